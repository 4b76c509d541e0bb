"""How alike two profiles are: character n-gram Jaccard, TF-IDF cosine, or sentence embeddings.

Used twice: by ``rlver profiles generate`` to reject near-duplicates as they arrive, and by
``rlver profiles stats`` to report a diversity measure (mean pairwise distance) of a training world.

Character n-grams work the same for English and Chinese (no tokenizer, no word segmentation) and need
no model, so they are the default; the published method's point that many *different* users guard
against reward hacking only needs a robust "are these two the same person?" test, not semantics.
Embeddings (``pip install rlver[embed]``) catch paraphrases that share few characters.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from rlver.errors import ConfigError
from rlver.profiles.schema import Profile

Method = Literal["ngram", "tfidf", "embed"]
METHODS: tuple[str, ...] = ("ngram", "tfidf", "embed")

#: Character n-gram length for Chinese (3 characters are about a word or two) and for alphabetic text
#: (5 characters, so that the handful of very common English trigrams, " th", "ing", do not make
#: every pair of English profiles look alike). Calibrated on the published profiles and our fixtures.
NGRAM_CJK = 3
NGRAM_ALPHA = 5
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")

_SPACE = re.compile(r"\s+")
_PUNCT = re.compile(r"[\W_]+", re.UNICODE)

Embedder = Callable[[Sequence[str]], Any]  # texts -> array (n, d)


def profile_text(profile: Profile) -> str:
    """The text that identifies a user: who they are, what happened, what they really need."""
    return "\n".join((profile.persona, profile.background, profile.hidden_need))


def normalise(text: str) -> str:
    """Lower-case, punctuation to spaces, whitespace collapsed: formatting must not hide a copy."""
    return _SPACE.sub(" ", _PUNCT.sub(" ", text.lower())).strip()


def ngram_size(text: str) -> int:
    """The n-gram length for ``text``: :data:`NGRAM_CJK` when most letters are CJK, else alphabetic."""
    cjk = len(_CJK.findall(text))
    return NGRAM_CJK if cjk * 2 >= sum(1 for ch in text if ch.isalpha()) and cjk else NGRAM_ALPHA


def char_ngrams(text: str, n: int | None = None) -> Counter[str]:
    """Counts of the character n-grams of the normalised text (``n=None``: :func:`ngram_size`)."""
    t = normalise(text)
    n = n or ngram_size(t)
    if len(t) < n:
        return Counter([t]) if t else Counter()
    return Counter(t[i : i + n] for i in range(len(t) - n + 1))


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


class SimilarityIndex(Protocol):
    """A growing set of texts that answers "what is the closest text already here?"."""

    def add(self, key: str, text: str) -> None: ...

    def nearest(self, text: str) -> tuple[str | None, float]: ...


@dataclass
class NgramIndex:
    """Exact Jaccard similarity over character n-gram sets (linear scan: fine for thousands)."""

    n: int | None = None
    _items: list[tuple[str, frozenset[str]]] = field(default_factory=list)

    def add(self, key: str, text: str) -> None:
        self._items.append((key, frozenset(char_ngrams(text, self.n))))

    def nearest(self, text: str) -> tuple[str | None, float]:
        grams = frozenset(char_ngrams(text, self.n))
        best: tuple[str | None, float] = (None, 0.0)
        for key, other in self._items:
            sim = jaccard(grams, other)
            if sim > best[1]:
                best = (key, sim)
        return best


@dataclass
class TfidfIndex:
    """Cosine similarity of TF-IDF weighted character n-gram vectors.

    The IDF is recomputed from the texts present at query time, so n-grams every profile shares
    ("the", "的") stop counting as evidence of a copy as the set grows.
    """

    n: int | None = None
    _items: list[tuple[str, Counter[str]]] = field(default_factory=list)
    _df: Counter[str] = field(default_factory=Counter)

    def add(self, key: str, text: str) -> None:
        grams = char_ngrams(text, self.n)
        self._items.append((key, grams))
        self._df.update(grams.keys())

    def _vector(self, grams: Counter[str], n_docs: int) -> dict[str, float]:
        vec = {
            g: (1 + math.log(c)) * (math.log((1 + n_docs) / (1 + self._df[g])) + 1) for g, c in grams.items()
        }
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        return {g: v / norm for g, v in vec.items()}

    def nearest(self, text: str) -> tuple[str | None, float]:
        grams = char_ngrams(text, self.n)
        n_docs = len(self._items) + 1
        query = self._vector(grams, n_docs)
        best: tuple[str | None, float] = (None, 0.0)
        for key, other in self._items:
            vec = self._vector(other, n_docs)
            small, big = (query, vec) if len(query) < len(vec) else (vec, query)
            sim = sum(w * big.get(g, 0.0) for g, w in small.items())
            if sim > best[1]:
                best = (key, sim)
        return best


@dataclass
class EmbeddingIndex:
    """Cosine similarity of sentence embeddings (needs an embedder, e.g. :func:`load_embedder`)."""

    embedder: Embedder
    _keys: list[str] = field(default_factory=list)
    _vecs: list[Any] = field(default_factory=list)

    def _embed(self, text: str) -> Any:
        import numpy as np

        vec = np.asarray(self.embedder([text]), dtype=np.float64)[0]
        return vec / (np.linalg.norm(vec) or 1.0)

    def add(self, key: str, text: str) -> None:
        self._keys.append(key)
        self._vecs.append(self._embed(text))

    def nearest(self, text: str) -> tuple[str | None, float]:
        import numpy as np

        if not self._vecs:
            return (None, 0.0)
        sims = np.stack(self._vecs) @ self._embed(text)
        i = int(np.argmax(sims))
        return (self._keys[i], float(sims[i]))


def load_embedder(model: str | None = None) -> Embedder:
    """A sentence embedder returning unit vectors: ``model`` (a local folder or an already-cached Hub
    id) or, by default, the all-MiniLM-L6-v2 that the ``[embed]`` extra ships inside its package.

    Raises :class:`ConfigError` with the install hint when the extra is missing. Never downloads
    (see :mod:`rlver.embedding`).
    """
    from rlver.embedding import load_sentence_embedder

    try:
        return load_sentence_embedder(model)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (or use --similarity ngram / tfidf)") from None


def make_index(method: str, *, embedder: Embedder | None = None, n: int | None = None) -> SimilarityIndex:
    """An empty index for ``method`` (``ngram``, ``tfidf`` or ``embed``)."""
    if method == "ngram":
        return NgramIndex(n=n)
    if method == "tfidf":
        return TfidfIndex(n=n)
    if method == "embed":
        return EmbeddingIndex(embedder or load_embedder())
    raise ConfigError(f"unknown similarity method {method!r}; choose one of: {', '.join(METHODS)}")


def pairwise_similarities(
    texts: Sequence[str],
    method: str = "ngram",
    *,
    embedder: Embedder | None = None,
    max_pairs: int = 50_000,
    seed: int = 0,
    n: int | None = None,
) -> list[tuple[int, int, float]]:
    """Similarity of every pair ``(i, j, sim)`` (or of ``max_pairs`` random pairs when there are more).

    Sampling keeps ``rlver profiles stats`` fast on large sets; the mean over a random sample of pairs
    is an unbiased estimate of the mean over all pairs.
    """
    k = len(texts)
    total = k * (k - 1) // 2
    if total == 0:
        return []
    if total <= max_pairs:
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    else:
        rng = random.Random(seed)
        seen: set[tuple[int, int]] = set()
        while len(seen) < max_pairs:
            i, j = rng.sample(range(k), 2)
            seen.add((min(i, j), max(i, j)))
        pairs = sorted(seen)
    if method == "embed":
        import numpy as np

        emb = np.asarray((embedder or load_embedder())(list(texts)), dtype=np.float64)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True).clip(min=1e-12)
        return [(i, j, float(emb[i] @ emb[j])) for i, j in pairs]
    grams = [char_ngrams(t, n) for t in texts]
    if method == "ngram":
        sets = [frozenset(g) for g in grams]
        return [(i, j, jaccard(sets[i], sets[j])) for i, j in pairs]
    if method == "tfidf":
        df: Counter[str] = Counter()
        for g in grams:
            df.update(g.keys())
        vecs = []
        for g in grams:
            vec = {t: (1 + math.log(c)) * (math.log((1 + k) / (1 + df[t])) + 1) for t, c in g.items()}
            norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
            vecs.append({t: v / norm for t, v in vec.items()})
        out = []
        for i, j in pairs:
            small, big = (vecs[i], vecs[j]) if len(vecs[i]) < len(vecs[j]) else (vecs[j], vecs[i])
            out.append((i, j, sum(w * big.get(t, 0.0) for t, w in small.items())))
        return out
    raise ConfigError(f"unknown similarity method {method!r}; choose one of: {', '.join(METHODS)}")
