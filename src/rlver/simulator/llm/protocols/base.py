"""What a sentient-user protocol is: the prompts it sends, the answers it reads, how it describes itself.

The sentient user (:mod:`rlver.simulator.llm.user`) runs the same dialogue under every protocol:
open, then per agent reply an appraisal call (our arithmetic moves the emotion) and a reply call. What
differs between protocols is only what this interface names, so the user holds one protocol object and
never asks which one it is.

Adding a protocol takes one file plus one registry line: ``protocols/<name>.py`` with a
:class:`LLMUserPrompts` subclass (a ``Literal`` ``name``, its options as fields, its
:class:`ProtocolDialogue`), and its line in :data:`PROTOCOLS` below (a lazy ``"module:attr"`` entry: the
protocol's module imports this one, so naming it by string makes no import cycle). The
config (``simulator.prompts: <name>`` with the options as keys), ``rlver eval --sim-prompts`` and the
manifests read it from there (``tests/simulator/test_simulator_sentient_protocols.py`` holds the count).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlver.config import MAX_COUNT
from rlver.errors import ConfigError
from rlver.profiles.published_code import published_digests
from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message
from rlver.registry import Entry, Registry
from rlver.simulator.llm.parsing import OpeningAnswer, PlannedReplyAnswer, ReplyAnswer
from rlver.simulator.llm.prompts import MAX_QUOTED_CHARS
from rlver.simulator.llm.published_calls import (
    PublishedPlayer,
    PublishedReplyAnswer,
    PublishedSimulator,
    published_scene,
    state_name,
)
from rlver.simulator.spec import Variants

#: The default bound on calls for one answer of a published-text protocol. The published loops re-send
#: a malformed answer's request until one parses; this bound only stops a broken endpoint (a judge that
#: never answers in the format) from running up an unbounded bill. A judge answering out of format
#: half the time reaches it once in 2**50 steps, so with a working judge a run sends what the published
#: code sends.
PARSE_GUARD = 50


@dataclass(frozen=True)
class DialogueStart:
    """What a protocol's prompts for one dialogue are built from: the profile, how hard the user is to
    please, its behaviour, the prompts' language and the emotion the user starts at."""

    profile: Profile
    difficulty: Difficulty
    behaviour: str | None
    language: str
    start_emotion: int


@dataclass(frozen=True)
class ReplyStep:
    """What the reply step may draw on: the appraisal call's prompt (``sage`` continues it), the
    dialogue before the agent's reply, that reply, and the appraisal our arithmetic applied."""

    appraisal_prompt: Sequence[Message]
    history: Sequence[Message]
    agent_reply: str
    appraisal: Appraisal


class ProtocolDialogue(ABC):
    """One dialogue's prompts under a protocol (it may keep what every call of the dialogue shares)."""

    @abstractmethod
    def opening(self, emotion: int) -> list[Message]:
        """The prompt that makes the user write an opening line (profiles without one)."""

    @abstractmethod
    def appraisal(self, history: Sequence[Message], agent_reply: str, emotion: int) -> list[Message]:
        """The appraisal step's prompt; ``history`` excludes ``agent_reply``."""

    @abstractmethod
    def reply(self, step: ReplyStep) -> list[Message]:
        """The reply step's prompt, after the appraisal was applied."""

    @abstractmethod
    def reask(self, error: str) -> Message:
        """Appended after a malformed answer, in the protocol's language and wording."""

    def reader(self, step: str) -> Callable[[str], BaseModel] | None:
        """How this step's answer is read when it is not a JSON object (``None``: the step's schema,
        read as JSON). A reader raises ``ValueError`` on a malformed answer, which is re-asked by
        sending the same request again (the published protocols' own loop)."""
        return None


def _protocol(name: str, description: str, module: str, cls: str) -> Entry[Any]:
    """A protocol's registry line: the class is both what it builds and its settings (its options)."""
    ref = f"rlver.simulator.llm.protocols.{module}:{cls}"
    return Entry(name, description, ref, ref)


#: The sentient user's prompt protocols, one line each (``protocols/__init__`` re-exports it).
PROTOCOLS: Registry[Any] = Registry(
    "prompt set",
    [
        _protocol("sage", "the published simulator's structure in rlver's words", "sage", "SageProtocol"),
        _protocol("sage-published", "SAGE's own text, fetched", "sage_published", "SagePublishedProtocol"),
        _protocol(
            "rlver-published",
            "the published training simulator's text, fetched",
            "rlver_published",
            "RlverPublishedProtocol",
        ),
        _protocol("rlver-v1", "rlver's earlier prompts", "v1", "V1Protocol"),
    ],
)


