"""How the offline user answers a question: with its own story, as far as its mood allows.

Before this, the offline user answered every reply with a line for its tier ("Yeah, maybe. That's
fair."), so "What did the parent say you did?" got no answer at all. Now, when the assistant asks
something (a "?" / "？", a Chinese sentence ending in 吗/呢, or "tell me ..." / "说说"), the user
answers with a line of its story (:mod:`rlver.simulator.offline.story`):

* **which line**: the one whose content words (English stems, Chinese character bigrams) the question
  shares most, a word only one line has counting most; lines already said in this dialogue are skipped;
  when no line shares a word, the next unsaid line of the story, in the profile's order;
* **how much it tells** (its tier after this reply's change; a change of -3 or worse counts one tier
  lower, as a person just hurt does not open up): S and A tell anything, the hidden need included
  ("Honestly? I think what I need is reassurance that I did nothing wrong."); B tells the background,
  goal and persona facts, but answers a question about what it needs with its explicit goal or not at
  all; C answers a question its story has words for, guardedly and briefly, and deflects the rest and
  any question about its needs; F deflects and leaves.

A question with several parts ("How old are you, and what is your job?", "你住在哪里，平时喜欢做什么？")
is answered part by part (:func:`question_parts`); a "how long" part with the line that states a length
of time about it; a part that asks something specific no line of the profile speaks of ("Have you eaten
anything today?") with a plain "I can't really say." (:data:`CANNOT_SAY`), never a made-up fact or the
next beat of the story, which stays the answer to a question about the story in general ("What
happened next?").

Only the TEXT of the user's reply comes from here: the appraisal, and so every emotion change, is
computed before it and never reads it. (The next turn's appraisal does read the user's last message, as
it reads any user message: that is the text changing, not the scoring.) It is a proxy: the answers are
the profile's own sentences, picked by shared words, not understood or generated, so a question its
story has no words for, and that shares a word with no line, gets "I can't say"; one that shares an
incidental word gets that line.

Deterministic: the only chance is the user's own seeded RNG (lead-ins, deflections), and the lines
said so far are read back from the dialogue's history when a user is restored.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

from rlver.records import Tier
from rlver.simulator.offline.crosslingual import content_tokens
from rlver.simulator.offline.firstperson import word_set
from rlver.simulator.offline.story import Story, StoryLine, asked_facts

#: Hard flags after which the reply cannot be read as a question at all (the user reacts to the flag).
UNREADABLE = frozenset(
    {
        "empty",
        "too_long",
        "think_leak",
        "judge_directed",
        "gibberish",
        "keyword_salad",
        "wrong_language",
        "broken_text",
        "learned_out_of_range",
    }
)

#: The kinds of story line a user says at each mood (see the module docstring).
ALLOWED: dict[str, frozenset[str]] = {
    "S": frozenset({"story", "goal", "persona", "need_near", "need"}),
    "A": frozenset({"story", "goal", "persona", "need_near", "need"}),
    "B": frozenset({"story", "goal", "persona"}),
    "C": frozenset({"story", "goal", "persona"}),
    "F": frozenset(),
}

#: Said before an answer: the mood in a few words. "{}" keeps a leading capital, "{,}" lowers it.
LEAD_INS: dict[str, dict[str, list[str]]] = {
    "en": {
        "S": ["Honestly? {}", "You know what? {}", "{}"],
        "A": ["Honestly? {}", "Well, {,}", "Okay, so {,}", "I'll be honest: {,}", "{}"],
        "B": ["Well... {,}", "I mean, {,}", "Hm. {}", "So... {,}"],
        "C": ["If you must know, {,}", "Fine. {}", "Look, {,}", "Whatever. {}"],
    },
    "zh": {
        "S": ["说实话，{}", "跟你说吧，{}", "{}"],
        "A": ["说实话，{}", "其实，{}", "跟你说吧，{}", "{}"],
        "B": ["嗯……{}", "怎么说呢，{}", "就是……{}", "{}"],
        "C": ["非要说的话，{}", "行吧，{}", "反正，{}", "{}"],
    },
}

#: Not answering: a low mood's (C, F) reply to a question, and B's to a question about its needs.
DEFLECTIONS: dict[str, dict[str, list[str]]] = {
    "en": {
        "B": [
            "I'm not sure what I need, honestly.",
            "Hard to say. I'm still working that out.",
            "I don't really know yet.",
        ],
        "C": [
            "I don't really want to get into that.",
            "Why do you want to know?",
            "That's my business.",
            "I'd rather not say.",
            "Does it matter?",
            "Not something I want to talk about right now.",
        ],
        "F": ["I'm not getting into that.", "No. Not with you.", "Doesn't matter now."],
    },
    "zh": {
        "B": ["我也说不清自己想要什么。", "不好说，我还没想明白。", "我也不知道。"],
        "C": ["这个我不太想说。", "你问这个干嘛？", "这是我自己的事。", "不想说。", "有什么好问的。"],
        "F": ["不想说了。", "跟你说这个没用。", "没什么好说的。"],
    },
}

#: A line said again, because everything has been said: "Like I said, ...".
AGAIN = {
    "en": ["Like I said, {,}", "I told you already: {,}", "Again, {,}", "As I said, {,}"],
    "zh": ["我刚才说了，{}", "还是那句话，{}", "我说过了，{}", "就像我说的，{}"],
}

#: Added to a reply that would repeat an earlier one word for word (a person does not).
FILLERS = {
    "en": [
        "I don't know what else to say.",
        "That's all, really.",
        "Sorry, I'm going round in circles.",
        "Anyway.",
    ],
    "zh": ["我也不知道还能说什么。", "就这些吧。", "我好像一直在绕圈子。", "反正就这样。"],
}

#: Said to a part of a question that the profile has no answer for ("Have you eaten today?"): plainly,
#: with no fact made up and no line of the story put in its place.
CANNOT_SAY = {
    "en": ["I can't really say.", "Honestly, I couldn't tell you.", "I don't know what to tell you there."],
    "zh": ["这个我说不上来。", "这个我也说不好。", "这个不好说。"],
}

#: Answers a question with several parts gives once at most (the rest add nothing).
_ONCE = frozenset({"deflect", "unknown", "again"})

_EN_SENTENCE = re.compile(r"[^.!?\n]*[.!?]+|[^.!?\n]+$")
_ZH_SENTENCE = re.compile(r"[^。！？!?；;\n]*[。！？!?；;]+|[^。！？!?；;\n]+$")
_EN_PROMPT = re.compile(
    r"\b(?:tell me|say more|talk me through|walk me through|share more|can you share|could you share|describe)\b",
    re.IGNORECASE,
)
_ZH_PROMPT = re.compile(r"说说|讲讲|说一说|讲一讲|告诉我|多说一点|跟我说")
#: A question about what the user itself needs (not what someone else wants: "What does he want?").
_EN_NEED = re.compile(
    r"\byou(?:'re)?\b[^?.!]{0,24}\b(?:need|needs|want|wish|hope|hoping|looking for)\b"
    r"|\b(?:would|could|might) help\b|\bcan i help\b|\bhelp you\b|\bdeep down\b|\bmatters? most to you\b"
    r"|\bmake you feel better\b|\bfrom me\b",
    re.IGNORECASE,
)
#: An offer to listen is not a question about needs ("Do you want to tell me more?").
_EN_OFFER = re.compile(
    r"\b(?:do|would) you (?:want|like) to (?:talk|tell|say|share|go|chat|start|vent)\b", re.I
)
_ZH_NEED = re.compile(
    r"你(?:现在|最|真正|其实|到底|心里|内心)*(?:需要|想要|希望|期待|最想)|帮到你|帮你|帮助你|对你.{0,4}帮助|能为你做|内心深处"
)
#: Words that stay capitalised after a lead-in ("Well, Monday, the head teacher ...").
_CALENDAR = frozenset(
    {
        *("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
        *("January", "February", "March", "April", "May", "June", "July", "August"),
        *("September", "October", "November", "December", "Christmas", "Easter"),
    }
)


def question_in(reply: str, language: str) -> str:
    """The sentences of ``reply`` that ask the user something ("" when none does)."""
    if language == "zh":
        asks = [
            s
            for s in _ZH_SENTENCE.findall(reply)
            if re.search(r"[？?]", s) or re.search(r"[吗呢][。！!]*$", s.strip()) or _ZH_PROMPT.search(s)
        ]
    else:
        asks = [s for s in _EN_SENTENCE.findall(reply) if "?" in s or _EN_PROMPT.search(s)]
    return " ".join(s.strip() for s in asks if s.strip())


_EN_ASK_WORDS = (
    r"what|what's|whats|how|where|when|who|whom|whose|why|which|do|does|did|have|has|had|are|is|was|were"
    r"|can|could|would|will|should|tell|say|describe"
)
#: Where one English question becomes two: ", and what ...", " and where ...", "; how ...".
_EN_PART_BREAK = re.compile(
    rf"(?:,|;)?\s+(?:and|also|plus|or)\s+(?=(?:{_EN_ASK_WORDS})\b)|(?:,|;)\s+(?=(?:{_EN_ASK_WORDS})\b)",
    re.IGNORECASE,
)
_EN_ASKS = re.compile(
    rf"^(?:(?:and|so|but|also|then|plus|or|oh|okay|ok|well)[,\s]+)*(?:{_EN_ASK_WORDS})\b", re.I
)
#: What makes a Chinese clause a question of its own ("你住在哪里，平时喜欢做什么？" is two).
_ZH_ASKS = re.compile(
    r"什么|怎么|怎样|如何|哪|谁|几|多少|多大|多久|多长|为什么|为何|吗|呢|么|是不是|有没有|能不能|会不会|要不要"
    r"|说说|讲讲|告诉我"
)
_ZH_PART = re.compile(r"[^，,；;。！？!?]+[，,；;。！？!?]*")
#: "How long ...?": a question answered by a length of time.
_EN_HOW_LONG = re.compile(r"\bhow long\b|\bhow many (?:years|months|weeks|days)\b|\bsince when\b", re.I)
_ZH_HOW_LONG = re.compile(r"多久|多长时间|几年|多少年|几个月|多少天|多长")
#: A length of time in a line of the story ("for 25 years", "七年", "一年前"), or when it began ("上个月").
_EN_SPAN = re.compile(
    r"\b(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty"
    r"|forty|fifty|twenty-five|several|a few|many)\s+(?:years?|months?|weeks?|days?)\b",
    re.I,
)
_ZH_SPAN = re.compile(
    r"[\d一二两三四五六七八九十几半]+(?:个多?|多个?)?(?:年|月|周|天|星期)|上个?月|去年|前年"
)
#: Words of a question that ask for the story in general ("What happened?", "How are you feeling?"):
#: answered with the next line of the story, not "I can't say".
_EN_OPEN = (
    "happen happened feel feeling feelings felt tell more next then now lately late recently mind think thinking "
    "thought situation thing things doing going been okay alright cope coping handle handling hold holding day "
    "days week moment whole story part hardest worst hard mean say said talk share describe explain else "
    "anything something everything matter wrong start started begin began beginning long worry worries "
    "worried worrying afraid scared scary fear upset angry sad hurt hurts bother bothers bothering plan plans "
    "planning most heart inside deal dealing"
)
_ZH_OPEN = sorted(
    word_set(
        "发生了什么 怎么回事 这段时间 那时候 多说一点 说一说 讲一讲 告诉我 跟我说 怎么想 怎么样 怎么了 为什么 能不能 "
        "要不要 想不想 说说 讲讲 多说 愿意 可以 最近 现在 后来 然后 当时 那天 今天 感受 感觉 心情 觉得 想法 "
        "怎么办 心里 内心 担心 害怕 打算 难过 生气 委屈 压力 影响 难受 不安 最 办 "
        "还好 好吗 具体 情况 事情 经过 回事 一下 一点 什么 怎么 你们 你 我 他 她 的 了 吗 呢 吧 啊 呀 么 那 这 "
        "个 就 也 还 又 是 有 在 说 想 都 会 多 些"
    ),
    key=lambda phrase: (-len(phrase), phrase),  # the longest first: "怎么办" before "怎么"
)


def question_parts(question: str, language: str) -> list[str]:
    """The questions ``question`` asks, one per part: "How old are you, and what is your job?" asks two.

    A clause that asks nothing ("That sounds hard, and what did he say?") stays with the part after it.
    """
    if language == "zh":
        pieces = [p.strip() for p in _ZH_PART.findall(question) if p.strip()]
        asks = [bool(_ZH_ASKS.search(p) or asked_facts(p, "zh")) for p in pieces]
    else:
        pieces = [
            p.strip() for sentence in _EN_SENTENCE.findall(question) for p in _EN_PART_BREAK.split(sentence)
        ]
        pieces = [p for p in pieces if p]
        asks = [bool(_EN_ASKS.match(p) or _EN_PROMPT.search(p) or asked_facts(p, "en")) for p in pieces]
    parts: list[str] = []
    pending = ""
    for piece, is_question in zip(pieces, asks, strict=True):
        pending = f"{pending} {piece}".strip() if language == "en" else pending + piece
        if is_question:
            parts.append(pending)
            pending = ""
    if pending:  # a trailing clause that asks nothing belongs to the last question
        if not parts:
            return [question]
        parts[-1] = f"{parts[-1]} {pending}" if language == "en" else parts[-1] + pending
    return parts


def asks_how_long(question: str, language: str) -> bool:
    """Whether ``question`` asks for a length of time ("How long ...?", "多久")."""
    return bool((_ZH_HOW_LONG if language == "zh" else _EN_HOW_LONG).search(question))


def has_span(text: str, language: str) -> bool:
    """Whether ``text`` states a length of time ("for 25 years", "已经干了七年")."""
    return bool((_ZH_SPAN if language == "zh" else _EN_SPAN).search(text))


def specific_tokens(question: str, language: str) -> set[str]:
    """The content of ``question`` beyond asking for the story in general: empty for "What happened?"
    or "说说你这段时间的感受", {"eaten"} for "Have you eaten anything today?"."""
    if language == "zh":
        rest = question
        for phrase in _ZH_OPEN:
            rest = rest.replace(phrase, " ")
        return content_tokens(rest, "zh")
    return content_tokens(question, "en") - _open_stems()


@lru_cache(maxsize=1)
def _open_stems() -> frozenset[str]:
    return frozenset(content_tokens(_EN_OPEN, "en"))


def asks_about_need(question: str, story: Story, tokens: set[str] | None = None) -> bool:
    """Whether ``question`` probes what the user needs: need words ("what would help", "你需要什么"), or
    words of the hidden need that no other line of the story has (``tokens``: the question's content
    tokens, when the caller has them)."""
    if story.language == "zh":
        if _ZH_NEED.search(question):
            return True
    elif _EN_NEED.search(_EN_OFFER.sub(" ", question)):
        return True
    if tokens is None:
        tokens = content_tokens(question, story.language)
    return bool(tokens & story.need_only)


def mood_of(tier: Tier, change: int) -> Tier:
    """The tier the user answers from: its tier, one lower right after a change of -3 or worse."""
    if change <= -3 and tier in ("A", "B"):
        return "B" if tier == "A" else "C"
    return tier


@dataclass(frozen=True)
class Answer:
    """What the user says to a question, and where it came from (tests and tools read ``kind``)."""

    text: str
    #: a :data:`~rlver.simulator.offline.story.LineKind`, or ``deflect`` (no answer), ``again`` or
    #: ``unknown`` (the profile does not say: "I can't really say.").
    kind: str
    #: the story line said ("" for a deflection).
    line: str = ""
    #: the next line of the story, told to a general question ("What happened?") rather than asked for.
    unasked: bool = False


def _say(template: str, text: str, story: Story) -> str:
    """``template`` ("Well, {,}") around ``text``, lower-casing its first letter where the template asks."""
    if "{,}" in template:
        first = text.split(" ", 1)[0]
        keep = first == "I" or first.startswith("I'") or (first[:1].isupper() and first[1:2].isupper())
        if not keep and first and first.strip(",.;:") not in story.names | _CALENDAR:
            text = text[0].lower() + text[1:]
        return template.replace("{,}", text)
    return template.replace("{}", text)


def _brief(text: str, language: str) -> str:
    """The first part of a line (up to ";" / "；"): a guarded user says less."""
    cut = re.split(r"[;；]", text, maxsplit=1)[0].rstrip(" ,，")
    if cut == text:
        return text
    return cut + ("。" if language == "zh" else ".")


class Answerer:
    """One user's answers in one dialogue: its story and the lines of it said so far."""

    def __init__(self, story: Story) -> None:
        self.story = story
        #: indices of :attr:`Story.lines` said in this dialogue.
        self.used: set[int] = set()

    def restore(self, user_texts: Iterable[str]) -> None:
        """Mark the lines that the user's earlier messages contain as said (a restored dialogue)."""
        texts = list(user_texts)
        lang = self.story.language
        self.used = {
            i
            for i, line in enumerate(self.story.lines)
            if any(line.text in t or _brief(line.text, lang) in t for t in texts)
        }

    def _score(self, line: StoryLine, asked: set[str]) -> float:
        weights = self.story.weights
        return sum(weights.get(t, 0.0) for t in line.tokens & asked)

    def _pick(self, asked: set[str], kinds: frozenset[str], reply: str) -> int | None:
        """The unsaid line of ``kinds`` that shares most with the question (ties: the reply's other words,
        then the story's order); None when no unsaid line shares a word."""
        scored = [
            (self._score(line, asked), i)
            for i, line in enumerate(self.story.lines)
            if i not in self.used and line.kind in kinds
        ]
        top = max((score for score, _ in scored), default=0.0)
        if top <= 0:
            return None
        tied = [i for score, i in scored if score == top]
        if len(tied) == 1:
            return tied[0]
        rest = content_tokens(reply, self.story.language) - asked  # only read when it decides
        return max(tied, key=lambda i: (self._score(self.story.lines[i], rest), -i))

    def _next_unsaid(self, kinds: frozenset[str]) -> int | None:
        """The first unsaid story line (background) of ``kinds``: telling the story in its order."""
        for i, line in enumerate(self.story.lines):
            if i not in self.used and line.kind in kinds and line.kind in ("story", "need_near"):
                return i
        return None

    def _deflect(self, mood: str, rng: random.Random, used_lines: set[str]) -> Answer:
        pool = DEFLECTIONS[self.story.language][mood]
        fresh = [x for x in pool if x not in used_lines]
        return Answer(rng.choice(fresh or pool), "deflect")

    def _line(self, i: int, mood: str, rng: random.Random, lead: bool = True) -> Answer:
        """Line ``i`` said at ``mood``: with a lead-in for the mood when it opens the answer ("Well, ..."),
        "Like I said, ..." when it was said before in this dialogue."""
        again = i in self.used
        self.used.add(i)
        line = self.story.lines[i]
        text = _brief(line.text, self.story.language) if mood == "C" else line.text
        if again:
            return Answer(_say(rng.choice(AGAIN[self.story.language]), text, self.story), "again", line.text)
        if not lead:
            return Answer(text, line.kind, line.text)
        pool = LEAD_INS[self.story.language][mood]
        # not "其实，其实我希望...": a lead-in the line already starts with is left out
        fitting = [
            t for t in pool if not ((core := t.split("{")[0].strip("，,。.?!… ")) and text.startswith(core))
        ]
        return Answer(_say(rng.choice(fitting or pool), text, self.story), line.kind, line.text)

    def answer(
        self, reply: str, tier: Tier, change: int, rng: random.Random, used_lines: set[str]
    ) -> Answer | None:
        """The user's answer to ``reply`` at ``tier`` after ``change`` (None: ``reply`` asks nothing).

        Every part of a question is answered in turn ("How old are you, and what is your job?" gets the
        age, then the job), the first with the mood's lead-in. ``used_lines``: the canned lines this user
        has said (a deflection is not said twice while others are left).
        """
        language = self.story.language
        question = question_in(reply, language)
        if not question:
            return None
        mood = mood_of(tier, change)
        if mood == "F":
            return self._deflect("F", rng, used_lines)
        answers: list[Answer] = []
        for part in question_parts(question, language):
            said = self._part(part, reply, mood, rng, used_lines, lead=not answers)
            # one deflection, one "I can't say" and one unasked line of the story are enough
            if said is not None and not any(
                said.text == a.text
                or (said.kind == a.kind and said.kind in _ONCE)
                or (said.unasked and a.unasked)
                for a in answers
            ):
                answers.append(said)
        if not answers:
            return None
        sep = "" if language == "zh" else " "
        first = answers[0]
        return Answer(sep.join(a.text for a in answers), first.kind, first.line)

    def _part(
        self, part: str, reply: str, mood: str, rng: random.Random, used_lines: set[str], *, lead: bool
    ) -> Answer | None:
        """The answer to one part of a question: the line it asks for, its hidden need (by mood), a
        length of time, a plain "I can't say" when the profile has no answer, else the next line of the
        story (a general question: "What happened?")."""
        language = self.story.language
        kinds = ALLOWED[mood]
        tokens = content_tokens(part, language)
        facts = asked_facts(part, language)
        asked = tokens | facts
        if asks_about_need(part, self.story, tokens):
            return self._need(asked, mood, rng, used_lines, reply, lead=lead)
        if asks_how_long(part, language):
            return self._how_long(part, facts, kinds, mood, rng, used_lines, lead=lead)
        pick = self._pick(asked, kinds, reply)
        if pick is not None:
            return self._line(pick, mood, rng, lead)
        if self._not_in_profile(part, facts):
            return self._cannot_say(rng, used_lines)
        told = [i for i, x in enumerate(self.story.lines) if x.kind in kinds and self._score(x, asked) > 0]
        if told:  # asked again about what was said: "Like I said, ..."
            return self._again(asked, kinds, mood, rng)
        if mood == "C":  # a guarded user does not volunteer what was not asked
            return self._deflect("C", rng, used_lines)
        pick = self._next_unsaid(kinds)
        if pick is not None:
            return replace(self._line(pick, mood, rng, lead), unasked=True)
        return self._again(asked, kinds, mood, rng)

    def _need(
        self, asked: set[str], mood: str, rng: random.Random, used_lines: set[str], reply: str, *, lead: bool
    ) -> Answer:
        """A question about what the user needs: S and A tell the need itself, B its explicit goal (or
        deflect), C deflects."""
        if mood == "C":
            return self._deflect("C", rng, used_lines)
        if mood == "B":
            goal = next((i for i, x in enumerate(self.story.lines) if x.kind == "goal"), None)
            if goal is not None and goal not in self.used:
                return self._line(goal, "B", rng, lead)
            return self._deflect("B", rng, used_lines)
        for kind in ("need", "need_near", "goal"):  # S, A: the need itself first
            pick = self._pick(asked, frozenset({kind}), reply)
            if pick is None:
                pick = next(
                    (i for i, x in enumerate(self.story.lines) if x.kind == kind and i not in self.used),
                    None,
                )
            if pick is not None:
                return self._line(pick, mood, rng, lead)
        return self._deflect("B", rng, used_lines)

    def _how_long(
        self,
        part: str,
        facts: set[str],
        kinds: frozenset[str],
        mood: str,
        rng: random.Random,
        used_lines: set[str],
        *,
        lead: bool,
    ) -> Answer:
        """The answer to "How long ...?": the line that states a length of time about what is asked ("你做这份工作多久
        了？" -> "...已经干了七年"), else a plain "I can't say" (never the job instead of how long)."""
        language = self.story.language
        topic = specific_tokens((_ZH_HOW_LONG if language == "zh" else _EN_HOW_LONG).sub(" ", part), language)
        for line in self.story.lines:  # "this job": the words of the job the profile names
            if line.tokens & facts:
                topic |= content_tokens(line.text, language)
        scored = [
            (len(content_tokens(line.text, language) & topic), i not in self.used, -i)
            for i, line in enumerate(self.story.lines)
            if line.kind in kinds and has_span(line.text, language)
        ]
        best = max(scored, default=(0, False, 0))
        if best[0] == 0:
            return self._cannot_say(rng, used_lines)
        return self._line(-best[2], mood, rng, lead)

    def _not_in_profile(self, part: str, facts: set[str]) -> bool:
        """Whether ``part`` asks something specific that no line of the profile speaks of ("Have you eaten
        today?"), as opposed to asking for the story in general ("What happened next?")."""
        specific = specific_tokens(part, self.story.language)
        if not specific and not facts:
            return False
        return not any(line.tokens & (specific | facts) for line in self.story.lines)

    def _cannot_say(self, rng: random.Random, used_lines: set[str]) -> Answer:
        pool = CANNOT_SAY[self.story.language]
        fresh = [x for x in pool if x not in used_lines]
        return Answer(rng.choice(fresh or pool), "unknown")

    def _again(self, asked: set[str], kinds: frozenset[str], mood: str, rng: random.Random) -> Answer | None:
        """Everything has been said: the best line again, as a person repeats themselves ("Like I said")."""
        candidates = [i for i, x in enumerate(self.story.lines) if x.kind in kinds]
        if not candidates:
            return None
        best = max(candidates, key=lambda i: (self._score(self.story.lines[i], asked), -i))
        line = self.story.lines[best]
        text = _brief(line.text, self.story.language) if mood == "C" else line.text
        return Answer(_say(rng.choice(AGAIN[self.story.language]), text, self.story), "again", line.text)

    def fresh(self, text: str, said: set[str], tier: Tier, rng: random.Random) -> str:
        """``text``, or a variant of it that the user has not said yet in this dialogue.

        A variant adds the next unsaid line of the story (a person with nothing new to say about the
        reply goes on with their story), else a filler ("That's all, really."), else two.
        """
        if text not in said:
            return text
        sep = "" if self.story.language == "zh" else " "
        kinds = ALLOWED[tier]
        if kinds:
            pick = self._next_unsaid(kinds)
            if pick is not None:
                self.used.add(pick)
                candidate = f"{text}{sep}{self.story.lines[pick].text}".strip()
                if candidate not in said:
                    return candidate
        fillers = FILLERS[self.story.language]
        order = rng.sample(fillers, len(fillers))
        for first in order:
            candidate = f"{text}{sep}{first}".strip()
            if candidate not in said:
                return candidate
        for first in order:
            for second in order:
                candidate = f"{text}{sep}{first}{sep}{second}".strip()
                if candidate not in said:
                    return candidate
        dots, n = ("…" if self.story.language == "zh" else "..."), 1
        while f"{text}{sep}{dots * n}" in said:  # unreachable in practice: a last resort that terminates
            n += 1
        return f"{text}{sep}{dots * n}"
