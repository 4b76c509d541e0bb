"""The ``sage-published`` protocol: each simulator request is the one SAGE's own code builds, byte for byte.

rlver's ``sage`` protocol follows SAGE's structure in rlver's words; a judge asked other words gives
other scores, so a new run under it cannot sit beside the leaderboard. This protocol sends SAGE's text
itself, read at run time from the fetched ``sage/simulator_response.py``
(:mod:`rlver.simulator.sentient.published_text`), and builds each prompt the way SAGE's
``planning_reply`` and ``player_reply`` do: the same ``str.replace`` calls in the same order, the
history as the same JSON (``ensure_ascii=False, indent=2``), split into earlier context and latest
exchange for the reply call, and the opening-line case. ``call_llm(prompt)`` is left to the user in
SAGE; rlver sends the prompt as one user message (``prompt_role: system`` is the other reading).

Answers are read as SAGE reads them (:func:`read_sage_appraisal`, :func:`read_sage_reply`): its field
splits, full-width colons and ``*`` removed, the first signed integer after ``Change:``, and the
goodbye words of SAGE's loop in the user's reply. Where SAGE retries a failed parse forever, rlver
sends the same request once more and then labels the turn failed. The emotion arithmetic stays
rlver's (:class:`~rlver.simulator.emotion.EmotionRules`): the change clamped to ±10 and the value
capped at 100, as SAGE's ``planning_reply`` does (simulator_response.py:150-155).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from rlver.errors import ConfigError
from rlver.profiles.published_code import published_digests
from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message
from rlver.simulator.sentient import published_text
from rlver.simulator.sentient.parsing import AppraisalAnswer
from rlver.simulator.sentient.protocols.base import ProtocolDialogue, ReplyStep, SentientProtocol

#: The files this protocol reads its text from (recorded with their sha256 in every manifest).
FILES = ("sage/simulator_response.py", "sage/test_npc.py")
#: SAGE's answer fields and the appraisal fields they fill.
APPRAISAL_FIELDS = {
    "content": "understanding",
    "TargetCompletion": "goal_fit",
    "reason": "goal_fit",
    "activity": "inner_reaction",
    "analyse": "feeling",
}
_SIGNED_INTEGER = re.compile(r"[+-]?\d+")
#: The largest stated change recorded as stated: SAGE clamps every change to ±10 (the same result
#: either way); the training simulator applies it, and a judge that states more than this is re-asked.
MAX_PUBLISHED_CHANGE = 10**6


class PublishedReplyAnswer(BaseModel):
    """The user's reply as SAGE reads it: the words after ``Response:`` and the plan before them."""

    reply: str
    end_dialogue: bool
    thinking: str
    #: whether the answer had a ``Response:`` field (without one SAGE says the whole answer)
    response_field: bool


def _field(text: str, name: str, until: str) -> str:
    """SAGE's field split: after the last ``name``, before the first ``until``, trimmed of newlines
    and one layer of brackets (simulator_response.py:143-147)."""
    return text.split(name)[-1].split(until)[0].strip("\n").strip("[").strip("]")


def read_sage_appraisal(text: str) -> AppraisalAnswer:
    """An appraisal answer read as SAGE's ``planning_reply`` reads it; ``ValueError`` where SAGE's
    parse raises (no integer after ``Change:``), so the caller re-asks as SAGE's loop does.

    The stated change is kept as stated (within ±:data:`MAX_PUBLISHED_CHANGE`, so a record stays a
    plain number); the ±10 clamp is the emotion rules', with the same result as SAGE's own clamp.
    """
    reply = text.replace("：", ":").replace("*", "")
    change_text = reply.split("Change:")[-1].strip("\n").strip("[").strip("]")
    numbers = _SIGNED_INTEGER.findall(change_text)
    if not numbers:
        raise ValueError("no signed integer after Change:")
    change = int(numbers[0])  # a ValueError past Python's digit limit, as in SAGE
    return AppraisalAnswer.model_construct(
        understanding=_field(reply, "Content:", "TargetCompletion:\n"),
        goal_fit=_field(reply, "TargetCompletion:", "Activity:\n"),
        inner_reaction=_field(reply, "Activity:", "Analyse:\n"),
        feeling=_field(reply, "Analyse:", "Change:\n"),
        change=max(-MAX_PUBLISHED_CHANGE, min(MAX_PUBLISHED_CHANGE, change)),
    )


