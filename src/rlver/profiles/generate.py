"""LLM-written user profiles: prompt, strict parsing, validation, near-duplicate rejection, resume.

The published method's training world is 500 profiles; its builder scripts called placeholder LLMs and
trusted whatever came back. Here every answer is treated as untrusted input: it must be exactly one
JSON object with every field present and of the right type and size, in the requested language, and
not a near-copy of a profile already accepted. Rejected answers are logged with their reason next to
the output (``<out stem>.rejected.jsonl``) so prompt or model problems are visible, and the loop is
bounded by a maximum number of attempts so a model that never complies cannot spin forever.

Profiles are appended one line at a time (:func:`rlver.io.append_jsonl`); a second run with the same
``--out`` counts what is there (accepted and rejected) and continues to ``n``, drawing the same
topics it would have drawn had it never stopped.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlver.errors import InputError, LLMError, Problem, RlverError
from rlver.io import append_jsonl, iter_jsonl, repair_torn_tail
from rlver.llm.base import ChatModel, Completion, SamplingParams
from rlver.llm.structured import AnswerError, Strictness, parse_json_object
from rlver.profiles.schema import Profile
from rlver.profiles.similarity import Embedder, make_index, profile_text
from rlver.records import Message

#: Conversational styles (the published data's three, in English).
STYLES: tuple[str, ...] = ("negative", "passive", "avoidant")
#: What the user really needs; drawn per attempt so a generated set covers all of them.
NEED_TYPES: tuple[str, ...] = (
    "being_heard",
    "validation",
    "reassurance",
    "practical_advice",
    "encouragement",
    "perspective",
    "companionship",
)
AGE_BANDS: tuple[str, ...] = ("18-25", "26-35", "36-50", "51-70")

#: Default similarity above which a candidate is a near-duplicate, per method. Calibrated on the
#: published training profiles: unrelated pairs reach at most ~0.30 (ngram) / ~0.41 (tfidf).
DEFAULT_MAX_SIMILARITY: dict[str, float] = {"ngram": 0.5, "tfidf": 0.6, "embed": 0.9}

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
#: Consecutive LLM failures after which the run stops (the endpoint is down, not flaky).
MAX_LLM_FAILURES_IN_A_ROW = 5

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")


# --------------------------------------------------------------------------------------------------
# Seed topics
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SeedTopic:
    """A topic to write a user about, with example opening lines that show the register."""

    topic: str
    openings: tuple[str, ...] = ()


def load_seed_topics(path: str | Path) -> list[SeedTopic]:
    """Read seed topics: JSONL (``{"topic": ..., "openings": [...]}``) or plain text (one a line).

    In a text file blank lines and lines starting with ``#`` are skipped.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(Problem(str(p), None, None, "no such seed-topic file"))
    topics: list[SeedTopic] = []
    if p.suffix == ".jsonl":
        for lineno, obj in iter_jsonl(p, skip_bad_trailing_line=False):
            if not isinstance(obj, dict) or not isinstance(obj.get("topic"), str) or not obj["topic"].strip():
                raise InputError(
                    Problem(str(p), lineno, "topic", "expected an object with a non-empty 'topic'")
                )
            openings = obj.get("openings", [])
            if not isinstance(openings, list) or not all(isinstance(o, str) for o in openings):
                raise InputError(Problem(str(p), lineno, "openings", "expected a list of strings"))
            topics.append(SeedTopic(obj["topic"].strip(), tuple(o.strip() for o in openings if o.strip())))
    else:
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(Problem(str(p), None, None, f"not UTF-8 text: {exc}")) from None
        for line in text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                topics.append(SeedTopic(line.strip()))
    if not topics:
        raise InputError(Problem(str(p), None, None, "no seed topics in the file"))
    return topics


def bundled_seed_topics(language: str) -> list[SeedTopic]:
    """The seed topics shipped with rlver for ``language`` (``en`` or ``zh``)."""
    resource = resources.files("rlver.profiles").joinpath("seeds", f"topics_{language}.jsonl")
    with resources.as_file(resource) as path:
        return load_seed_topics(path)


# --------------------------------------------------------------------------------------------------
# Prompt
# --------------------------------------------------------------------------------------------------
_SCHEMA_EN = """{
  "name": "the user's name",
  "age": 34,
  "occupation": "what they do",
  "persona": "3-6 sentences: hobbies, habits, temperament, how they talk",
  "background": {
    "cause": "what set the problem off",
    "timeline": ["event 1 with when it happened", "event 2", "..."],
    "conflict": "the main conflict the user is stuck in",
    "tried": "what the user has already tried and why it did not work"
  },
  "reactions": {
    "high": "how the user talks when their emotion is high",
    "medium": "... when it is middling",
    "low": "... when it is low",
    "on_target": "how they react to a reply that meets their real need",
    "off_target": "how they react to a reply that misses it"
  },
  "goal": "what the user explicitly wants from this conversation",
  "hidden_need": "what they really need but will not say outright",
  "traits": ["three", "trait", "words"]%OPENING%
}"""

