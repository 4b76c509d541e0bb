"""Tests that kill mutants of ``rlver.rollout.batching`` the first mutation run left alive (issue 42, item
3; ``python bench/mutants.py batching``): the batch time each answer carries, the error that stops the
queue, and a finished batch leaving the set the queue waits on at close."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from rlver.llm.base import SamplingParams
from rlver.records import Message
from rlver.rollout import batching
from rlver.rollout.batching import PolicyQueue, RolloutTimes
from test_batching import AnswersAt, BatchSizes, FakeClock

HELLO = [Message(role="user", content="hi")]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(batching, "time", SimpleNamespace(perf_counter=fake.perf_counter))
    return fake


def test_each_answer_carries_its_batchs_generation_time(clock: FakeClock) -> None:
    """A batch that starts at t = 1 and whose generation ends at t = 3 answers with 2 s (the
    ``time/`` per-turn figures read it), however long the request waited before the batch started."""

    async def run() -> float:
        queue = PolicyQueue(AnswersAt(clock, done=3.0), serial=True, times=RolloutTimes())
        server = asyncio.create_task(queue.serve())
        clock.now = 1.0
        _, batch_s = await queue.ask(HELLO, SamplingParams())
        queue.close()
        await server
        return batch_s

    assert asyncio.run(run()) == 2.0


def test_the_first_stop_error_stops_the_queue() -> None:
    """An error recorded for the queue (a transcript that cannot be written) is raised by ``serve``
    before the next batch starts, and that batch is not run."""

    async def run(queue: PolicyQueue) -> None:
        server = asyncio.create_task(queue.serve())
        asking = asyncio.create_task(queue.ask(HELLO, SamplingParams()))
        try:
            await server
        finally:
            asking.cancel()

    policy = BatchSizes()
    queue = PolicyQueue(policy, serial=True, times=RolloutTimes())
    queue.stop_errors.append(OSError("transcript: disk full"))
    with pytest.raises(OSError, match="disk full"):
        asyncio.run(run(queue))
    assert policy.sizes == []


def test_a_finished_batch_leaves_the_in_flight_set() -> None:
    """``close`` waits for the batches still in flight; a finished one is dropped from that set as it
    ends, so the queue holds no task of a batch that has answered (an endpoint's run sends hundreds)."""

    async def run() -> PolicyQueue:
        queue = PolicyQueue(BatchSizes(), serial=False, times=RolloutTimes())
        server = asyncio.create_task(queue.serve())
        for _ in range(3):
            await queue.ask(HELLO, SamplingParams())
        queue.close()
        await server
        return queue

    queue = asyncio.run(run())
    assert queue.times.batches == 3 and queue.in_flight == set()
