"""One dialogue between the policy and a simulated user, as a Gymnasium-like environment.

``reset(profile)`` returns the user's opening line; ``step(raw_reply)`` strips the think block, lets the
simulated user appraise the visible reply and answer, and says whether the dialogue is over.

Termination follows the published protocol:

* the user's emotion reaches 100 (``"emotion_high"``) or falls below 10 (``"emotion_low"``);
* the user ends the dialogue themselves (``UserTurn.ends_dialogue``; reason from the simulator,
  ``"left"`` by default);
* the turn limit (``"turn_limit"``). In the published evaluation the limit is 10 turns counting the
  user's opening line, so the 10th assistant reply is the last and is never appraised: at most 9
  appraisals. With ``appraise_final_reply=False`` that last reply is appended without calling the
  simulator (it cannot change the score, and it saves one simulator round per dialogue).

Every one of these rules is a field of :class:`rlver.rules.DialogueRules`, held as
``EnvConfig.rules`` (defaults: the published evaluation; :meth:`EnvConfig.published_training` the
published training dynamics, verified in docs/protocol.md): per-turn change bound and floor at 0,
stopping at 100, the low threshold, the turn-limit rule and a shared opening line per GRPO group
(applied by the rollout runner).

``step`` says, as Gymnasium does, whether the dialogue *terminated* (the emotion ended it, or the user
left) or was *truncated* (the turn limit; a context that is full, under verl); ``done`` is either.

Two choices worth knowing (see docs/transcripts.md):

* The system prompt **is** ``episode.messages[0]`` (role ``"system"``), so a transcript line holds the
  exact context the policy saw and the trainer can tokenise it without reconstructing anything.
* Assistant messages keep their **raw** text, think block included, in the transcript. What the
  simulated user is shown of a reply, and what the policy's later turns see of it, is the reply layout
  (:meth:`EnvConfig.shown_to_simulator`, :meth:`EnvConfig.in_history`, recorded by
  :meth:`EnvConfig.reply_layout`; docs/published-text.md, "The reply layout"): without think mode both see the
  reply as written, as both published loops pass it; in think mode the user sees the text after the
  last ``</think>`` and later turns see the same text (``think_context: visible``, the published think
  rollout) or the raw reply (``full``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rlver.config import MAX_COUNT
from rlver.env.thinking import shown_to_user, split_think, system_prompt
from rlver.errors import error_kind
from rlver.limits import text_too_long
from rlver.llm.base import Completion
from rlver.migrate import nest_flat_rules
from rlver.profiles.schema import Language, Profile
from rlver.records import Episode, Message, SampledTurn, TurnTiming, UserTurn
from rlver.rules import EVALUATION, PUBLISHED_TRAINING, TRAINING, DialogueRules
from rlver.simulator.base import SimulatedUser, UserSimulator
from rlver.simulator.emotion import EmotionState


def per_turn_samples(think: bool, think_context: str) -> bool:
    """The one home of the per-turn layout: a think policy that sees only the visible text of its
    earlier replies has a different context at every turn, so each assistant turn is its own sample
    (the environment's policy context, the local learner and the verl agent loop all ask here)."""
    return think and think_context == "visible"


class EnvConfig(BaseModel):
    """How a dialogue runs: its :class:`~rlver.rules.DialogueRules` plus what the policy is shown.

    The defaults are the Sentient Benchmark's (:data:`~rlver.rules.EVALUATION` rules, the neutral
    agent prompt), so ``EnvConfig()`` and :meth:`evaluation` are the same dialogue. Flat rule keys
    (``EnvConfig(max_assistant_turns=3)``, an ``env:`` block of an older file) are read into ``rules``.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    rules: DialogueRules = Field(
        default=EVALUATION,
        description=(
            "How the dialogue runs and ends (start emotion, turn limit, ends); defaults are the Sentient "
            "Benchmark's. Keys given change single rules; ``{preset: ...}`` picks a preset."
        ),
    )
    think: bool = Field(
        default=False,
        description=(
            "Think mode: the policy writes a <think> block before each reply; the user sees only the "
            "visible text."
        ),
    )
    think_context: Literal["full", "visible"] = Field(
        default="visible",
        description=(
            "Think mode: what later turns see of earlier replies. ``full`` = the raw reply, think block "
            "included; ``visible`` = only the visible text. ``visible`` is the default because both "
            "published protocols keep only what the user saw: SAGE's ``call_npc`` sends each message's "
            'content (SAGE/npc_response.py:16-20 ``mes["content"]``) and the think rollout keeps the visible text '
            '(RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py:402-411 ``split("</think>")[-1].strip()``, 555-556 ``"content":extracted_content_1``). '
            "rlver's own training dialogue (:meth:`training`) keeps ``full``."
        ),
    )
    system_prompt: str | None = Field(
        default=None, description="Replaces the built-in system prompt when set."
    )
    agent_prompt: Literal["neutral", "coaching", "published", "sage-published", "rlver-published"] = Field(
        default="neutral",
        description=(
            'The built-in agent prompt: ``neutral`` (the benchmark\'s plain "high-EQ chat partner", what'
            " the published evaluation used), ``coaching`` (our empathy coaching, rlver's training "
            "default; raises a base model's score) or ``published`` (the published training's friend-chat"
            " prompt, in our words). ``sage-published`` / ``rlver-published``: the published text itself,"
            " fetched (``rlver data download``)."
        ),
    )
    language: Language | None = Field(
        default=None, description="Language of the built-in system prompt; ``None`` follows the profile."
    )
    max_reply_chars: int = Field(
        default=8000,
        ge=1,
        le=MAX_COUNT,
        description=(
            "Policy output is untrusted: the visible reply handed to the simulator is cut to this length."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _read_older_shapes(cls, data: Any) -> Any:
        # flat rule keys (``max_assistant_turns=3``, an older file's ``env:``): rlver.migrate
        return nest_flat_rules(data, EVALUATION)

    @field_validator("system_prompt")
    @classmethod
    def _prompt_not_too_long(cls, value: str | None) -> str | None:
        why = text_too_long(len(value)) if value is not None else None
        if why:
            raise ValueError(why)
        return value

    @classmethod
    def evaluation(cls, **overrides: Any) -> EnvConfig:
        """The published benchmark protocol: 10 assistant replies, the last never appraised, start 40."""
        return cls.model_validate({"rules": EVALUATION, **overrides})

    @classmethod
    def training(cls, **overrides: Any) -> EnvConfig:
        """rlver's training dialogue: 8 assistant turns, every reply appraised, start 30, coaching."""
        return cls.model_validate(
            {"rules": TRAINING, "agent_prompt": "coaching", "think_context": "full", **overrides}
        )

    @property
    def per_turn_samples(self) -> bool:
        """Whether each assistant turn is its own policy context (see :func:`per_turn_samples`)."""
        return per_turn_samples(self.think, self.think_context)

    # -- the reply layout: one home for what each side sees of a reply ---------------------------------
    def shown_to_simulator(self, raw: str, *, cut: bool) -> tuple[str, bool]:
        """What the simulated user is shown of the raw reply ``raw``, and whether it was cut.

        Without think mode: the reply as written, as both published loops pass it (SAGE's
        ``test_npc.py:113-115`` ``call_npc(player["history"])`` hands ``call_npc``'s answer to the simulator; RLVER's rollout the decoded
        text, ``vllm_rollout_spmd.py:496-504`` ``extracted_content = content``), so a reply that happens to hold ``</think>`` is shown
        whole. In think mode: the published think rollout's rule (:func:`shown_to_user`,
        ``vllm_rollout_spmd_think.py:402-406`` ``split("</think>")[-1].strip()``). ``cut``: rlver's safety bound ``max_reply_chars``
        applies (a protocol that quotes the published way shows the text uncut, as the published code).
        """
        shown = shown_to_user(raw) if self.think else raw
        if cut and len(shown) > self.max_reply_chars:
            return shown[: self.max_reply_chars], True
        return shown, False

    def in_history(self, raw: str) -> str:
        """What the policy's later turns see of its earlier reply ``raw``: the text the user was shown
        (think mode with ``think_context: visible``, as the published think rollout keeps it,
        ``vllm_rollout_spmd_think.py:555-556`` ``"content":extracted_content_1``), else the reply as written."""
        return shown_to_user(raw) if self.per_turn_samples else raw

    def reply_layout(self, *, cut: bool) -> dict[str, Any]:
        """The layout as a manifest records it (``rlver explain`` reads it): what the simulated user is
        shown (``whole`` or ``after_think``), what later turns of the agent see (``whole`` or
        ``after_think``), and where the user's view is cut (``None``: never)."""
        return {
            "simulator": "after_think" if self.think else "whole",
            "agent_history": "after_think" if self.per_turn_samples else "whole",
            "cut_at": self.max_reply_chars if cut else None,
        }

    @classmethod
    def published_training(cls, **overrides: Any) -> EnvConfig:
        """The published RLVER training dynamics and policy prompt (docs/protocol.md has the file:line
        of each) on top of :meth:`training`'s turns, appraisal and start."""
        base: dict[str, Any] = {
            "rules": PUBLISHED_TRAINING,
            "agent_prompt": "published",  # the friend-chat prompt (RLVER vllm_rollout/system_prompt.py)
        }
        # think: only visible text in the history (vllm_rollout_spmd_think.py:555 ``self.extract_content(content)``); without think the
        # context holds no thoughts either way, and ``full`` is what rlver's training configs record
        base["think_context"] = "visible" if overrides.get("think") else "full"
        return cls.model_validate({**base, **overrides})


#: End reasons that cut a dialogue short rather than end it: the turn limit, and (under verl, or the
#: local trainer's token budget) a context with no room for another turn. Every other reason (the
#: emotion, the user leaving or being satisfied) is the dialogue's own end: Gymnasium's *terminated*.
TRUNCATION_REASONS = frozenset({"turn_limit", "context_full"})


@dataclass
class StepResult:
    """What ``step`` returns, split as Gymnasium's ``step`` is: ``terminated`` when the dialogue ended
    by itself (the emotion reached an end, the user left), ``truncated`` when a limit cut it (the turn
    limit). ``user_message`` is ``None`` when it ended without a user reply (the unappraised final
    reply)."""

    user_message: str | None
    emotion: int
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """Over, for either reason."""
        return self.terminated or self.truncated

    @classmethod
    def ended_by(
        cls, reason: str | None, user_message: str | None, emotion: int, info: dict[str, Any]
    ) -> StepResult:
        """The result of a step whose dialogue ended for ``reason`` (``None``: it goes on)."""
        truncated = reason in TRUNCATION_REASONS
        terminated = reason is not None and not truncated
        return cls(user_message, emotion, terminated=terminated, truncated=truncated, info=info)


class EnvStateError(RuntimeError):
    """``step`` before ``reset`` or after the dialogue ended: a bug in the caller, not bad input."""


class PolicyMessages(list[Message]):
    """The policy's messages plus, per assistant message, the token ids it sampled (or ``None``)."""

    def __init__(self, messages: list[Message], sampled: list[SampledTurn | None]) -> None:
        super().__init__(messages)
        self.assistant_token_ids: list[list[int] | None] = [t.token_ids if t else None for t in sampled]


class DialogueEnv:
    """One dialogue. Create one per dialogue; the simulator object may be shared by many."""

    def __init__(self, simulator: UserSimulator, config: EnvConfig | None = None) -> None:
        self.simulator = simulator
        self.config = config or EnvConfig()
        self._clear()

    def _clear(self) -> None:
        self._user: SimulatedUser | None = None
        self._profile: Profile | None = None
        self._messages: list[Message] = []
        self._sampled: list[SampledTurn | None] = []
        self._user_turns: list[UserTurn] = []
        self._timings: list[TurnTiming] = []
        self._emotion = self.config.rules.start_emotion
        self._done = False
        self._end_reason: str | None = None
        self._format_errors = 0
        self._truncated_replies = 0
        self._policy_tokens = 0
        self._simulator_tokens = 0
        self._error: str | None = None
        self._error_kind: str | None = None
        self._started = 0.0
        self._wall_s = 0.0
        self._seed = 0
        self._sample_index = 0
        self._opening_s = 0.0

    # -- lifecycle ------------------------------------------------------------------------------
    async def reset(self, profile: Profile, seed: int = 0, *, sample_index: int = 0) -> str:
        """Start a dialogue with ``profile``; return the user's opening message."""
        self._clear()
        self._profile = profile
        self._seed = seed
        self._sample_index = sample_index
        self._started = time.perf_counter()
        language = self.config.language or profile.language
        prompt = self.config.system_prompt or system_prompt(
            self.config.think, language, self.config.agent_prompt
        )
        self._messages.append(Message(role="system", content=prompt))
        rules = self.config.rules
        self._user = self.simulator.start(profile, start_emotion=rules.start_emotion, seed=seed)
        dynamics = self._user.emotion.rules
        if dynamics.dialogue != rules:  # the environment owns the dynamics; the simulator states changes
            self._user.emotion = EmotionState(self._user.emotion.value, replace(dynamics, dialogue=rules))
        self._emotion = self._user.emotion.value
        t0 = time.perf_counter()
        opening = await self._user.open()
        sim_s = time.perf_counter() - t0
        self._simulator_tokens += opening.tokens
        self._user_turns.append(opening)
        self._messages.append(Message(role="user", content=opening.text))
        self._opening_s = sim_s
        return opening.text

    async def step(
        self, agent_raw_text: str, *, completion: Completion | None = None, policy_s: float | None = None
    ) -> StepResult:
        """Send one raw assistant reply; return the user's answer, the emotion and whether it is over.

        ``completion`` (optional) lets the runner record the policy's token count and latency.
        Simulator errors propagate; the caller decides (the runner marks the episode failed).
        """
        if self._user is None:
            raise EnvStateError("step() called before reset()")
        if self._done:
            raise EnvStateError("step() called after the dialogue ended")
        split = split_think(agent_raw_text)
        format_error = self.config.think and not split.well_formed
        if format_error:
            self._format_errors += 1
        visible, truncated = self.config.shown_to_simulator(agent_raw_text, cut=self.simulator.cuts_reply)
        self._messages.append(Message(role="assistant", content=agent_raw_text))
        ids = completion.token_ids if completion is not None else None
        self._sampled.append(
            SampledTurn(
                token_ids=ids,
                logprobs=completion.token_logprobs if completion is not None else None,
                finish_reason=completion.finish_reason if completion is not None else None,
            )
            if ids
            else None
        )
        if completion is not None:
            self._policy_tokens += completion.completion_tokens
            self._truncated_replies += completion.finish_reason == "length"
        timing = TurnTiming(
            policy_s=policy_s if policy_s is not None else (completion.latency_s if completion else 0.0)
        )
        self._timings.append(timing)
        info: dict[str, Any] = {
            "assistant_turn": self.assistant_turns,
            "visible": visible,
            "format_error": format_error,
            "truncated": truncated,
        }

        rules = self.config.rules
        if (
            rules.turn_limit_rule == "reply_count"
            and self.assistant_turns >= rules.max_assistant_turns
            and not rules.appraise_final_reply
        ):
            self._finish("turn_limit")
            info.update(end_reason=self._end_reason, appraised=False)
            return StepResult.ended_by("turn_limit", None, self._emotion, info)

        t0 = time.perf_counter()
        turn = await self._user.respond(visible)
        timing.simulator_s = time.perf_counter() - t0
        self._simulator_tokens += turn.tokens
        self._user_turns.append(turn)
        self._messages.append(Message(role="user", content=turn.text))
        if turn.appraisal is not None:
            self._emotion = turn.appraisal.emotion_after
        else:  # a simulator may skip appraisal; the emotion then stays where it was
            self._emotion = self._user.emotion.value

        reason = self._ending(turn)
        if reason is not None:
            self._finish(reason)
        info.update(
            end_reason=self._end_reason,
            appraised=turn.appraisal is not None,
            appraisal=turn.appraisal,
            tier=self._user.emotion.tier,
        )
        return StepResult.ended_by(reason, turn.text, self._emotion, info)

    def _ending(self, turn: UserTurn) -> str | None:
        """Why the dialogue ends after this user turn (``None``: it goes on): the emotion, the user's
        goodbye (before the emotion when the simulator follows SAGE's order, test_npc.py:107-111 ``"emotion-point"]>=100``),
        then the turn limit."""
        rules = self.config.rules
        goodbye = (turn.end_reason or "left") if turn.ends_dialogue else None
        if goodbye is not None and self.simulator.goodbye_first:
            return goodbye
        reason = rules.emotion_end(self._emotion) or goodbye
        if reason is None and self.assistant_turns >= rules.reply_limit:
            reason = "turn_limit"
        return reason

    def mark_failed(self, exc: BaseException) -> None:
        """End the dialogue as failed (a policy or simulator call failed for good)."""
        self._error = f"{type(exc).__name__}: {exc}"[:2000]
        self._error_kind = error_kind(exc)
        self._finish("error")

    def _finish(self, reason: str) -> None:
        self._done = True
        self._end_reason = reason
        self._wall_s = time.perf_counter() - self._started if self._started else 0.0

    # -- views ----------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._done

    @property
    def emotion(self) -> int:
        return self._emotion

    @property
    def assistant_turns(self) -> int:
        return sum(1 for m in self._messages if m.role == "assistant")

    @property
    def profile(self) -> Profile | None:
        return self._profile

    def messages_for_policy(self) -> list[Message]:
        """The policy's context: system prompt + dialogue, assistant messages raw (think kept).

        The list carries the assistant turns' sampled ids (``assistant_token_ids``) so that a local
        backend conditions on exactly the tokens it sampled, not on a re-tokenisation of their text.
        """
        if self.config.per_turn_samples:
            # thought-free history: earlier replies as their visible text, so no sampled ids apply
            visible = [
                Message(role=m.role, content=self.config.in_history(m.content))
                if m.role == "assistant"
                else m
                for m in self._messages
            ]
            return PolicyMessages(visible, [None] * len(self._sampled))
        return PolicyMessages(self._messages, list(self._sampled))

    @property
    def episode(self) -> Episode:
        """The dialogue so far as an :class:`Episode` (complete once ``done``)."""
        if self._profile is None:
            raise EnvStateError("episode requested before reset()")
        emotions = [t.appraisal.emotion_after for t in self._user_turns if t.appraisal is not None]
        wall = self._wall_s if self._done else time.perf_counter() - self._started
        return Episode(
            profile_id=self._profile.id,
            sample_index=self._sample_index,
            episode_id=f"{self._profile.id}#{self._sample_index}",
            messages=list(self._messages),
            user_turns=list(self._user_turns),
            start_emotion=self.config.rules.start_emotion,
            final_emotion=self._emotion,
            emotions=emotions,
            status="failed" if self._error is not None else "finished",
            end_reason=self._end_reason,
            error=self._error,
            error_kind=self._error_kind,
            format_errors=self._format_errors,
            truncated_replies=self._truncated_replies,
            policy_tokens=self._policy_tokens,
            simulator_tokens=self._simulator_tokens,
            simulator_prompt_tokens=sum(t.prompt_tokens for t in self._user_turns),
            simulator_completion_tokens=sum(t.completion_tokens for t in self._user_turns),
            timings=list(self._timings),
            wall_s=wall,
            sampled=list(self._sampled) if any(t is not None for t in self._sampled) else [],
            meta={
                "seed": self._seed,
                "think": self.config.think,
                "language": self.config.language or self._profile.language,
                "simulator": self.simulator.name,
                "opening_s": round(self._opening_s, 6),
                **self._user_settings(),
            },
        )

    def _user_settings(self) -> dict[str, Any]:
        """The behaviour mode and difficulty the simulated user actually ran with, so that every
        consumer (eval breakdowns, training logs, verl extra fields) can slice results by them."""
        from rlver.simulator.behaviours import get_behaviour

        user = self._user
        if user is None:
            return {}
        out: dict[str, Any] = {"behaviour": get_behaviour(getattr(user, "behaviour", None)).name}
        difficulty = getattr(user, "difficulty", None)
        if difficulty:
            out["difficulty"] = difficulty
        return out
