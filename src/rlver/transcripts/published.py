"""The published result format (the SAGE benchmark's ``*_result.jsonl`` files), in and out.

One dialogue per record::

    {"id": "...", "emo_point": 5, "emo_state": "Emotion-F", "player": "...", "scene": "...",
     "character": "...", "topic": "...", "task": "...", "history": [
        {"role": "user", "content": "...", "emotion-point": 40},                       # opening line
        {"role": "assistant", "content": "...", "think": "..."},                     # think optional
        {"role": "user", "content": "...", "thinking": "...", "emotion-point": 35,
         "planning": {"content": "...", "TargetCompletion": "...", "activity": "...",
                      "analyse": "...", "change": -5}},
        ...]}

``emo_point`` is the final emotion; each user message's ``emotion-point`` is the emotion *after* the
appraisal in its ``planning``; ``change`` there is already clamped to [-10, 10]. The RLVER training
code writes ``reason`` instead of ``TargetCompletion``; both are read.

Field mapping onto :class:`rlver.records.Appraisal`: ``content`` → ``understanding``,
``TargetCompletion``/``reason`` → ``goal_fit``, ``activity`` → ``inner_reaction``, ``analyse`` →
``feeling``, ``change`` → ``raw_change`` and ``change`` (the published files do not keep the unclamped
number). Recorded numbers are kept *as recorded* — never recomputed — so ``rlver audit`` can check
them. The user's reply reasoning (``thinking``) goes to ``UserTurn.extra["thinking"]``; the other
top-level fields go to ``Episode.meta["published"]`` so a write-back reproduces them.

Reading is tolerant: a JSON array file or JSONL; numbers given as strings (``"35"``, ``"+5"``,
``"35.0"``); missing or extra fields. A missing ``change`` is inferred from consecutive emotion points
(and vice versa), marked in ``UserTurn.extra``. What cannot be understood is reported as
``file:line: field: problem``.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlver.env.thinking import split_think
from rlver.errors import InputError, Problem
from rlver.io import atomic_write_text, iter_jsonl
from rlver.profiles.schema import Profile
from rlver.records import Appraisal, Episode, Message, UserTurn
from rlver.rules import EVALUATION_START
from rlver.simulator.emotion import EmotionRules, tier_of

PUBLISHED_KEYS = ("id", "emo_point", "emo_state", "player", "scene", "history")
_INT = re.compile(r"^\s*([+-]?\d+(?:\.0*)?)\s*$")
_GOAL_FIT_KEYS = ("TargetCompletion", "reason", "target_completion")
_STYLE_TO_ZH = {"negative": "负面型", "passive": "被动型", "avoidant": "回避型"}


class _Bad(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


#: Emotions are 0-100 and changes ±10: a number beyond this is a corrupted file, not data to keep
#: "as recorded" (it would also overflow the float maths of the metrics).
_MAX_ABS = 10**9


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_int(value: Any, field: str) -> int:
    """An integer from an int, a whole float, or a string like ``"35"``, ``"+5"``, ``" -10 "``."""
    number: int | None = None
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and len(value) <= 64:
        m = _INT.match(value)
        if m:
            number = int(m.group(1).split(".")[0])
    if number is None:
        raise _Bad(field, f"expected an integer, got {_shown(value)}")
    if abs(number) > _MAX_ABS:
        raise _Bad(field, f"out of range (at most {_MAX_ABS} in size): {_shown(value)}")
    return number


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------------------------------
# reading


def iter_published_records(path: str | os.PathLike[str]) -> Iterable[tuple[int | None, int, Any]]:
    """Yield ``(line, index, record)`` from a JSON array file or a JSONL file.

    ``line`` is the 1-based line for JSONL and ``None`` for an array file (then ``index`` locates it).
    """
    p = Path(path)
    if not p.exists():
        raise InputError(Problem(str(p), None, None, "file not found"))
    raw = p.read_bytes()
    head = raw.lstrip()[:1]
    if head == b"[":
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # also 4300+-digit ints, absurd nesting
            why = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise InputError(Problem(str(p), None, None, f"not a valid JSON array: {why}")) from None
        for index, rec in enumerate(data):
            yield None, index, rec
        return
    for index, (lineno, rec) in enumerate(iter_jsonl(p)):
        yield lineno, index, rec


def is_published_record(record: Any) -> bool:
    """Whether a JSON object looks like a published result record (vs. one of our transcript lines)."""
    return isinstance(record, dict) and "history" in record and "type" not in record


def format_of_first_record(first: Any) -> str:
    """``"published"`` or ``"rlver"``: which reader a transcript file needs, judged by its first record.

    A list stands for a JSON array file; only the published format is written that way.
    """
    return "published" if isinstance(first, list) or is_published_record(first) else "rlver"


@dataclass
class _History:
    """What reading one record's ``history`` has produced so far (messages, turns, the emotion chain)."""

    start_emotion: int | None  # the caller's default start, for a record whose opening line has none
    messages: list[Message] = field(default_factory=list)
    user_turns: list[UserTurn] = field(default_factory=list)
    emotions: list[int] = field(default_factory=list)
    start: int | None = None
    prev: int | None = None