def read_sage_reply(text: str, goodbye_words: Sequence[str]) -> PublishedReplyAnswer:
    """A reply answer read as SAGE's ``player_reply`` reads it (simulator_response.py:281-282); the
    dialogue ends when the reply holds one of the loop's goodbye words (test_npc.py:107)."""
    thinking = text.split("Response:")[0].split("Thinking:\n")[-1].strip("\n").strip("[").strip("]")
    reply = text.split("Response:")[-1].strip("\n").strip("[").strip("]").strip("“").strip("”")
    return PublishedReplyAnswer(
        reply=reply,
        end_dialogue=any(word in reply for word in goodbye_words),
        thinking=thinking,
        response_field="Response:" in text,
    )


def history_json(history: Sequence[Message], speakers: dict[str, str]) -> str:
    """The dialogue as SAGE quotes it: a JSON list of ``{"role", "content"}`` with SAGE's speaker
    names, ``ensure_ascii=False, indent=2`` (simulator_response.py:127-131)."""
    rows = [{"role": speakers[m.role], "content": m.content} for m in history]
    return json.dumps(rows, ensure_ascii=False, indent=2)


def state_name(emotion: int, tiers: Sequence[tuple[str, int]]) -> str:
    """SAGE's emotion state: the first tier whose threshold the value reaches, else F below the last
    (simulator_response.py:166-171)."""
    for name, threshold in tiers:
        if emotion >= threshold:
            return name
    return tiers[-1][0][:-1] + "F"


def sage_appraisal_prompt(
    texts: published_text.SimulatorTexts, player: str, scene: str, emotion: int, history: Sequence[Message]
) -> str:
    """``planning_reply``'s prompt (simulator_response.py:119-131), ``history`` ending with the agent's
    reply. Its second ``{{target}}`` replace is a no-op once the first has run (and reads a key SAGE
    never sets: docs/protocol.md, published bugs), so it is left out."""
    prompt = (
        texts.appraisal_template.replace("{{emotion}}", str(emotion))
        .replace("{{simulator_role}}", player)
        .replace("{{simulator_scene}}", scene)
        .replace("{{target}}", texts.target)
    )
    return prompt.replace("{{dialog_history}}", history_json(history, texts.speakers))


def planning_text(texts: published_text.SimulatorTexts, appraisal: Appraisal) -> str:
    """The appraisal as the reply call is shown it: the published literals and fields, in order."""
    out = []
    for part in texts.planning_parts:
        if part.field is None:
            out.append(part.text)
        else:
            out.append(str(getattr(appraisal, APPRAISAL_FIELDS[part.field])))
    return "".join(out)


def sage_reply_prompt(
    texts: published_text.SimulatorTexts,
    player: str,
    scene: str,
    state: str,
    history: Sequence[Message],
    appraisal: Appraisal | None,
) -> str:
    """``player_reply``'s prompt (simulator_response.py:245-270); ``appraisal`` ``None`` and an empty
    ``history`` make the opening line."""
    planning = texts.opening_planning if appraisal is None else planning_text(texts, appraisal)
    prompt = (
        texts.reply_template.replace("{{planning}}", planning)
        .replace("{{target}}", texts.target)
        .replace("{{emotion}}", state)
        .replace("{{player_type}}", player)
        .replace("{{player_topic}}", scene)
    )
    if not history:
        return prompt.replace("{{dialog_history}}", texts.empty_history).replace("{{new_history}}", "")
    earlier = history_json(history[:-2], texts.speakers)
    latest = history_json(history[-2:], texts.speakers)
    return prompt.replace("{{dialog_history}}", earlier).replace("{{new_history}}", latest)


