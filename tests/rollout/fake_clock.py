"""A clock the rollout tests set by hand, for ``rlver.rollout.batching``'s ``time.perf_counter``."""

from __future__ import annotations


class FakeClock:
    """``time.perf_counter`` as the test sets it."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now
