"""Tests that kill the mutants of ``rlver.env.rewards`` the first mutation run left alive (issue 42,
item 3; ``python bench/mutants.py rewards``). Each names the mutant family it is for."""

from __future__ import annotations

import pytest

from helpers import add_for_test
from rlver.env.rewards import (
    REWARD_MODES,
    RewardSpec,
    final_rewards,
    format_flags,
    place_on_tokens,
    sample_rewards,
    turn_rewards,
)
from rlver.records import Episode
from rlver.registry import Entry
from test_env_rewards import make_episode

BROKEN = ["<think>a</think>fine", "forgot to think"]


def test_a_final_emotion_of_zero_earns_zero() -> None:
    """``max(final_emotion, 0)``: the floor is 0, not any other small number."""
    assert final_rewards(make_episode(5, [0]), RewardSpec()) == [0.0]


def test_think_mode_is_read_from_meta_first() -> None:
    """``meta["think"]`` decides, whatever ``format_errors`` says (a count read back from elsewhere)."""
    ep = make_episode(40, [50, 55], BROKEN, think=True)
    ep.format_errors = 0
    assert format_flags(ep) == [False, True]
    ep.meta = {"think": False}
    ep.format_errors = 1
    assert format_flags(ep) == [False, False]


def test_without_meta_format_errors_decide_think_mode() -> None:
    """An episode written before ``meta["think"]`` existed: one format error or more means think mode."""
    ep = make_episode(40, [50, 55], BROKEN, think=True)
    ep.meta = {}
    ep.format_errors = 1
    assert format_flags(ep) == [False, True]
    ep.format_errors = 0
    assert format_flags(ep) == [False, False]


def test_a_sample_that_kept_one_turn_earns_the_whole_dialogue_on_it() -> None:
    ep = make_episode(30, [40, 35, 60])
    spec = RewardSpec(mode="delta")
    assert sample_rewards(ep, spec, kept_turns=1) == pytest.approx([0.30])


def test_a_mode_returning_the_wrong_count_is_an_error_not_a_shorter_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``zip(..., strict=True)``: a reward mode with one value too few fails loudly under a penalty."""

    def one_short(ep: Episode, spec: RewardSpec) -> list[float]:
        return [1.0] * (ep.assistant_turns - 1)

    add_for_test(monkeypatch, REWARD_MODES, Entry("short", "a test's mode", one_short))
    ep = make_episode(40, [50, 55], BROKEN, think=True)
    with pytest.raises(ValueError, match="zip"):
        turn_rewards(ep, RewardSpec.model_validate({"mode": "short", "format_penalty": 0.1}))


def test_placing_rewards_needs_one_turn_end_each() -> None:
    with pytest.raises(ValueError, match="zip"):
        place_on_tokens([0.5, 0.25], [1], 6)
    with pytest.raises(ValueError, match="zip"):
        place_on_tokens([0.5], [1, 4], 6)
