"""The offline user's own story, in the first person: what it can say when the assistant asks it something.

A profile is written *about* the user ("She moved his seat", "她觉得自己没有错"); the user must answer
*as* that person ("I moved his seat", "我觉得自己没有错"). :func:`story_of` splits the background into
sentences, drops what is only meant for the simulator (how the user reacts at each emotion, what meets
or misses the hidden need), and rewrites each sentence in the first person; the goal, the hidden need
and a few persona facts (job, home, hobbies, age) become lines of their own. Every line carries the
content tokens that a question is matched against (:mod:`rlver.simulator.offline.answers`).

Nothing is generated: each line is the profile's own text with its labels and pronouns changed
(:mod:`rlver.simulator.offline.firstperson` holds the rules, and what they cannot resolve).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from rlver.profiles.schema import Profile
from rlver.simulator.offline.crosslingual import content_tokens
from rlver.simulator.offline.firstperson import Voice, rewrite, word_set
from rlver.simulator.offline.lexicon import CJK_CHAR, EN_STOPWORDS

#: What a line is, which decides at which tiers the user says it (answers.py): ``story`` (background),
#: ``goal`` (the explicit goal), ``persona`` (a fact about the person), ``need_near`` (background that
#: all but states the hidden need, e.g. "Where things stand"), ``need`` (the hidden need itself).
LineKind = Literal["story", "goal", "persona", "need_near", "need"]


@dataclass(frozen=True)
class StoryLine:
    """One sentence the user can say, and the tokens a question is matched against."""

    text: str
    kind: LineKind
    tokens: frozenset[str]


@dataclass(frozen=True)
class Story:
    """Everything a user can tell about itself, in the profile's order (cause and timeline first)."""

    language: str
    lines: tuple[StoryLine, ...]
    #: Content tokens of the hidden need.
    need_tokens: frozenset[str]
    #: Tokens of the hidden need that no line but the need's own has (a question with one probes the need).
    need_only: frozenset[str] = frozenset()
    #: Names and places: capitalised words an answer keeps capitalised after a lead-in ("Well, Conor ...").
    names: frozenset[str] = frozenset()
    #: Per token, 1 / the number of lines that hold it: a word only one line has picks that line.
    weights: dict[str, float] = field(default_factory=dict)


# -- sections of a background ------------------------------------------------------------------------
#: Labels (lower-cased, without markdown) and the section they open. Ours (profiles/bundled, the
#: generator's labels) and the published SAGE scenes' ("**事件起因：**", "**事件的当前状态：**").
_SECTIONS: dict[str, str] = {
    "cause": "story",
    "起因": "story",
    "事件起因": "story",
    "timeline": "timeline",
    "经过": "timeline",
    "时间线": "timeline",
    "事件经过": "timeline",
    "main conflict": "story",
    "主要冲突": "story",
    "主要矛盾": "story",
    "what they have tried": "tried",
    "试过的办法": "tried",
    "已经尝试过的办法": "tried",
    "尝试过但没有成功的解决方案": "tried",
    "where things stand": "need_near",
    "现状": "need_near",
    "事件的当前状态": "need_near",
    "how they react": "skip",
    "reactions": "skip",
    "不同状态下的反应": "skip",
    "反应方式": "skip",
}
#: Words that mark text written for the simulator, not something the user would say.
_META = re.compile(
    r"emotion|hidden need|(?<![a-z])npc(?![a-z])|(?<![a-z])react|replies that|隐藏|情绪高|情绪低|情绪一般|情绪中等|反应|回复|玩家",
    re.IGNORECASE,
)
_MARKUP = re.compile(r"[*_`]+")
_ITEM = re.compile(r"^\s*(?:[-•]|\*(?!\*)|\d+[.)、])\s*")
_EN_LABEL = re.compile(r"^([A-Za-z][A-Za-z0-9 '\-]{0,40}?):\s*(.*)$")
_ZH_LABEL = re.compile(r"^([^：:，。,！？]{1,16})[：:]\s*(.*)$")
_EN_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9'\"‘“])")
_ZH_SENTENCE = re.compile(r"(?<=[。！？!?])")


