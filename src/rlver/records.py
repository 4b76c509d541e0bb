"""Records that cross module boundaries: messages, appraisals, user turns, episodes.

These are the contract between the simulator, the environment, the rollout runner, the trainer and the
evaluator, and they are what a transcript line contains. Every emotion number in an :class:`Episode` is
traceable to the :class:`Appraisal` that produced it (see ``rlver audit``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlver.rules import EVALUATION_START, FAILURE_BELOW, SUCCESS_AT

Role = Literal["system", "user", "assistant"]
Tier = Literal["S", "A", "B", "C", "F"]
EpisodeStatus = Literal["finished", "failed"]

#: The benchmark's outcome of a dialogue is decided by its final emotion: **success** at or above
#: ``SUCCESS_AT``, **failure** below ``FAILURE_BELOW`` (both declared in :mod:`rlver.rules`).

#: Emotions are 0-100; a value beyond ±1e9 in a file is corruption, not a number to keep (it would
#: also overflow the float and decimal maths of the metrics). Out-of-range but sane values (-5, 130)
#: stay readable so that ``rlver audit`` can report them.
EmotionValue = Annotated[int, Field(ge=-(10**9), le=10**9)]


class Message(BaseModel):
    """One chat message. Assistant messages keep their *raw* text, think block included."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


class Appraisal(BaseModel):
    """One simulator judgement of one agent reply.

    The four text fields are the simulator's named reasoning steps. ``raw_change`` is the integer
    the simulator stated; ``change`` is what was applied after clamping to the per-turn bound, and
    ``emotion_after`` = clamp(``emotion_before`` + ``change``, 0, 100).
    ``features`` holds the offline simulator's per-feature contributions (empty for LLM simulators).
    """

    understanding: str = ""
    goal_fit: str = ""
    inner_reaction: str = ""
    feeling: str = ""
    raw_change: int
    change: int
    emotion_before: int
    emotion_after: int
    tier: Tier
    features: dict[str, float] = Field(default_factory=dict)


class UserTurn(BaseModel):
    """What the simulated user did after one agent reply (or its opening line)."""

    text: str
    appraisal: Appraisal | None = None  # None for the opening line
    ends_dialogue: bool = False
    end_reason: str | None = None  # "satisfied", "left", "emotion_high", "emotion_low", ...
    latency_s: float = 0.0
    tokens: int = 0
    #: The simulator's input and output tokens for this turn (every call and re-ask; 0 when unknown).
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: The simulator's calls for this turn that were cut at their token cap (``finish_reason`` length).
    truncated_calls: int = 0
    # Fields carried verbatim from an imported transcript (e.g. the published user ``thinking``).
    extra: dict[str, Any] = Field(default_factory=dict)


class TurnTiming(BaseModel):
    """Seconds spent on one round: the policy's generation and the simulator's work."""

    policy_s: float = 0.0
    simulator_s: float = 0.0


class SampledTurn(BaseModel):
    """What the local policy sampled for one assistant turn: its token ids and their log-probs.

    Kept in memory only (never written to a transcript): the trainer builds its sequences from these
    ids instead of re-tokenising the reply text, and compares the log-probs with its own scoring.
    """

    token_ids: list[int]
    logprobs: list[float] | None = None
    finish_reason: str | None = None


class Episode(BaseModel):
    """One dialogue: a line of a transcript."""

    profile_id: str
    sample_index: int = 0  # index within a GRPO group (n dialogues per profile)
    episode_id: str = ""
    messages: list[Message] = Field(default_factory=list)
    user_turns: list[UserTurn] = Field(default_factory=list)
    start_emotion: EmotionValue = EVALUATION_START
    final_emotion: EmotionValue = EVALUATION_START
    emotions: list[EmotionValue] = Field(default_factory=list)  # emotion after each appraisal, in order
    reward: float | None = None
    status: EpisodeStatus = "finished"
    end_reason: str | None = None  # why the dialogue ended ("turn_limit", "emotion_high", ...)
    error: str | None = None
    error_kind: str | None = None
    format_errors: int = 0  # assistant replies without a well-formed think block (think mode)
    #: Agent replies cut at the agent's token cap (``finish_reason == "length"``): a count, so a run
    #: whose cap shortened replies says so (the published benchmark set no cap).
    truncated_replies: int = 0
    policy_tokens: int = 0
    simulator_tokens: int = 0
    #: The simulator's input / output tokens over the dialogue (sums of the user turns' counts).
    simulator_prompt_tokens: int = 0
    simulator_completion_tokens: int = 0
    timings: list[TurnTiming] = Field(default_factory=list)
    wall_s: float = 0.0
    meta: dict[str, Any] = Field(default_factory=dict)  # e.g. behaviour mode, difficulty, topic
    # One entry per assistant message when the policy reported its sampled ids (local backend), else
    # empty. Memory only: ``exclude=True`` keeps token ids out of transcripts.
    sampled: list[SampledTurn | None] = Field(default_factory=list, exclude=True)

    @property
    def assistant_turns(self) -> int:
        return sum(1 for m in self.messages if m.role == "assistant")

    @property
    def succeeded(self) -> bool:
        """The benchmark's *success*: the final emotion reached ``SUCCESS_AT``."""
        return reached_success(self.final_emotion)

    @property
    def failed_low(self) -> bool:
        """The benchmark's *failure*: the final emotion fell below ``FAILURE_BELOW``."""
        return fell_to_failure(self.final_emotion)


def reached_success(emotion: int) -> bool:
    """Whether an emotion value is a success (the dialogue's outcome when it is the final one)."""
    return emotion >= SUCCESS_AT


def fell_to_failure(emotion: int) -> bool:
    """Whether an emotion value is a failure (the dialogue's outcome when it is the final one)."""
    return emotion < FAILURE_BELOW
