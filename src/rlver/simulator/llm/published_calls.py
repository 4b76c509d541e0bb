"""What the two published simulators share: how a call quotes the dialogue, names the emotion, hands the
appraisal to the reply call, and what a reply answer holds (no published text here: it is read by
:mod:`rlver.simulator.llm.published_text`).

Each published simulator (:class:`PublishedSimulator`) is its fetched texts plus four functions: the
appraisal prompt, the reply prompt, and the readers of their answers. The protocols that send them
(``sage-published``, ``rlver-published``) differ only in those.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from rlver.errors import ConfigError
from rlver.profiles.schema import Profile
from rlver.records import Appraisal, Message
from rlver.simulator.llm.parsing import AppraisalAnswer
from rlver.simulator.llm.published_text import SimulatorTexts

#: The published answer fields and the appraisal fields they fill (SAGE's ``TargetCompletion`` and the
#: training simulator's ``reason`` are the same step: the fit with the hidden theme).
APPRAISAL_FIELDS = {
    "content": "understanding",
    "TargetCompletion": "goal_fit",
    "reason": "goal_fit",
    "activity": "inner_reaction",
    "analyse": "feeling",
}
#: The largest stated change recorded as stated: SAGE clamps every change to ±10 (the same result
#: either way); the training simulator applies it, and a judge that states more than this is re-asked.
MAX_PUBLISHED_CHANGE = 10**6


class PublishedReplyAnswer(BaseModel):
    """The user's reply as the published code reads it: the words after ``Response:`` and the plan
    before them."""

    reply: str
    end_dialogue: bool
    thinking: str
    #: whether the answer had a ``Response:`` field (without one the whole answer is said)
    response_field: bool


@dataclass(frozen=True)
class PublishedPlayer:
    """Who the published simulator plays and where: its texts, the profile's player and scene text."""

    texts: SimulatorTexts
    player: str
    scene: str


def published_reply(text: str, thinking: str, goodbye_words: Sequence[str]) -> PublishedReplyAnswer:
    """The reply both published loops read: the words after the last ``Response:``, trimmed of newlines,
    one layer of brackets and curly quotes; the dialogue ends when it holds a goodbye word."""
    reply = text.split("Response:")[-1].strip("\n").strip("[").strip("]").strip("“").strip("”")
    return PublishedReplyAnswer(
        reply=reply,
        end_dialogue=any(word in reply for word in goodbye_words),
        thinking=thinking,
        response_field="Response:" in text,
    )


AppraisalPrompt = Callable[[PublishedPlayer, int, Sequence[Message]], str]
ReplyPrompt = Callable[[PublishedPlayer, str, Sequence[Message], "Appraisal | None"], str]


@dataclass(frozen=True)
class PublishedSimulator:
    """One published simulator: where its text comes from and how each call is built and read."""

    #: ``SAGE's`` / ``RLVER's``: whose prompts, in messages
    owner: str
    texts: Callable[[], SimulatorTexts]
    #: the fetched files the prompts come from (recorded with their sha256)
    files: tuple[str, ...]
    appraisal_prompt: AppraisalPrompt
    reply_prompt: ReplyPrompt
    read_appraisal: Callable[[str], AppraisalAnswer]
    read_reply: Callable[[str, Sequence[str]], PublishedReplyAnswer]
    goodbye_words: Callable[[], tuple[str, ...]]


def history_json(history: Sequence[Message], speakers: dict[str, str]) -> str:
    """The dialogue as the published code quotes it: a JSON list of ``{"role", "content"}`` with its
    speaker names, ``ensure_ascii=False, indent=2`` (SAGE simulator_response.py:127-131 ``ensure_ascii=False, indent=2``)."""
    rows = [{"role": speakers[m.role], "content": m.content} for m in history]
    return json.dumps(rows, ensure_ascii=False, indent=2)


def split_history(history: Sequence[Message], speakers: dict[str, str]) -> tuple[str, str]:
    """Earlier context and the latest exchange (the last two messages), each as :func:`history_json`."""
    return history_json(history[:-2], speakers), history_json(history[-2:], speakers)


def fill_history(prompt: str, texts: SimulatorTexts, history: Sequence[Message]) -> str:
    """A call's two dialogue slots: earlier context and the latest exchange; on an empty dialogue (the
    opening line) the published opening text and nothing (SAGE simulator_response.py:282-297 ``if not history``)."""
    if not history:
        return prompt.replace("{{dialog_history}}", texts.empty_history).replace("{{new_history}}", "")
    earlier, latest = split_history(history, texts.speakers)
    return prompt.replace("{{dialog_history}}", earlier).replace("{{new_history}}", latest)


def state_name(emotion: int, tiers: Sequence[tuple[str, int]]) -> str:
    """The published emotion state: the first tier whose threshold the value reaches, else F below the
    last (SAGE simulator_response.py:164-169 ``emo_point<10``; dsv3 :227-232 ``'Emotion-F'``)."""
    for name, threshold in tiers:
        if emotion >= threshold:
            return name
    return tiers[-1][0][:-1] + "F"


def planning_text(texts: SimulatorTexts, appraisal: Appraisal | None) -> str:
    """The appraisal as the reply call is shown it: the published literals and fields, in order; with
    no appraisal yet (the opening line), the published opening instruction."""
    if appraisal is None:
        return texts.opening_planning
    out = []
    for part in texts.planning_parts:
        if part.field is None:
            out.append(part.text)
        else:
            out.append(str(getattr(appraisal, APPRAISAL_FIELDS[part.field])))
    return "".join(out)


def published_scene(profile: Profile, protocol: str) -> str:
    """The profile's ``scene`` as published, or a ConfigError naming the protocol to use instead."""
    if profile.published_scene is None:
        raise ConfigError(
            f"simulator protocol {protocol!r} quotes a published profile's player and scene as they are; "
            f"profile {profile.id!r} ({profile.source or 'no source'}) is not in the published format: "
            "use --sim-prompts sage for it"
        )
    return profile.published_scene


def warn_off_format(episodes: Sequence[Any]) -> None:
    """One warning with the count when a published simulator's reply answers lack the published
    ``Response:`` field (a model answering in JSON or free text): the published code says such an
    answer whole, so the run goes on as published, but its user is then not playing SAGE's role and
    nothing else would say so. Reads the ``response_field`` each such turn records."""
    turns = [t for ep in episodes for t in getattr(ep, "user_turns", ()) if "response_field" in t.extra]
    off = sum(not t.extra["response_field"] for t in turns)
    if off:
        warnings.warn(
            f"{off} of {len(turns)} simulator answers had no 'Response:' field, not the published "
            "format (a JSON object or free text?): each was said whole, as the published code does; "
            "check that the simulator model follows the published prompts",
            stacklevel=2,
        )
