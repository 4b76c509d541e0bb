"""The transfer appraisal: features that mean the same in English and Chinese, fitted on SAGE's judgements.

The published SAGE simulator's released judgements are all Chinese, so nothing can be fitted on English
replies directly. The char-n-gram model (:mod:`rlver.simulator.offline.learned`) learns Chinese phrases, which
say nothing about English. This module defines a small set of *dense* features that exist in both
languages and are computed in each with that language's own tokens and word lists:

* length, questions and exclamations, second- and first-person address;
* named emotions, acknowledgement, advice, and advice that comes before any acknowledgement;
* platitudes, apologies (and apology loops), an assistant's register ("here are some tips",
  "以下是…建议");
* phrase loops and repeated sentences inside the reply, resemblance to the agent's earlier replies;
* coherence with the user's last message (how many of its content words the reply takes up, how much
  of the reply is about them), with the hidden need and with the story;
* whether it reads as a finished reply at all (ends on a sentence end, does not open on a connective
  such as "Also," / "另外", lists and headings);
* the user's state: emotion, turn, conversational style, its own earlier changes.

A ridge regression on the Chinese released turns gives one weight per feature
(``bench/transfer_appraisal_fit.py`` fits it and measures it with agent models held out); the English
offline user applies the same weights to the English versions of the features. What English inherits is
therefore the *direction and size* of SAGE's preferences over these features, measured in Chinese; no
English judgement checks it (see docs/simulator.md, "The English offline user").
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlver.errors import ConfigError
from rlver.simulator.offline.learned import STATE_NAMES, read_artefact, round_change, state_features
from rlver.simulator.offline.lexicon import (
    CJK_CHAR,
    CJK_RUN,
    EN_STOPWORDS,
    EN_WORD,
    ZH_FUNCTION_CHARS,
    ZH_GENERIC_BIGRAMS,
    PhraseList,
    TextView,
    _phrases,
)

#: The artefact shipped in the package.
XL_ARTEFACT_NAME = "appraisal_xl.json"
#: Bumped whenever a feature changes (an artefact of another version is refused).
XL_FEATURES_VERSION = "xl-v1"

#: Names of the features, in vector order.
XL_NAMES = (
    "log_len",
    "log_len_sq",
    "questions",
    "ends_question",
    "exclaims",
    "second_person",
    "first_person",
    "named_emotion",
    "acknowledge",
    "advice",
    "advice_before_ack",
    "platitude",
    "apology",
    "assistant_register",
    "phrase_loop",
    "sentence_repeat",
    "repeat_prev",
    "user_reuse",
    "user_share",
    "need_overlap",
    "story_overlap",
    "list_lines",
    "emotion",
    "emotion_sq",
    "turn",
    *STATE_NAMES,
)


@dataclass(frozen=True)
class XLLexicon:
    """The word lists of one language for the transfer features (same meaning in each language)."""

    second_person: PhraseList
    first_person: PhraseList
    emotion: PhraseList
    acknowledge: PhraseList
    advice: PhraseList
    platitude: PhraseList
    apology: PhraseList
    assistant: PhraseList
    connectives: tuple[str, ...]


XL_EN = XLLexicon(
    second_person=_phrases("you|your|yours|you're|yourself|you've|you'll|you'd"),
    first_person=_phrases("i|me|my|mine|i'm|i've|i'd|i'll|myself"),
    emotion=_phrases(
        "sad|sadness|angry|anger|upset|hurt|hurts|frustrated|frustration|anxious|anxiety|scared|afraid|"
        "fear|lonely|alone|ashamed|shame|guilty|guilt|embarrassed|humiliated|disappointed|heartbroken|"
        "grief|jealous|resentful|overwhelmed|exhausted|stressed|nervous|worried|helpless|betrayed|"
        "furious|devastated|proud|relieved|happy|hopeless|numb|panic|bitter|insulted"
    ),
    acknowledge=_phrases(
        "sounds|sound like|i hear|hear you|that must|must be|must have|must feel|makes sense|"
        "no wonder|understandable|i understand|i can see|i can imagine|of course you|it's okay to|"
        "it's ok to|it's natural|anyone would|that's a lot|that's hard|that's really|what a"
    ),
    advice=_phrases(
        "try|should|suggest|consider|recommend|step|steps|plan|make sure|start by|you could|you can|"
        "you might|it might help|it may help|focus on|remember to|practice|practise|set|schedule|"
        "write down|talk to|reach out|seek|set aside|make a list|take a break"
    ),
    platitude=_phrases(
        "everything happens for a reason|calm down|just relax|don't worry|cheer up|look on the bright side|"
        "it could be worse|time heals|stay positive|you'll be fine|not a big deal|get over it|move on|"
        "others have it worse|think positive|let it go|it will be okay|it'll be okay|everything will be|"
        "believe in yourself|you've got this|you got this|keep your head up|stay strong|be strong|"
        "things will get better|it is what it is|just|simply|at least"
    ),
    apology=_phrases("sorry|apologise|apologize|apologies|forgive me"),
    assistant=_phrases(
        "here are|here's how|here is|tips|steps to|strategies|i can help|i'd be happy to|happy to help|"
        "let me know|feel free|i hope this helps|hope this helps|provide me|please provide|can you provide|"
        "as an ai|language model|in conclusion|additionally|furthermore|overall|in summary|key points|"
        "it's important to|it is important to|remember that"
    ),
    connectives=(
        "also",
        "additionally",
        "furthermore",
        "moreover",
        "finally",
        "lastly",
        "however",
        "and",
        "but",
        "so",
        "then",
        "secondly",
        "thirdly",
        "besides",
        "therefore",
        "overall",
        "instead",
        "otherwise",
    ),
)

XL_ZH = XLLexicon(
    second_person=_phrases("你|您"),
    first_person=_phrases("我"),
    emotion=_phrases(
        "难过|伤心|生气|愤怒|委屈|受伤|沮丧|焦虑|害怕|恐惧|孤单|孤独|羞愧|丢脸|愧疚|内疚|尴尬|失望|心碎|悲伤|嫉妒|"
        "怨恨|不甘|崩溃|疲惫|累|压力|紧张|担心|无助|背叛|愤怒|绝望|自豪|骄傲|释然|开心|麻木|慌|苦涩|屈辱"
    ),
    acknowledge=_phrases(
        "听起来|听上去|我听到|我能感觉到|我能感受到|一定很|肯定很|一定是|难怪|可以理解|能理解|我理解|理解你|"
        "我能想象|换作是谁|谁都会|很正常|确实不容易|真的不容易|这太|真的很"
    ),
    advice=_phrases(
        "试试|试着|应该|建议|考虑|推荐|步骤|计划|确保|首先|你可以|可以先|不妨|或许可以|也许可以|专注于|记得|"
        "练习|安排|写下来|写下|聊聊|找人|寻求|列个|列一个|休息一下"
    ),
    platitude=_phrases(
        "凡事都有原因|冷静|别想太多|别担心|开心点|往好处想|可能更糟|时间会冲淡一切|保持积极|你会没事的|"
        "没什么大不了|想开点|想开一点|看开|放下吧|一切都会好的|会好起来的|相信自己|你可以的|加油|坚强点|"
        "事情会好起来|就这样吧|只要|就好了|不就是|至少"
    ),
    apology=_phrases("对不起|抱歉|不好意思|原谅我"),
    assistant=_phrases(
        "以下是|以下几点|一些建议|几点建议|小贴士|技巧|策略|我可以帮|很乐意|乐意帮助|随时告诉我|随时找我|"
        "希望对你有帮助|希望能帮到你|请提供|作为ai|语言模型|总之|此外|另外|综上|总结|关键点|重要的是|请记住"
    ),
    connectives=(
        "另外",
        "此外",
        "而且",
        "还有",
        "最后",
        "其次",
        "但是",
        "可是",
        "所以",
        "然后",
        "因此",
        "总之",
        "并且",
    ),
)

XL_LEXICONS = {"en": XL_EN, "zh": XL_ZH}

_SENT_END = re.compile(r"[.!?。！？…]+[\"'”’)）」』]*\s*|\n+")
_ENDS_CLEANLY = re.compile(
    r"(?:[.!?。！？…~～)）」』\"”’*]|[\U0001F300-\U0001FAFF\u2600-\u27BF])[\ufe0f\u200d]*\s*$"
)
_LIST_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)、]|#+)\s*", re.MULTILINE)
_EN_SUFFIX = re.compile(r"(?:ing|ed|es|s|ly)$")


def _stem(word: str) -> str:
    """A crude English stem (a few suffixes off, then the first six letters): "worried" ~ "worrying"."""
    return _EN_SUFFIX.sub("", word)[:6] if len(word) > 4 else word


#: English words that say nothing about what a dialogue is about (the English counterpart of
#: ``ZH_GENERIC_BIGRAMS``): common verbs, a reply's stock nouns, words of support. Without them "help",
#: "talk" and "feel" count as taking up the user's words in any reply to anyone.
_EN_GENERIC = """able actually always another anyone bad big bit care come day different done easy end even ever every
everyone fact feel find fine first give glad go going good great happy hard help hope important keep kind last let
life little long look lot make makes many maybe mean might mind much need never new next okay one open part people person
point put rather real really reason right say seem sense share show someone sometimes sorry sort sound specific start
still support sure take talk tell thank thanks think time today true try understand use way well whatever work world
yeah yes"""
_EN_GENERIC_STEMS = frozenset(_stem(w) for w in _EN_GENERIC.split())


def content_tokens(text: str, language: str) -> set[str]:
    """The content-bearing units of ``text``: stemmed non-stopwords (en), non-generic CJK bigrams (zh).

    Cached: one reply is read for its content by the transfer appraisal, the uptake check and the
    answer to a question within one turn; a fresh set each call, so a caller may change its copy."""
    return set(_content_tokens(text, language))


@functools.lru_cache(maxsize=8192)
def _content_tokens(text: str, language: str) -> frozenset[str]:
    if language == "zh":
        out: set[str] = set()
        for run in CJK_RUN.findall(text):
            for i in range(len(run) - 1):
                gram = run[i : i + 2]
                if gram not in ZH_GENERIC_BIGRAMS and not (
                    gram[0] in ZH_FUNCTION_CHARS and gram[1] in ZH_FUNCTION_CHARS
                ):
                    out.add(gram)
        return frozenset(out)
    out = set()
    for word in EN_WORD.findall(text.lower()):
        word = word.removesuffix("'s")  # "band's" is "band"
        if "'" in word:
            continue  # a contraction ("can't", "they're", "i'd") is function words, not a topic
        if len(word) > 2 and word not in EN_STOPWORDS and (stem := _stem(word)) not in _EN_GENERIC_STEMS:
            out.add(stem)
    return frozenset(out)


@dataclass(frozen=True)
class XLProfile:
    """The profile fields the transfer appraisal reads, prepared once per profile."""

    language: str
    need: frozenset[str]
    story: frozenset[str]
    style: str

    @classmethod
    def of(cls, language: str, hidden_need: str, background: str, goal: str, style: str) -> XLProfile:
        return cls(
            language=language,
            need=frozenset(content_tokens(hidden_need, language)),
            story=frozenset(content_tokens(f"{background}\n{goal}", language)),
            style=style.strip().lower(),
        )


def sentences(text: str) -> list[str]:
    """The reply's sentences (split after . ! ? 。！？… and at line breaks), stripped, none empty."""
    return [s.strip() for s in _SENT_END.split(text) if s and s.strip()]