def _clean(line: str) -> tuple[str, bool, bool]:
    """A background line without markdown: (text, is a heading, is a list item)."""
    stripped = line.strip()
    heading = stripped.startswith("#")
    item = bool(_ITEM.match(stripped))
    text = _MARKUP.sub("", _ITEM.sub("", stripped.lstrip("#"), count=1)).strip()
    return _ITEM.sub("", text, count=1).strip() if item else text, heading, item


def _label(text: str, language: str) -> tuple[str, str] | None:
    """``(label, content)`` when ``text`` starts with a short label ("Cause:", "起因：")."""
    match = (_ZH_LABEL if language == "zh" else _EN_LABEL).match(text)
    if match is None:
        return None
    label = match.group(1).strip()
    if language == "en" and len(label.split()) > 6:
        return None
    return label, match.group(2).strip()


def _sentences(text: str, language: str) -> list[str]:
    splitter = _ZH_SENTENCE if language == "zh" else _EN_SENTENCE
    return [s.strip() for s in splitter.split(text) if s.strip()]


def _long_enough(text: str, language: str) -> bool:
    """Titles ("重逢与重燃旧情（1个月前）", "我与张浩。") are not sentences worth saying."""
    if language == "zh":
        return len(CJK_CHAR.findall(text)) >= 8
    return len(text.split()) >= 4


def _is_title(text: str, language: str) -> bool:
    """A heading in a list ("重逢与重燃旧情（1个月前）"): short, with no punctuation of a sentence."""
    if re.search(r"[.!?,;。！？，；]", text):
        return False
    return len(CJK_CHAR.findall(text)) < 16 if language == "zh" else len(text.split()) < 6


def background_sentences(background: str, language: str) -> list[tuple[str, str]]:
    """``(section, sentence)`` for every sentence of ``background`` the user could say, in order.

    ``section`` is ``story``, ``timeline`` (a dated item: its label is kept, "Two weeks ago, ..."),
    ``tried`` (said as "I've tried ...") or ``need_near``. Sections about how the user reacts, and any
    line that talks about emotions, NPCs or the hidden need, are left out: they steer the simulator.
    """
    out: list[tuple[str, str]] = []
    section, skipping = "story", False
    sep = "，" if language == "zh" else ", "
    for raw in background.splitlines():
        text, heading, item = _clean(raw)
        if heading:
            skipping = bool(_META.search(text))
            section = "story"
            continue
        if not text:
            continue
        labelled = _label(text, language)
        if labelled is not None:
            label, content = labelled
            key = label.lower()
            known = _SECTIONS.get(key)
            if known is not None or (not item and not content):
                skipping = known == "skip" or bool(_META.search(label))
                section = known if known not in (None, "skip") else "story"
                text = content
            elif section == "timeline" and item:
                if _is_title(content, language):  # "第一阶段：重逢与重燃旧情（1个月前）"
                    continue
                text = f"{label}{sep}{content}"  # a dated entry: "Two weeks ago, the boy hit ..."
            elif _META.search(label):
                continue
            else:
                text = content
        elif not item and skipping:
            continue
        if skipping or not text or _META.search(text):
            continue
        for sentence in _sentences(text, language):
            if _long_enough(sentence, language) and not _is_title(sentence, language):
                out.append((section, sentence))
    return out


# -- who the user is ----------------------------------------------------------------------------------
_PERSONA_FIELD = re.compile(
    r"^[ \t]*[-*•]*[ \t]*\**[ \t]*([^:：\n]{1,20}?)[ \t]*\**[ \t]*[:：][ \t]*\**[ \t]*(\S[^\n]*?)[ \t]*$",
    re.MULTILINE,
)