def record_to_episode(record: dict[str, Any], *, start_emotion: int | None = None) -> Episode:
    """Convert one published record; raises ``_Bad`` (internal) for what cannot be read."""
    if not isinstance(record, dict):
        raise _Bad("", f"expected a JSON object, got {type(record).__name__}")
    pid = record.get("id")
    if pid is None or str(pid).strip() == "":
        raise _Bad("id", "missing dialogue id")
    history = record.get("history")
    if not isinstance(history, list):
        raise _Bad("history", f"expected a list of messages, got {type(history).__name__}")
    walk = _History(start_emotion=start_emotion)
    for i, msg in enumerate(history):
        _read_message(walk, f"history[{i}]", msg)

    start = walk.start
    if start is None:
        start = start_emotion if start_emotion is not None else EVALUATION_START
    final = parse_int(record["emo_point"], "emo_point") if "emo_point" in record else (walk.prev or start)
    meta_published = {k: v for k, v in record.items() if k not in ("id", "emo_point", "history")}
    return Episode(
        profile_id=str(pid),
        episode_id=str(pid),
        messages=walk.messages,
        user_turns=walk.user_turns,
        start_emotion=start,
        final_emotion=final,
        emotions=walk.emotions,
        status="finished",
        end_reason=None,
        meta={"format": "published", "published": meta_published},
    )


def _read_message(walk: _History, where: str, msg: Any) -> None:
    """One history item: an assistant reply (``think`` folded back in), or a user turn."""
    if not isinstance(msg, dict):
        raise _Bad(where, f"expected a message object, got {type(msg).__name__}")
    role = msg.get("role")
    content = _text(msg.get("content"))
    if role == "assistant":
        think = msg.get("think")
        raw = f"<think>{_text(think)}</think>\n{content}" if think else content
        walk.messages.append(Message(role="assistant", content=raw))
        return
    if role != "user":
        raise _Bad(f"{where}.role", f"expected 'user' or 'assistant', got {role!r}")
    walk.messages.append(Message(role="user", content=content))
    extra: dict[str, Any] = {}
    if "thinking" in msg:
        extra["thinking"] = _text(msg["thinking"])
    point = parse_int(msg["emotion-point"], f"{where}.emotion-point") if "emotion-point" in msg else None
    raw_planning = msg.get("planning")
    planning: dict[str, Any] = raw_planning if isinstance(raw_planning, dict) else {}
    if not walk.user_turns:  # the opening line: no appraisal
        default = walk.start_emotion if walk.start_emotion is not None else EVALUATION_START
        walk.start = walk.prev = point if point is not None else default
        if planning:
            extra["planning"] = planning
        walk.user_turns.append(UserTurn(text=content, extra=extra))
        return
    appraisal = _appraisal(walk, where, planning, point, extra)
    walk.user_turns.append(UserTurn(text=content, appraisal=appraisal, extra=extra))
    if appraisal is not None:
        walk.emotions.append(appraisal.emotion_after)
        walk.prev = appraisal.emotion_after


def _appraisal(
    walk: _History, where: str, planning: dict[str, Any], point: int | None, extra: dict[str, Any]
) -> Appraisal | None:
    """The appraisal a user turn records, numbers kept as recorded; what was inferred is marked in
    ``extra``. ``None`` when the turn has neither a change nor an emotion point."""
    prev = walk.prev
    assert prev is not None
    if "change" in planning:
        change = parse_int(planning["change"], f"{where}.planning.change")
    elif point is not None:
        change = point - prev
        extra["change_inferred"] = True
    else:
        extra["no_appraisal"] = True
        return None
    if point is None:
        point = prev + change
        extra["emotion_inferred"] = True
    goal_key = next((k for k in _GOAL_FIT_KEYS if k in planning), "TargetCompletion")
    if goal_key != "TargetCompletion":
        extra["goal_fit_key"] = goal_key
    return Appraisal(
        understanding=_text(planning.get("content")),
        goal_fit=_text(planning.get(goal_key)),
        inner_reaction=_text(planning.get("activity")),
        feeling=_text(planning.get("analyse")),
        raw_change=change,
        change=change,
        emotion_before=prev,
        emotion_after=point,
        tier=tier_of(point),
    )


