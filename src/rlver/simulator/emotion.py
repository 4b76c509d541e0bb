"""The simulated user's emotion: a bounded integer with tiers. Pure functions, no I/O.

Tiers follow the published simulator: S >= 100, A >= 70, B >= 40, C >= 10, F < 10. The tier steers how
the user talks (S: thanks and goodbye, F: leaves).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlver.errors import ConfigError
from rlver.records import Tier
from rlver.rules import EVALUATION, EVALUATION_START, DialogueRules

EMOTION_MIN = 0
EMOTION_MAX = 100
MAX_CHANGE = 10

#: One line per tier: how the user behaves there (used in prompts, docs and the offline simulator).
TIER_MEANING: dict[Tier, str] = {
    "S": "fully met: thanks the agent and says goodbye",
    "A": "warm and open",
    "B": "neutral, cautious",
    "C": "guarded and curt",
    "F": "has had enough and leaves",
}


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
    """How emotion moves: the per-turn bound and the value range.

    The defaults are the published *evaluation* (SAGE/simulator_response.py:151 ``max(-10,min(10,`` clamps the stated
    change to ±10, :155 ``min(emo_point,100)`` caps the value at 100). The published *training* simulator neither bounds the
    change nor floors the value (RLVER hard_player_simulator_dsv3.py:219-220 ``min(self.emo_point,100)``: ``+= change`` then
    ``min(.., 100)``): ``dialogue=PUBLISHED_TRAINING`` reproduces it (see docs/protocol.md). Whether
    the change is bounded and the value floored are rules of the dialogue (:class:`DialogueRules`,
    set by the environment); the bound itself is the simulator's.
    """

    max_change: int = MAX_CHANGE
    low: int = EMOTION_MIN
    high: int = EMOTION_MAX
    dialogue: DialogueRules = EVALUATION

    @property
    def bound_change(self) -> bool:
        """Clamp each stated change to ±max_change."""
        return self.dialogue.bound_change

    @property
    def floor(self) -> bool:
        """Keep the value at or above ``low`` (the cap at ``high`` always applies, as published)."""
        return self.dialogue.floor_emotion

    def __post_init__(self) -> None:
        # Checked here so that a bad config fails at start-up with a message, not mid-run.
        if self.max_change < 0:
            raise ConfigError(f"max_change must be >= 0 (got {self.max_change})")
        if self.low >= self.high:
            raise ConfigError(f"emotion range must have low < high (got {self.low}..{self.high})")

    def clamp_change(self, raw_change: int) -> int:
        if not self.bound_change:
            return raw_change
        return clamp(raw_change, -self.max_change, self.max_change)

    def bound(self, value: int) -> int:
        """The value range: capped at ``high``; floored at ``low`` unless ``floor`` is off."""
        return clamp(value, self.low, self.high) if self.floor else min(value, self.high)

    def apply(self, emotion: int, raw_change: int) -> tuple[int, int]:
        """Return ``(applied_change, new_emotion)`` for a stated change."""
        change = self.clamp_change(raw_change)
        return change, self.bound(emotion + change)


@dataclass
class EmotionState:
    """A user's current emotion plus the rules that move it."""

    value: int = EVALUATION_START
    rules: EmotionRules = EmotionRules()

    def __post_init__(self) -> None:
        self.value = self.rules.bound(self.value)

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
        return is_terminal(self.value)

    @property
    def terminal_reason(self) -> str | None:
        """``"emotion_high"``, ``"emotion_low"`` or ``None``: the episode end reason it implies."""
        return terminal_reason(self.value)


def is_terminal(emotion: int) -> bool:
    """Whether an emotion value ends the dialogue by itself (>= 100 or < 10)."""
    return terminal_reason(emotion) is not None


def terminal_reason(emotion: int) -> str | None:
    """The end reason an emotion value implies, or ``None`` while the dialogue may go on.

    The published protocol ends a dialogue as soon as its outcome is decided, so the thresholds are the
    benchmark's own success and failure: the :data:`rlver.rules.EVALUATION` rules.
    """
    return EVALUATION.emotion_end(emotion)
