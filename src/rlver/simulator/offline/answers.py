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

Only the TEXT of the user's reply comes from here: the appraisal, and so every emotion change, is
computed before it and never reads it. (The next turn's appraisal does read the user's last message, as
it reads any user message: that is the text changing, not the scoring.) It is a proxy: the answers are
the profile's own sentences, picked by shared words, not understood or generated, so a question its
story has no words for gets a sentence that does not answer it.

Deterministic: the only chance is the user's own seeded RNG (lead-ins, deflections), and the lines
said so far are read back from the dialogue's history when a user is restored.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass

from rlver.records import Tier
from rlver.simulator.offline.crosslingual import content_tokens
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
    #: a :data:`~rlver.simulator.offline.story.LineKind`, or ``deflect`` (no answer) or ``again``.
    kind: str
    #: the story line said ("" for a deflection).
    line: str = ""


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

    def _line(self, i: int, mood: str, rng: random.Random) -> Answer:
        self.used.add(i)
        line = self.story.lines[i]
        text = _brief(line.text, self.story.language) if mood == "C" else line.text
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

        ``used_lines``: the canned lines this user has said (a deflection is not said twice while others
        are left).
        """
        language = self.story.language
        question = question_in(reply, language)
        if not question:
            return None
        mood = mood_of(tier, change)
        if mood == "F":
            return self._deflect("F", rng, used_lines)
        kinds = ALLOWED[mood]
        tokens = content_tokens(question, language)
        asked = tokens | asked_facts(question, language)
        if asks_about_need(question, self.story, tokens):
            if mood == "C":
                return self._deflect("C", rng, used_lines)
            if mood == "B":
                goal = next((i for i, x in enumerate(self.story.lines) if x.kind == "goal"), None)
                if goal is not None and goal not in self.used:
                    return self._line(goal, "B", rng)
                return self._deflect("B", rng, used_lines)
            for kind in ("need", "need_near", "goal"):  # S, A: the need itself first
                pick = self._pick(asked, frozenset({kind}), reply)
                if pick is None:
                    pick = next(
                        (i for i, x in enumerate(self.story.lines) if x.kind == kind and i not in self.used),
                        None,
                    )
                if pick is not None:
                    return self._line(pick, mood, rng)
        pick = self._pick(asked, kinds, reply)
        if pick is None:
            if mood == "C":  # a guarded user does not volunteer what was not asked
                return self._deflect("C", rng, used_lines)
            pick = self._next_unsaid(kinds)
        if pick is not None:
            return self._line(pick, mood, rng)
        return self._again(asked, kinds, mood, rng)

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
