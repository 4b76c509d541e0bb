"""The rollout tests' fake clock: ``rlver.rollout.batching`` reads ``time.perf_counter`` through it,
so the busy clock's and the batch timer's arithmetic is checked on set times, not a wall clock."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fake_clock import FakeClock
from rlver.rollout import batching


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(batching, "time", SimpleNamespace(perf_counter=fake.perf_counter))
    return fake