def _units(text: str, view: TextView, language: str) -> tuple[list[str], float]:
    """The sequence for loop checks and the length in word-like units (two CJK characters = one)."""
    if language == "zh":
        return view.cjk_chars, len(view.cjk_chars) / 2 + len(view.words)
    return view.words, float(len(view.words))


def _first_position(phrases: PhraseList, view: TextView, lower: str) -> int:
    """Where the first phrase of the list starts in ``lower`` (a large number when none occurs)."""
    hits = phrases.findall(view)
    if not hits:
        return 1 << 30
    if view.cjk_chars:
        return min((lower.find(h) for h in hits if lower.find(h) >= 0), default=1 << 30)
    return min((view.padded.find(f" {h} ") for h in hits if view.padded.find(f" {h} ") >= 0), default=1 << 30)


def _repeat_share(seq: Sequence[str]) -> float:
    """The share of adjacent pairs of ``seq`` that repeat an earlier pair (0 for fewer than 8 pairs)."""
    pairs = [a + "\x00" + b for a, b in itertools.pairwise(seq)]
    return 1 - len(set(pairs)) / len(pairs) if len(pairs) >= 8 else 0.0


def _saturate(count: float, scale: float) -> float:
    return 1.0 - math.exp(-count / scale)


def _overlap(reply: set[str], other: frozenset[str] | set[str]) -> float:
    return len(reply & other) / len(reply) if reply and other else 0.0