def read_published(path: str | os.PathLike[str], *, start_emotion: int | None = None) -> list[Episode]:
    """Read a published result file (JSON array or JSONL) into episodes.

    Every unreadable record is reported (``file:line: field: problem``) in one :class:`InputError`.
    """
    p = Path(path)
    problems: list[Problem] = []
    episodes: list[Episode] = []
    for lineno, index, rec in iter_published_records(p):
        try:
            episodes.append(record_to_episode(rec, start_emotion=start_emotion))
        except _Bad as bad:
            field = bad.field if lineno is not None else f"[{index}].{bad.field}".rstrip(".")
            problems.append(Problem(str(p), lineno, field or None, bad.message))
    if problems:
        raise InputError(problems, summary=f"{p}: {len(problems)} problem(s) in published result file")
    if not episodes:
        warnings.warn(f"{p}: no dialogues found", stacklevel=2)
    return episodes


# --------------------------------------------------------------------------------------------------
# writing


def _profile_fields(profile: Profile) -> dict[str, Any]:
    scene = profile.background
    if profile.hidden_need and profile.hidden_need not in scene:
        scene = (
            f"{scene}\n####隐藏主题:\n{profile.hidden_need}"
            if profile.language == "zh"
            else (f"{scene}\n#### Hidden need:\n{profile.hidden_need}")
        )
    return {
        "player": profile.persona,
        "scene": scene,
        "character": _STYLE_TO_ZH.get(profile.style, profile.style)
        if profile.language == "zh"
        else profile.style,
        "topic": profile.topic,
        "task": profile.goal,
    }


def episode_to_record(
    episode: Episode, profile: Profile | None = None, *, rules: EmotionRules | None = None
) -> dict[str, Any]:
    """Convert an episode to a published record (the system prompt is dropped; think → ``think``)."""
    del rules  # numbers are written as recorded; the audit checks them
    published = dict(episode.meta.get("published", {})) if isinstance(episode.meta, dict) else {}
    if profile is not None:
        for key, value in _profile_fields(profile).items():
            published.setdefault(key, value)
    history: list[dict[str, Any]] = []
    turns = iter(episode.user_turns)
    for msg in episode.messages:
        if msg.role == "system":
            continue
        if msg.role == "assistant":
            split = split_think(msg.content)
            item: dict[str, Any] = {
                "role": "assistant",
                "content": split.visible if split.thought else msg.content,
            }
            if split.thought:
                item["think"] = split.thought
            history.append(item)
            continue
        turn = next(turns, None)
        item = {"role": "user", "content": msg.content}
        if turn is None:
            history.append(item)
            continue
        extra = turn.extra or {}
        if "thinking" in extra:
            item["thinking"] = extra["thinking"]
        if turn.appraisal is None:
            if not history:  # opening line
                item["emotion-point"] = episode.start_emotion
                if isinstance(extra.get("planning"), dict):
                    item["planning"] = extra["planning"]
            history.append(item)
            continue
        a = turn.appraisal
        goal_key = extra.get("goal_fit_key", "TargetCompletion")
        item["emotion-point"] = a.emotion_after
        item["planning"] = {
            "content": a.understanding,
            goal_key: a.goal_fit,
            "activity": a.inner_reaction,
            "analyse": a.feeling,
            "change": a.change,
        }
        history.append(item)
    tier = tier_of(episode.final_emotion)
    record: dict[str, Any] = {
        "id": episode.profile_id,
        "emo_point": episode.final_emotion,
        "emo_state": f"Emotion-{tier}",
    }
    for key in ("player", "scene"):
        record[key] = published.pop(key, "")
    published.pop("emo_state", None)
    record.update(published)
    record["history"] = history
    return record


def write_published(
    path: str | os.PathLike[str],
    episodes: Sequence[Episode],
    profiles: dict[str, Profile] | None = None,
) -> None:
    """Write episodes as a published result file (JSONL, atomically). Failed episodes are skipped."""
    profiles = profiles or {}
    lines = [
        json.dumps(episode_to_record(ep, profiles.get(ep.profile_id)), ensure_ascii=False)
        for ep in episodes
        if ep.status == "finished"
    ]
    atomic_write_text(path, "".join(line + "\n" for line in lines))