_SYSTEM = {
    "en": (
        "You write profiles of people who come to a chat assistant for emotional support. The "
        "profiles drive a role-playing user simulator, so they must be concrete, specific and "
        "internally consistent: a believable person, a story with dates and turning points, and "
        "clear cues for how the person reacts. Avoid clichés and celebrity names. Write every text "
        "value in English.\n\n"
        "Answer with exactly one JSON object and nothing else (no prose, no comments), with these "
        "keys:\n"
    ),
    "zh": (
        "你负责为一个情感陪伴聊天助手编写“来访用户”的人物档案。档案会驱动一个角色扮演的用户模拟器，"
        "因此必须具体、细致、前后一致：一个可信的人，一段有时间点和转折的经历，以及清楚的反应线索。"
        "避免陈词滥调，不要使用名人姓名。所有文本内容都用简体中文书写（JSON 的键保持英文）。\n\n"
        "只输出一个 JSON 对象，不要输出任何其他文字或注释，键如下：\n"
    ),
}

_REQUEST = {
    "en": (
        "Write one profile.\n"
        "- Topic: {topic}\n"
        "- Age between {age_band}\n"
        "- Conversational style: {style} ({style_hint})\n"
        "- Type of hidden need: {need_type}\n"
        "{openings}"
        "Make the timeline at least three dated entries and give exactly three traits."
    ),
    "zh": (
        "请写一份档案。\n"
        "- 话题：{topic}\n"
        "- 年龄在 {age_band} 岁之间\n"
        "- 对话风格：{style}（{style_hint}）\n"
        "- 隐藏需求的类型：{need_type}\n"
        "{openings}"
        "时间线至少写三条带时间的经历，性格特点正好三个词。"
    ),
}

_STYLE_HINTS = {
    "en": {
        "negative": "complains, sees the dark side, easily discouraged",
        "passive": "waits to be asked, gives little, goes along",
        "avoidant": "sidesteps the painful part, changes the subject",
    },
    "zh": {
        "negative": "爱抱怨，容易往坏处想，容易灰心",
        "passive": "被问才说，说得少，随大流",
        "avoidant": "回避痛处，转移话题",
    },
}

_OPENING_FIELD = {
    "en": ',\n  "opening": "the first message the user sends the assistant, in their own voice"',
    "zh": ',\n  "opening": "用户发给助手的第一句话，用他自己的口吻"',
}

_OPENINGS_HINT = {
    "en": "- People with this topic have opened like this (for register only, do not copy):\n",
    "zh": "- 这类话题的用户曾这样开场（只参考语气，不要照抄）：\n",
}


@dataclass(frozen=True)
class AttemptPlan:
    """What one attempt asks for; a pure function of (seed, attempt index) so resume draws the same."""

    attempt: int
    topic: SeedTopic
    style: str
    need_type: str
    age_band: str


def plan_attempt(topics: Sequence[SeedTopic], seed: int, attempt: int) -> AttemptPlan:
    """Cycle through the topics in a seeded order; draw style, need type and age band per attempt."""
    order = list(range(len(topics)))
    random.Random(f"topics:{seed}").shuffle(order)
    rng = random.Random(f"attempt:{seed}:{attempt}")
    return AttemptPlan(
        attempt=attempt,
        topic=topics[order[attempt % len(order)]],
        style=rng.choice(STYLES),
        need_type=rng.choice(NEED_TYPES),
        age_band=rng.choice(AGE_BANDS),
    )


def build_messages(plan: AttemptPlan, language: str, *, with_opening: bool) -> list[Message]:
    schema = _SCHEMA_EN.replace("%OPENING%", _OPENING_FIELD[language] if with_opening else "")
    openings = ""
    if plan.topic.openings:
        openings = _OPENINGS_HINT[language] + "".join(f'  "{o}"\n' for o in plan.topic.openings[:3])
    request = _REQUEST[language].format(
        topic=plan.topic.topic,
        age_band=plan.age_band,
        style=plan.style,
        style_hint=_STYLE_HINTS[language][plan.style],
        need_type=plan.need_type.replace("_", " "),
        openings=openings,
    )
    return [
        Message(role="system", content=_SYSTEM[language] + schema),
        Message(role="user", content=request),
    ]


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


