"""The per-turn (visible) layout is decided in one place (issue 37): ``rlver.env.dialogue.per_turn_samples``.

The environment's policy context, the local learner and the verl agent loop all ask it, so the three
cannot disagree about whether a think dialogue is one training sequence or one per assistant turn.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlver.env.dialogue import EnvConfig, per_turn_samples

SRC = Path(__file__).resolve().parents[2] / "src" / "rlver"
DECISION = re.compile(r"""think_context\s*==\s*["']visible["']""")


def test_the_visible_decision_is_spelled_in_one_module() -> None:
    found = sorted(
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if DECISION.search(p.read_text(encoding="utf-8"))
    )
    assert found == ["env/dialogue.py"], found


@pytest.mark.parametrize(
    ("think", "context", "expected"),
    [(True, "visible", True), (True, "full", False), (False, "visible", False), (False, "full", False)],
)
def test_per_turn_samples_only_for_a_think_policy_shown_visible_text(
    think: bool, context: str, expected: bool
) -> None:
    assert per_turn_samples(think, context) is expected
    assert EnvConfig(think=think, think_context=context).per_turn_samples is expected  # type: ignore[arg-type]


def test_benchmark_keeps_only_what_the_user_saw_and_rlver_training_keeps_full() -> None:
    assert EnvConfig.evaluation(think=True).per_turn_samples  # as SAGE's call_npc and the think rollout
    assert EnvConfig.published_training(think=True).per_turn_samples
    assert EnvConfig.training(think=True).think_context == "full"
