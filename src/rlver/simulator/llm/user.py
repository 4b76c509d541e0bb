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

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from rlver.llm.base import ChatModel, SamplingParams
from rlver.llm.structured import StructuredResult
from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message, UserTurn
from rlver.seeding import hashed_seed
from rlver.simulator.base import Judgement, SimulatedUser, UserSimulator
from rlver.simulator.emotion import EmotionRules, EmotionState
from rlver.simulator.llm.parsing import (
    AppraisalAnswer,
    OpeningAnswer,
    PlannedReplyAnswer,
    ReplyAnswer,
    ask_simulator,
)
from rlver.simulator.llm.protocols import DialogueStart, LLMUserPrompts, ReplyStep, protocol_named

#: The simulator's answer cap when its sampling states none. SAGE's simulator calls set no cap
#: (SAGE/simulator_response.py:24-27 ``def call_llm`` passes only the prompt); an appraisal in five named steps plus a
#: planned reply runs to several hundred tokens, so the cap is set where only a runaway answer meets
#: it. A cut answer is counted (``UserTurn.truncated_calls``) and re-asked once.
SIMULATOR_MAX_TOKENS = 4096

#: The default sampling of the simulator LLM (see the module docstring for why).
DEFAULT_SAMPLING = SamplingParams(temperature=0.7, top_p=1.0, max_tokens=SIMULATOR_MAX_TOKENS)

AnswerT = TypeVar("AnswerT", bound=BaseModel)