def xl_text_features(
    reply: str, last_user: str, previous: Sequence[set[str]], profile: XLProfile
) -> tuple[list[float], set[str]]:
    """The reply's own features (everything before ``emotion`` in :data:`XL_NAMES`) and its tokens."""
    lang = profile.language
    lex = XL_LEXICONS[lang]
    text = reply.strip()
    view = TextView.of(text)
    lower = view.lower
    seq, units = _units(text, view, lang)
    per_unit = max(units, 1.0)
    n_q = text.count("?") + text.count("？")
    acks = lex.acknowledge.findall(view)
    advice = lex.advice.findall(view)
    apologies = len(lex.apology.findall(view))
    sents = sentences(text)
    repeated = len(sents) - len(set(sents))
    tokens = content_tokens(text, lang)
    user_tokens = content_tokens(last_user, lang)
    repeat = max((len(tokens & p) / len(tokens | p) for p in previous if tokens and p), default=0.0)
    log_len = math.log1p(units) / 5.0
    return [
        log_len,
        log_len * log_len,
        min(3, n_q) / 3.0,
        1.0 if text.endswith(("?", "？")) else 0.0,
        min(3, text.count("!") + text.count("！")) / 3.0,
        min(1.0, 10 * len(lex.second_person.findall(view)) / per_unit),
        min(1.0, 10 * len(lex.first_person.findall(view)) / per_unit),
        _saturate(len(set(lex.emotion.findall(view))), 1.5),
        _saturate(len(acks), 1.0),
        _saturate(len(advice), 1.5),
        1.0
        if advice and _first_position(lex.advice, view, lower) < _first_position(lex.acknowledge, view, lower)
        else 0.0,
        _saturate(len(lex.platitude.findall(view)), 1.0),
        min(1.0, apologies / 2.0),
        _saturate(len(lex.assistant.findall(view)), 1.5),
        _repeat_share(seq),
        repeated / len(sents) if sents else 0.0,
        repeat,
        len(tokens & user_tokens) / len(user_tokens) if user_tokens else 0.0,
        _overlap(tokens, user_tokens),
        _overlap(tokens, profile.need),
        _overlap(tokens, profile.story),
        min(5, len(_LIST_LINE.findall(text))) / 5.0,
    ], tokens