# --------------------------------------------------------------------------------------------------
# The generation loop
# --------------------------------------------------------------------------------------------------
@dataclass
class GenerateSettings:
    n: int
    language: str = "en"
    seed: int = 0
    with_opening: bool = False
    similarity: str = "ngram"
    max_similarity: float | None = None  # None: DEFAULT_MAX_SIMILARITY[similarity]
    max_attempts: int | None = None  # per invocation; None: 3 * missing + 10
    concurrency: int = 4
    sampling: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=1.0, max_tokens=2048))
    source: str = "generated"

    @property
    def threshold(self) -> float:
        return (
            self.max_similarity
            if self.max_similarity is not None
            else DEFAULT_MAX_SIMILARITY[self.similarity]
        )


@dataclass
class GenerateReport:
    out: Path
    rejected_path: Path
    target: int
    existing: int = 0
    accepted: int = 0
    attempts: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return self.existing + self.accepted

    @property
    def complete(self) -> bool:
        return self.total >= self.target

    def as_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "rejected_log": str(self.rejected_path),
            "target": self.target,
            "existing": self.existing,
            "accepted": self.accepted,
            "total": self.total,
            "attempts": self.attempts,
            "rejected": dict(self.rejected),
            "complete": self.complete,
        }


def rejected_path_for(out: Path) -> Path:
    """Where rejected answers of ``out`` are logged: ``<stem>.rejected.jsonl`` beside it."""
    return out.with_name(f"{out.stem}.rejected.jsonl")


def _count_lines(path: Path) -> int:
    return sum(1 for _ in iter_jsonl(path)) if path.exists() else 0


def _existing_profiles(out: Path) -> list[Profile]:
    profiles: list[Profile] = []
    if not out.exists():
        return profiles
    for lineno, obj in iter_jsonl(out):
        try:
            profiles.append(Profile.model_validate(obj))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputError(
                Problem(str(out), lineno, ".".join(map(str, first["loc"])) or None, first["msg"]),
                summary=f"{out} holds a line that is not a profile; fix or move it before resuming",
            ) from None
    return profiles


@dataclass
class _Run:
    """One call of :func:`generate_profiles`: where it writes, what it has accepted, how it stands."""

    settings: GenerateSettings
    report: GenerateReport
    index: Any  # a similarity index (rlver.profiles.similarity.make_index)
    seen_ids: set[str]
    on_result: Callable[[str, dict[str, Any]], None] | None
    failures_in_a_row: int = 0
    last_error: LLMError | None = None

    def reject(self, plan: AttemptPlan, kind: str, reason: str, answer: str, **extra: Any) -> None:
        record = {
            "attempt": plan.attempt,
            "topic": plan.topic.topic,
            "kind": kind,
            "reason": reason,
            **extra,
            "answer": answer[:4000],
        }
        append_jsonl(self.report.rejected_path, record)
        self.report.rejected[kind] += 1
        if self.on_result:
            self.on_result("rejected", record)

    def candidate(self, plan: AttemptPlan, answer: str) -> tuple[Profile, str]:
        """The answer as a new profile and its similarity text; :class:`Rejection` if unusable."""
        s = self.settings
        profile = answer_to_profile(
            read_answer(answer), plan, s.language, with_opening=s.with_opening, source=s.source
        )
        if profile.id in self.seen_ids:
            raise Rejection(
                "duplicate", "identical to a profile already accepted", similar_to=profile.id, similarity=1.0
            )
        text = profile_text(profile)
        near, sim = self.index.nearest(text)
        if near is not None and sim >= s.threshold:
            raise Rejection(
                "duplicate",
                f"near-duplicate of {near}: {s.similarity} similarity {sim:.2f} >= {s.threshold:.2f}",
                similar_to=near,
                similarity=round(sim, 4),
            )
        return profile, text

    def accept(self, plan: AttemptPlan, profile: Profile, text: str) -> None:
        append_jsonl(self.report.out, profile.model_dump(mode="json", exclude_defaults=False))
        self.index.add(profile.id, text)
        self.seen_ids.add(profile.id)
        self.report.accepted += 1
        if self.on_result:
            self.on_result("accepted", {"attempt": plan.attempt, "id": profile.id, "topic": plan.topic.topic})

    def handle(self, plan: AttemptPlan, result: Completion | BaseException) -> None:
        """One attempt's outcome: an LLM failure, a rejection or a new profile (in attempt order)."""
        if isinstance(result, BaseException):
            if not isinstance(result, (LLMError, TimeoutError)):
                raise result
            self.failures_in_a_row += 1
            self.last_error = result if isinstance(result, LLMError) else LLMError(str(result))
            self.reject(plan, "llm_error", f"{type(result).__name__}: {result}", "")
            return
        self.failures_in_a_row = 0
        try:
            profile, text = self.candidate(plan, result.text)
        except Rejection as rej:
            self.reject(plan, rej.kind, rej.reason, result.text, **rej.extra)
            return
        self.accept(plan, profile, text)

    def raise_if_endpoint_down(self) -> None:
        if self.failures_in_a_row >= MAX_LLM_FAILURES_IN_A_ROW and self.last_error is not None:
            raise type(self.last_error)(
                f"the model failed {self.failures_in_a_row} times in a row; stopping "
                f"({self.report.total}/{self.settings.n} profiles in {self.report.out}, rerun to resume): "
                f"{self.last_error}"
            )


