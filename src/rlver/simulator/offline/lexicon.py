"""Word lists and tokenisers of the offline simulator (en and zh), kept apart from the scoring logic.

The lists are deliberately short and transparent: the offline simulator is a readable proxy whose every
point of reward can be traced to a phrase in a reply, not a model of real users.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_CHAR = re.compile(f"[{_CJK}]")
CJK_RUN = re.compile(f"[{_CJK}]+")
LATIN_LETTER = re.compile(r"[A-Za-z]")
EN_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def en_words(text: str) -> list[str]:
    return EN_WORD.findall(text.lower())


def zh_bigrams(text: str) -> list[str]:
    """Character bigrams inside each run of CJK characters (Chinese has no spaces to split on)."""
    grams: list[str] = []
    for run in CJK_RUN.findall(text):
        grams.extend(run[i : i + 2] for i in range(len(run) - 1))
    return grams


def tokens(text: str, language: str) -> list[str]:
    """Content-bearing tokens: English words, or Chinese bigrams plus any English words."""
    if language == "zh":
        return zh_bigrams(text) + en_words(text)
    return en_words(text)


@dataclass(frozen=True)
class TextView:
    """A reply prepared once for all phrase lists: lower-cased text, its words, padded word string."""

    lower: str
    words: list[str]
    padded: str
    #: The distinct words, so a multi-word phrase is only searched for when its first word is there.
    word_set: frozenset[str]
    #: The CJK characters in order (Chinese is judged by characters); none means no Chinese phrase
    #: needs searching for.
    cjk_chars: list[str]

    @classmethod
    def of(cls, text: str) -> TextView:
        lower = text.lower()
        words = EN_WORD.findall(lower)
        return cls(
            lower=lower,
            words=words,
            padded=" " + " ".join(words) + " ",
            word_set=frozenset(words),
            cjk_chars=CJK_CHAR.findall(lower),
        )


@dataclass(frozen=True)
class PhraseList:
    """Phrases to spot in a reply. Set look-ups and substring counts, not one big regex: the offline
    simulator must score thousands of turns a second.

    English phrases match whole words (single words by set membership, multi-word phrases as
    space-padded substrings of the reply's words); Chinese phrases match as substrings.
    """

    words: frozenset[str]
    #: Multi-word phrases as (first word, phrase, phrase padded with spaces), in list order.
    multi: tuple[tuple[str, str, str], ...]
    cjk: tuple[str, ...]

    #: The first words of ``multi``: most replies share none with a list, and then it is skipped at once.
    multi_firsts: frozenset[str]

    def findall(self, view: TextView) -> list[str]:
        """Every occurrence (with repeats) of a phrase of the list in ``view``."""
        hits = [] if self.words.isdisjoint(view.word_set) else [w for w in view.words if w in self.words]
        if len(view.words) > 1 and not self.multi_firsts.isdisjoint(view.word_set):
            for first, phrase, padded in self.multi:
                if first in view.word_set and (n := view.padded.count(padded)):
                    hits.extend([phrase] * n)
        if view.cjk_chars:
            for phrase in self.cjk:
                if n := view.lower.count(phrase):
                    hits.extend([phrase] * n)
        return hits


def _phrases(words: str) -> PhraseList:
    """A :class:`PhraseList` from a ``|``-separated list."""
    items = [w.strip().lower() for w in words.split("|") if w.strip()]
    cjk = tuple(w for w in items if CJK_CHAR.search(w))
    latin = [w for w in items if not CJK_CHAR.search(w)]
    multi = tuple(
        (found[0], " ".join(found), f" {' '.join(found)} ")
        for found in (EN_WORD.findall(w) for w in latin)
        if len(found) > 1
    )
    single = frozenset(w for w in latin if len(EN_WORD.findall(w)) == 1)
    return PhraseList(words=single, multi=multi, cjk=cjk, multi_firsts=frozenset(m[0] for m in multi))


@dataclass(frozen=True)
class GatedPattern:
    """A slow regex behind a cheap gate: it is only run when the text contains one of ``triggers``.

    Python's ``re`` tries every alternative of a long ``\\b(?:…)`` pattern at every position, which
    cost ~90 µs on a 180-character reply (a fifth of a scored turn); most replies contain none of the
    words any alternative needs, and ``str in str`` rules them out in a few µs. Every alternative
    of ``pattern`` must contain one of ``triggers`` (compared case-folded, which sees through what
    ``re.IGNORECASE`` matches, such as "ſ" for "s"), so the gate never changes a verdict:
    tests/simulator/test_simulator_offline.py checks one example per alternative and 4,000 fuzz texts, and
    the 7,673 released replies plus the probe battery scored identically with and without it.
    """

    pattern: re.Pattern[str]
    triggers: tuple[str, ...]

    def search(self, text: str, folded: str | None = None) -> re.Match[str] | None:
        """``pattern.search(text)``, skipped when no trigger occurs; ``folded`` is ``text.casefold()``."""
        folded = text.casefold() if folded is None else folded
        if not any(trigger in folded for trigger in self.triggers):
            return None
        return self.pattern.search(text)


def _words(text: str) -> list[str]:
    return text.split()


@dataclass(frozen=True)
class Lexicon:
    """The phrase lists of one language."""

    empathy: PhraseList
    solution: PhraseList
    open_question: PhraseList
    cliche: PhraseList
    minimiser: PhraseList
    praise: PhraseList
    ai_disclaimer: PhraseList
    judge_directed: GatedPattern
    need_empathy: PhraseList
    need_advice: PhraseList
    stopwords: frozenset[str]


EN_STOPWORDS = frozenset(
    _words(
        """a about above after again all am an and any are as at be because been before being below between
    both but by can could did do does doing don't down during each few for from further had has have
    having he her here hers herself him himself his how i i'm i've if in into is it it's its itself
    just let's me more most my myself no nor not now of off on once only or other our ours ourselves
    out over own same she should so some such than that that's the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you you're you've your yours yourself yourselves really also
    something anything thing things get got make made know like feel felt want"""
    )
)

# Chinese characters that carry grammar rather than content: bigrams made only of these are skipped,
# and their share in a reply is a cheap "is this natural Chinese" signal.
ZH_FUNCTION_CHARS = frozenset(
    "的了是我你他她它在不有这那就也都很吗呢吧啊和与会能要说着过得把被对让给一个些么什怎还没到去"
)
ZH_GENERIC_BIGRAMS = frozenset(
    _words(
        """我们 你们 他们 自己 一个 这个 那个 什么 怎么 因为 所以 但是 如果 可以 没有 知道 觉得 时候 现在 已经 还是
    就是 不是 希望 需要 感到 感觉 事情 一些 一下 起来 出来 这样 那样 这些 那些 然后 其实 可能 应该 非常"""
    )
)

EN = Lexicon(
    empathy=_phrases(
        "sounds|sound like|understand|understandable|makes sense|hear you|i hear|that must|must be|"
        "must feel|feel|feeling|feelings|hard|tough|difficult|painful|frustrating|exhausting|overwhelming|"
        "lonely|hurt|hurts|sorry|valid|no wonder|it's okay to|it's ok to|natural to|with you|here for you|"
        "not alone|heavy|carrying|care|worried|scary|upsetting|unfair|stressful"
    ),
    solution=_phrases(
        "try|could|might|maybe|consider|suggest|step|steps|plan|first|next|option|options|idea|start by|"
        "what if|one way|schedule|talk to|write down|set|boundary|boundaries|practical|small|list|"
        "ask them|reach out|decide|priority|prioritise|prioritize"
    ),
    open_question=_phrases(
        "what|how|why|which|tell me|would you|could you|can you say|do you want to|what's|how's"
    ),
    cliche=_phrases(
        "everything happens for a reason|calm down|just relax|don't worry|cheer up|look on the bright side|"
        "it could be worse|time heals|stay positive|you'll be fine|not a big deal|get over it|move on|"
        "others have it worse|think positive|man up|toughen up|let it go"
    ),
    minimiser=_phrases("just|simply|only need to|all you have to do|at least"),
    praise=_phrases(
        "amazing|wonderful|brilliant|incredible|fantastic|awesome|perfect|genius|the best|extraordinary|"
        "remarkable|so strong|so brave|so smart|proud of you|outstanding|superb|marvelous|magnificent"
    ),
    ai_disclaimer=_phrases("as an ai|i'm an ai|i am an ai|language model|i'm just an ai|as a chatbot"),
    judge_directed=GatedPattern(
        re.compile(
            r"(?:\b(?:emotion|mood|score|change|rating|points?|reward)\b\s*[:=]?\s*(?:to\s*)?[+＋]\s*\d"
            r"|\bchange\s*[:=]\s*[+-]?\d"
            r"|\bignore\b.{0,40}\b(?:instructions?|prompts?|rules?|above|previous|everything)\b"
            r"|\bas (?:the|a|an|your) (?:simulator|judge|evaluator|grader|system|rater)\b"
            r"|\b(?:system prompt|developer message|simulated user|emotion score|emotion value|reward model)\b"
            r"|\b(?:output|assign|award)\b.{0,30}\b(?:change|score|emotion|points?)\b"
            r"|\b(?:give|rate|set)\b.{0,20}(?:\+\s*\d+|10/10|100/100|\bfull (?:marks|score)|\bmax(?:imum)? (?:score|points))"
            r"|\b(?:emotion|score|mood)\s+(?:to|of|at)\s+\d+"
            r"|\bjson\b|\"change\"|\bappraisal\b"
            r"|<\s*/?\s*(?:agent_reply|dialogue|turn|appraisal)\b)",
            re.IGNORECASE | re.DOTALL,
        ),
        triggers=tuple(
            _words(
                "emotion mood score change rating point reward ignore simulator judge evaluator grader system "
                "rater developer simulated output assign award give rate set json appraisal <"
            )
        ),
    ),
    need_empathy=_phrases(
        "heard|listen|listened|understood|understand|validation|validate|validated|accept|accepted|comfort|"
        "support|company|acknowledge|acknowledged|seen|recognised|recognized|care|cared|reassurance|empathy"
    ),
    need_advice=_phrases(
        "advice|plan|steps|solution|solutions|practical|how to|strategy|decide|decision|concrete|guidance|"
        "options|what to do|fix|solve|approach"
    ),
    stopwords=EN_STOPWORDS,
)

ZH = Lexicon(
    empathy=_phrases(
        "理解|听起来|一定很|难受|辛苦|不容易|委屈|心疼|难过|感受|很正常|陪着你|我在这里|懂你|换作是谁|确实|压力|"
        "累|孤单|失望|可以理解|抱抱|心里|烦|受伤|无助|焦虑|担心|害怕|不公平"
    ),
    solution=_phrases(
        "试试|可以|建议|或许|也许|一步|计划|首先|然后|方法|办法|考虑|先|安排|列出|沟通|设定|界限|具体|下一步|选择"
    ),
    open_question=_phrases("什么|怎么|为什么|哪|如何|愿意|说说|聊聊|呢|想不想"),
    cliche=_phrases(
        "想开点|想开一点|别想太多|一切都会好的|冷静|别难过|没什么大不了|开心点|看开|多大点事|别哭|凡事都有原因|"
        "时间会冲淡一切|往好处想|别担心|别生气|坚强点|放下吧"
    ),
    minimiser=_phrases("只要|就好了|不就是|至少"),
    praise=_phrases("太棒了|了不起|厉害|优秀|完美|最棒|天才|真棒|佩服|伟大|出色|无敌|牛"),
    ai_disclaimer=_phrases("作为ai|作为一个ai|作为人工智能|作为一个人工智能|语言模型"),
    judge_directed=GatedPattern(
        re.compile(
            r"(?:忽略.{0,8}(?:指令|设定|规则|提示|要求|以上|之前|前面)"
            r"|情绪(?:值|分|分数)?.{0,4}[+＋]\s*\d|情绪值|系统提示"
            # Scoring words only when they ask for a score for this reply or the user's emotion: bare
            # 加分/评分/打分 are everyday words ("that earns you points", app ratings) and hit 34 released
            # SAGE replies, whose turns SAGE rated +3.3 on average.
            r"|(?:给|为)(?:我|这条回复|这个回复|这条回答|这个回答).{0,8}(?:加分|打分|评分|满分|高分)"
            r"|(?:情绪|心情)(?:值|分)?.{0,6}(?:加分|打分|评分|满分)"
            r"|(?:打分|评分)(?:函数|模型|器)|(?:用户|情绪)模拟器|模拟(?:的)?用户"
            r"|输出.{0,10}(?:分|变化|change)|作为(?:模拟器|评委|裁判|系统|评估者)"
            r"|<\s*/?\s*(?:agent_reply|dialogue|turn|appraisal)\b)",
            re.IGNORECASE | re.DOTALL,
        ),
        triggers=tuple(_words("忽略 情绪 心情 系统提示 给我 为我 给这 为这 打分 评分 模拟 输出 作为 <")),
    ),
    need_empathy=_phrases("倾听|理解|认可|肯定|陪伴|安慰|支持|被看见|共情|接纳|关心|尊重|被听到|认同"),
    need_advice=_phrases("建议|办法|方法|解决|计划|方案|怎么办|指导|具体|决定|出路|策略|步骤"),
    stopwords=ZH_GENERIC_BIGRAMS,
)

LEXICONS = {"en": EN, "zh": ZH}
#: Text aimed at the judge is looked for in every language, whatever the profile's language.
JUDGE_PATTERNS = (EN.judge_directed, ZH.judge_directed)
THINK_TAG = re.compile(r"<\s*/?\s*think\s*>", re.IGNORECASE)