#: Faults of form that no released reply shows, so the Chinese fit cannot weigh them, and that make a text
#: less than a finished reply: cut off mid-sentence, the same sentence twice, sentences out of their order.
#: Set by us, not inherited: the English user adds them to the transfer score (docs/simulator.md).
#: ``out_of_order`` is per fault (see :func:`order_faults`), at most :data:`MAX_ORDER_FAULTS` of them.
STRUCTURE_PENALTIES: dict[str, float] = {
    "cut_off": -3.0,
    "repeats_sentence": -4.0,
    "out_of_order": -1.5,
    "role_disorder": -1.0,
}
MAX_ORDER_FAULTS = 3

#: Sentences that answer the user's message as a whole, so they come before the reply's own content: a
#: greeting or interjection, regret at what the user told ("I'm so sorry to hear that"), thanks for
#: telling, "don't apologise", a verdict on the user's feeling as a whole ("It's completely
#: understandable", "I hear you"). Matched at the start of a sentence. Left out because capable replies
#: use them mid-reply (the released Chinese replies do, and SAGE did not mind): "I understand",
#: "honestly", "don't worry", "it sounds like" (docs/simulator.md).
_EN_OPENING = re.compile(
    r"^(?:hi|hello|hey|dear|oh|ah|aw+|wow|ugh|oof|yikes|"
    r"(?:i'm|i am) (?:so |really |very |truly |deeply )?sorry|so sorry|sorry (?:to hear|about|for|that)|"
    r"thanks?(?: you)?(?: so much)? for (?:sharing|telling|opening|reaching|letting|trusting)|"
    r"don't apologi[sz]e|no need to apologi[sz]e|"
    r"(?:it's|it is|that's|that is) (?:completely |totally |perfectly |so |really |very )?"
    r"(?:normal|understandable|okay|ok|natural|fine)|"
    r"i hear you|i can (?:only )?imagine|"
    r"i'm (?:so )?glad (?:you|to hear)|congratulations|congrats)\b"
)
_ZH_OPENING = re.compile(
    r"^(?:你好|嗨|哎|唉|哇|天哪|抱歉|对不起|真(?:的)?(?:很)?抱歉|听到.{0,12}(?:难过|遗憾|抱歉|心疼)|"
    r"谢谢你(?:愿意)?(?:分享|告诉|说)|别道歉|不用道歉|"
    r"(?:这|这种感觉|你的感受)?(?:完全|真的)?(?:可以理解|很正常))"
)
#: Sentences that close a reply (an offer to talk again, a farewell, a conclusion; not wishes such as
#: "good luck" / "祝你…", which the released replies use mid-reply and SAGE rated highly): a reply that
#: goes on with more content after one went on after saying goodbye (a short afterthought such as
#: "You've got this!" or "加油！" is part of the sign-off). Matched anywhere in a sentence.
_EN_CLOSING = re.compile(
    r"\b(?:let me know|feel free|hope (?:this|that|it) helps|take care|"
    r"don't hesitate|have a (?:great|good|nice|wonderful|lovely) (?:day|night|evening|weekend|time)|"
    r"keep (?:me posted|in touch)|talk soon|bye|"
    r"in conclusion|in summary|to sum up|all in all|ultimately|overall)\b"
)
_ZH_CLOSING = re.compile(
    r"希望(?:这些|这|我的话)?(?:能)?(?:对你)?有(?:所)?帮助|随时(?:告诉|找|联系)我|保重|再见|拜拜|"
    r"有(?:什么)?需要(?:的话)?(?:随时)?(?:告诉|找)我"
)
#: Openings that point back at something said before (a connective, "In this case", "That's why", "This
#: means"): no reply starts on one ("This can be so hard" can, the user's message being what "this" is).
#: The single-word connectives are :attr:`XLLexicon.connectives`.
_EN_LEAD = re.compile(
    r"^(?:for (?:example|instance)|in fact|anyway|plus|still|yet|after that|as a result|because|or|again|"
    r"(?:that's|that is|this is) (?:why|because|how)|in (?:this|that|such|these|those) "
    r"(?:case|cases|situation|situations|sense)|on the other hand|even so|that said|in addition|"
    r"similarly|likewise|meanwhile|as (?:such|mentioned|i said)|like i said|with that|by doing so|"
    r"(?:this|that) (?:is where|means|doesn't mean|way|approach))\b"
)

