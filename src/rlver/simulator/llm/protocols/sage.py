"""The ``sage`` protocol: the published simulator's structure (prompts in :mod:`..prompts.sage`).

Two calls per agent reply, each with its own system message as SAGE's (one shared message under
``shared_rules``), built once per dialogue so every call of a step repeats it byte for byte (prefix
caches). The reply step plans, drafts and rewrites before the final words; the
plan is kept in the turn's ``extra``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from rlver.records import Message
from rlver.simulator.llm import prompts
from rlver.simulator.llm.parsing import PlannedReplyAnswer
from rlver.simulator.llm.prompts import sage
from rlver.simulator.llm.prompts.sage import SageOptions
from rlver.simulator.llm.protocols.base import (
    DialogueStart,
    LLMUserPrompts,
    ProtocolDialogue,
    ReplyStep,
)


class SageProtocol(SageOptions, LLMUserPrompts):
    """``sage`` with its options: the nine :class:`SageOptions` and two texts of the ``rlver-v1`` prompts.

    ``magnitude_rubric`` adds the -10..+10 scale (the published prompt states none) and
    ``difficulty_paragraph`` the difficulty text (the published benchmark simulator has none).
    """

    name: Literal["sage"] = Field(
        default="sage", description="``sage``: SAGE's prompt structure in our words, with the options below."
    )
    magnitude_rubric: bool = Field(
        default=False,
        description="Add the -10..+10 scale of the ``rlver-v1`` prompts (the published prompt states none).",
    )
    difficulty_paragraph: bool = Field(
        default=False,
        description=(
            "Add the difficulty text of the ``rlver-v1`` prompts (the published benchmark simulator has "
            "none)."
        ),
    )

    prompt_version: ClassVar[str] = sage.SAGE_PROMPT_VERSION
    opening_answer: ClassVar[type[PlannedReplyAnswer]] = PlannedReplyAnswer
    reply_answer: ClassVar[type[PlannedReplyAnswer]] = PlannedReplyAnswer

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """The settings a config may turn on (``rlver calibrate --sim-option`` offers them)."""
        return ("magnitude_rubric", "difficulty_paragraph", *SageOptions.names())

    def check_language(self, language: str) -> None:
        prompts.prompt_set(language)
        sage.sage_texts(language)

    def dialogue(self, start: DialogueStart) -> ProtocolDialogue:
        systems = {
            step: sage.system_message(
                start.profile,
                language=start.language,
                magnitude_rubric=self.magnitude_rubric,
                difficulty=start.difficulty if self.difficulty_paragraph else None,
                behaviour=start.behaviour,
                options=self,
                step=step,
            )
            for step in ("appraisal", "reply")
        }
        return SageDialogue(self, systems["appraisal"], systems["reply"], start.language)

    def shown(self) -> dict[str, bool]:
        return {name: getattr(self, name) for name in self.option_names()}

    def unread_settings(self) -> dict[str, str]:
        if self.difficulty_paragraph:
            return {}
        return {"difficulty": "the sage prompts show it only with difficulty_paragraph: true"}

    def extra(self, answer: BaseModel) -> dict[str, Any]:
        """The plan before the final words (stance, aim, tone, draft, rewrite)."""
        return {"plan": answer.plan()} if isinstance(answer, PlannedReplyAnswer) else {}


class SageDialogue(ProtocolDialogue):
    """One dialogue: each step's system message is shared by every call of that step."""

    def __init__(self, protocol: SageProtocol, system: Message, reply_system: Message, language: str) -> None:
        self.options = protocol
        self.system = system
        self.reply_system = reply_system
        self.language = language

    def opening(self, emotion: int) -> list[Message]:
        """The opening is a reply with no appraisal yet, so it gets the reply's system message."""
        return sage.opening_messages(self.reply_system, emotion, language=self.language, options=self.options)

    def appraisal(self, history: Sequence[Message], agent_reply: str, emotion: int) -> list[Message]:
        return sage.appraisal_messages(
            self.system, history, agent_reply, emotion, language=self.language, options=self.options
        )

    def reply(self, step: ReplyStep) -> list[Message]:
        """The reply call (see :func:`sage.reply_messages`)."""
        return sage.reply_messages(
            step.appraisal_prompt,
            step.appraisal,
            language=self.language,
            options=self.options,
            system=self.reply_system,
        )

    def reask(self, error: str) -> Message:
        return sage.reask_message(error, self.language)
