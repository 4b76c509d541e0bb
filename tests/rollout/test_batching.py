"""The policy queue's two mechanisms, each on its own (``rlver.rollout.batching``): the settle that lets
every dialogue whose user answered without I/O join a batch before it starts, and the busy clock that
gives ``time/policy_s``, ``time/simulator_s`` and ``time/policy_idle_s``.

Both were planted as bugs in a review (issue 42, B2 and B3) and survived the suite, whose rollouts
happened to queue every request before the queue woke and never overlapped two clocked calls by hand.
The clock is tested on a fake clock (its arithmetic), never on the wall clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from fake_clock import FakeClock
from rlver.llm.base import Completion, MessagesLike, SamplingParams
from rlver.llm.scripted import ScriptedChatModel
from rlver.records import Message
from rlver.rollout import batching
from rlver.rollout.batching import Busy, PolicyQueue, RolloutTimes


class BatchSizes(ScriptedChatModel):
    """The policy's text is scripted; what the test reads is the size of each batch it was asked for."""

    def __init__(self) -> None:
        super().__init__(["Tell me more."], name="batch-sizes")
        self.sizes: list[int] = []

    async def complete_each(
        self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
    ) -> list[Completion | BaseException]:
        self.sizes.append(len(batch))
        return await super().complete_each(batch, samplings)


async def _requests_after_loop_turns(turns: Sequence[int]) -> list[int]:
    """Dialogue ``i`` asks for its reply after ``turns[i]`` event-loop turns and no I/O (what the
    offline user's reply costs); returns the batch sizes the policy saw."""
    policy = BatchSizes()
    queue = PolicyQueue(policy, serial=True, times=RolloutTimes())
    server = asyncio.create_task(queue.serve())

    async def dialogue(i: int, wait: int) -> None:
        for _ in range(wait):
            await asyncio.sleep(0)
        answer, _ = await queue.ask([Message(role="user", content=f"user {i}")], SamplingParams(seed=i))
        assert isinstance(answer, Completion)

    await asyncio.gather(*(dialogue(i, wait) for i, wait in enumerate(turns)))
    queue.close()
    await server
    return policy.sizes


def test_requests_ready_within_a_few_loop_turns_form_one_batch() -> None:
    """B2 (no settle): the first request would start a batch of one and the rest queue behind it.
    Eight users who answer 0..14 loop turns apart, none waiting on I/O, must share one batch."""
    sizes = asyncio.run(_requests_after_loop_turns([0, 2, 4, 6, 8, 10, 12, 14]))
    assert sizes == [8]


def test_settle_gives_up_after_its_turn_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settle is bounded: a coroutine that keeps the loop busy cannot hold a batch back for more
    than ``SETTLE_TURNS`` turns, so a user who answers after more turns than that is the next batch."""
    monkeypatch.setattr(batching, "SETTLE_TURNS", 5)
    sizes = asyncio.run(_requests_after_loop_turns([0, 1, 400]))
    assert sizes[-1] == 1 and sum(sizes) == 3


def test_the_busy_clock_counts_overlapping_calls_once_from_the_first_start(clock: FakeClock) -> None:
    """B3 (the clock restarted on every call that overlaps one in flight): ``time/policy_s`` and
    ``time/simulator_s`` were under-counted. Calls over [0, 6] and [5, 10] hold the clock for 10 s, not
    the 5 s from the second start; a later lone call over [20, 21] adds 1 s; the gap adds nothing."""
    busy = Busy()
    for at, event in [(0, "enter"), (5, "enter"), (6, "exit"), (10, "exit"), (20, "enter"), (21, "exit")]:
        clock.now = float(at)
        getattr(busy, event)()
    assert busy.total == 11.0 and busy.active == 0


class AnswersAt(BatchSizes):
    """A policy whose generation ends at ``clock.now = done`` (the clock moves; no time passes)."""

    def __init__(self, clock: FakeClock, done: float) -> None:
        super().__init__()
        self.clock, self.done = clock, done

    async def complete_each(
        self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
    ) -> list[Completion | BaseException]:
        self.clock.now = self.done
        return await super().complete_each(batch, samplings)


def test_the_queue_clocks_demand_from_the_first_request_to_the_last_answer(clock: FakeClock) -> None:
    """B3 through the queue: a request at t = 0 and one at t = 1 (while the first waits), answered in
    one batch that ends at t = 3, keep the demand clock running 3 s and the generation clock 2 s."""

    async def run() -> PolicyQueue:
        queue = PolicyQueue(AnswersAt(clock, done=3.0), serial=True, times=RolloutTimes())
        server = asyncio.create_task(queue.serve())
        hello = [Message(role="user", content="hi")]
        first = asyncio.create_task(queue.ask(hello, SamplingParams()))
        await asyncio.sleep(0)  # the first request is queued at t = 0 ...
        clock.now = 1.0
        await queue.ask(hello, SamplingParams())  # ... the second at t = 1
        await first
        queue.close()
        await server
        return queue

    queue = asyncio.run(run())
    assert queue.times.batches == 1 and queue.times.requests == 2
    assert queue.demand.total == 3.0 and queue.generating.total == 2.0


def test_a_barrier_returns_when_its_loop_ends_and_leaves_nothing_behind(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The engine's worker waits in the rollout's barrier while the loop is held; the loop then ends
    (a Ctrl-C's way out): the barrier returns, and nothing is left behind (no error, nothing on stderr,
    no coroutine that was never awaited); a barrier called after its loop has closed returns at once."""
    import gc
    import threading
    import time
    import warnings

    errors: list[BaseException] = []

    def worker(barrier: Any) -> threading.Thread:
        def run() -> None:
            try:
                barrier()
            except BaseException as exc:  # what the engine's worker would die of
                errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    async def main() -> tuple[threading.Thread, Any]:
        barrier = batching.loop_barrier(asyncio.get_running_loop())
        waiting = worker(barrier)
        time.sleep(3 * batching.BARRIER_POLL_S)  # the loop is held: the barrier cannot settle yet
        return waiting, barrier

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        waiting, barrier = asyncio.run(main())  # its shutdown cancels what is left on the loop
        waiting.join(timeout=30)
        late = worker(barrier)
        late.join(timeout=30)
        gc.collect()
    assert not waiting.is_alive() and not late.is_alive() and errors == []
    assert [str(w.message) for w in caught] == []
    assert capfd.readouterr().err == ""