_NUMBERED = re.compile(r"(?m)^\s*(?:\*\*)?(\d{1,2})[.)、]")
_EN_ORDINALS = {
    "first": 1,
    "firstly": 1,
    "second": 2,
    "secondly": 2,
    "third": 3,
    "thirdly": 3,
    "finally": 9,
    "lastly": 9,
}
_ZH_ORDINALS = {"首先": 1, "第一": 1, "其次": 2, "第二": 2, "第三": 3, "最后": 9}


def _opening_order(sents: Sequence[str], language: str) -> list[int]:
    """The rank of each sentence that opens on an ordinal ("First," = 1, "Finally," = 9), in order."""
    ranks: list[int] = []
    for sent in sents:
        low = sent.lower().lstrip("*-•# ")
        if language == "zh":
            ranks.extend(r for w, r in _ZH_ORDINALS.items() if low.startswith(w))
        elif (m := EN_WORD.match(low)) and m.group(0) in _EN_ORDINALS:
            ranks.append(_EN_ORDINALS[m.group(0)])
    return ranks


def _misplaced(sents: Sequence[str], language: str) -> int:
    """Sentences out of their place: an opening after a sentence that is not one, a closing before one
    that is not one (a reply may open or close with several)."""
    lows = [s.lower().lstrip("*-•#\"'“‘( ") for s in sents]
    opening, closing = (_ZH_OPENING, _ZH_CLOSING) if language == "zh" else (_EN_OPENING, _EN_CLOSING)
    opens = [bool(opening.match(s)) for s in lows]
    closes = [bool(closing.search(s)) and not o for s, o in zip(lows, opens, strict=True)]
    content = [not c and _substantive(s, language) for s, c in zip(lows, closes, strict=True)]
    late = sum(1 for i, o in enumerate(opens) if o and not all(opens[:i]))
    early = sum(1 for i, c in enumerate(closes) if c and any(content[i + 1 :]))
    return late + early


