"""The ``rlver-v1`` protocol: our earlier prompts (prompts in :mod:`rlver.simulator.llm.prompts`).

A -10..+10 rubric and a difficulty paragraph in the appraisal; the reply step starts a new
conversation and answers in one JSON object (no plan). It has no options: it shows the simulator
everything the ``sage`` options can add.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import Field

from rlver.records import Message
from rlver.simulator.llm import prompts
from rlver.simulator.llm.parsing import OpeningAnswer, ReplyAnswer
from rlver.simulator.llm.protocols.base import (
    DialogueStart,
    LLMUserPrompts,
    ProtocolDialogue,
    ReplyStep,
)
from rlver.simulator.llm.protocols.sage import SageProtocol


class V1Protocol(LLMUserPrompts):
    """``rlver-v1``: no options."""

    name: Literal["rlver-v1"] = Field(
        default="rlver-v1",
        description=(
            "``rlver-v1``: rlver's earlier prompt set (-10..+10 rubric, difficulty paragraph, one-JSON "
            "reply)."
        ),
    )

    prompt_version: ClassVar[str] = prompts.PROMPT_VERSION
    opening_answer: ClassVar[type[OpeningAnswer]] = OpeningAnswer
    reply_answer: ClassVar[type[ReplyAnswer]] = ReplyAnswer

    def check_language(self, language: str) -> None:
        prompts.prompt_set(language)

    def dialogue(self, start: DialogueStart) -> ProtocolDialogue:
        return V1Dialogue(prompts.Speaker(start.profile, start.difficulty, start.behaviour, start.language))

    def shown(self) -> dict[str, bool]:
        """Everything the ``sage`` options can add (traits, bands, number and tier, first person, the
        guard, the whole appraisal, the rubric and the difficulty paragraph) is in these prompts."""
        return dict.fromkeys(SageProtocol.option_names(), True)


class V1Dialogue(ProtocolDialogue):
    """Each call is built anew from the speaker (no shared system message)."""

    def __init__(self, who: prompts.Speaker) -> None:
        self.who = who

    def opening(self, emotion: int) -> list[Message]:
        return prompts.opening_messages(self.who.profile, language=self.who.language)

    def appraisal(self, history: Sequence[Message], agent_reply: str, emotion: int) -> list[Message]:
        return prompts.appraisal_messages(self.who, history, agent_reply, emotion)

    def reply(self, step: ReplyStep) -> list[Message]:
        """A new conversation: the profile, the exchange, the appraisal just made."""
        return prompts.reply_messages(self.who, step.history, step.agent_reply, step.appraisal)

    def reask(self, error: str) -> Message:
        return prompts.reask_message(error, self.who.language)
