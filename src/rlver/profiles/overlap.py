"""Which personas of one profile set appear in another: word for word, or nearly.

The published benchmark and the published training set were written from shared personas: many of the
100 SAGE test users are, word for word, users of the 500 RLVER training profiles, in other scenes
(docs/profiles.md, "Personas shared by the benchmark and the training set"). A policy trained on those
profiles has met the benchmark's people, which a reader of its score should know; ``rlver profiles
overlap`` measures it for any two sets and ``rollout.exclude_personas_of`` keeps them out of training.

Two measures, both named wherever a figure is printed:

* **exact**: the persona texts are equal after surrounding whitespace is removed and inner whitespace
  collapsed (:func:`persona_key`): the same person, word for word;
* **near**: of the rest, the nearest persona of the other set by character n-gram Jaccard
  (:mod:`rlver.profiles.similarity`, 3-grams for Chinese) reaches the threshold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rlver.profiles.schema import Profile
from rlver.profiles.similarity import NgramIndex, ngram_size, normalise

#: The near-duplicate threshold: character n-gram Jaccard of two personas.
NEAR_THRESHOLD = 0.6

_SPACE = re.compile(r"\s+")


def persona_key(persona: str) -> str:
    """A persona as compared word for word: whitespace does not make two people different."""
    return _SPACE.sub(" ", persona).strip()


@dataclass(frozen=True)
class PersonaOverlap:
    """How many profiles of ``a`` have a persona of ``b``, exactly or nearly (``threshold``)."""

    n_a: int
    n_b: int
    exact: list[tuple[str, str]]  # (id in a, id in b)
    near: list[tuple[str, str, float]]  # (id in a, nearest id in b, Jaccard)
    threshold: float
    ngram: int

    def measure(self) -> str:
        return (
            f"exact: the same persona text, whitespace collapsed; near: character {self.ngram}-gram "
            f"Jaccard >= {self.threshold} with the nearest persona of the other set"
        )


def persona_overlap(
    a: Sequence[Profile], b: Sequence[Profile], threshold: float = NEAR_THRESHOLD
) -> PersonaOverlap:
    """The profiles of ``a`` whose persona is one of ``b``'s (see the module docstring)."""
    keys: dict[str, str] = {}
    for p in b:
        keys.setdefault(persona_key(p.persona), p.id)
    sample = " ".join(p.persona for p in [*a[:5], *b[:5]])
    n = ngram_size(normalise(sample)) if sample.strip() else 3
    index = NgramIndex(n=n)
    for p in b:
        index.add(p.id, p.persona)
    exact: list[tuple[str, str]] = []
    near: list[tuple[str, str, float]] = []
    for p in a:
        same = keys.get(persona_key(p.persona))
        if same is not None:
            exact.append((p.id, same))
            continue
        nearest, sim = index.nearest(p.persona)
        if nearest is not None and sim >= threshold:
            near.append((p.id, nearest, round(sim, 3)))
    return PersonaOverlap(len(a), len(b), exact, near, threshold, n)


def without_personas_of(profiles: Sequence[Profile], other: Sequence[Profile]) -> list[Profile]:
    """``profiles`` less those whose persona is, word for word, one of ``other``'s."""
    keys = {persona_key(p.persona) for p in other}
    return [p for p in profiles if persona_key(p.persona) not in keys]


def training_profiles(name: str, exclude_personas_of: str | None = None) -> list[Profile]:
    """A training run's profiles (``rollout.profiles``) less the personas of ``exclude_personas_of``
    (``rollout.exclude_personas_of``): the one place both engines read them from."""
    from rlver.profiles.sets import load_profile_set

    profiles = load_profile_set(name)
    if exclude_personas_of is None:
        return profiles
    return without_personas_of(profiles, load_profile_set(exclude_personas_of))