def _start_run(
    out: Path,
    settings: GenerateSettings,
    against: Sequence[Profile],
    embedder: Embedder | None,
    on_result: Callable[[str, dict[str, Any]], None] | None,
) -> _Run:
    """Repair and read what earlier runs left in ``out`` (and its rejection log); index it all."""
    rej_path = rejected_path_for(out)
    for path in (out, rej_path):
        repair_torn_tail(path)
    existing = _existing_profiles(out)
    report = GenerateReport(out=out, rejected_path=rej_path, target=settings.n, existing=len(existing))
    index = make_index(settings.similarity, embedder=embedder)
    for p in [*against, *existing]:
        index.add(p.id, profile_text(p))
    return _Run(settings, report, index, {p.id for p in existing}, on_result)


def _sampling_for(settings: GenerateSettings, plan: AttemptPlan) -> SamplingParams:
    """A fixed sampling seed becomes a distinct seed per attempt (so retries are not repeats)."""
    seed = settings.sampling.seed
    return settings.sampling.model_copy(update={"seed": None if seed is None else seed + plan.attempt})


async def generate_profiles(
    model: ChatModel,
    topics: Sequence[SeedTopic],
    out: str | Path,
    settings: GenerateSettings,
    *,
    against: Sequence[Profile] = (),
    embedder: Embedder | None = None,
    on_result: Callable[[str, dict[str, Any]], None] | None = None,
) -> GenerateReport:
    """Generate profiles into ``out`` until it holds ``settings.n`` (or the attempts run out).

    ``against``: other profiles (e.g. an existing training set) new ones must not duplicate.
    ``on_result("accepted"|"rejected", record)`` is called after each attempt (progress display).
    Raises the last :class:`LLMError` after :data:`MAX_LLM_FAILURES_IN_A_ROW` failed calls in a row.
    """
    if not topics:
        raise InputError(Problem("seed topics", None, None, "no seed topics given"))
    if settings.language not in _SYSTEM:
        raise InputError(Problem("--lang", None, None, f"expected one of {', '.join(_SYSTEM)}"))
    run = _start_run(Path(out), settings, against, embedder, on_result)
    report = run.report
    attempt = report.existing + _count_lines(report.rejected_path)
    missing = settings.n - report.existing
    budget = settings.max_attempts if settings.max_attempts is not None else 3 * max(missing, 0) + 10
    while report.total < settings.n and report.attempts < budget:
        width = min(settings.concurrency, settings.n - report.total, budget - report.attempts)
        plans = [plan_attempt(topics, settings.seed, attempt + i) for i in range(width)]
        attempt += width
        report.attempts += width
        calls = [
            model.complete(
                build_messages(p, settings.language, with_opening=settings.with_opening),
                _sampling_for(settings, p),
            )
            for p in plans
        ]
        results = await asyncio.gather(*calls, return_exceptions=True)
        # Results are handled in attempt order, so the outcome does not depend on arrival order.
        for plan, result in zip(plans, results, strict=True):
            run.handle(plan, result)
        run.raise_if_endpoint_down()
    return report


def raise_if_incomplete(report: GenerateReport) -> None:
    """A clear error when the attempt budget ran out before ``n`` profiles were accepted."""
    if not report.complete:
        reasons = ", ".join(f"{k}: {v}" for k, v in report.rejected.most_common()) or "none"
        raise RlverError(
            f"stopped after {report.attempts} attempts with {report.total}/{report.target} profiles "
            f"in {report.out} (rejected: {reasons}; reasons in {report.rejected_path}). "
            "Rerun the same command to continue, or raise --max-attempts."
        )
