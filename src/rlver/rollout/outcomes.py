"""What a batch of dialogues came to: the benchmark's score, success and failure, computed once.

Both consumers read this one implementation: the evaluator's full report
(``rlver.eval.metrics.compute_metrics``, with intervals, trajectories and breakdowns on top) and the
trainer's per-step and held-out summaries. It lives below both (``train`` and ``eval`` may not import
each other). The thresholds are ``Episode.succeeded`` / ``Episode.failed_low`` (``rlver.records``).

Failed runs (``status != "finished"``: an API error, an unparseable simulator turn) are counted apart
and excluded from every number, so an outage never looks like a bad model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from rlver.records import Episode


@dataclass(frozen=True)
class Outcomes:
    """The finished and failed dialogues of a batch and the benchmark's counts over the finished ones."""

    done: tuple[Episode, ...]
    failed: tuple[Episode, ...]
    #: Finished dialogues that succeeded (``Episode.succeeded``) and that failed (``Episode.failed_low``).
    success: int
    failure: int

    @property
    def n(self) -> int:
        """Dialogues counted in the score (finished)."""
        return len(self.done)

    @property
    def finals(self) -> list[int]:
        return [ep.final_emotion for ep in self.done]

    @property
    def score(self) -> Fraction | None:
        """Mean final emotion, exact (a ``Fraction``: the leaderboard rounds it half up); None if n = 0."""
        return Fraction(sum(self.finals), self.n) if self.n else None

    @property
    def success_rate(self) -> float:
        """Share of finished dialogues that succeeded (0 when none finished)."""
        return self.success / self.n if self.n else 0.0

    @property
    def failure_rate(self) -> float:
        """Share of finished dialogues that failed (0 when none finished)."""
        return self.failure / self.n if self.n else 0.0

    @property
    def mean_turns(self) -> float:
        """Mean number of assistant replies per finished dialogue (0 when none finished)."""
        return sum(ep.assistant_turns for ep in self.done) / self.n if self.n else 0.0


def outcomes(episodes: Iterable[Episode]) -> Outcomes:
    """Split ``episodes`` into finished and failed runs (order kept) for :class:`Outcomes`."""
    all_eps = list(episodes)
    done = tuple(ep for ep in all_eps if ep.status == "finished")
    return Outcomes(
        done=done,
        failed=tuple(ep for ep in all_eps if ep.status != "finished"),
        success=sum(ep.succeeded for ep in done),
        failure=sum(ep.failed_low for ep in done),
    )