def _substantive(sentence: str, language: str) -> bool:
    """More than a short afterthought: five words or more (English), eight CJK characters (Chinese)."""
    if language == "zh":
        return len(CJK_CHAR.findall(sentence)) >= 8
    return len(EN_WORD.findall(sentence)) >= 5


def _opens_on_lead(opener: str, language: str) -> bool:
    """Whether the first sentence opens on a connective or a phrase that points back ("In this case")."""
    lex = XL_LEXICONS[language]
    if language == "zh":
        return any(opener.startswith(c) for c in lex.connectives)
    word = EN_WORD.match(opener)
    return bool(word and word.group(0) in lex.connectives) or bool(_EN_LEAD.match(opener))


def order_faults(sents: Sequence[str], text: str, language: str) -> int:
    """How many things are out of their order: opening on a connective, a numbered list that does not
    start at 1 or goes backwards (other than restarting at 1), "First … Finally" out of sequence, and
    every opening or closing sentence out of its place (:func:`_misplaced`)."""
    numbers = [int(n) for n in _NUMBERED.findall(text)]
    ranks = _opening_order(sents, language)
    opener = sents[0].lower().lstrip("*-•#\"'“‘( ") if sents else ""
    sequence = (
        (numbers and numbers[0] != 1)
        or any(b < a and b != 1 for a, b in itertools.pairwise(numbers))
        or ranks != sorted(ranks)
        or (ranks and ranks[0] != 1 and len(ranks) > 1)
    )
    return int(_opens_on_lead(opener, language)) + int(bool(sequence)) + _misplaced(sents, language)


#: Graded sentence roles (English): what a reply says first (taking the user's message up as a whole: regret,
#: "don't worry", "it's normal", "to be honest"), what it says last (an offer, a question, "remember", "I'm
#: here"), and between them its content. A sentence that opens on a word pointing back ("they", "this",
#: "but", "also", "just") or says "another" / "as well" / "in this case" cannot come first either. Softer
#: than :data:`_EN_OPENING` / :data:`_EN_CLOSING` (which count whole faults): only the *share* of sentence
#: pairs in the wrong order of roles counts (:func:`role_disorder`), so a mid-reply "don't worry" costs a
#: little, and a shuffled reply, whose roles land anywhere, costs more than the same sentences in order.
_EN_ROLE_OPEN = re.compile(
    r"\b(?:sorry|don't worry|to be honest|honestly|i understand|i can see|it sounds|sounds like|"
    r"(?:it's|it is|that's|that is) (?:\w+ )?(?:normal|understandable|okay|natural|disappointing|tough|hard|a lot)|"
    r"i hear|thank you|thanks|oh|wow|congrat\w*|i'm so|that must)\b"
)
_EN_POINTING_BACK = """they them their he she his her this that these those such also but and so then however
another plus still yet or because just instead again"""
_EN_ROLE_BACK_FIRST = frozenset(_EN_POINTING_BACK.split())
#: "That sounds hard", "This must be exhausting": "that" / "this" here is the user's message, so such a
#: sentence opens a reply.
_EN_ROLE_ON_MESSAGE = re.compile(r"(?:that|this|it)(?:'s| is)? (?:\w+ )?(?:sounds|must|seems|looks)\b")
_EN_ROLE_BACK = re.compile(
    r"\b(?:also|another|too|again|other|as well|in this case|in this situation|as a result|here's the thing|"
    r"anyway)\b"
)
_EN_ROLE_CLOSE = re.compile(
    r"\b(?:let me know|feel free|if you(?:'d| would)? (?:like|want|need)|i'm here|i am here|remember|hope|"
    r"take care|you've got this|you got this|good luck|keep|don't hesitate|whenever|anytime|any time)\b"
)


def _role(sentence: str) -> int:
    """0 opening, 1 content, 2 content that points back (cannot open the reply), 3 closing (an offer, a
    question)."""
    low = sentence.lower().lstrip("*-•#\"'“‘( ")
    first = m.group(0) if (m := EN_WORD.match(low)) else ""
    if (_EN_ROLE_OPEN.search(low) and first not in _EN_ROLE_BACK_FIRST) or _EN_ROLE_ON_MESSAGE.match(low):
        return 0
    if _EN_ROLE_CLOSE.search(low) or low.endswith("?"):
        return 3
    return 2 if first in _EN_ROLE_BACK_FIRST or _EN_ROLE_BACK.search(low) else 1


