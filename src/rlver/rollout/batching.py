"""The policy's side of a rollout: what every dialogue asks for its next reply.

One home for batching: a policy that batches requests itself (:attr:`ChatModel.queues_requests`: the
local engine, whose one queue refills its slots as rows end) and an endpoint (it takes concurrent
requests) are sent each dialogue's request alone, the moment its user has spoken
(:class:`PolicyQueue` passes it through). The runner forms batches only for a model that generates one
batch at a time and has no queue of its own (``batch_serially`` without ``queues_requests``): one
``complete_each`` over every request waiting when the policy is free.

Why a rollout stays reproducible when the engine batches: a row's log-probs depend, in their last bits,
on which rows share its decode steps, so the step at which a request joins must not depend on wall
time. The runner hands the engine an admission barrier (:func:`loop_barrier`): before the engine admits
waiting requests after a row's answer, it waits until the rollout's event loop has settled
(:func:`settle`), i.e. every dialogue whose user answers without I/O (the offline user, a scripted one)
has queued its next request; they are then admitted in the order they were queued, which the loop
makes the same on every run. A user doing real I/O is not waited for: its request joins when it comes.

What is batched does not change what is sampled: each request carries its own seed, and the local
sampler draws a row's tokens from that seed and its prompt alone, whatever else shares the batch.

:class:`Busy` clocks give the step's timing metrics: how long a generation was in flight, how long a
simulator call was, and how long the policy stood idle while dialogues waited on their users.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rlver.errors import PolicyOutOfMemoryError
from rlver.llm.base import ChatModel, Completion, MessagesLike, SamplingParams

#: One answer from the queue: the completion (or the error that failed it) and the batch's wall time.
Answer = tuple[Completion | BaseException, float]


@dataclass
class RolloutTimes:
    """Wall-clock split of one rollout, filled in by the runner (``time/*`` metrics of a step)."""

    #: seconds with a policy generation in flight
    policy_s: float = 0.0
    #: seconds with at least one simulator call (opening or reply) in flight, semaphore wait included
    simulator_s: float = 0.0
    #: seconds the policy had nothing to generate (nothing queued, nothing in flight) while
    #: dialogues were still live, i.e. every live dialogue was waiting on its simulated user
    policy_idle_s: float = 0.0
    #: generation batches the runner formed (none when the policy batches requests itself), and the
    #: dialogue turns asked of the policy
    batches: int = 0
    requests: int = 0


class Busy:
    """Wall time during which at least one call of some kind was in flight (a union of intervals).

    Summing each call's own duration would count overlapping calls twice; a rollout's simulator calls
    overlap by design, and what a user wants to know is how much of the wall clock they held.
    """

    def __init__(self) -> None:
        self.active = 0
        self.since = 0.0
        self.total = 0.0

    def enter(self) -> None:
        if self.active == 0:
            self.since = time.perf_counter()
        self.active += 1

    def exit(self) -> None:
        self.active -= 1
        if self.active == 0:
            self.total += time.perf_counter() - self.since


@dataclass
class _Request:
    messages: MessagesLike
    sampling: SamplingParams
    answer: asyncio.Future[Answer]


@dataclass
class PolicyQueue:
    """The dialogues' policy requests; see the module docstring.

    ``direct``: each request goes to the policy alone, the moment it is asked (a policy that batches
    requests itself, an endpoint). Otherwise the queue forms batches; ``serial``: one at a time (a
    model in this process without a queue: a second batch would only wait behind the first).
    """

    policy: ChatModel
    serial: bool
    times: RolloutTimes
    direct: bool = False
    pending: list[_Request] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    #: wall time with a request queued or generating: the policy's demand (idle is the rest)
    demand: Busy = field(default_factory=Busy)
    generating: Busy = field(default_factory=Busy)
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    #: checked before each batch: an error here (a transcript that cannot be written) stops the run
    stop_errors: list[BaseException] = field(default_factory=list)

    async def ask(self, messages: MessagesLike, sampling: SamplingParams) -> Answer:
        """Queue one dialogue's request and wait for its reply (``PolicyOutOfMemoryError`` raises)."""
        if self.direct:
            return await self._one(messages, sampling)
        request = _Request(messages, sampling, asyncio.get_running_loop().create_future())
        self.demand.enter()
        try:
            self.pending.append(request)
            self.arrived.set()
            return await request.answer
        finally:
            self.demand.exit()

    async def _one(self, messages: MessagesLike, sampling: SamplingParams) -> Answer:
        """One request, straight to the policy; its wall time is its own (queue wait included). An
        error recorded for the queue (a transcript that cannot be written) stops the run first."""
        if self.stop_errors:
            raise self.stop_errors[0]
        self.times.requests += 1
        self.demand.enter()
        self.generating.enter()
        t0 = time.perf_counter()
        try:
            (result,) = await generate(self.policy, [messages], [sampling])
        finally:
            self.generating.exit()
            self.demand.exit()
        return result, time.perf_counter() - t0

    def close(self) -> None:
        """No dialogue is left: :meth:`serve` returns once the batches in flight have ended."""
        self.closed = True
        self.arrived.set()

    async def serve(self) -> None:
        """Run batches until :meth:`close`: everything queued when the policy is free, in one call
        (nothing to run when requests go straight to the policy)."""
        while not self.direct:
            await self.arrived.wait()
            await settle()
            self.arrived.clear()
            if self.stop_errors:
                raise self.stop_errors[0]
            if self.pending:
                batch, self.pending = self.pending, []
                task = asyncio.create_task(self._run(batch))
                self.in_flight.add(task)
                task.add_done_callback(self.in_flight.discard)
                if self.serial:
                    await task
            elif self.closed:
                if self.in_flight:
                    await asyncio.gather(*self.in_flight)
                return

    async def _run(self, batch: list[_Request]) -> None:
        """One ``complete_each`` over ``batch``; every request gets its answer (or the OOM error)."""
        self.times.batches += 1
        self.times.requests += len(batch)
        self.generating.enter()
        t0 = time.perf_counter()
        try:
            results = await generate(self.policy, [r.messages for r in batch], [r.sampling for r in batch])
        except PolicyOutOfMemoryError as exc:
            for r in batch:
                if not r.answer.done():
                    r.answer.set_exception(exc)
            return
        finally:
            self.generating.exit()
        batch_s = time.perf_counter() - t0
        for r, result in zip(batch, results, strict=True):
            if not r.answer.done():
                r.answer.set_result((result, batch_s))
        if self.pending:
            self.arrived.set()  # requests that came in during this batch are the next one


async def generate(
    policy: ChatModel, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
) -> list[Completion | BaseException]:
    """One policy call; a failure fails every row of it in place, except running out of memory,
    which fails the run (dropping the dialogues that did not fit would bias what is trained)."""
    try:
        out = await policy.complete_each(batch, samplings)
    except PolicyOutOfMemoryError:
        raise
    except Exception as exc:
        return [exc] * len(batch)
    if len(out) != len(batch):
        err = RuntimeError(f"policy returned {len(out)} completions for {len(batch)} prompts")
        return [err] * len(batch)
    return list(out)


#: Most event-loop turns :func:`settle` waits; a coroutine that never awaits real I/O cannot hold a
#: batch back for longer than this.
SETTLE_TURNS = 1000


async def settle() -> None:
    """Let every coroutine that can go on without waiting (on I/O, a timer or a thread) do so first.

    A simulator that answers without real I/O (the offline user, a scripted one) hands its reply back
    within a few loop turns; without this, the first such dialogue would start a batch of one and
    the rest would wait behind it. The loop's ready queue is read where the event loop has one
    (CPython's); elsewhere a fixed number of turns is waited.
    """
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)
    turns = SETTLE_TURNS if ready is not None else 64
    for _ in range(turns):
        await asyncio.sleep(0)
        if ready is not None and not ready:
            return


#: How often a barrier waiting on the loop checks that the loop still runs (a loop closed under a
#: Ctrl-C must not leave the engine's worker waiting for ever).
BARRIER_POLL_S = 0.05


def loop_barrier(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """An admission barrier for an engine's worker thread (:meth:`ChatModel.set_admission_barrier`):
    it runs :func:`settle` on ``loop`` and blocks until it is done, so every dialogue that can go on
    without I/O has queued its request first. Called on the loop's own thread (an engine run in the
    caller's thread), or once the loop has stopped, it returns at once instead of deadlocking."""
    owner = threading.get_ident()  # built on the loop's thread

    def barrier() -> None:
        if threading.get_ident() == owner or loop.is_closed() or not loop.is_running():
            return
        settled = threading.Event()

        def start() -> None:  # on the loop: the settle is made there, so a closed loop leaves none
            asyncio.ensure_future(settle()).add_done_callback(lambda _: settled.set())

        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # the loop closed meanwhile
            return
        while not settled.wait(BARRIER_POLL_S):
            if loop.is_closed() or not loop.is_running():
                return  # a Ctrl-C ended the loop: its tasks (the settle among them) are cancelled

    return barrier
