"""The pieces a report is made of beyond its runs: figures and a preface with dialogues picked out.

Their own module so that what builds a preface (the demo, :mod:`rlver.eval.training_report`) and the
report that draws it (:mod:`rlver.eval.report`) import them from one place without importing each
other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlver.records import Episode


@dataclass
class Figure:
    """One figure: ``svg`` is a static ``<svg>`` element (:mod:`rlver.charts`), inlined by the HTML
    report and written as ``<name>.svg`` beside the Markdown one; ``alt`` says what it shows."""

    name: str
    alt: str
    svg: str


@dataclass
class Featured:
    """A dialogue picked out in the preface: ``run`` is the index of its run in the report's runs."""

    caption: str
    run: int
    episode: Episode


@dataclass
class Preface:
    """What an orchestrating command shows above the standard sections (the demo: which offline user it
    trained against, before/after numbers, the reward curve, one dialogue before and after training)."""

    paragraphs: Sequence[str] = ()
    figures: Sequence[Figure] = ()
    featured: Sequence[Featured] = ()


def first_shared_pair(before: Sequence[Episode], after: Sequence[Episode]) -> tuple[Episode, Episode]:
    """The first dialogue of ``before`` whose user (profile and sample) also has one in ``after``, with
    that one; else the first of each. The first, not the best: a picked-out pair is never a pick."""
    after_by_key = {(ep.profile_id, ep.sample_index): ep for ep in after}
    for ep in before:
        match = after_by_key.get((ep.profile_id, ep.sample_index))
        if match is not None:
            return ep, match
    return before[0], after[0]
