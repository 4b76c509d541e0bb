"""The simulated user's emotion: a bounded integer with tiers. Pure functions, no I/O.

Tiers follow the published simulator: S >= 100, A >= 70, B >= 40, C >= 10, F < 10. The tier steers how
the user talks (S: thanks and goodbye, F: leaves).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlver.records import Tier

EMOTION_MIN = 0
EMOTION_MAX = 100
EVAL_START = 40
TRAIN_START = 30
MAX_CHANGE = 10


def tier_of(emotion: int) -> Tier:
    if emotion >= 100:
        return "S"
    if emotion >= 70:
        return "A"
    if emotion >= 40:
        return "B"
    if emotion >= 10:
        return "C"
    return "F"


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


@dataclass(frozen=True)
class EmotionRules:
    """How emotion moves: the per-turn bound and the value range."""

    max_change: int = MAX_CHANGE
    low: int = EMOTION_MIN
    high: int = EMOTION_MAX

    def clamp_change(self, raw_change: int) -> int:
        return clamp(raw_change, -self.max_change, self.max_change)

    def apply(self, emotion: int, raw_change: int) -> tuple[int, int]:
        """Return ``(applied_change, new_emotion)`` for a stated change."""
        change = self.clamp_change(raw_change)
        return change, clamp(emotion + change, self.low, self.high)


@dataclass
class EmotionState:
    """A user's current emotion plus the rules that move it."""

    value: int = EVAL_START
    rules: EmotionRules = EmotionRules()

    def __post_init__(self) -> None:
        self.value = clamp(self.value, self.rules.low, self.rules.high)

    @property
    def tier(self) -> Tier:
        return tier_of(self.value)

    def apply(self, raw_change: int) -> tuple[int, int, int]:
        """Apply a stated change; return ``(before, applied_change, after)``."""
        before = self.value
        change, self.value = self.rules.apply(before, raw_change)
        return before, change, self.value

    @property
    def is_terminal(self) -> bool:
        """The published termination on emotion: reached 100, or fell below 10."""
        return self.value >= 100 or self.value < 10
