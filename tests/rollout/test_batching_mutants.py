"""Tests that kill mutants of ``rlver.rollout.batching`` the first mutation run left alive (issue 42, item
3; ``python bench/mutants.py batching``): the batch time each answer carries, the error that stops the
queue, a finished batch leaving the set the queue waits on at close, the settle on CPython's loop, and
a failed policy call."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from fake_clock import FakeClock
from rlver.llm.base import Completion, SamplingParams
from rlver.records import Message
from rlver.rollout import batching
from rlver.rollout.batching import PolicyQueue, RolloutTimes, generate
from test_batching import AnswersAt, BatchSizes, _requests_after_loop_turns

HELLO = [Message(role="user", content="hi")]


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


def test_settle_waits_while_the_loop_has_work_up_to_its_limit() -> None:
    """On CPython's loop the settle reads the ready queue: a user whose reply takes 300 loop turns (no
    I/O) still joins the first batch, since the loop was never idle; the fixed 64 turns of a loop
    without a readable queue would have started a batch of one."""
    assert asyncio.run(_requests_after_loop_turns([0, 300])) == [2]


class Failing(BatchSizes):
    """A policy that raises, or answers fewer prompts than it was asked."""

    def __init__(self, answers: int | None) -> None:
        super().__init__()
        self.answers = answers

    async def complete_each(self, batch: Any, samplings: Any) -> list[Completion | BaseException]:
        if self.answers is None:
            raise ValueError("endpoint said 500")
        return (await super().complete_each(batch, samplings))[: self.answers]


def test_a_failed_call_fails_every_row_in_place() -> None:
    """One error per prompt, so each dialogue of the batch ends with it and the others go on; a policy
    that answers fewer prompts than asked is such a failure, said in numbers."""
    prompts = [HELLO, HELLO, HELLO]
    samplings = [SamplingParams()] * 3
    raised = asyncio.run(generate(Failing(None), prompts, samplings))
    assert len(raised) == 3 and all(
        isinstance(e, ValueError) and str(e) == "endpoint said 500" for e in raised
    )
    short = asyncio.run(generate(Failing(1), prompts, samplings))
    assert len(short) == 3 and all(isinstance(e, RuntimeError) for e in short)
    assert str(short[0]) == "policy returned 1 completions for 3 prompts"


def test_settle_on_a_loop_without_a_readable_queue_waits_a_fixed_number_of_turns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A loop that keeps its ready queue elsewhere (uvloop) has no ``_ready``: the settle neither fails
    nor returns at once, it lets the other coroutines run a fixed 64 turns (65 counted here: the
    counter's first turn comes before the settle starts)."""

    async def run() -> int:
        turns, settled = 0, False

        async def count() -> None:
            nonlocal turns
            while not settled:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.create_task(count())
        await asyncio.sleep(0)
        with monkeypatch.context() as m:
            m.setattr(batching.asyncio, "get_running_loop", lambda: SimpleNamespace())
            await batching.settle()
        settled = True
        await counter
        return turns

    assert asyncio.run(run()) == 65


def test_settle_on_an_idle_loop_returns_after_one_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing else can go on: the settle gives the loop one turn and returns, so a lone request
    starts its batch at once instead of waiting out ``SETTLE_TURNS``."""
    real_sleep = asyncio.sleep
    turns: list[float] = []

    async def counted(delay: float) -> None:
        turns.append(delay)
        await real_sleep(delay)

    async def run() -> None:
        with monkeypatch.context() as m:
            m.setattr(batching.asyncio, "sleep", counted)
            await batching.settle()

    asyncio.run(run())
    assert turns == [0]