class LLMUserPrompts(Variants, ABC):
    """A prompt protocol of the sentient user, with its options as fields (chosen by ``name``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tag_field: ClassVar[str] = "name"
    choices: ClassVar[Registry[Any]] = PROTOCOLS
    #: ``simulator.prompts.prompt_role=system`` under ``sage`` is refused, never dropped
    refuses_keys_of_others: ClassVar[bool] = True

    name: str = Field(
        default="sage", description="the protocol ``SimulatorSpec`` uses when a config names none"
    )

    #: recorded in every manifest; each protocol changes its own whenever its prompts change
    prompt_version: ClassVar[str]
    #: the answer schemas of the opening and reply steps (the appraisal's is shared)
    opening_answer: ClassVar[type[OpeningAnswer] | type[PlannedReplyAnswer] | type[BaseModel]]
    reply_answer: ClassVar[type[ReplyAnswer] | type[PlannedReplyAnswer] | type[BaseModel]]
    #: Whether ``env.max_reply_chars`` cuts what the simulator is shown of a reply (rlver's safety
    #: bound); the published-text protocols quote it uncut, as the published code does. What is shown
    #: of a think block is the environment's reply layout (``EnvConfig.shown_to_simulator``).
    cuts_reply: ClassVar[bool] = True
    #: The user's goodbye ends the dialogue before the emotion thresholds are checked (SAGE's order,
    #: test_npc.py:107-111 ``"emotion-point"]>=100``); it changes the end's label, never the score.
    goodbye_first: ClassVar[bool] = False

    def prepare(self) -> None:
        """Read what the prompts need before any dialogue starts (a protocol that reads fetched
        files raises InputError here, exit 2, before any work). Default: nothing to read."""

    @abstractmethod
    def check_language(self, language: str) -> None:
        """Fail at start-up (ConfigError) when the protocol has no prompts in ``language``."""

    @abstractmethod
    def dialogue(self, start: DialogueStart) -> ProtocolDialogue:
        """The prompts of one dialogue: ``start.profile``'s user at ``start.start_emotion``."""

    def unfit(self, profile: Profile, language: str) -> str | None:
        """Why this protocol cannot play ``profile`` in ``language`` (None: it can)."""
        try:
            self.check_language(language)
        except ConfigError as exc:
            return str(exc)
        return None

    def refuse_unfit_profiles(self, profiles: Sequence[Profile], language: str | None, where: str) -> None:
        """Refuse (ConfigError, exit 2) before any work a set (``where`` names it) holding a profile
        this protocol cannot play; each dialogue of it would fail only once the run had started, the
        reason written to the transcript alone. ``language``: the prompts' (None: each profile's)."""
        unfit = [(p.id, why) for p in profiles if (why := self.unfit(p, language or p.language))]
        if unfit:
            first, why = unfit[0]
            raise ConfigError(
                f"{where}: {len(unfit)} of {len(profiles)} profiles cannot run under simulator protocol "
                f"{self.name!r} (the first, {first!r}: {why})"
            )

    @abstractmethod
    def shown(self) -> dict[str, bool]:
        """What the prompts show the simulator, by option name (recorded by :meth:`describe`)."""

    def extra(self, answer: BaseModel) -> dict[str, Any]:
        """What a spoken answer keeps in the turn's ``extra`` beyond its words (default: nothing)."""
        return {}

    def read_attempts(self) -> int:
        """Calls a step may take before its answer counts as malformed for good (the JSON protocols:
        the question and one re-ask with the error). ``0``: no bound."""
        return 2

    def unread_settings(self) -> dict[str, str]:
        """The run-wide user settings (``difficulty``, ``behaviour``) these prompts never show, each
        with the reason (``LLMUserSpec.inert_settings`` reports those a run sets)."""
        return {}

    @property
    def reads_empty_answers(self) -> bool:
        """Whether an empty answer is read like any other (the published parsers read ``""``), rather
        than an error of the model's client, retried there."""
        return False

    def describe(self) -> dict[str, Any]:
        return {
            "prompts": self.name,
            "prompt_version": self.prompt_version,
            "max_quoted_chars": MAX_QUOTED_CHARS,
            **self.shown(),
        }


