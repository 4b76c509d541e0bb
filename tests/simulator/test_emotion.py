"""The emotion state machine: tiers, clamps, terminal rule. Pure functions, every boundary."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlver.errors import ConfigError
from rlver.rules import EVALUATION_START, TRAINING_START
from rlver.simulator.emotion import (
    EmotionRules,
    EmotionState,
    clamp,
    is_terminal,
    terminal_reason,
    tier_of,
)


@pytest.mark.parametrize(
    ("value", "tier"),
    [
        (-5, "F"),
        (0, "F"),
        (9, "F"),
        (10, "C"),
        (39, "C"),
        (40, "B"),
        (69, "B"),
        (70, "A"),
        (99, "A"),
        (100, "S"),
        (130, "S"),
    ],
)
def test_tier_boundaries(value: int, tier: str) -> None:
    assert tier_of(value) == tier


def test_start_values_match_the_published_protocol() -> None:
    assert EVALUATION_START == 40 and TRAINING_START == 30
    assert EmotionState().value == 40
    assert EmotionState(30).tier == "C"


@pytest.mark.parametrize(
    ("raw", "applied"),
    [(-100, -10), (-11, -10), (-10, -10), (-3, -3), (0, 0), (7, 7), (10, 10), (11, 10), (500, 10)],
)
def test_change_is_clamped_to_ten_by_default(raw: int, applied: int) -> None:
    assert EmotionRules().clamp_change(raw) == applied


def test_change_bound_is_configurable() -> None:
    rules = EmotionRules(max_change=5)
    assert rules.clamp_change(9) == 5
    assert rules.clamp_change(-9) == -5
    assert EmotionRules(max_change=0).apply(50, 10) == (0, 50)
    assert EmotionRules(max_change=30).apply(50, 25) == (25, 75)


@pytest.mark.parametrize(("start", "raw", "after"), [(95, 10, 100), (100, 10, 100), (3, -10, 0), (0, -1, 0)])
def test_value_is_clamped_to_0_100(start: int, raw: int, after: int) -> None:
    state = EmotionState(start)
    before, change, value = state.apply(raw)
    assert before == start
    assert value == after == state.value
    assert change == max(-10, min(10, raw))  # the applied change is the clamped one, not value - before


def test_out_of_range_start_is_clamped() -> None:
    assert EmotionState(150).value == 100
    assert EmotionState(-4).value == 0


@pytest.mark.parametrize(
    ("value", "reason"),
    [(0, "emotion_low"), (9, "emotion_low"), (10, None), (40, None), (99, None), (100, "emotion_high")],
)
def test_terminal_rule(value: int, reason: str | None) -> None:
    assert terminal_reason(value) == reason
    assert is_terminal(value) is (reason is not None)
    state = EmotionState(value)
    assert state.terminal_reason == reason
    assert state.is_terminal is (reason is not None)


def test_walk_to_terminal_states() -> None:
    state = EmotionState(40)
    for _ in range(5):
        state.apply(+12)
    assert state.value == 90 and not state.is_terminal
    state.apply(+10)
    assert state.value == 100 and state.tier == "S" and state.terminal_reason == "emotion_high"
    low = EmotionState(15)
    low.apply(-5)
    assert low.value == 10 and not low.is_terminal
    low.apply(-1)
    assert low.value == 9 and low.tier == "F" and low.terminal_reason == "emotion_low"


def test_bad_rules_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="max_change"):
        EmotionRules(max_change=-1)
    with pytest.raises(ConfigError, match="low < high"):
        EmotionRules(low=50, high=50)


@given(start=st.integers(-50, 150), changes=st.lists(st.integers(-1000, 1000), max_size=20))
def test_every_step_is_traceable(start: int, changes: list[int]) -> None:
    """after == clamp(before + clamp(raw, -10, 10), 0, 100) at every step, whatever the input."""
    state = EmotionState(start)
    for raw in changes:
        before, applied, after = state.apply(raw)
        assert applied == clamp(raw, -10, 10)
        assert after == clamp(before + applied, 0, 100)
        assert 0 <= after <= 100