_MARKED_SENTENCE = re.compile(r"[^.!?…\n]+(?:[.!?…]+[\"'”’)]*)?")


def role_disorder(text: str, language: str) -> float:
    """The share of sentence pairs whose roles (:func:`_role`) come in the wrong order, 0 to 1 (English;
    0 for Chinese, which no contrast set checks and whose user is the learned appraisal)."""
    sents = [s.strip() for s in _MARKED_SENTENCE.findall(text) if s.strip()]
    if language != "en" or len(sents) < 2:
        return 0.0
    roles = [_role(s) for s in sents]
    # A pointing-back sentence may stand anywhere among the content except first.
    ranks = [roles[0], *(1 if r == 2 else r for r in roles[1:])]
    wrong = sum(1 for a, b in itertools.combinations(ranks, 2) if a > b)
    return wrong / (len(roles) * (len(roles) - 1) / 2)


def structure_faults(reply: str, language: str) -> dict[str, float]:
    """The :data:`STRUCTURE_PENALTIES` that apply to ``reply`` (empty for a well-formed reply)."""
    text = reply.strip()
    out: dict[str, float] = {}
    if not text:
        return out
    if not _ENDS_CLEANLY.search(text):
        out["cut_off"] = STRUCTURE_PENALTIES["cut_off"]
    sents = sentences(text)
    long_ones = [s.lower() for s in sents if len(s) >= (8 if language == "zh" else 15)]
    if len(long_ones) != len(set(long_ones)):
        out["repeats_sentence"] = STRUCTURE_PENALTIES["repeats_sentence"]
    faults = min(MAX_ORDER_FAULTS, order_faults(sents, text, language))
    if faults:
        out["out_of_order"] = STRUCTURE_PENALTIES["out_of_order"] * faults
    if disorder := role_disorder(text, language):
        out["role_disorder"] = round(STRUCTURE_PENALTIES["role_disorder"] * disorder, 4)
    return out


#: Whether a reply is a reply to *this* user (English; set by us, like :data:`STRUCTURE_PENALTIES`): a
#: reply written for someone else takes up none of this user's own words. Earned per content word of the
#: user's last message that the reply takes up, saturating (one word 0.97, two 1.47, three 1.74, at most
#: 2). A reward, not a penalty for taking up nothing: a short generic reply ("That sounds really painful.
#: What part of it weighs on you most?") takes up nothing and is not a fault (docs/simulator.md).
TAKES_UP_WEIGHT = 2.0


def uptake_features(reply: str, last_user: str, profile: XLProfile) -> dict[str, float]:
    """``{"takes_up": …}`` for an English reply that takes up words of the user's last message (else empty).

    The fitted ``user_reuse`` / ``user_share`` features see the same words, but their Chinese weights are
    small beside style (apologies, advice, length), so two replies by one model are told apart by their
    style rather than by whom they answer (docs/simulator.md, the off-topic contrast class)."""
    if profile.language != "en":
        return {}
    taken = len(content_tokens(reply, "en") & content_tokens(last_user, "en"))
    return {"takes_up": round(TAKES_UP_WEIGHT * _saturate(taken, 1.5), 4)} if taken else {}


#: The same question as :data:`TAKES_UP_WEIGHT`, asked by meaning when the English user has a sentence
#: embedder (``simulator.embed: true``), in place of ``takes_up``, since it sees paraphrases as well as
#: the words: ``REPLIES_TO_WEIGHT * (cosine - REPLIES_TO_CENTRE)`` of the reply with the user's last
#: message, at least :data:`REPLIES_TO_FLOOR`. So a reply to someone else's problem (cosine ~0.05) loses
#: about 3.5, and a reply about this user's words gains. Set by us (docs/simulator.md), like the
#: structure penalties: the weight is the smallest with the most off-topic wins on the development half
#: of the contrast set (28/30; measured, not tuned, on the held-out half), and the centre puts our warm
#: on-topic fixture where ``takes_up`` puts it (+1.16 against +1.19 on average; mean cosine 0.516).
REPLIES_TO_WEIGHT = 10.0
REPLIES_TO_CENTRE = 0.4
REPLIES_TO_FLOOR = -4.0


