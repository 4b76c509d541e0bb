"""The dialogue's rules and their three named presets (rlver.rules)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rlver.rules import EVALUATION, PUBLISHED_TRAINING, TRAINING, DialogueRules


def test_evaluation_is_the_benchmark() -> None:
    assert (EVALUATION.start_emotion, EVALUATION.reply_limit, EVALUATION.max_appraisals) == (40, 10, 9)
    assert EVALUATION.emotion_end(100) == "emotion_high" and EVALUATION.emotion_end(9) == "emotion_low"
    assert EVALUATION.emotion_end(10) is None


def test_training_presets() -> None:
    assert (TRAINING.start_emotion, TRAINING.reply_limit, TRAINING.max_appraisals) == (30, 8, 8)
    published = PUBLISHED_TRAINING
    assert (published.reply_limit, published.max_appraisals) == (9, 9)
    assert not published.ends(100) and published.ends(0) and not published.ends(1)
    assert published.shared_opening and not published.bound_change and not published.floor_emotion


def test_but_validates_and_rules_are_frozen() -> None:
    assert EVALUATION.but(max_assistant_turns=3).reply_limit == 3
    with pytest.raises(ValidationError):
        EVALUATION.but(start_emotion=101)
    with pytest.raises(ValidationError):
        DialogueRules(turns=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        EVALUATION.start_emotion = 50  # type: ignore[misc]
    assert not DialogueRules(stop_on_emotion=False).ends(0)
