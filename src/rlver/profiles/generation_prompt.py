"""What a generated profile is asked for: the seed topics and the request one attempt sends.

Each attempt draws a topic, a style, a need and an age band (:func:`plan_attempt`, reproducible from
the run seed and the attempt number, so a resumed run draws what it would have drawn) and asks for
one JSON object in the schema below (:func:`build_messages`). What comes back is checked by
:mod:`rlver.profiles.answer_check`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rlver.errors import InputError, Problem
from rlver.io import iter_jsonl
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


#: The system message of the request, by language (the languages a set can be generated in).
SYSTEM = {
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
        Message(role="system", content=SYSTEM[language] + schema),
        Message(role="user", content=request),
    ]
