"""A generated profile's answer, checked as untrusted input and turned into a :class:`Profile`.

The answer must be exactly one JSON object (:data:`STRICTNESS`), with every field present and of the
right type and size (:data:`FIELD_BOUNDS`), in the requested language. A failed check raises
:class:`Rejection` with the reason the run logs beside its output.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from rlver.llm.structured import AnswerError, Strictness, parse_json_object
from rlver.profiles.generation_prompt import AttemptPlan
from rlver.profiles.schema import Profile

MAX_ANSWER_CHARS = 30_000


#: The answer is the object itself: a leading think block and one wrapping code fence at most.
STRICTNESS = Strictness.EXACT


#: (min, max) characters per text field; bounds keep a runaway answer out of the training world.
FIELD_BOUNDS: dict[str, tuple[int, int]] = {
    "name": (1, 80),
    "occupation": (2, 120),
    "persona": (40, 2_000),
    "cause": (20, 1_500),
    "conflict": (20, 1_500),
    "tried": (10, 1_000),
    "goal": (10, 600),
    "hidden_need": (10, 600),
    "opening": (5, 600),
    "reaction": (10, 600),
    "timeline_entry": (5, 400),
    "trait": (1, 40),
}


REACTION_KEYS: tuple[str, ...] = ("high", "medium", "low", "on_target", "off_target")


_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


_LATIN = re.compile(r"[A-Za-z]")


# --------------------------------------------------------------------------------------------------
# Parsing and validation
# --------------------------------------------------------------------------------------------------
class Rejection(Exception):
    """An answer that cannot become a profile; ``kind`` groups reasons in summaries."""

    def __init__(self, kind: str, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.extra = extra


def read_answer(text: str) -> dict[str, Any]:
    """The answer's one JSON object (``EXACT``: at most a leading think block and one wrapping fence)."""
    try:
        return parse_json_object(text, STRICTNESS, max_chars=MAX_ANSWER_CHARS)
    except AnswerError as exc:
        raise Rejection("parse", str(exc)) from None


