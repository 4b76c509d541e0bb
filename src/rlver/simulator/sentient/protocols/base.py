"""What a sentient-user protocol is: the prompts it sends, the answers it reads, how it describes itself.

The sentient user (:mod:`rlver.simulator.sentient.user`) runs the same dialogue under every protocol:
open, then per agent reply an appraisal call (our arithmetic moves the emotion) and a reply call. What
differs between protocols is only what this interface names, so the user holds one protocol object and
never asks which one it is.

Adding a protocol takes one file plus one registry line: ``protocols/<name>.py`` with a
:class:`SentientProtocol` subclass (a ``Literal`` ``name``, its options as fields, its
:class:`ProtocolDialogue`), and its line in :data:`rlver.simulator.sentient.protocols.PROTOCOLS`. The
config (``simulator.protocol: <name>`` with the options as keys), ``rlver eval --sim-protocol`` and the
manifests read it from there (``tests/simulator/test_simulator_sentient_protocols.py`` holds the count).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message
from rlver.simulator.sentient.parsing import OpeningAnswer, PlannedReplyAnswer, ReplyAnswer
from rlver.simulator.sentient.prompts import MAX_QUOTED_CHARS
from rlver.simulator.spec import Variants


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


class SentientProtocol(Variants, ABC):
    """A prompt protocol of the sentient user, with its options as fields (chosen by ``name``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tag_field: ClassVar[str] = "name"

    #: the protocol ``SimulatorSpec`` uses when a config names none
    name: str = "sage"

    #: recorded in every manifest; each protocol changes its own whenever its prompts change
    prompt_version: ClassVar[str]
    #: the answer schemas of the opening and reply steps (the appraisal's is shared)
    opening_answer: ClassVar[type[OpeningAnswer] | type[PlannedReplyAnswer] | type[BaseModel]]
    reply_answer: ClassVar[type[ReplyAnswer] | type[PlannedReplyAnswer] | type[BaseModel]]
    #: The simulator is shown the agent's whole reply, think block and all, uncut (SAGE's loop hands
    #: ``call_npc``'s answer to the simulator as it is, test_npc.py:114-115); else the visible text.
    shows_whole_reply: ClassVar[bool] = False
    #: The user's goodbye ends the dialogue before the emotion thresholds are checked (SAGE's order,
    #: test_npc.py:107-111); it changes the end's label, never the score.
    goodbye_first: ClassVar[bool] = False

    def prepare(self) -> None:
        """Read what the prompts need before any dialogue starts (a protocol that reads fetched
        files raises InputError here, exit 2, before any work). Default: nothing to read."""

    @abstractmethod
    def check_language(self, language: str) -> None:
        """Fail at start-up (ConfigError) when the protocol has no prompts in ``language``."""

    @abstractmethod
    def dialogue(
        self, profile: Profile, *, difficulty: Difficulty, behaviour: str | None, language: str
    ) -> ProtocolDialogue:
        """The prompts of one dialogue with ``profile``."""

    @abstractmethod
    def shown(self) -> dict[str, bool]:
        """What the prompts show the simulator, by option name (recorded by :meth:`describe`)."""

    def extra(self, answer: BaseModel) -> dict[str, Any]:
        """What a spoken answer keeps in the turn's ``extra`` beyond its words (default: nothing)."""
        return {}

    def describe(self) -> dict[str, Any]:
        return {
            "protocol": self.name,
            "prompt_version": self.prompt_version,
            "max_quoted_chars": MAX_QUOTED_CHARS,
            **self.shown(),
        }
