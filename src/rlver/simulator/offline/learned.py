"""The learned appraisal: a linear model of the published simulator's emotion change, numpy only.

The published SAGE simulator (an LLM) judges each agent reply and moves the user's emotion, almost
always by ±5 or ±10. Its released result files hold thousands of such judgements. This module turns
what a simulator legitimately sees at one turn —

* the profile (hidden need, story, goal, conversational style),
* the dialogue so far (visible text only),
* the current emotion,
* the agent's visible reply —

into a sparse feature vector (character n-grams of the reply and of the user's last message, plus a
few dense context features, its own earlier emotion changes in this dialogue among them) and scores
it with weights fitted by :mod:`rlver.fidelity.appraisal_fit`.
The weights ship inside the package as JSON (``rlver/simulator/offline/data/appraisal_zh.json``) with their
provenance: data files and sha256, fit settings and validation figures.

It is Chinese-only: the released judgements are all on the Chinese SAGE profiles, so nothing here
says anything about English replies (the offline user keeps its lexicon appraisal for English).
It is a *proxy* fitted to another model's judgements, so it can be gamed: the offline user puts hard
vetoes (gibberish, keyword salad, wrong language, repetition, judge-directed text) before it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlver.errors import ConfigError

#: The artefact shipped in the package.
ARTEFACT_NAME = "appraisal_zh.json"
#: Bumped whenever the features change (an artefact of another version is refused).
FEATURES_VERSION = "zh-ngram-v2"

_WS = re.compile(r"\s+")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

#: The user's state besides emotion and turn, read by both fitted appraisals (this one and the
#: transfer appraisal): the profile's style, then the simulator's own trajectory in this dialogue. It
#: knows how it judged the earlier replies, and SAGE's judgements are strongly persistent within a
#: dialogue (+0.03 held-out Spearman, measured).
STATE_NAMES: tuple[str, ...] = (
    "style_negative",
    "style_passive",
    "style_avoidant",
    "last_change",
    "last_change_2",
    "mean_change",
    "ups",
    "downs",
    "first_turn",
)

#: Names of the dense context features, in vector order.
DENSE_NAMES = (
    "emotion",
    "emotion_sq",
    "turn",
    "log_len",
    "log_len_sq",
    "questions",
    "exclaims",
    "need_overlap",
    "story_overlap",
    "user_overlap",
    "repeat_prev",
    *STATE_NAMES,
)


def normalise(text: str) -> str:
    """Lower-case, whitespace collapsed: what the n-grams are taken from."""
    return _WS.sub(" ", text.strip().lower())


def char_ngrams(text: str, n_max: int, prefix: str) -> set[str]:
    """The set of character 1..``n_max``-grams of ``text`` (already normalised), each tagged ``prefix``."""
    size = len(text)
    return {prefix + text[i : i + n] for n in range(1, n_max + 1) for i in range(size - n + 1)}


def cjk_bigrams(text: str) -> set[str]:
    out: set[str] = set()
    for run in _CJK_RUN.findall(text):
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    return out


def _overlap(reply: set[str], other: set[str] | frozenset[str]) -> float:
    return len(reply & other) / len(reply) if reply and other else 0.0


@dataclass(frozen=True)
class ProfileText:
    """The profile fields the learned appraisal reads, prepared once per profile."""

    need_bigrams: frozenset[str]
    story_bigrams: frozenset[str]
    style: str

    @classmethod
    def of(cls, hidden_need: str, background: str, goal: str, style: str) -> ProfileText:
        return cls(
            need_bigrams=frozenset(cjk_bigrams(hidden_need)),
            story_bigrams=frozenset(cjk_bigrams(f"{background}\n{goal}")),
            style=style.strip().lower(),
        )


@dataclass(frozen=True)
class ReplyContext:
    """What the user knows when it appraises a reply: its profile, its emotion, the turn (the agent's
    reply count, from 1), its own last message, the bigrams of the agent's earlier replies and its own
    earlier emotion changes in the dialogue (oldest first)."""

    profile: ProfileText
    emotion: int
    turn: int
    last_user: str
    previous_bigrams: Sequence[set[str]] = ()
    previous_changes: Sequence[int] = ()


def dense_features(reply: str, context: ReplyContext) -> list[float]:
    """The dense context features (see :data:`DENSE_NAMES`), unscaled."""
    profile, emotion, turn = context.profile, context.emotion, context.turn
    last_user, previous_bigrams, previous_changes = (
        context.last_user,
        context.previous_bigrams,
        context.previous_changes,
    )
    bigrams = cjk_bigrams(reply)
    e = emotion / 100.0
    log_len = math.log1p(len(reply)) / 7.0
    repeat = 0.0
    for prev in previous_bigrams:
        if bigrams and prev:
            repeat = max(repeat, len(bigrams & prev) / len(bigrams | prev))
    return [
        e,
        e * e,
        turn / 10.0,
        log_len,
        log_len * log_len,
        min(3, reply.count("?") + reply.count("？")) / 3.0,
        min(3, reply.count("!") + reply.count("！")) / 3.0,
        _overlap(bigrams, profile.need_bigrams),
        _overlap(bigrams, profile.story_bigrams),
        _overlap(bigrams, cjk_bigrams(last_user)),
        repeat,
        *state_features(profile.style, previous_changes),
    ]


def state_features(style: str, previous_changes: Sequence[int]) -> list[float]:
    """:data:`STATE_NAMES`: the style as one-hot, then the last two changes, their mean, and how many
    went up / down (scaled to about [-1, 2])."""
    h = list(previous_changes)
    return [
        1.0 if style == "negative" else 0.0,
        1.0 if style == "passive" else 0.0,
        1.0 if style == "avoidant" else 0.0,
        (h[-1] if h else 0) / 10.0,
        (h[-2] if len(h) > 1 else 0) / 10.0,
        (sum(h) / len(h) if h else 0.0) / 10.0,
        sum(1 for x in h if x > 0) / 5.0,
        sum(1 for x in h if x < 0) / 5.0,
        0.0 if h else 1.0,
    ]


def sparse_keys(reply: str, last_user: str, settings: dict[str, Any]) -> set[str]:
    """The n-gram keys of one turn: ``r:`` reply grams, ``u:`` grams of the user's last message."""
    keys = char_ngrams(normalise(reply), int(settings["reply_ngram"]), "r:")
    if int(settings.get("user_ngram", 0)) > 0:
        keys |= char_ngrams(normalise(last_user), int(settings["user_ngram"]), "u:")
    return keys