class LLMUser(SimulatedUser):
    """One LLM-backed user in one dialogue."""

    def __init__(
        self,
        simulator: LLMSimulator,
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
        self.protocol = simulator.protocol
        #: this dialogue's prompts (a protocol may build what every call shares once, here)
        self.prompts = self.protocol.dialogue(
            DialogueStart(profile, difficulty, behaviour, language, start_emotion=emotion.value)
        )

    def _sampling(self) -> SamplingParams:
        """Per-call sampling: a fixed base seed becomes a distinct, reproducible seed per call."""
        base = self.simulator.sampling
        self._calls += 1
        if base.seed is None:
            return base
        return base.model_copy(
            update={"seed": hashed_seed(base.seed, self.seed, self.profile.id, self._calls)}
        )

    async def _ask(
        self, messages: list[Message], schema: type[AnswerT], step: str, quoted: Sequence[str] = ()
    ) -> tuple[AnswerT, StructuredResult]:
        """One simulator call (re-asked once in the protocol's language); sampling drawn per call."""
        return await ask_simulator(
            self.simulator.model,
            messages,
            self._sampling(),
            schema,
            reask_builder=self.prompts.reask,
            quoted=quoted,
            step=step,
            reader=cast("Callable[[str], AnswerT] | None", self.prompts.reader(step)),
            attempts=self.protocol.read_attempts(),
        )

    def restore(self, history: Sequence[Message], emotion: int) -> None:
        """Also rebuild the agent replies quoted back to the parser (echo detection) from ``history``."""
        super().restore(history, emotion)
        self._agent_replies = [m.content for m in history if m.role == "assistant"]

    async def open(self) -> UserTurn:
        started = time.perf_counter()
        if self.profile.opening is not None:  # "" too: a group's shared opening the user wrote empty
            self.history.append(Message(role="user", content=self.profile.opening))
            return UserTurn(text=self.profile.opening, latency_s=time.perf_counter() - started, tokens=0)
        prompt = self.prompts.opening(self.emotion.value)
        answer, result = await self._ask(
            prompt, cast("type[OpeningAnswer]", self.protocol.opening_answer), "opening"
        )
        self.history.append(Message(role="user", content=answer.reply))
        return UserTurn(
            text=answer.reply,
            latency_s=time.perf_counter() - started,
            tokens=result.tokens,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            truncated_calls=result.truncated,
            extra=self.protocol.extra(answer),
        )

    def _appraisal(self, answer: AppraisalAnswer) -> Appraisal:
        """Apply the stated change (our arithmetic, not the LLM's) and keep both raw and applied."""
        return self.applied(
            Judgement(
                answer.change, answer.understanding, answer.goal_fit, answer.inner_reaction, answer.feeling
            )
        )

    async def _ask_reply(
        self, appraisal_prompt: list[Message], agent_reply: str, appraisal: Appraisal, quoted: Sequence[str]
    ) -> tuple[ReplyAnswer | PlannedReplyAnswer, StructuredResult]:
        """The reply step: the protocol decides whether it continues the appraisal conversation."""
        prompt = self.prompts.reply(ReplyStep(appraisal_prompt, self.history, agent_reply, appraisal))
        return await self._ask(prompt, cast("type[ReplyAnswer]", self.protocol.reply_answer), "reply", quoted)

    async def _judge(
        self, agent_reply: str
    ) -> tuple[list[Message], Appraisal, StructuredResult, tuple[str, ...]]:
        """The appraisal call and our arithmetic on it: what :meth:`respond` and :meth:`appraise` share.

        Returns the appraisal prompt (the ``sage`` reply step continues it), the applied appraisal, the
        call's result (tokens), and the agent replies so far (quoted back if the model echoes them).
        """
        self._agent_replies.append(agent_reply)
        quoted = tuple(self._agent_replies)
        appraisal_prompt = self.prompts.appraisal(self.history, agent_reply, self.emotion.value)
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
        return self.user_turn(
            reply.reply,
            appraisal,
            ends=reply.end_dialogue,
            started=started,
            tokens=sum(r.tokens for r in results),
            prompt_tokens=sum(r.prompt_tokens for r in results),
            completion_tokens=sum(r.completion_tokens for r in results),
            truncated_calls=sum(r.truncated for r in results),
            extra=self.protocol.extra(reply),
        )


class LLMSimulator(UserSimulator):
    """Makes LLM-backed users; one instance serves every dialogue of a run (the model is shared).

    ``difficulty`` / ``behaviour`` of ``None`` fall back to the profile's own setting, then to
    ``normal`` / ``cooperative``; a value given here overrides the profile (a run-wide choice).
    ``prompt_language`` of ``None`` follows each profile's language.

    ``protocol`` picks the prompts, with its options: a
    :class:`~rlver.simulator.llm.protocols.LLMUserPrompts` object, or a protocol's name for its
    defaults. ``sage`` is the published structure (what ``SimulatorSpec`` and so ``rlver eval`` and
    the published presets use); ``rlver-v1`` (our earlier prompts) is this class's default so direct
    constructions keep their behaviour.
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
        protocol: LLMUserPrompts | str = "rlver-v1",
    ) -> None:
        super().__init__(rules, difficulty=difficulty, behaviour=behaviour)
        self.protocol = protocol_named(protocol) if isinstance(protocol, str) else protocol
        self.protocol.prepare()
        if self.protocol.reads_empty_answers:  # its parser reads "" (a reply said, a change re-asked)
            model.accept_empty = True
        self.model = model
        self.sampling = sampling or DEFAULT_SAMPLING
        if prompt_language is not None:
            self.protocol.check_language(prompt_language)
        self.prompt_language = prompt_language

    @property
    def cuts_reply(self) -> bool:
        return self.protocol.cuts_reply

    @property
    def goodbye_first(self) -> bool:
        return self.protocol.goodbye_first

    def start(self, profile: Profile, *, start_emotion: int, seed: int = 0) -> LLMUser:
        difficulty, behaviour = self.persona_of(profile)
        return LLMUser(
            self,
            profile,
            self.emotion_at(start_emotion),
            difficulty=difficulty,
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
            **self.protocol.describe(),
            "max_change": self.rules.max_change,
            "emotion_range": [self.rules.low, self.rules.high],
        }
