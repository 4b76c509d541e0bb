"""The ``sage-published`` protocol: each simulator request is the one SAGE's own code builds, byte for byte.

rlver's ``sage`` protocol follows SAGE's structure in rlver's words; a judge asked other words gives
other scores, so a new run under it cannot sit beside the leaderboard. This protocol sends SAGE's text
itself, read at run time from the fetched ``sage/simulator_response.py``
(:mod:`rlver.simulator.llm.published_text`), and builds each prompt the way SAGE's
``planning_reply`` and ``player_reply`` do: the same ``str.replace`` calls in the same order, the
history as the same JSON (``ensure_ascii=False, indent=2``), split into earlier context and latest
exchange for the reply call, and the opening-line case. ``call_llm(prompt)`` is left to the user in
SAGE; rlver sends the prompt as one user message (``prompt_role: system`` is the other reading).

Answers are read as SAGE reads them (:func:`read_sage_appraisal`, :func:`read_sage_reply`): its field
splits, full-width colons and ``*`` removed, the first signed integer after ``Change:``, and the
goodbye words of SAGE's loop in the user's reply. Where SAGE retries a failed parse forever, rlver
sends the same request once more and then labels the turn failed. The emotion arithmetic stays
rlver's (:class:`~rlver.simulator.emotion.EmotionRules`): the change clamped to ±10 and the value
capped at 100, as SAGE's ``planning_reply`` does (simulator_response.py:150-155 ``min(emo_point,100)``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import Field

from rlver.records import Appraisal, Message
from rlver.simulator.llm import published_text
from rlver.simulator.llm.parsing import AppraisalAnswer
from rlver.simulator.llm.protocols.base import PublishedTextProtocol
from rlver.simulator.llm.published_calls import (
    MAX_PUBLISHED_CHANGE,
    PublishedPlayer,
    PublishedReplyAnswer,
    PublishedSimulator,
    fill_history,
    history_json,
    planning_text,
    published_reply,
)

#: The files this protocol reads its text from (recorded with their sha256 in every manifest).
FILES = ("sage/simulator_response.py", "sage/test_npc.py")
_SIGNED_INTEGER = re.compile(r"[+-]?\d+")


def _field(text: str, name: str, until: str) -> str:
    """SAGE's field split: after the last ``name``, before the first ``until``, trimmed of newlines
    and one layer of brackets (simulator_response.py:143-147 ``split("Content:")``)."""
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
    """A reply answer read as SAGE's ``player_reply`` reads it (simulator_response.py:307-308 ``split("Response:")``); the
    dialogue ends when the reply holds one of the loop's goodbye words (test_npc.py:107 ``"再见" in``)."""
    thinking = text.split("Response:")[0].split("Thinking:\n")[-1].strip("\n").strip("[").strip("]")
    return published_reply(text, thinking, goodbye_words)


def sage_appraisal_prompt(who: PublishedPlayer, emotion: int, history: Sequence[Message]) -> str:
    """``planning_reply``'s prompt (simulator_response.py:121-132 ``replace("{{dialog_history}}",history_str)``), ``history`` ending with the agent's
    reply. Its second ``{{target}}`` replace is a no-op once the first has run (and reads a key SAGE
    never sets: docs/published-text.md, published bugs), so it is left out."""
    texts, player, scene = who.texts, who.player, who.scene
    prompt = (
        texts.appraisal_template.replace("{{emotion}}", str(emotion))
        .replace("{{simulator_role}}", player)
        .replace("{{simulator_scene}}", scene)
        .replace("{{target}}", texts.target)
    )
    return prompt.replace("{{dialog_history}}", history_json(history, texts.speakers))


def sage_reply_prompt(
    who: PublishedPlayer, state: str, history: Sequence[Message], appraisal: Appraisal | None
) -> str:
    """``player_reply``'s prompt (simulator_response.py:273-297 ``replace("{{new_history}}",new_his_str)``); ``appraisal`` ``None`` and an empty
    ``history`` make the opening line."""
    texts, player, scene = who.texts, who.player, who.scene
    prompt = (
        texts.reply_template.replace("{{planning}}", planning_text(texts, appraisal))
        .replace("{{target}}", texts.target)
        .replace("{{emotion}}", state)
        .replace("{{player_type}}", player)
        .replace("{{player_topic}}", scene)
    )
    return fill_history(prompt, texts, history)


SAGE = PublishedSimulator(
    owner="SAGE's",
    texts=published_text.sage_texts,
    files=FILES,
    appraisal_prompt=sage_appraisal_prompt,
    reply_prompt=sage_reply_prompt,
    read_appraisal=read_sage_appraisal,
    read_reply=read_sage_reply,
    goodbye_words=lambda: published_text.sage_loop_texts().goodbye_words,
)


class SagePublishedProtocol(PublishedTextProtocol):
    """``sage-published``: SAGE's own prompts and parsing, from the fetched files; the goodbye is
    checked first, as in SAGE's loop."""

    name: Literal["sage-published"] = Field(
        default="sage-published", description="``sage-published``: SAGE's own prompts and parsing, fetched."
    )

    prompt_version: ClassVar[str] = "sage-published"
    simulator: ClassVar[PublishedSimulator] = SAGE
    goodbye_first: ClassVar[bool] = True
