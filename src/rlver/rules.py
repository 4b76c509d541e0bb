"""The dialogue's rules, declared once: where it starts, how long it runs, when emotion ends it.

Every place that runs or checks a dialogue reads its rules from :class:`DialogueRules`: the
environment (``EnvConfig.rules``), a training config (``rollout.rules``), the auditor and the run
manifest. The three named presets are the protocols rlver knows (docs/protocol.md has the file:line of
each published value):

* :data:`EVALUATION`: the Sentient Benchmark. Start 40, 10 replies counting to SAGE's 10-turn limit,
  the last reply never appraised (SAGE/test_npc.py:93 ``turns>10``), change bounded to ±10 and floored at 0, the
  dialogue ends at 100 or below 10.
* :data:`TRAINING`: rlver's training dialogue. Start 30, 8 replies, every one appraised, the
  evaluation's bounded dynamics.
* :data:`PUBLISHED_TRAINING`: the published RLVER training dynamics on :data:`TRAINING`'s turns: no
  bound and no floor (hard_player_simulator_dsv3.py:219-220 ``min(self.emo_point,100)``), no stop at 100, the end at ``<= 0``
  (``end_below=1``), the turn limit checked after the user's reply (vllm_rollout_spmd.py:518 ``turn_count>self.config.environment.max_turns``) and one
  opening line per GRPO group (vllm_rollout_spmd.py:446-450 ``.clone()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Where a benchmark dialogue starts (SAGE's initial emotion).
EVALUATION_START = 40
#: Where a training dialogue starts (the published training simulator's initial emotion).
TRAINING_START = 30

#: The benchmark's outcome of a dialogue, decided by its final emotion: **success** at or above
#: ``SUCCESS_AT``, **failure** below ``FAILURE_BELOW`` (SAGE's leaderboard). The published dialogue
#: also ends at exactly these values (:meth:`DialogueRules.emotion_end`). The one home of both
#: numbers: the rules, the records, metrics, training summaries and the plots read them from here.
SUCCESS_AT = 100
FAILURE_BELOW = 10

#: The benchmark's text: on SAGE's own profile set (``sage``) an LLM user is asked SAGE's own questions and
#: the agent gets SAGE's own system prompt, both read from the fetched files (``sage-published``); every
#: other set keeps rlver's ``sage`` protocol and the neutral prompt (SAGE has no English prompts). The
#: one decision ``rlver eval`` (``eval/config.published_benchmark``) and the in-training benchmark
#: evaluation (``TrainConfig.eval_simulator``) read, so the two send the same requests.
BENCHMARK_PROFILES = "sage"
BENCHMARK_TEXT = "sage-published"


def asks_published_text(profiles: str, prompt_set: bool) -> bool:
    """Whether a benchmark run on ``profiles`` sends SAGE's own text: on SAGE's profiles, to a user
    whose kind is asked a prompt set (``prompt_set``: ``simulator.spec.asks_prompt_set``; the kinds'
    registry is above this module, so the caller reads it)."""
    return profiles == BENCHMARK_PROFILES and prompt_set


#: ``reply_count``: at most ``max_assistant_turns`` replies (the last one appraised only with
#: ``appraise_final_reply``), as SAGE/test_npc.py:93 ``turns>10`` does. ``after_user_exceeds``: the published
#: training check, made after the user's reply with ``turns > max_assistant_turns``
#: (RLVER vllm_rollout_spmd.py:518 ``turn_count>self.config.environment.max_turns``), so ``max_assistant_turns + 1`` replies, every one appraised.
TurnLimitRule = Literal["reply_count", "after_user_exceeds"]

#: Why a dialogue ended because of the user's emotion.
EmotionEnd = Literal["emotion_high", "emotion_low"]


class DialogueRules(BaseModel):
    """How one dialogue runs and when it ends. The defaults are the Sentient Benchmark's."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    start_emotion: int = Field(
        default=EVALUATION_START,
        ge=0,
        le=100,
        description="The user's emotion (0-100) when the dialogue starts (benchmark 40, training 30).",
    )
    max_assistant_turns: int = Field(
        default=10,
        ge=1,
        le=200,
        description=(
            "The most replies the agent gives in one dialogue (how they are counted: ``turn_limit_rule``)."
        ),
    )
    appraise_final_reply: bool = Field(
        default=False,
        description=(
            "Appraise the last reply too (training); the benchmark never appraises it, since it cannot "
            "change the score, and skips that simulator round."
        ),
    )
    stop_on_emotion: bool = Field(
        default=True,
        description="End on emotion at all (off: only the turn limit and the user leaving end a dialogue).",
    )
    bound_change: bool = Field(
        default=True, description="Clamp each stated change to ±max_change (off in the published training)."
    )
    floor_emotion: bool = Field(
        default=True,
        description="Keep the emotion at or above 0 (off in the published training: it may go below 0).",
    )
    end_at_high: bool = Field(
        default=True,
        description="End the dialogue when the emotion reaches 100 (the published training goes on at 100).",
    )
    end_below: int = Field(
        default=FAILURE_BELOW,
        ge=-1000,
        le=101,
        description=(
            "End the dialogue when the emotion falls below this (evaluation: 10; training ``<= 0`` = 1)."
        ),
    )
    turn_limit_rule: TurnLimitRule = Field(
        default="reply_count", description="How the turn limit is counted (see :data:`TurnLimitRule`)."
    )
    shared_opening: bool = Field(
        default=False,
        description=(
            "All dialogues of one profile in a rollout round share one opening line (the published "
            "training clones one simulated user per prompt, vllm_rollout_spmd.py:446-450 ``.clone()``)."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _from_preset(cls, data: Any) -> Any:
        """``{preset: published_training, max_assistant_turns: 4}``: a named preset, some rules changed."""
        if not isinstance(data, Mapping) or "preset" not in data:
            return data
        name = data["preset"]
        if name not in PRESETS:
            raise ValueError(f"preset {name!r} is not one of {', '.join(PRESETS)}")
        rest = {k: v for k, v in data.items() if k != "preset"}
        return {**PRESETS[name].model_dump(), **rest}

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


def rule_range(field: str) -> tuple[int | None, int | None]:
    """The inclusive range ``DialogueRules`` accepts for an integer rule (its field's ``ge``/``le``).

    Why: a check outside this module (``rlver audit``'s rule overrides) reads the bounds from here
    instead of restating them, so it can never accept what the rules refuse or refuse what they accept.
    """
    low: int | None = None
    high: int | None = None
    for limit in DialogueRules.model_fields[field].metadata:
        low = getattr(limit, "ge", low)
        high = getattr(limit, "le", high)
    return low, high


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
    "benchmark": EVALUATION,
    "training": TRAINING,
    "published_training": PUBLISHED_TRAINING,
}


def protocol_name(rules: DialogueRules) -> str:
    """``benchmark`` (the Sentient Benchmark's dialogue), ``training`` (rlver's or the published
    training dialogue) or ``custom``: which protocol a held-out score was measured on."""
    # The number of replies may differ (the label states it): a 2-turn check from 30 is still the
    # training protocol, and a 3-reply run from 40 with the last reply unappraised the benchmark's.
    turns = {"max_assistant_turns": EVALUATION.max_assistant_turns, "shared_opening": False}
    if rules.but(**turns) == EVALUATION:
        return "benchmark"
    for same in (TRAINING, PUBLISHED_TRAINING):
        if rules.but(**turns, appraise_final_reply=same.appraise_final_reply) == same.but(**turns):
            return "training"
    return "custom"


def protocol_label(rules: DialogueRules, name: str | None = None) -> str:
    """``"training protocol: 2 replies from 30"``: printed next to every held-out score, so a number
    measured on the training dialogue is never read as a benchmark score (docs/benchmark.md)."""
    label = name or protocol_name(rules)
    appraised = rules.max_appraisals
    return f"{label} protocol: {rules.reply_limit} replies from {rules.start_emotion}" + (
        "" if appraised == rules.reply_limit else f", {appraised} appraised"
    )