class AppraisalModel:
    """Fitted weights plus the provenance that produced them. Immutable once loaded."""

    def __init__(self, data: dict[str, Any]) -> None:
        if data.get("features_version") != FEATURES_VERSION:
            raise ConfigError(
                f"learned appraisal: artefact has features_version {data.get('features_version')!r}, "
                f"this rlver reads {FEATURES_VERSION!r}; refit with `rlver simulator fit`"
            )
        self.data = data
        self.settings: dict[str, Any] = data["settings"]
        self.weights: dict[str, float] = dict(zip(data["vocab"], data["weights"], strict=True))
        self.dense_weights: list[float] = list(data["dense_weights"])
        self.dense_mean: list[float] = list(data["dense_mean"])
        self.dense_scale: list[float] = list(data["dense_scale"])
        self.intercept: float = float(data["intercept"])
        #: The largest n-gram part of any reply in the fitting data: above it, the reply is vetoed.
        self.ngram_ceiling: float = float(data.get("ngram_ceiling", math.inf))
        #: predicted change = clip(round(slope * score + offset)) — matched to the recorded spread.
        self.slope: float = float(data["calibration"]["slope"])
        self.offset: float = float(data["calibration"]["offset"])

    def score(self, reply: str, context: ReplyContext) -> tuple[float, dict[str, float]]:
        """The raw score of one reply and its contributions: ``ngrams``, ``context``, ``intercept``."""
        keys = sparse_keys(reply, context.last_user, self.settings)
        # One C-level lookup per key (dict.get through map): the hot loop of the offline user.
        ngram = sum(filter(None, map(self.weights.get, keys))) / math.sqrt(len(keys)) if keys else 0.0
        dense = dense_features(reply, context)
        from_context = sum(
            wd * (x - m) / s
            for wd, x, m, s in zip(self.dense_weights, dense, self.dense_mean, self.dense_scale, strict=True)
        )
        return ngram + from_context + self.intercept, {
            "ngrams": ngram,
            "context": from_context,
            "intercept": self.intercept,
        }

    def change(self, score: float, max_change: int = 10) -> int:
        """An integer change on the recorded scale from a raw score (see :func:`round_change`)."""
        return round_change(self.slope * score + self.offset, max_change)

    def top_ngrams(self, k: int = 20, *, prefix: str = "r:", min_len: int = 2) -> list[tuple[str, float]]:
        """The ``k`` most rewarded reply n-grams (the probe builds keyword salad from them)."""
        items = [
            (key[len(prefix) :], weight)
            for key, weight in self.weights.items()
            if key.startswith(prefix) and len(key) - len(prefix) >= min_len and weight > 0
        ]
        items.sort(key=lambda kv: (-kv[1], kv[0]))
        return items[:k]

    def describe(self) -> dict[str, Any]:
        """Provenance for run manifests: data files and sha256, settings, validation figures."""
        return {
            "artefact": ARTEFACT_NAME,
            "artefact_sha256": self.data.get("artefact_sha256", ""),
            "features_version": FEATURES_VERSION,
            "language": "zh",
            "data": self.data.get("data", []),
            "settings": self.settings,
            "validation": self.data.get("validation", {}),
        }


def round_change(value: float, max_change: int = 10) -> int:
    """A stretched score to an integer change: nearest integer, but never 0 for a non-zero score.

    The published simulator almost never leaves the emotion unchanged (3 of 7,215 released turns), so a
    rounded 0 only costs sign agreement: the sign of the score is the better guess (0.742 → 0.776 with
    agent models held out, 0.756 → 0.786 with profiles held out).
    Plain Python on purpose: it runs once per turn, where a numpy call would cost more than the maths.
    """
    if value == 0:
        return 0
    magnitude = max(1, math.floor(abs(value) + 0.5))
    return max(-max_change, min(max_change, magnitude if value > 0 else -magnitude))


def artefact_path() -> Path:
    return Path(__file__).resolve().parent / "data" / ARTEFACT_NAME


def read_artefact(path: Path, what: str, build_with: str) -> dict[str, Any]:
    """A fitted appraisal's JSON artefact, with its sha256 (provenance in run manifests). A missing or
    broken file is a ConfigError naming the file and how to rebuild it."""
    import hashlib

    if not path.exists():
        raise ConfigError(f"{what}: {path} not found; build it with {build_with}")
    raw = path.read_bytes()
    try:
        data: dict[str, Any] = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{what}: {path} is not valid JSON ({exc})") from None
    data["artefact_sha256"] = hashlib.sha256(raw).hexdigest()
    return data


@lru_cache(maxsize=4)
def load_appraisal_model(path: str | None = None) -> AppraisalModel:
    """The shipped model (or the artefact at ``path``), loaded once per process."""
    p = Path(path) if path else artefact_path()
    return AppraisalModel(read_artefact(p, "learned appraisal", "`rlver simulator fit`"))