def _persona_fields(persona: str) -> dict[str, str]:
    return {m.group(1).strip().lower(): m.group(2).strip() for m in _PERSONA_FIELD.finditer(persona)}


def voice_of(persona: str, background: str, language: str) -> Voice:
    """The user's pronoun (from a gender field, else the subject of the conflict / where-things-stand
    lines, else the more frequent one) and name (a ``Name:`` field, else the persona's first word)."""
    fields = _persona_fields(persona)
    name = fields.get("name") or fields.get("姓名") or fields.get("名字") or ""
    if not name:
        first = re.split(r"[，,]", persona.strip(), maxsplit=1)[0].strip()
        zh_name = language == "zh" and 1 < len(first) <= 4 and all(CJK_CHAR.match(c) for c in first)
        en_name = language == "en" and re.fullmatch(r"[A-Z][a-z]+(?: [A-Z][a-z]+)?", first)
        if zh_name or en_name:
            name = first
    names = tuple(dict.fromkeys(n for n in (name, name.split()[0] if " " in name else "") if n))
    return Voice(pronoun=_pronoun(background, fields, language), names=names)


def _pronoun(background: str, fields: dict[str, str], language: str) -> str:
    gender = fields.get("gender") or fields.get("性别") or ""
    female, male = ("她", "他") if language == "zh" else ("she", "he")
    if gender:
        if gender.startswith(("女", "f", "F", "w", "W")):
            return female
        if gender.startswith(("男", "m", "M")):
            return male
    if language == "zh":
        for line in background.splitlines():
            labelled = _label(_clean(line)[0], "zh")
            if labelled and _SECTIONS.get(labelled[0]) in ("story", "need_near"):
                found = re.search(r"(?<![其吉])([她他])(?![们人])", labelled[1])
                if found and labelled[0] not in ("起因", "事件起因"):
                    return found.group(1)
        she = len(re.findall(r"她(?!们)", background))
        he = len(re.findall(r"(?<![其吉])他(?![们人])", background))
    else:
        for line in background.splitlines():
            labelled = _label(_clean(line)[0], "en")
            if labelled and labelled[0].lower() in ("main conflict", "where things stand"):
                first = (labelled[1].split() or [""])[0].lower()
                if first in ("she", "he"):
                    return first
        words = re.findall(r"[a-z]+", background.lower())
        she, he = words.count("she"), words.count("he")
    if she > he:
        return female
    if he > she:
        return male
    return ""


# -- the story ----------------------------------------------------------------------------------------
#: Persona facts the user may mention, with the words of a question that ask for them.
_PERSONA_EN = {
    "name": ("#name", "I'm {v}."),
    "job": ("#job", "I'm {a}{v}."),
    "occupation": ("#job", "I'm {a}{v}."),
    "lives in": ("#home", "I live in {v}."),
    "hobbies": ("#hobby", "When I get the time, I like {v}."),
    "age": ("#age", "I'm {v}."),
    "background": ("#background", "A bit about me: {v}."),
}
_PERSONA_ZH = {
    "姓名": ("#name", "我叫{v}。"),
    "名字": ("#name", "我叫{v}。"),
    "职业": ("#job", "我是{v}。"),
    "居住地": ("#home", "我住在{v}。"),
    "爱好": ("#hobby", "我平时喜欢{v}。"),
    "个人爱好": ("#hobby", "我平时喜欢{v}。"),
    "年龄": ("#age", "我今年{v}。"),
    "出身": ("#background", "说到我自己，{v}。"),
}
_ASKS_EN = {
    "#job": word_set("job jobs work working career living profession occupation"),
    "#home": word_set("live lives hometown city town based"),
    "#hobby": word_set("hobby hobbies fun free enjoy weekend weekends relax unwind interests"),
    "#age": word_set("old age"),
    "#name": word_set("name"),
    "#background": word_set("background"),
}
_ASKS_ZH = {
    "#job": ("工作", "职业", "做什么的", "干什么的", "上班"),
    "#home": ("住在", "住哪", "哪里人", "哪个城市", "家在"),
    "#hobby": ("爱好", "兴趣", "平时喜欢", "业余", "放松"),
    "#age": ("多大", "几岁", "年龄", "年纪"),
    "#name": ("名字", "叫什么", "怎么称呼", "姓名"),
    "#background": ("出身", "背景", "介绍一下你自己", "你自己的情况"),
}


