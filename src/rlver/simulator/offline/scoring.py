"""The offline user's lexicon appraisal: the features of one reply, and the hard flags that veto it.

Split from :mod:`rlver.simulator.offline.user` (which holds the user and the simulator): everything
here is a pure function of a reply, the profile's features and the dialogue so far, so the reward-hacking
watch (:mod:`rlver.rollout.hackwatch`) reads the same flags without starting a user.

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
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rlver.profiles.schema import Difficulty, Profile
from rlver.simulator.offline.crosslingual import (
    XLProfile,
)
from rlver.simulator.offline.learned import (
    ProfileText,
)
from rlver.simulator.offline.lexicon import (
    CJK_CHAR,
    JUDGE_PATTERNS,
    LATIN_LETTER,
    THINK_TAG,
    ZH_FUNCTION_CHARS,
    Lexicon,
    TextView,
    en_words,
    tokens,
)

Embedder = Callable[[list[str]], np.ndarray]

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


def ngram_set(items: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(items[i : i + n]) for i in range(len(items) - n + 1)}


def text_units(text: str, language: str) -> tuple[list[str], int]:
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
            user_grams |= ngram_set(text_units(message, pf.language)[0], 3)
    draft = _Draft()
    text = reply.strip()
    view = TextView.of(text)
    if pf.language == "en":  # the words were just found: reuse them
        seq, units, reply_tokens = view.words, len(view.words), view.words
    else:
        (seq, units), reply_tokens = text_units(text, pf.language), tokens(text, pf.language)
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
    grams = ngram_set(seq, 3)
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


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two embedding vectors (0 when either is all zeros)."""
    denom = float(np.linalg.norm(a) * np.linalg.norm(b)) or 1.0
    return float(a @ b) / denom


def _relevance(
    draft: _Draft, text: str, token_set: set[str], pf: ProfileFeatures, embedder: Embedder | None
) -> None:
    """Relevance to the profile: embedding cosine when an embedder is set, else weighted word overlap."""
    if embedder is not None and pf.need_vector is not None and text:
        cosine = cosine_similarity(np.asarray(embedder([text])[0], dtype=np.float64), pf.need_vector)
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


def feeling_words(change: int, language: str) -> str:
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
