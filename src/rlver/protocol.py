"""The dialogue's rules, declared once: where it starts, how long it runs, when emotion ends it.

Every place that runs or checks a dialogue reads its rules from :class:`DialogueRules`: the
environment (``EnvConfig.rules``), a training config (``rollout.rules``), the auditor and the run
manifest. The three named presets are the protocols rlver knows (docs/protocol.md has the file:line of
each published value):

* :data:`EVALUATION`: the Sentient Benchmark. Start 40, 10 replies counting to SAGE's 10-turn limit,
  the last reply never appraised (SAGE/test_npc.py:93), change bounded to ±10 and floored at 0, the
  dialogue ends at 100 or below 10.
* :data:`TRAINING`: rlver's training dialogue. Start 30, 8 replies, every one appraised, the
  evaluation's bounded dynamics.
* :data:`PUBLISHED_TRAINING`: the published RLVER training dynamics on :data:`TRAINING`'s turns: no
  bound and no floor (hard_player_simulator_dsv3.py:219-220), no stop at 100, the end at ``<= 0``
  (``end_below=1``), the turn limit checked after the user's reply (vllm_rollout_spmd.py:518) and one
  opening line per GRPO group (vllm_rollout_spmd.py:446-450).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlver.records import FAILURE_BELOW, SUCCESS_AT

#: Where a benchmark dialogue starts (SAGE's initial emotion).
EVALUATION_START = 40
#: Where a training dialogue starts (the published training simulator's initial emotion).
TRAINING_START = 30

#: ``reply_count``: at most ``max_assistant_turns`` replies (the last one appraised only with
#: ``appraise_final_reply``), as SAGE/test_npc.py:93 does. ``after_user_exceeds``: the published
#: training check, made after the user's reply with ``turns > max_assistant_turns``
#: (RLVER vllm_rollout_spmd.py:518), so ``max_assistant_turns + 1`` replies, every one appraised.
TurnLimitRule = Literal["reply_count", "after_user_exceeds"]

#: Why a dialogue ended because of the user's emotion.
EmotionEnd = Literal["emotion_high", "emotion_low"]


class DialogueRules(BaseModel):
    """How one dialogue runs and when it ends. The defaults are the Sentient Benchmark's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start_emotion: int = Field(default=EVALUATION_START, ge=0, le=100)
    max_assistant_turns: int = Field(default=10, ge=1, le=200)
    #: Appraise the last reply too (training); the benchmark never appraises it, since it cannot
    #: change the score, and skips that simulator round.
    appraise_final_reply: bool = False
    #: End on emotion at all (off: only the turn limit and the user leaving end a dialogue).
    stop_on_emotion: bool = True
    #: Clamp each stated change to ±max_change (off in the published training).
    bound_change: bool = True
    #: Keep the emotion at or above 0 (off in the published training: it may go below 0).
    floor_emotion: bool = True
    #: End the dialogue when the emotion reaches 100 (the published training goes on at 100).
    end_at_high: bool = True
    #: End the dialogue when the emotion falls below this (evaluation: 10; training ``<= 0`` = 1).
    end_below: int = Field(default=FAILURE_BELOW, ge=-1000, le=101)
    #: How the turn limit is counted (see :data:`TurnLimitRule`).
    turn_limit_rule: TurnLimitRule = "reply_count"
    #: All dialogues of one profile in a rollout round share one opening line (the published
    #: training clones one simulated user per prompt, vllm_rollout_spmd.py:446-450).
    shared_opening: bool = False

    @property
    def reply_limit(self) -> int:
        """The most assistant replies one dialogue can have."""
        extra = 1 if self.turn_limit_rule == "after_user_exceeds" else 0
        return self.max_assistant_turns + extra

    @property
    def max_appraisals(self) -> int:
        """The most appraisals one dialogue can have."""
        if self.turn_limit_rule == "after_user_exceeds":
            return self.max_assistant_turns + 1
        return self.max_assistant_turns - (0 if self.appraise_final_reply else 1)

    def emotion_end(self, emotion: int) -> EmotionEnd | None:
        """The end reason this emotion value implies under these rules, or ``None``."""
        if not self.stop_on_emotion:
            return None
        if self.end_at_high and emotion >= SUCCESS_AT:
            return "emotion_high"
        if emotion < self.end_below:
            return "emotion_low"
        return None

    def ends(self, emotion: int) -> bool:
        """Whether this emotion value ends the dialogue under these rules."""
        return self.emotion_end(emotion) is not None

    def but(self, **changes: Any) -> DialogueRules:
        """A copy with some rules changed, validated (``EVALUATION.but(max_assistant_turns=3)``)."""
        return DialogueRules.model_validate({**self.model_dump(), **changes})


EVALUATION = DialogueRules()
TRAINING = DialogueRules(start_emotion=TRAINING_START, max_assistant_turns=8, appraise_final_reply=True)
PUBLISHED_TRAINING = TRAINING.but(
    bound_change=False,
    floor_emotion=False,
    end_at_high=False,
    end_below=1,
    turn_limit_rule="after_user_exceeds",
    shared_opening=True,
)

#: The presets by name (``rules: {preset: published_training}`` in a config reads this).
PRESETS: dict[str, DialogueRules] = {
    "evaluation": EVALUATION,
    "training": TRAINING,
    "published_training": PUBLISHED_TRAINING,
}