def replies_to_features(similarity: float) -> dict[str, float]:
    """``{"replies_to": …}`` from the embedding cosine of the reply with the user's last message."""
    value = max(REPLIES_TO_FLOOR, REPLIES_TO_WEIGHT * (similarity - REPLIES_TO_CENTRE))
    return {"replies_to": round(value, 4)}


def xl_context_features(profile: XLProfile, emotion: int, turn: int, changes: Sequence[int]) -> list[float]:
    """The user's state: emotion, turn, style, and its own earlier changes in this dialogue."""
    e = emotion / 100.0
    return [e, e * e, turn / 10.0, *state_features(profile.style, changes)]


def xl_features(
    reply: str,
    profile: XLProfile,
    *,
    last_user: str,
    previous: Sequence[set[str]],
    emotion: int,
    turn: int,
    changes: Sequence[int] = (),
) -> list[float]:
    """The whole feature vector (:data:`XL_NAMES` order) of one turn."""
    text, _ = xl_text_features(reply, last_user, previous, profile)
    return text + xl_context_features(profile, emotion, turn, changes)


class TransferModel:
    """The fitted weights of the transfer appraisal, with their provenance. Immutable once loaded."""

    def __init__(self, data: dict[str, Any]) -> None:
        if data.get("features_version") != XL_FEATURES_VERSION or list(data.get("names", [])) != list(
            XL_NAMES
        ):
            raise ConfigError(
                f"transfer appraisal: artefact has features_version {data.get('features_version')!r} and "
                f"{len(data.get('names', []))} features, this rlver reads {XL_FEATURES_VERSION!r} with "
                f"{len(XL_NAMES)}; refit with bench/transfer_appraisal_fit.py"
            )
        self.data = data
        self.weights: list[float] = list(data["weights"])
        self.mean: list[float] = list(data["mean"])
        self.scale: list[float] = list(data["scale"])
        #: The range each feature took in the fitting data: a value outside it is clipped to it, since the
        #: fit says nothing about values it never saw (English replies can fall outside Chinese ranges).
        self.low: list[float] = list(data["low"])
        self.high: list[float] = list(data["high"])
        self.intercept = float(data["intercept"])
        self.slope = float(data["calibration"]["slope"])
        self.offset = float(data["calibration"]["offset"])

    def contributions(self, features: Sequence[float]) -> dict[str, float]:
        """Each feature's part of the raw score (standardised value times weight)."""
        return {
            name: w * (min(hi, max(lo, x)) - m) / s
            for name, w, x, m, s, lo, hi in zip(
                XL_NAMES, self.weights, features, self.mean, self.scale, self.low, self.high, strict=True
            )
        }

    def score(self, features: Sequence[float]) -> float:
        """The raw score (the intercept plus every contribution)."""
        return self.intercept + sum(self.contributions(features).values())

    def change(self, score: float, max_change: int = 10) -> int:
        """An integer change on the recorded scale (see :func:`rlver.simulator.offline.learned.round_change`)."""
        return round_change(self.slope * score + self.offset, max_change)

    def describe(self) -> dict[str, Any]:
        """Provenance for run manifests: data, settings, validation on Chinese."""
        return {
            "artefact": XL_ARTEFACT_NAME,
            "features_version": XL_FEATURES_VERSION,
            "fitted_on": "zh (released SAGE judgements); applied to en through the English features",
            "data": self.data.get("data", []),
            "settings": self.data.get("settings", {}),
            "validation": self.data.get("validation", {}),
        }


def xl_artefact_path() -> Path:
    return Path(__file__).resolve().parent / "data" / XL_ARTEFACT_NAME


@lru_cache(maxsize=4)
def load_transfer_model(path: str | None = None) -> TransferModel:
    """The shipped transfer model (or the artefact at ``path``), loaded once per process."""
    p = Path(path) if path else xl_artefact_path()
    return TransferModel(read_artefact(p, "transfer appraisal", "bench/transfer_appraisal_fit.py"))


__all__ = [
    "XL_NAMES",
    "TransferModel",
    "XLProfile",
    "content_tokens",
    "load_transfer_model",
    "sentences",
    "xl_features",
    "xl_text_features",
]
