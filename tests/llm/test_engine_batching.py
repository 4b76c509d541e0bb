"""The transformers engine batches like an inference server: one queue for every caller, a freed
slot refilled at the next decode step, a row's tokens its own whatever shared its steps, and no host
cost of vocabulary size per reply.

The real tiny model on the CPU; a forward hook pushes the end-of-turn ids down where a test needs
replies of an exact length (only the model's text is steered, never the engine).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import torch

from rlver.llm.base import Completion, SamplingParams
from rlver.llm.local import LocalChatModel
from rlver.llm.scheduler import fifo_decode_steps, least_decode_steps
from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.records import Message

torch.set_num_threads(1)

SAMPLING = SamplingParams(temperature=1.0, top_p=0.95, max_tokens=8)


def chats(n: int) -> list[list[Message]]:
    return [[Message(role="user", content=f"day {i}: " + "work was long " * (i % 5))] for i in range(n)]


def exact_lengths(chat: LocalChatModel) -> None:
    """No stop id is ever drawn: every reply runs to its ``max_tokens``."""
    stops = list(chat.stop_token_ids)

    def push_down(mod: Any, args: Any, out: Any) -> Any:
        out.logits[..., stops] = -1e4
        return out

    chat.model.register_forward_hook(push_down)


def staggered(n: int) -> list[SamplingParams]:
    """Lengths 2..48 in a fixed shuffled order, one seed each."""
    lengths = [2 + (i * 37) % 47 for i in range(n)]
    return [SAMPLING.model_copy(update={"seed": 500 + i, "max_tokens": k}) for i, k in enumerate(lengths)]


def test_a_reply_costs_one_decode_and_nothing_of_vocabulary_size() -> None:
    net, tok = tiny_model_and_tokenizer(0)
    chat = LocalChatModel(net, tok, device="cpu")
    calls: dict[str, int] = {"get_vocab": 0, "decode": 0, "convert_tokens_to_ids": 0}
    for name in calls:
        original = getattr(tok, name)

        def spy(*args: Any, _name: str = name, _f: Any = original, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _f(*args, **kwargs)

        setattr(tok, name, spy)
    samplings = [SAMPLING.model_copy(update={"seed": i}) for i in range(8)]
    out = asyncio.run(chat.complete_each(chats(8), samplings))
    assert all(isinstance(c, Completion) and c.token_ids for c in out), out
    assert calls == {"get_vocab": 0, "decode": 8, "convert_tokens_to_ids": 0}, calls


def test_a_reply_alone_equals_the_same_reply_in_a_crowded_refilled_batch() -> None:
    net, tok = tiny_model_and_tokenizer(0)
    chat = LocalChatModel(net, tok, device="cpu", max_batch_size=4)
    exact_lengths(chat)
    target = SAMPLING.model_copy(update={"seed": 77, "max_tokens": 12})
    (alone,) = asyncio.run(chat.complete_each(chats(8)[5:6], [target]))
    assert isinstance(alone, Completion)
    steps_alone = chat.engine.scheduler.counts.decode_steps
    # 12 rows in 4 slots, of staggered lengths: the target (row 9) joins a running batch as a refill
    samplings = staggered(12)
    samplings[9] = target
    conversations = chats(12)
    conversations[9] = chats(8)[5]
    crowd = asyncio.run(chat.complete_each(conversations, samplings))
    counts = chat.engine.scheduler.counts
    assert counts.prefills > 2 and counts.decode_rows > 2 * (counts.decode_steps - steps_alone)
    got = crowd[9]
    assert isinstance(got, Completion)
    assert got.token_ids == alone.token_ids and len(got.token_ids or []) == 12
    assert got.token_logprobs == pytest.approx(alone.token_logprobs, abs=1e-5)
    for c, s in zip(crowd, samplings, strict=True):
        assert isinstance(c, Completion) and len(c.token_ids or []) == s.max_tokens


@pytest.mark.parametrize("how", ["complete_each", "concurrent complete"])
def test_a_freed_slot_takes_the_next_waiting_reply_at_the_next_step(how: str) -> None:
    """64 replies of 2-48 tokens in 16 slots, in one call or as 64 concurrent ``complete`` calls (the
    engine's queue batches them; nobody else does): the decode steps are exactly those of
    first-in-first-out refilling in the engine's admission order (all 64 were waiting when it first
    looked, so the largest budget first), i.e. a freed slot takes the next waiting reply at the next
    step, and at most 1.25 x the least any schedule could take (the call's own order: 1.26 x). The engine waits until all 64 are
    queued, so the count does not depend on how fast the event loop hands them over."""
    net, tok = tiny_model_and_tokenizer(0)
    chat = LocalChatModel(net, tok, device="cpu", max_batch_size=16)
    exact_lengths(chat)
    samplings, conversations = staggered(64), chats(64)
    scheduler, hold = chat.engine.scheduler, chat.engine.decoder._lock
    calls: list[list[int]] = []
    submit = scheduler.submit

    def counted(requests: list[Any]) -> None:  # passes every call on; opens the engine after the 64th row
        calls.append([r.sampling.max_tokens for r in requests])
        submit(requests)
        if sum(map(len, calls)) == len(samplings):
            hold.release()

    scheduler.submit = counted  # type: ignore[method-assign]

    async def concurrently() -> list[Any]:
        return await asyncio.gather(
            *(chat.complete(m, s) for m, s in zip(conversations, samplings, strict=True))
        )

    hold.acquire()
    if how == "complete_each":
        out = asyncio.run(chat.complete_each(conversations, samplings))
    else:
        out = asyncio.run(concurrently())
    lengths = [len(c.token_ids or []) for c in out]
    assert lengths == [s.max_tokens for s in samplings]
    assert len(calls) == (1 if how == "complete_each" else 64)
    assert sorted(k for call in calls for k in call) == sorted(lengths)
    # all 64 were waiting when the engine first looked: one cohort, the largest budget first
    steps = chat.engine.scheduler.counts.decode_steps
    assert steps == fifo_decode_steps(sorted(lengths, reverse=True), 16)
    assert steps <= 1.25 * least_decode_steps(lengths, 16), (steps, least_decode_steps(lengths, 16))


def _one_prompt_engine(slots: int) -> tuple[LocalChatModel, Callable[[str, int], Any]]:
    """The tiny model's chat in ``slots`` slots, each reply exactly its budget long, and a maker of
    engine requests for one fixed prompt: ``request(request_id, budget)``."""
    net, tok = tiny_model_and_tokenizer(0)
    chat = LocalChatModel(net, tok, device="cpu", max_batch_size=slots)
    exact_lengths(chat)
    prompt = tok.encode("day 1: work was long")
    stops = list(chat.stop_token_ids)

    def request(rid: str, budget: int) -> Any:
        sampling = SAMPLING.model_copy(update={"max_tokens": budget})
        (r,) = chat.engine._requests([prompt], sampling, [1], stops, rid)
        return r

    return chat, request


def test_a_request_is_overtaken_only_by_those_waiting_when_it_was_first_seen() -> None:
    """One slot. A (4 tokens) and B (2) are queued together; while A decodes, C (8 tokens, the largest
    budget) arrives. B was waiting before C was: B goes before C, so no later, longer request can hold
    a waiting one back; A and B, seen together, go largest budget first."""
    chat, request = _one_prompt_engine(slots=1)
    engine = chat.engine
    done: list[str] = []
    late = request("C", 8)

    def arrive_late(mod: Any, args: Any, out: Any) -> None:  # in the engine's thread, while A decodes
        if not late.future.done() and late.seen is None and late not in engine.scheduler._queue:
            engine.scheduler.submit([late])

    chat.model.register_forward_hook(arrive_late)
    first = [request("B", 2), request("A", 4)]
    for r in [*first, late]:
        r.future.add_done_callback(lambda f, rid=r.request_id: done.append(rid))
    engine.scheduler.run_here(first)
    assert [len(r.future.result()[0]) for r in (*first, late)] == [2, 4, 8]
    assert done == ["A", "B", "C"]


def test_a_request_without_a_token_budget_is_admitted_first_in_its_cohort() -> None:
    """``max_tokens`` null (up to the context's room, as a published-prompt request may be) is the
    largest budget, not an error: the admission order reads it before any row is decoded."""
    from rlver.llm.engine_request import Request
    from rlver.llm.scheduler import admission_order

    def request(name: str, budget: int | None, seen: int) -> Request:
        settings = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_tokens": budget}
        return Request([1], settings, SamplingParams(max_tokens=budget), None, frozenset(), name, seen=seen)

    waiting = [
        request("short", 4, 1),
        request("open", None, 1),
        request("long", 9, 1),
        request("later", None, 2),
    ]
    assert [r.request_id for r in admission_order(waiting)] == ["open", "long", "short", "later"]


def test_the_admission_barrier_runs_before_each_admission_that_follows_an_answer() -> None:
    """Four slots. A (3 tokens) and B (8) start together; the barrier stands in for a caller whose
    dialogue goes on when its answer lands: the moment A is answered, the barrier queues A's next
    turn, C, which joins at the very next admission (never later, whatever the thread timing). The
    barrier runs as the period starts and after each step that answered a row, before admitting."""
    chat, request = _one_prompt_engine(slots=4)
    engine = chat.engine
    a, b, c = request("A", 3), request("B", 8), request("C", 2)
    calls: list[tuple[int, bool]] = []

    def barrier() -> None:
        calls.append((engine.scheduler.counts.decode_steps, a.future.done()))
        if a.future.done() and c.seen is None and c not in engine.scheduler._queue:
            engine.scheduler.submit([c])

    assert engine.set_admission_barrier(barrier)
    engine.scheduler.run_here([a, b])
    engine.set_admission_barrier(None)
    # the start, A's answer (its 3rd token, sampled after 2 decode steps and answered before the 3rd
    # ran): C joins at the next admission; then C's answer (B's last row is held: no barrier)
    assert calls == [(0, False), (3, True), (5, True)]
    assert engine.scheduler.counts.prefills == 2
    assert [len(r.future.result()[0]) for r in (a, b, c)] == [3, 8, 2]
    # C's two tokens ran beside B's: no decode step of its own after B ended
    assert engine.scheduler.counts.decode_steps == 7