def asked_facts(question: str, language: str) -> set[str]:
    """Persona-fact keys (``#job``, ``#home``, ...) that a question asks about."""
    if language == "zh":
        return {key for key, cues in _ASKS_ZH.items() if any(c in question for c in cues)}
    words = set(re.findall(r"[a-z]+", question.lower()))
    return {key for key, cues in _ASKS_EN.items() if words & cues}


def _lower_first(text: str, keep: frozenset[str]) -> str:
    """``text`` to follow a lead-in: its first letter lower-cased unless it starts a name or "I"."""
    first = text.split(" ", 1)[0].strip("'\"‘“")
    if (
        not first
        or first in keep
        or first == "I"
        or first.startswith("I'")
        or (first.isupper() and len(first) > 1)
    ):
        return text
    return text[0].lower() + text[1:]


def _proper_nouns(text: str) -> frozenset[str]:
    """Capitalised words that are not at a sentence start: names and places to keep capitalised."""
    found = re.findall(r"(?<=[a-z,;] )([A-Z][A-Za-z]+)", text)
    return frozenset(w for w in found if w.lower() not in EN_STOPWORDS)


def _capitalise(text: str) -> str:
    return text[0].upper() + text[1:] if text else text


def _second_person_zh(text: str, voice: Voice) -> str:
    """A Chinese goal or need in the user's words: the published data's "你想..." is the user ("我想..."),
    and "对方" in ours is the assistant ("你")."""
    text = text.strip().lstrip("*").strip().replace("你", "我")
    return rewrite(text, voice, "zh").replace("对方", "你")


def _goal_line(goal: str, voice: Voice, language: str, keep: frozenset[str]) -> str:
    if language == "zh":
        goal = _second_person_zh(goal, voice)
    text = rewrite(goal.strip(), voice, language).rstrip(".。!！")
    if language == "zh":
        if text.startswith("我"):
            return text + "。"
        return ("我" if text.startswith(("想", "希望", "要")) else "我想") + text + "。"
    text = re.sub(r"^(?:to|i want to|i'd like to)\s+", "", text, flags=re.IGNORECASE)
    return f"I just want to {_lower_first(text, keep)}."


def _need_line(need: str, voice: Voice, language: str, keep: frozenset[str]) -> str:
    if language == "zh":
        text = _second_person_zh(need, voice).rstrip("。")
        if text.startswith("我"):
            return "其实" + text + "。"
        return ("其实我" if text.startswith(("想", "希望", "要", "需要")) else "其实我需要的是") + text + "。"
    text = rewrite(need.strip(), voice, language).rstrip(".")
    if re.match(r"to\s", text, flags=re.IGNORECASE):
        return f"I think I need {_lower_first(text, keep)}."
    return f"I think what I need is {_lower_first(text, keep)}."


def _article(noun: str) -> str:
    """ "a " or "an " before ``noun`` (by its sound, roughly: "an ICU nurse", "a UX designer")."""
    word = noun.split(" ", 1)[0]
    if word.isupper() and len(word) > 1:
        return "an " if word[0] in "AEFHILMNORSX" else "a "
    low = word.lower()
    if low.startswith(("uni", "use", "usu", "uti", "eu", "one")):
        return "a "
    return "an " if low[:1] in "aeiou" or low.startswith(("hour", "honest")) else "a "


#: Words that start a persona's background as a predicate ("always wanted to teach"), and past
#: participles that do not ("married to Conor", "widowed").
_PREDICATE_START = word_set("always never grew was has had used")
_STATES = word_set("married widowed divorced retired engaged separated")