def published_scene(profile: Profile, protocol: str) -> str:
    """The profile's ``scene`` as published, or a ConfigError naming the protocol to use instead."""
    if profile.published_scene is None:
        raise ConfigError(
            f"simulator protocol {protocol!r} quotes a published profile's player and scene as they are; "
            f"profile {profile.id!r} ({profile.source or 'no source'}) is not in the published format: "
            "use --sim-protocol sage for it"
        )
    return profile.published_scene


class SagePublishedProtocol(SentientProtocol):
    """``sage-published``: SAGE's own prompts and parsing, from the fetched files."""

    name: Literal["sage-published"] = "sage-published"
    #: The role of the one message that carries SAGE's prompt (``call_llm(prompt)`` says nothing):
    #: ``user`` (default) or ``system``.
    prompt_role: Literal["user", "system"] = "user"

    prompt_version: ClassVar[str] = "sage-published"
    opening_answer: ClassVar[type[BaseModel]] = PublishedReplyAnswer
    reply_answer: ClassVar[type[BaseModel]] = PublishedReplyAnswer
    shows_whole_reply: ClassVar[bool] = True
    goodbye_first: ClassVar[bool] = True

    def prepare(self) -> None:
        published_text.sage_texts()
        published_text.sage_loop_texts()

    def check_language(self, language: str) -> None:
        if language != "zh":
            raise ConfigError(
                f"simulator protocol 'sage-published' has SAGE's Chinese prompts only (asked for {language!r}); "
                "use --sim-protocol sage"
            )

    def dialogue(
        self, profile: Profile, *, difficulty: Difficulty, behaviour: str | None, language: str
    ) -> ProtocolDialogue:
        return SagePublishedDialogue(self, profile.persona, published_scene(profile, self.name))

    def shown(self) -> dict[str, bool]:
        return {}

    def extra(self, answer: BaseModel) -> dict[str, Any]:
        """SAGE's ``thinking`` (kept in its history, simulator_response.py:286) and whether the answer
        had a ``Response:`` field."""
        if isinstance(answer, PublishedReplyAnswer):
            return {"thinking": answer.thinking, "response_field": answer.response_field}
        return {}

    def describe(self) -> dict[str, Any]:
        return {
            "protocol": self.name,
            "prompt_version": self.prompt_version,
            "prompt_role": self.prompt_role,
            "shown_reply": "whole",
            "published_files": published_digests(FILES),
        }


class SagePublishedDialogue(ProtocolDialogue):
    """One dialogue: the profile's published text and SAGE's templates."""

    def __init__(self, protocol: SagePublishedProtocol, player: str, scene: str) -> None:
        self.role = protocol.prompt_role
        self.texts = published_text.sage_texts()
        self.goodbye = published_text.sage_loop_texts().goodbye_words
        self.player = player
        self.scene = scene

    def _message(self, prompt: str) -> list[Message]:
        return [Message(role=self.role, content=prompt)]

    def opening(self, emotion: int) -> list[Message]:
        state = state_name(emotion, self.texts.tiers)
        return self._message(sage_reply_prompt(self.texts, self.player, self.scene, state, [], None))

    def appraisal(self, history: Sequence[Message], agent_reply: str, emotion: int) -> list[Message]:
        quoted = [*history, Message(role="assistant", content=agent_reply)]
        return self._message(sage_appraisal_prompt(self.texts, self.player, self.scene, emotion, quoted))

    def reply(self, step: ReplyStep) -> list[Message]:
        quoted = [*step.history, Message(role="assistant", content=step.agent_reply)]
        state = state_name(step.appraisal.emotion_after, self.texts.tiers)
        prompt = sage_reply_prompt(self.texts, self.player, self.scene, state, quoted, step.appraisal)
        return self._message(prompt)

    def reask(self, error: str) -> Message:
        """Not used: a malformed answer is re-asked with the same request (see :meth:`reader`)."""
        return Message(role=self.role, content=error)

    def reader(self, step: str) -> Callable[[str], BaseModel] | None:
        if step == "appraisal":
            return read_sage_appraisal
        goodbye = self.goodbye
        return lambda text: read_sage_reply(text, goodbye)