class PublishedTextProtocol(LLMUserPrompts):
    """A protocol that sends a published simulator's own requests, read from its fetched files
    (``sage-published``, ``rlver-published``): what they share; each names its :attr:`simulator`."""

    prompt_role: Literal["user", "system"] = Field(
        default="user",
        description=(
            "The role of the one message that carries the published prompt (the published code sends a "
            "user message, or leaves ``call_llm(prompt)`` open): ``user`` (default) or ``system``."
        ),
    )
    parse_attempts: int = Field(
        default=PARSE_GUARD,
        ge=0,
        le=MAX_COUNT,
        description=(
            "Calls a step may take until its answer parses (the same request each time). The published "
            "loops re-send until one parses, without bound (SAGE simulator_response.py:135-161 ``time.sleep(3)``, dsv3 "
            ":204-225 ``time.sleep(3)``); ``0`` does that. The default is a guard against a broken endpoint only, large "
            "enough that a judge which sometimes answers out of format is handled as the published loop "
            "handles it; a smaller value fails the turn sooner (``rlver explain`` names it)."
        ),
    )

    simulator: ClassVar[PublishedSimulator]
    opening_answer: ClassVar[type[BaseModel]] = PublishedReplyAnswer
    reply_answer: ClassVar[type[BaseModel]] = PublishedReplyAnswer
    cuts_reply: ClassVar[bool] = False

    def prepare(self) -> None:
        self.simulator.texts()
        self.simulator.goodbye_words()

    def check_language(self, language: str) -> None:
        if language != "zh":
            raise ConfigError(
                f"simulator protocol {self.name!r} has {self.simulator.owner} Chinese prompts only "
                f"(asked for {language!r}); use --sim-prompts sage"
            )

    def unfit(self, profile: Profile, language: str) -> str | None:
        """Also a profile without the published player and scene (rlver's own and generated ones)."""
        why = super().unfit(profile, language)
        if why is None and profile.published_scene is None:
            why = f"not in the published format (source {profile.source or 'not named'}); use --sim-prompts sage"
        return why

    def dialogue(self, start: DialogueStart) -> ProtocolDialogue:
        scene = published_scene(start.profile, self.name)
        dialogue = PublishedDialogue(self.simulator, self.prompt_role, start.profile.persona, scene)
        dialogue.appraisal_emotion = self.appraisal_emotion_shown(start.start_emotion)
        return dialogue

    def appraisal_emotion_shown(self, start_emotion: int) -> int | None:
        """The emotion every appraisal prompt of a dialogue shows (``None``: the current one, as SAGE's
        ``planning_reply`` shows the value it is handed each turn)."""
        return None

    def read_attempts(self) -> int:
        return self.parse_attempts

    def unread_settings(self) -> dict[str, str]:
        why = f"{self.simulator.owner} published prompts have no place for it"
        return {"difficulty": why, "behaviour": why}

    @property
    def reads_empty_answers(self) -> bool:
        """An empty answer is read as the published code reads it: a reply of ``""`` is said, an
        appraisal without a change is re-sent (SAGE's ``call_llm``/dsv3's ``call_api`` return it as is)."""
        return True

    def shown(self) -> dict[str, bool]:
        return {}

    def extra(self, answer: BaseModel) -> dict[str, Any]:
        """The published ``thinking`` (kept in its history) and whether the answer had ``Response:``."""
        if isinstance(answer, PublishedReplyAnswer):
            return {"thinking": answer.thinking, "response_field": answer.response_field}
        return {}

    def describe(self) -> dict[str, Any]:
        return {
            "prompts": self.name,
            "prompt_version": self.prompt_version,
            "prompt_role": self.prompt_role,
            "parse_attempts": self.parse_attempts,
            "published_files": published_digests(self.simulator.files),
        }


class PublishedDialogue(ProtocolDialogue):
    """One dialogue of a published simulator: the profile's published text and its templates."""

    def __init__(
        self, simulator: PublishedSimulator, role: Literal["user", "system"], player: str, scene: str
    ) -> None:
        self.simulator = simulator
        self.texts = simulator.texts()
        self.who = PublishedPlayer(self.texts, player, scene)
        self.goodbye = simulator.goodbye_words()
        self.role = role
        self.player = player
        self.scene = scene
        #: the number every appraisal prompt shows; ``None``: the emotion at that turn
        self.appraisal_emotion: int | None = None

    def _message(self, prompt: str) -> list[Message]:
        return [Message(role=self.role, content=prompt)]

    def opening(self, emotion: int) -> list[Message]:
        state = state_name(emotion, self.texts.tiers)
        return self._message(self.simulator.reply_prompt(self.who, state, [], None))

    def appraisal(self, history: Sequence[Message], agent_reply: str, emotion: int) -> list[Message]:
        quoted = [*history, Message(role="assistant", content=agent_reply)]
        shown = emotion if self.appraisal_emotion is None else self.appraisal_emotion
        return self._message(self.simulator.appraisal_prompt(self.who, shown, quoted))

    def reply(self, step: ReplyStep) -> list[Message]:
        quoted = [*step.history, Message(role="assistant", content=step.agent_reply)]
        state = state_name(step.appraisal.emotion_after, self.texts.tiers)
        prompt = self.simulator.reply_prompt(self.who, state, quoted, step.appraisal)
        return self._message(prompt)

    def reask(self, error: str) -> Message:
        """Not used: a malformed answer is re-asked with the same request (see :meth:`reader`)."""
        return Message(role=self.role, content=error)

    def reader(self, step: str) -> Callable[[str], BaseModel] | None:
        if step == "appraisal":
            return self.simulator.read_appraisal
        read, goodbye = self.simulator.read_reply, self.goodbye
        return lambda text: read(text, goodbye)