def _starts_with_verb(value: str) -> bool:
    """Whether a persona's ``Background:`` value reads as "(she) ...": "played drums ...", "supports ..."."""
    first = value.split(" ", 1)[0].lower()
    if first in _STATES:
        return False
    return (
        first in _PREDICATE_START
        or first.endswith("ed")
        or (first.endswith("s") and not first.endswith("ss"))
    )


def _persona_lines(persona: str, voice: Voice, language: str) -> list[StoryLine]:
    table = _PERSONA_ZH if language == "zh" else _PERSONA_EN
    out: list[StoryLine] = []
    for label, value in _persona_fields(persona).items():
        if label not in table or not value:
            continue
        key, template = table[label]
        value = value.rstrip(".。")
        if key == "#background" and language == "en" and voice.pronoun and _starts_with_verb(value):
            # "supports her brother's fees": said as a sentence ("She supports ..." -> "I support my ...")
            text = _capitalise(rewrite(f"{voice.pronoun} {value}", voice, language)) + "."
            out.append(StoryLine(text, "persona", frozenset({key})))
            continue
        if key != "#name":  # a name said as "I'm Olivia Bennett", not rewritten to "I'm I"
            value = rewrite(value, voice, language)
        article = ""
        if key == "#job" and language == "en" and not re.match(r"(?:an?|the|my)\s", value, re.IGNORECASE):
            article = _article(value)
        text = template.replace("{a}", article).replace("{v}", value)
        out.append(StoryLine(text, "persona", frozenset({key})))
    return out


def story_of(profile: Profile, language: str) -> Story:
    """The user's story for ``profile`` (cached: it is the same for every dialogue with the profile)."""
    return _story(language, profile.persona, profile.background, profile.goal, profile.hidden_need)


@lru_cache(maxsize=512)
def _story(language: str, persona: str, background: str, goal: str, hidden_need: str) -> Story:
    voice = voice_of(persona, background, language)
    keep = _proper_nouns(f"{background}\n{goal}\n{hidden_need}") | frozenset(voice.names)
    need_tokens = frozenset(content_tokens(hidden_need, language))
    lines: list[StoryLine] = []
    for section, sentence in background_sentences(background, language):
        text = rewrite(sentence, voice, language)
        if section == "tried":
            if language == "zh":
                text = text if text.startswith("我") else "我" + text
            else:
                text = "I've tried " + _lower_first(text, keep)
        elif language == "en":
            text = _capitalise(text)
        tokens = frozenset(content_tokens(text, language))
        shared = len(tokens & need_tokens)
        near = section == "need_near" or (shared >= 2 and shared >= 0.4 * len(need_tokens))
        lines.append(StoryLine(text, "need_near" if near else "story", tokens))
    goal_tokens = frozenset(content_tokens(goal, language))
    # The published profiles' goal is their hidden need ("task"): it is not said as a goal then.
    same = goal.strip() == hidden_need.strip()
    if not same and not (len(goal_tokens) >= 3 and len(goal_tokens & need_tokens) >= 0.8 * len(goal_tokens)):
        lines.append(StoryLine(_goal_line(goal, voice, language, keep), "goal", goal_tokens))
    lines.extend(_persona_lines(persona, voice, language))
    need_text = _need_line(hidden_need, voice, language, keep)
    lines.append(StoryLine(need_text, "need", need_tokens))
    counts: dict[str, int] = {}
    for line in lines:
        for token in line.tokens:
            counts[token] = counts.get(token, 0) + 1
    weights = {token: 1.0 / n for token, n in counts.items()}
    told = {t for line in lines if line.kind not in ("need", "need_near") for t in line.tokens}
    return Story(
        language=language,
        lines=tuple(lines),
        need_tokens=need_tokens,
        need_only=need_tokens - told,
        names=keep,
        weights=weights,
    )
