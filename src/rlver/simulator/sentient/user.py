"""The LLM-backed sentient user: appraise each agent reply, move the emotion, answer in character.

Follows the "sentient agent as a judge" design (SAGE, Zhang et al. 2025) that RLVER trains against:
after every agent reply the simulator LLM (1) appraises it in named reasoning steps ending in an
integer emotion change and (2) writes the user's next message steered by the new emotion tier. The
emotion arithmetic is ours, not the LLM's: the stated change is clamped to the per-turn bound and the
value to 0..100 by :class:`~rlver.simulator.emotion.EmotionState`, and both the raw and the applied
change are kept in the :class:`~rlver.records.Appraisal`, so every number in a transcript can be
re-derived (``rlver audit``).

Sampling: the published leaderboard did not record its simulator's sampling settings. We default to
temperature 0.7 (a lively but stable user, close to common chat-API defaults used for such
simulators), top_p 1.0, and record the settings in every manifest; set temperature 0 for replayable
(cacheable) runs.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from rlver.errors import ConfigError
from rlver.llm.base import ChatModel, SamplingParams
from rlver.llm.structured import StructuredResult
from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message, UserTurn
from rlver.simulator.sentient import prompts
from rlver.simulator.base import SimulatedUser, UserSimulator
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import EmotionRules, EmotionState
from rlver.simulator.sentient.parsing import (
    AppraisalAnswer,
    OpeningAnswer,
    PlannedReplyAnswer,
    ReplyAnswer,
    ask_simulator,
)
from rlver.simulator.sentient.prompts import sage

#: ``sage``: the published simulator's structure (see :mod:`rlver.simulator.sentient.prompts.sage`);
#: ``rlver-v1``: our earlier prompts (a -10..+10 rubric, a difficulty paragraph, one-JSON reply).
Protocol = Literal["sage", "rlver-v1"]
PROTOCOLS: tuple[str, ...] = ("sage", "rlver-v1")

#: The simulator's answer cap when its sampling states none. SAGE's simulator calls set no cap
#: (SAGE/simulator_response.py:24-27 passes only the prompt); an appraisal in five named steps plus a
#: planned reply runs to several hundred tokens, so the cap is set where only a runaway answer meets
#: it. A cut answer is counted (``UserTurn.truncated_calls``) and re-asked once.
SIMULATOR_MAX_TOKENS = 4096

#: The default sampling of the simulator LLM (see the module docstring for why).
DEFAULT_SAMPLING = SamplingParams(temperature=0.7, top_p=1.0, max_tokens=SIMULATOR_MAX_TOKENS)

#: Tiers at which a user who ends the dialogue counts as satisfied rather than leaving.
SATISFIED_TIERS = ("S", "A")

AnswerT = TypeVar("AnswerT", bound=BaseModel)


def _derived_seed(*parts: object) -> int:
    """A stable 31-bit seed from parts (Python's ``hash`` is salted per process)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def end_reason_for(tier: str) -> str:
    """The user ended the dialogue: content (``satisfied``) at tiers S/A, else ``left``."""
    return "satisfied" if tier in SATISFIED_TIERS else "left"


class SentientUser(SimulatedUser):
    """One LLM-backed user in one dialogue."""

    def __init__(
        self,
        simulator: SentientSimulator,
        profile: Profile,
        emotion: EmotionState,
        *,
        difficulty: Difficulty,
        behaviour: str | None,
        language: str,
        seed: int,
    ) -> None:
        super().__init__(profile, emotion)
        self.simulator = simulator
        self.difficulty: Difficulty = difficulty
        self.behaviour = behaviour
        self.language = language
        self.seed = seed
        self._calls = 0
        self._agent_replies: list[str] = []
        self._system: Message | None = None

    def _sage_system(self) -> Message:
        """The sage system message: built once per dialogue, so every call shares it byte for byte."""
        if self._system is None:
            sim = self.simulator
            self._system = sage.system_message(
                self.profile,
                language=self.language,
                magnitude_rubric=sim.magnitude_rubric,
                difficulty=self.difficulty if sim.difficulty_paragraph else None,
                behaviour=self.behaviour,
                options=sim.sage_options,
            )
        return self._system

    def _sampling(self) -> SamplingParams:
        """Per-call sampling: a fixed base seed becomes a distinct, reproducible seed per call."""
        base = self.simulator.sampling
        self._calls += 1
        if base.seed is None:
            return base
        return base.model_copy(
            update={"seed": _derived_seed(base.seed, self.seed, self.profile.id, self._calls)}
        )

    def _reask(self, error: str) -> Message:
        if self.simulator.protocol == "sage":
            return sage.reask_message(error, self.language)
        return prompts.reask_message(error, self.language)

    async def _ask(
        self, messages: list[Message], schema: type[AnswerT], step: str, quoted: Sequence[str] = ()
    ) -> tuple[AnswerT, StructuredResult]:
        """One simulator call (re-asked once in the protocol's language); sampling drawn per call."""
        return await ask_simulator(
            self.simulator.model,
            messages,
            self._sampling(),
            schema,
            reask_builder=self._reask,
            quoted=quoted,
            step=step,
        )

    def restore(self, history: Sequence[Message], emotion: int) -> None:
        """Also rebuild the agent replies quoted back to the parser (echo detection) from ``history``."""
        super().restore(history, emotion)
        self._agent_replies = [m.content for m in history if m.role == "assistant"]

    async def open(self) -> UserTurn:
        started = time.perf_counter()
        if self.profile.opening:
            self.history.append(Message(role="user", content=self.profile.opening))
            return UserTurn(text=self.profile.opening, latency_s=time.perf_counter() - started, tokens=0)
        answer: OpeningAnswer | PlannedReplyAnswer
        if self.simulator.protocol == "sage":
            prompt = sage.opening_messages(
                self._sage_system(),
                self.emotion.value,
                language=self.language,
                options=self.simulator.sage_options,
            )
            answer, result = await self._ask(prompt, PlannedReplyAnswer, "opening")
        else:
            prompt = prompts.opening_messages(self.profile, language=self.language)
            answer, result = await self._ask(prompt, OpeningAnswer, "opening")
        self.history.append(Message(role="user", content=answer.reply))
        return UserTurn(
            text=answer.reply,
            latency_s=time.perf_counter() - started,
            tokens=result.tokens,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            truncated_calls=result.truncated,
            extra=_plan_extra(answer),
        )

    def _appraisal(self, answer: AppraisalAnswer) -> Appraisal:
        """Apply the stated change (our arithmetic, not the LLM's) and keep both raw and applied."""
        before, change, after = self.emotion.apply(answer.change)
        return Appraisal(
            understanding=answer.understanding,
            goal_fit=answer.goal_fit,
            inner_reaction=answer.inner_reaction,
            feeling=answer.feeling,
            raw_change=answer.change,
            change=change,
            emotion_before=before,
            emotion_after=after,
            tier=self.emotion.tier,
        )

    def _appraisal_prompt(self, agent_reply: str) -> list[Message]:
        if self.simulator.protocol == "sage":
            return sage.appraisal_messages(
                self._sage_system(),
                self.history,
                agent_reply,
                self.emotion.value,
                language=self.language,
                options=self.simulator.sage_options,
            )
        return prompts.appraisal_messages(
            self.profile,
            self.history,
            agent_reply,
            self.emotion.value,
            difficulty=self.difficulty,
            behaviour=self.behaviour,
            language=self.language,
        )

    async def _ask_reply(
        self, appraisal_prompt: list[Message], agent_reply: str, appraisal: Appraisal, quoted: Sequence[str]
    ) -> tuple[ReplyAnswer | PlannedReplyAnswer, StructuredResult]:
        """The reply step: ``sage`` continues the appraisal conversation; ``rlver-v1`` starts anew."""
        if self.simulator.protocol == "sage":
            prompt = sage.reply_messages(
                appraisal_prompt, appraisal, language=self.language, options=self.simulator.sage_options
            )
            return await self._ask(prompt, PlannedReplyAnswer, "reply", quoted)
        prompt = prompts.reply_messages(
            self.profile,
            self.history,
            agent_reply,
            appraisal,
            behaviour=self.behaviour,
            language=self.language,
        )
        return await self._ask(prompt, ReplyAnswer, "reply", quoted)

    async def _judge(
        self, agent_reply: str
    ) -> tuple[list[Message], Appraisal, StructuredResult, tuple[str, ...]]:
        """The appraisal call and our arithmetic on it: what :meth:`respond` and :meth:`appraise` share.

        Returns the appraisal prompt (the ``sage`` reply step continues it), the applied appraisal, the
        call's result (tokens), and the agent replies so far (quoted back if the model echoes them).
        """
        self._agent_replies.append(agent_reply)
        quoted = tuple(self._agent_replies)
        appraisal_prompt = self._appraisal_prompt(agent_reply)
        answer, result = await self._ask(appraisal_prompt, AppraisalAnswer, "appraisal", quoted)
        return appraisal_prompt, self._appraisal(answer), result, quoted

    async def appraise(self, agent_reply: str) -> UserTurn:
        """The appraisal call alone (no answer is written: ``text`` is empty). For calibration."""
        started = time.perf_counter()
        _, appraisal, result, _ = await self._judge(agent_reply)
        self.history.append(Message(role="assistant", content=agent_reply))
        return UserTurn(
            text="",
            appraisal=appraisal,
            latency_s=time.perf_counter() - started,
            tokens=result.tokens,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            truncated_calls=result.truncated,
        )

    async def respond(self, agent_reply: str) -> UserTurn:
        """Appraise ``agent_reply`` (our arithmetic moves the emotion), then answer in character."""
        started = time.perf_counter()
        appraisal_prompt, appraisal, appraisal_result, quoted = await self._judge(agent_reply)
        reply, reply_result = await self._ask_reply(appraisal_prompt, agent_reply, appraisal, quoted)
        self.history.append(Message(role="assistant", content=agent_reply))
        self.history.append(Message(role="user", content=reply.reply))
        results = (appraisal_result, reply_result)
        return UserTurn(
            text=reply.reply,
            appraisal=appraisal,
            ends_dialogue=reply.end_dialogue,
            end_reason=end_reason_for(appraisal.tier) if reply.end_dialogue else None,
            latency_s=time.perf_counter() - started,
            tokens=sum(r.tokens for r in results),
            prompt_tokens=sum(r.prompt_tokens for r in results),
            completion_tokens=sum(r.completion_tokens for r in results),
            truncated_calls=sum(r.truncated for r in results),
            extra=_plan_extra(reply),
        )


def _plan_extra(answer: BaseModel) -> dict[str, Any]:
    """A planned (``sage``) answer keeps its plan in the turn's ``extra``; other answers add nothing."""
    return {"plan": answer.plan()} if isinstance(answer, PlannedReplyAnswer) else {}


class SentientSimulator(UserSimulator):
    """Makes LLM-backed users; one instance serves every dialogue of a run (the model is shared).

    ``difficulty`` / ``behaviour`` of ``None`` fall back to the profile's own setting, then to
    ``normal`` / ``cooperative``; a value given here overrides the profile (a run-wide choice).
    ``prompt_language`` of ``None`` follows each profile's language.

    ``protocol`` picks the prompts: ``sage`` (the published structure; what ``SimulatorSpec`` and so
    ``rlver eval`` and the published presets use) or ``rlver-v1`` (our earlier prompts; this class's
    default so direct constructions keep their behaviour). Under ``sage``, ``magnitude_rubric`` adds
    the -10..+10 scale and ``difficulty_paragraph`` the difficulty text; both are off by default
    because the published benchmark simulator has neither.
    """

    name = "sentient"

    def __init__(
        self,
        model: ChatModel,
        *,
        sampling: SamplingParams | None = None,
        difficulty: Difficulty | None = None,
        behaviour: str | None = None,
        rules: EmotionRules | None = None,
        prompt_language: str | None = None,
        protocol: str = "rlver-v1",
        magnitude_rubric: bool = False,
        difficulty_paragraph: bool = False,
        sage_options: sage.SageOptions | None = None,
    ) -> None:
        super().__init__(rules)
        #: ``sage`` only: what the prompts show beyond SAGE's (all off by default; see SageOptions).
        self.sage_options = sage_options or sage.SageOptions()
        if protocol not in PROTOCOLS:
            raise ConfigError(f"simulator protocol {protocol!r}: choose one of {', '.join(PROTOCOLS)}")
        self.protocol = protocol
        self.magnitude_rubric = magnitude_rubric
        self.difficulty_paragraph = difficulty_paragraph
        self.model = model
        self.sampling = sampling or DEFAULT_SAMPLING
        self.difficulty = difficulty
        if behaviour is not None:
            get_behaviour(behaviour)  # fail at start-up on an unknown mode
        self.behaviour = behaviour
        if prompt_language is not None:
            prompts.prompt_set(prompt_language)
            if protocol == "sage":
                sage.sage_texts(prompt_language)
        self.prompt_language = prompt_language

    def start(self, profile: Profile, *, start_emotion: int, seed: int = 0) -> SentientUser:
        behaviour = self.behaviour if self.behaviour is not None else profile.behaviour
        get_behaviour(behaviour)
        return SentientUser(
            self,
            profile,
            EmotionState(start_emotion, self.rules),
            difficulty=self.difficulty or profile.difficulty or "normal",
            behaviour=behaviour,
            language=self.prompt_language or profile.language,
            seed=seed,
        )

    async def aclose(self) -> None:
        """Close the model's HTTP client (the eval runner calls this when a run ends)."""
        await self.model.aclose()

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model.describe(),
            "sampling": self.sampling.model_dump(),
            "difficulty": self.difficulty or "per-profile (default normal)",
            "behaviour": self.behaviour or "per-profile (default cooperative)",
            "prompt_language": self.prompt_language or "per-profile",
            "protocol": self.protocol,
            "prompt_version": sage.SAGE_PROMPT_VERSION if self.protocol == "sage" else prompts.PROMPT_VERSION,
            "magnitude_rubric": self.magnitude_rubric if self.protocol == "sage" else True,
            "difficulty_paragraph": self.difficulty_paragraph if self.protocol == "sage" else True,
            # the rlver-v1 prompts show all of these (traits, bands, number and tier, first person,
            # the guard, the whole appraisal)
            **{
                name: getattr(self.sage_options, name) if self.protocol == "sage" else True
                for name in sage.SageOptions.names()
            },
            "max_change": self.rules.max_change,
            "emotion_range": [self.rules.low, self.rules.high],
        }