def _bounds(bound: str, language: str) -> tuple[int, int]:
    """Field bounds; Chinese says in one character what English says in about three."""
    low, high = FIELD_BOUNDS[bound]
    return (max(1, low // 3), high) if language == "zh" else (low, high)


def _text(
    obj: dict[str, Any], key: str, where: str, bound: str, problems: list[str], language: str = "en"
) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        problems.append(
            f"{where}{key}: expected a string, got {'nothing' if value is None else type(value).__name__}"
        )
        return ""
    value = value.strip()
    low, high = _bounds(bound, language)
    if not low <= len(value) <= high:
        problems.append(f"{where}{key}: length {len(value)} outside [{low}, {high}]")
    return value


def _language_problem(texts: Sequence[str], language: str) -> str | None:
    joined = "".join(texts)
    cjk = len(_CJK.findall(joined))
    latin = len(_LATIN.findall(joined))
    share = cjk / max(1, cjk + latin)
    if language == "zh" and share < 0.5:
        return f"expected Chinese text, but only {share:.0%} of letters are Chinese characters"
    if language == "en" and share > 0.05:
        return f"expected English text, but {share:.0%} of letters are Chinese characters"
    return None


_LABELS = {
    "en": {
        "name": "Name",
        "age": "Age",
        "occupation": "Occupation",
        "cause": "Cause",
        "timeline": "Timeline",
        "conflict": "Main conflict",
        "tried": "What they have tried",
        "reactions": "Reactions",
        "high": "When emotion is high",
        "medium": "When emotion is middling",
        "low": "When emotion is low",
        "on_target": "To an on-target reply",
        "off_target": "To an off-target reply",
    },
    "zh": {
        "name": "姓名",
        "age": "年龄",
        "occupation": "职业",
        "cause": "起因",
        "timeline": "时间线",
        "conflict": "主要矛盾",
        "tried": "已经尝试过的办法",
        "reactions": "反应方式",
        "high": "情绪高时",
        "medium": "情绪中等时",
        "low": "情绪低时",
        "on_target": "对说中需求的回复",
        "off_target": "对没说中需求的回复",
    },
}


@dataclass
class _Fields:
    """An answer's fields after checking: stripped texts, and every problem found on the way."""

    language: str
    problems: list[str] = field(default_factory=list)
    name: str = ""
    occupation: str = ""
    persona: str = ""
    goal: str = ""
    hidden_need: str = ""
    age: Any = None
    cause: str = ""
    conflict: str = ""
    tried: str = ""
    timeline: list[str] = field(default_factory=list)
    reactions: dict[str, str] = field(default_factory=dict)
    traits: list[str] = field(default_factory=list)
    opening: str | None = None

    def text(self, obj: dict[str, Any], key: str, where: str = "", bound: str | None = None) -> str:
        return _text(obj, key, where, bound or key, self.problems, self.language)

    def string_list(
        self, obj: dict[str, Any], key: str, where: str, count: tuple[int, int], unit: str
    ) -> list[str]:
        """A list of non-blank strings (stripped) whose length is within ``count``."""
        raw = obj.get(key)
        if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
            self.problems.append(f"{where}{key}: expected a list of strings")
            return []
        items = [t.strip() for t in raw if t.strip()]
        if not count[0] <= len(items) <= count[1]:
            self.problems.append(f"{where}{key}: expected {count[0]}-{count[1]} {unit}, got {len(items)}")
        return items

    def texts(self) -> list[str]:
        """Every free text whose language is checked."""
        found = [self.persona, self.cause, self.conflict, self.tried, self.goal, self.hidden_need]
        found += [*self.timeline, *self.reactions.values()]
        return [*found, self.opening] if self.opening else found


def _check_age(obj: dict[str, Any], f: _Fields) -> None:
    age = obj.get("age")
    if isinstance(age, str) and age.strip().isdigit():
        age = int(age.strip())
    if not isinstance(age, int) or isinstance(age, bool) or not 12 <= age <= 100:
        f.problems.append(f"age: expected an integer 12-100, got {age!r}")
    f.age = age


def _check_timeline(bg: dict[str, Any], f: _Fields) -> None:
    f.timeline = f.string_list(bg, "timeline", "background.", (2, 12), "entries")
    low, high = _bounds("timeline_entry", f.language)
    for i, entry in enumerate(f.timeline):
        if not low <= len(entry) <= high:
            f.problems.append(f"background.timeline[{i}]: length {len(entry)} outside [{low}, {high}]")


def _check_background(obj: dict[str, Any], f: _Fields) -> None:
    bg = obj.get("background")
    if not isinstance(bg, dict):
        f.problems.append("background: expected an object with cause, timeline, conflict, tried")
        return
    f.cause = f.text(bg, "cause", "background.")
    f.conflict = f.text(bg, "conflict", "background.")
    f.tried = f.text(bg, "tried", "background.")
    _check_timeline(bg, f)


def _check_reactions(obj: dict[str, Any], f: _Fields) -> None:
    raw = obj.get("reactions")
    if not isinstance(raw, dict):
        f.problems.append("reactions: expected an object with " + ", ".join(REACTION_KEYS))
        return
    for key in REACTION_KEYS:
        f.reactions[key] = f.text(raw, key, "reactions.", "reaction")


def _check_traits(obj: dict[str, Any], f: _Fields) -> None:
    f.traits = f.string_list(obj, "traits", "", (2, 5), "words")
    if any(len(t) > FIELD_BOUNDS["trait"][1] for t in f.traits):
        f.problems.append("traits: each trait must be a word or short phrase (<= 40 characters)")


def check_answer(obj: dict[str, Any], language: str, *, with_opening: bool) -> _Fields:
    """Check every field; raise :class:`Rejection` listing *every* problem, then the language."""
    f = _Fields(language)
    for key in ("name", "occupation", "persona", "goal", "hidden_need"):
        setattr(f, key, f.text(obj, key))
    _check_age(obj, f)
    _check_background(obj, f)
    _check_reactions(obj, f)
    _check_traits(obj, f)
    if with_opening:
        f.opening = f.text(obj, "opening")
    if f.problems:
        raise Rejection("schema", "; ".join(f.problems))
    wrong_language = _language_problem(f.texts(), language)
    if wrong_language:
        raise Rejection("language", wrong_language)
    return f


def _render(f: _Fields) -> tuple[str, str]:
    """The profile's persona and background texts, labelled in the profile's language."""
    lab = _LABELS[f.language]
    sep = "：" if f.language == "zh" else ": "
    persona = "\n".join(
        [
            f"{lab['name']}{sep}{f.name}",
            f"{lab['age']}{sep}{f.age}",
            f"{lab['occupation']}{sep}{f.occupation}",
            f.persona,
        ]
    )
    background = "\n".join(
        [
            f"{lab['cause']}{sep}{f.cause}",
            f"{lab['timeline']}{sep}",
            *(f"- {t}" for t in f.timeline),
            f"{lab['conflict']}{sep}{f.conflict}",
            f"{lab['tried']}{sep}{f.tried}",
            f"{lab['reactions']}{sep}",
            *(f"- {lab[k]}{sep}{f.reactions[k]}" for k in REACTION_KEYS),
        ]
    )
    return persona, background


def answer_to_profile(
    obj: dict[str, Any], plan: AttemptPlan, language: str, *, with_opening: bool, source: str
) -> Profile:
    """Validate an answer's fields strictly and render them into a :class:`Profile`.

    Raises :class:`Rejection` listing *every* problem found, so one look at the log tells what the
    model got wrong.
    """
    f = check_answer(obj, language, with_opening=with_opening)
    persona_text, background_text = _render(f)
    digest = hashlib.sha1(f"{persona_text}\n{background_text}\n{f.hidden_need}".encode()).hexdigest()[:12]
    try:
        return Profile(
            id=f"gen-{language}-{digest}",
            language=language,  # type: ignore[arg-type]
            persona=persona_text,
            background=background_text,
            goal=f.goal,
            hidden_need=f.hidden_need,
            traits=f.traits,
            style=plan.style,
            topic=plan.topic.topic,
            need_type=plan.need_type,
            opening=f.opening,
            source=source,
        )
    except ValidationError as exc:  # pragma: no cover - the checks above cover the schema
        raise Rejection(
            "schema", "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        ) from None
