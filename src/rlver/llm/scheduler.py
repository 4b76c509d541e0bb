"""Continuous batching for the transformers engine: one queue of requests, slots refilled at every
decode step.

Why the engine owns batching: a caller that forms its own batches (a rollout that waits for every
dialogue of a turn, a chunk that decodes to its longest row) leaves a finished row's slot empty until
the whole batch is done, and callers that ask one by one (concurrent ``complete`` calls, an async
environment) are never batched at all. Here every request, from any caller and any thread, waits in one
queue; one worker thread runs the decode loop, and after every decode step the free slots take the next
waiting requests (their prefill runs beside the step and their rows join the running batch's KV cache).

What a refill does not change: each row draws from its own seeded stream (``row_uniforms``) at its own
step index, so a row's tokens depend on its prompt and seed alone, never on which rows shared its
steps.

Admission order: the requests the worker first sees waiting at the same decode step form a cohort;
cohorts go in the order they were seen, and within one the largest token budget (``max_tokens``) goes
first, the order of arrival among equals (:func:`admission_order`). Why: the decode steps a set of
replies takes are set by its tail, the long replies that start late and then run with the slots nearly
empty; starting the long ones first (the longest-job-first rule for filling machines) shrinks it. Why
cohorts: a request is overtaken only by those that were already waiting when it was first seen, so no
stream of later, longer requests can hold it back. One call's rows (``generate``, ``complete_each``,
the rollout's batch) are queued at once and so share a cohort; where their budgets are equal (a
rollout) the order is the call's own.

Requests whose sampling settings differ (temperature, top-p, top-k) do not share a batch: a
request whose settings differ from the running batch's waits at the head of the queue until that batch
drains (overtaken by nothing seen after it).

Admission barrier (:meth:`Scheduler.set_barrier`): a caller whose requests must join at steps fixed by
its own work, not by wall time, registers a blocking callable; the worker calls it at the start of every
busy period and after every step that answered (or failed) a row, before it admits anyone. A rollout's
barrier waits, on the rollout's event loop, until every dialogue that can go on without I/O (the offline
user) has queued its next request (:func:`rlver.rollout.batching.settle`): so which rows share a decode
step, and so each row's log-probs to their last bit, is the same on every run and on resume, while a
user doing real I/O is not waited for and its request joins whenever it arrives. Without a barrier
(the verifiers environment, ``rlver chat``, a plain ``complete``) admission is as above, at once.

Out of memory: the rows in flight go back to the head of the queue in their order and the slot count is
halved (a row resampled from its seed draws the same tokens); a single row that still does not fit
fails with the engine's error. The decode state itself (prefill, merging and trimming the cache, one
step) is :mod:`rlver.llm.decoding`'s.
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlver.heartbeat import activity
from rlver.interrupt import raise_if_stopping
from rlver.llm.engine_request import Request
from rlver.llm.sampling import sample_tokens, to_host

if TYPE_CHECKING:
    from rlver.llm.decoding import Decoder, Running
    from rlver.llm.static_slots import StaticSlots, Turn


@dataclass
class Counts:
    """What the loop did, for tests and the bench: decode steps (one forward of the running batch),
    prefills, and the rows each decode step held (their sum over steps is the slot occupancy)."""

    decode_steps: int = 0
    prefills: int = 0
    decode_rows: int = 0
    slots_offered: int = 0


class Scheduler:
    """The queue and its worker thread (see the module docstring)."""

    def __init__(
        self,
        decoder: Decoder,
        max_slots: int,
        *,
        out_of_memory: Callable[[Request], BaseException],
        is_out_of_memory: Callable[[BaseException], bool],
    ) -> None:
        """``out_of_memory(request)``: the error for a single row that does not fit;
        ``is_out_of_memory(exc)``: whether a failure was an allocation failure."""
        self.decoder = decoder
        self.max_slots = max_slots
        self._oom_error = out_of_memory
        self._is_oom = is_out_of_memory
        self._queue: collections.deque[Request] = collections.deque()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self.counts = Counts()
        #: the worker's takes so far: a request's cohort is the take that first saw it waiting
        self._takes = 0
        #: Answers held back until the busy period's session has ended: the last rows of a period are
        #: answered after the model's training mode is restored, so a caller that gets its reply finds
        #: the model as it left it (a trainer that scores right after its rollout races no restore).
        self._held: list[tuple[Request, tuple[list[int], list[float]]]] = []
        #: the caller's admission barrier (``None``: admit at once; see the module docstring)
        self._barrier: Callable[[], None] | None = None
        #: a row was answered or failed since the last take: the barrier runs before the next one
        self._delivered = True

    def set_barrier(self, barrier: Callable[[], None] | None) -> None:
        """Register (or, with ``None``, remove) the admission barrier: a blocking callable the worker
        calls before admitting anyone at the start of a busy period and after a step that answered a
        row. A second barrier while one is set is refused (one caller's steps can be fixed, not two)."""
        with self._lock:
            if barrier is not None and self._barrier is not None:
                raise RuntimeError("the engine already has an admission barrier; remove it first")
            self._barrier = barrier

    # -- callers' side ------------------------------------------------------------------------------------
    def submit(self, requests: list[Request]) -> None:
        """Queue ``requests`` (after everything already waiting; :func:`admission_order` says who
        goes first); the worker starts if idle."""
        with self._lock:
            self._queue.extend(requests)
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="rlver-engine", daemon=True)
                self._worker.start()

    def run_here(self, requests: list[Request]) -> None:
        """Queue ``requests`` and run the loop in the calling thread until the queue is empty: the
        engine's own time with no thread hop, and a loop a profiler started in this thread records
        (benchmarks). Refused while the worker runs."""
        with self._lock:
            if self._worker is not None:
                raise RuntimeError("the engine's worker thread is running; run_here needs it idle")
            self._worker = threading.current_thread()
            self._queue.extend(requests)
        try:
            with self.decoder.session():
                self._busy()
        finally:
            self._answer_held()  # after the session: the model's mode is restored
            with self._lock:
                self._worker = None

    def waiting(self) -> int:
        with self._lock:
            return len(self._queue)

    # -- the worker ---------------------------------------------------------------------------------------
    def _take(self, room: int, key: tuple[float, float, int] | None) -> list[Request]:
        """Up to ``room`` requests that share ``key`` (the first one sets it when the batch is empty),
        in :func:`admission_order`, stopping at the first whose key differs (it waits for the batch to
        drain, overtaken by nobody behind it); every request still waiting is marked seen at this take."""
        self._wait_at_barrier()
        taken: list[Request] = []
        with self._lock:
            self._takes += 1
            live = [r for r in self._queue if not r.future.cancelled()]
            for r in live:
                if r.seen is None:
                    r.seen = self._takes
            if room > 0 and live:
                for r in admission_order(live):
                    if len(taken) == room:
                        break
                    if key is None:
                        key = r.key
                    if r.key != key:
                        break
                    taken.append(r)
            chosen = {id(r) for r in taken}
            self._queue = collections.deque(r for r in live if id(r) not in chosen)
        return taken

    def _wait_at_barrier(self) -> None:
        """Run the barrier when a row was answered since the last take (or a busy period starts)."""
        barrier = self._barrier
        if barrier is not None and self._delivered and not self._held:
            barrier()  # held answers end the period first: its next one starts at the barrier
        self._delivered = False

    def _give_back(self, requests: list[Request]) -> None:
        with self._lock:
            self._queue.extendleft(reversed(requests))

    def _finish_or_stop(self) -> bool:
        """Whether the worker may end: nothing waits (checked under the lock a submitter takes)."""
        with self._lock:
            if self._queue:
                return False
            self._worker = None
            return True

    def _run(self) -> None:
        """Busy periods until the queue is empty; the decoder's session (eval mode, inference mode,
        one autocast region) spans each."""
        try:
            while True:
                with self.decoder.session():
                    self._busy()
                self._answer_held()  # after the session: the model's mode is restored
                if self._finish_or_stop():
                    return
        except BaseException as exc:  # a stop request (Ctrl-C): every waiting caller hears of it
            self._answer_held()  # finished rows keep their answers
            with self._lock:
                waiting, self._queue = list(self._queue), collections.deque()
                self._worker = None
            for r in waiting:
                _fail(r, exc)

    def _busy(self) -> None:
        """Refill, sample, step, until no row is live and nothing waits."""
        self._delivered = True  # a busy period starts at the barrier: every caller has queued
        if self.decoder.static_cache:
            self._busy_static()
            return
        slots = self.max_slots
        batch: Running | None = None
        while True:
            live = batch.requests if batch is not None else []
            newcomers = self._take(slots - len(live), live[0].key if live else None)
            if not newcomers and batch is None:
                return
            self._answer_held()  # the period goes on: held answers wait no longer
            try:
                raise_if_stopping()
                if newcomers:
                    self.counts.prefills += 1
                    batch = self.decoder.join(batch, newcomers)
                assert batch is not None
                batch = self._sample_and_step(batch, slots)
            except Exception as exc:
                batch = None
                slots = self._recover([*live, *newcomers], exc, slots)
            except BaseException as exc:  # a stop request: the rows in flight fail with it, then the rest
                for r in [*live, *newcomers]:
                    _fail(r, exc)
                raise

    def _busy_static(self) -> None:
        """The static-cache path (``compile_decode``): fixed slots on a static KV cache
        (:mod:`rlver.llm.static_slots`), a freed slot taking the next waiting request at the next
        step as on the dynamic path; one turn reads the tokens in flight and launches the next step."""
        from rlver.llm.static_slots import held_slots

        slots = self.max_slots
        batch = held_slots(self.decoder, slots)
        while True:
            newcomers = self._take(batch.room(), batch.key())
            if not newcomers and batch.idle():
                return
            self._answer_held()  # the period goes on: held answers wait no longer
            rows = [*batch.requests(), *newcomers]
            try:
                raise_if_stopping()
                self.counts.prefills += bool(newcomers)
                turn = self._static_turn(batch, newcomers)
                for request, result in turn.finished:
                    self._answer(request, result, last=batch.idle())
            except Exception as exc:
                self.decoder.held_static = None
                slots = self._recover(rows, exc, slots)
                batch = held_slots(self.decoder, slots)
            except BaseException as exc:  # a stop request: the rows in flight fail with it, then the rest
                batch.clear()
                for r in rows:
                    _fail(r, exc)
                raise

    def _static_turn(self, batch: StaticSlots, newcomers: list[Request]) -> Turn:
        """One turn of the static slots, counted like a step of the dynamic path."""
        turn = batch.turn(newcomers)
        if turn.stepped:
            self.counts.decode_steps += 1
            self.counts.decode_rows += turn.used
            self.counts.slots_offered += batch.slots
        return turn

    def _recover(self, rows: list[Request], exc: Exception, slots: int) -> int:
        """After a failed step: out of memory puts ``rows`` back at the head of the queue and halves
        the slots (a single row that does not fit fails with the engine's error); any other failure
        fails ``rows``. The slots to go on with."""
        self._delivered = True  # failed rows' callers go on too: the barrier runs before the next take
        if not self._is_oom(exc):
            for r in rows:
                _fail(r, exc)
            return slots
        from rlver.llm.decoding import release_cached_memory

        release_cached_memory()
        if len(rows) == 1:
            _fail(rows[0], self._oom_error(rows[0]))
            return slots
        self._give_back(rows)  # sampled again from their seeds: the same tokens
        return max(1, len(rows) // 2)

    def _sample_and_step(self, batch: Running, slots: int) -> Running | None:
        """One token for every row; finished rows answer their callers and leave; the others decode
        one step (``None`` when none is left)."""
        s = batch.requests[0].settings
        ids, lps = sample_tokens(
            batch.logits,
            batch.step_uniforms(),
            float(s["temperature"]),
            float(s["top_p"]),
            int(s["top_k"]),
        )
        host_ids, host_lps = to_host(ids, lps)  # the step's one copy: [2, rows]
        keep: list[int] = []
        done: list[int] = []
        for b, (req, tok, lp) in enumerate(zip(batch.requests, host_ids, host_lps, strict=True)):
            tokens, logps = batch.tokens[b], batch.logps[b]
            tokens.append(tok)
            logps.append(lp)
            if self.decoder.row_ends(req, tokens, batch.budgets[b]):
                done.append(b)
            else:
                keep.append(b)
        activity.add_tokens(len(host_ids))  # progress lines (rlver.heartbeat)
        for b in done:
            self._answer(batch.requests[b], (batch.tokens[b], batch.logps[b]), last=not keep)
        if not keep:
            return None
        self.counts.decode_steps += 1
        self.counts.decode_rows += len(keep)
        self.counts.slots_offered += slots
        return self.decoder.step(batch, ids, keep)

    def _answer(self, request: Request, result: tuple[list[int], list[float]], *, last: bool) -> None:
        """Answer ``request`` now, or hold it to the end of the busy period when its batch is done
        and nothing waits (``last``): see ``_held``."""
        self._delivered = True
        if last and not self.waiting():
            self._held.append((request, result))
        elif not request.future.done():
            request.future.set_result(result)

    def _answer_held(self) -> None:
        held, self._held = self._held, []
        for request, result in held:
            if not request.future.done():
                request.future.set_result(result)


def _fail(request: Request, exc: BaseException) -> None:
    if not request.future.done():
        request.future.set_exception(exc)


def admission_order(waiting: list[Request]) -> list[Request]:
    """The waiting requests in the order they may take a slot: cohort by cohort (the take that first
    saw each waiting), within one the largest ``max_tokens`` first, arrival order among equals (a
    stable sort of the queue, which is in arrival order)."""
    return sorted(waiting, key=lambda r: (r.seen or 0, -_budget(r)))


def _budget(request: Request) -> float:
    """A request's token budget; none set (``max_tokens`` null: up to the context's room) is the
    largest there is."""
    budget = request.settings.get("max_tokens")
    return math.inf if budget is None else float(budget)


def least_decode_steps(lengths: list[int], slots: int) -> int:
    """The fewest decode forwards that can feed back every token of replies of ``lengths`` tokens but
    each reply's last: a step feeds at most ``slots`` rows, and a reply's tokens come one step after
    another. What the engine's occupancy is measured against (bench/engine_speed.py, its tests)."""
    return max(math.ceil(sum(k - 1 for k in lengths) / slots), max(lengths) - 1)


def fifo_decode_steps(lengths: list[int], slots: int) -> int:
    """The decode steps of first-in-first-out refilling that never leaves a slot empty while a reply
    waits: the best an engine that does not know the lengths ahead can do in arrival order, and what
    :class:`Scheduler` takes (its tests assert the equality)."""
    queue, steps = list(lengths), 0
    live: list[int] = []
    while queue or live:
        while queue and len(live) < slots:
            live.append(queue.pop(0))
        live = [k - 1 for k in live if k > 1]
        steps += bool(live)
    return steps
