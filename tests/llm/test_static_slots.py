"""The static-cache path refills its slots: a freed slot takes the next waiting request at the next
step, each row writing at its own column and seeing its own columns alone, so a row's tokens do not
depend on what shared its steps or on what its slot held before.

The real tiny model on the CPU, with the static path turned on as ``compile_decode`` turns it on on
CUDA (eager here; ``tests/llm/test_graph_step.py`` compiles the step). Forward hooks steer only the
model's text: no stop id at all (replies run to their budget), or the stop id forced at one position
(replies end by a drawn stop, the case the host learns of one step late).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch

from rlver.llm.base import Completion, SamplingParams
from rlver.llm.local import LocalChatModel
from rlver.llm.scheduler import fifo_decode_steps, least_decode_steps
from rlver.llm.static_slots import static_decode_steps
from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.records import Message
from test_engine_batching import SAMPLING, chats, exact_lengths, staggered

torch.set_num_threads(1)


def chat_with(slots: int, *, static: bool = True) -> LocalChatModel:
    net, tok = tiny_model_and_tokenizer(0)
    chat = LocalChatModel(net, tok, device="cpu", max_batch_size=slots)
    chat.engine.decoder.static_cache = static  # what compile_decode turns on, without torch.compile
    return chat


def replies(
    chat: LocalChatModel, conversations: list[Any], samplings: list[SamplingParams]
) -> list[Completion]:
    out = asyncio.run(chat.complete_each(conversations, samplings))
    assert all(isinstance(c, Completion) for c in out), out
    return [c for c in out if isinstance(c, Completion)]


def stop_at(chat: LocalChatModel, position: int) -> None:
    """The stop id is drawn for the token at ``position`` and never before, so a reply to a prompt of
    ``n`` tokens ends by a stop after ``position - n + 1`` tokens."""
    stops = list(chat.stop_token_ids)

    def steer(mod: Any, args: Any, kwargs: Any, out: Any) -> Any:
        out.logits[..., stops] = -1e4
        ends = kwargs["position_ids"][:, -1] + 1 >= position
        out.logits[ends, -1, stops[0]] = 1e4
        return out

    chat.model.register_forward_hook(steer, with_kwargs=True)


def test_a_reply_alone_equals_the_same_reply_in_a_crowded_refilled_static_batch() -> None:
    """12 replies of staggered length in 4 static slots; the target (row 9) takes a slot another row
    left, at columns that row wrote. Its tokens equal those it draws alone on the static path and on
    the dynamic path, and its log-probs too (a static step's shapes never change, so alone and crowded
    its decode steps run the same kernels; only the prefill's batch differs)."""
    target = SAMPLING.model_copy(update={"seed": 77, "max_tokens": 12})
    alone: dict[bool, Completion] = {}
    for static in (False, True):
        chat = chat_with(4, static=static)
        exact_lengths(chat)
        (alone[static],) = replies(chat, chats(8)[5:6], [target])
    chat = chat_with(4)
    exact_lengths(chat)
    samplings, conversations = staggered(12), chats(12)
    samplings[9], conversations[9] = target, chats(8)[5]
    crowd = replies(chat, conversations, samplings)
    counts = chat.engine.scheduler.counts
    assert counts.prefills >= 4 and counts.decode_rows > 3 * counts.decode_steps // 2  # refilled, crowded
    assert [len(c.token_ids or []) for c in crowd] == [s.max_tokens for s in samplings]
    got = crowd[9]
    assert got.token_ids == alone[True].token_ids == alone[False].token_ids
    # equal to the last bit on the development box; the prefill's batch shape differs, so allow 1e-6
    assert got.token_logprobs == pytest.approx(alone[True].token_logprobs, abs=1e-6)
    assert got.token_logprobs == pytest.approx(alone[False].token_logprobs, abs=1e-5)


def test_static_slots_refill_at_the_next_step_when_replies_end_at_their_budget() -> None:
    """64 replies of 2-48 tokens in 16 static slots, ending at their budgets: the host knows which
    token is a row's last before reading it, so its slot takes the next request (longest first) in
    the step of the turn that reads that token. Here that is the least any schedule could take (96;
    the dynamic path, whose freed slot sits out the step it is freed in, takes 99)."""
    chat = chat_with(16)
    exact_lengths(chat)
    out = replies(chat, chats(64), staggered(64))
    lengths = [len(c.token_ids or []) for c in out]
    assert lengths == [s.max_tokens for s in staggered(64)]
    steps = chat.engine.scheduler.counts.decode_steps
    assert steps == static_decode_steps(sorted(lengths, reverse=True), 16, known_ends=True)
    assert steps <= 1.25 * least_decode_steps(lengths, 16), (steps, least_decode_steps(lengths, 16))
    counts = chat.engine.scheduler.counts
    assert counts.decode_rows == sum(k - 1 for k in lengths)  # every row a step fed went on


def test_a_reply_that_ends_by_a_stop_costs_its_static_slot_one_step() -> None:
    """48 replies of 2-50 tokens that end by a drawn stop id (equal budgets: arrival order): the
    host reads a row's stop one step late, so its slot decodes one surplus step before it is
    refilled (the slot time the dynamic path, which samples before it steps, leaves the slot empty),
    and the last reply's surplus step ends the period: one step more than the dynamic path."""
    conversations = [[Message(role="user", content="so " * ((i * 37) % 47))] for i in range(48)]
    sampling = [SAMPLING.model_copy(update={"seed": 900 + i, "max_tokens": 64}) for i in range(48)]
    counted: dict[bool, tuple[list[int], int]] = {}
    for static in (False, True):
        chat = chat_with(16, static=static)
        last = max(len(chat.prompt_ids(m)) for m in conversations) + 1
        stop_at(chat, last)
        out = replies(chat, conversations, sampling)
        assert {c.finish_reason for c in out} == {"stop"}
        counted[static] = ([len(c.token_ids or []) for c in out], chat.engine.scheduler.counts.decode_steps)
    lengths, steps = counted[True]
    assert counted[False][0] == lengths and len(set(lengths)) > 20 and min(lengths) == 2
    assert counted[False][1] == fifo_decode_steps(lengths, 16)
    assert steps == static_decode_steps(lengths, 16, known_ends=False) == counted[False][1] + 1


def test_a_newcomer_longer_than_the_cache_grows_it_under_the_running_rows() -> None:
    """Two static slots. A (40 tokens) starts on a cache of 256 columns; while it decodes, B arrives
    needing 300 new tokens: the cache grows to 512 columns with A's columns copied over, and both
    replies equal those drawn alone."""

    def run(first: tuple[int, int], late: tuple[int, int] | None = None) -> tuple[list[list[int]], int]:
        """(seed, budget) of the row queued first and of the one submitted while it decodes."""
        chat = chat_with(2)
        exact_lengths(chat)
        engine = chat.engine
        prompt = chat.prompt_ids(chats(1)[0])

        def request(seed: int, budget: int) -> Any:
            sampling = SAMPLING.model_copy(update={"max_tokens": budget})
            (r,) = engine._requests([prompt], sampling, [seed], list(chat.stop_token_ids), str(seed))
            return r

        queued = [request(*first)]
        arriving = [request(*late)] if late else []

        def arrive(mod: Any, args: Any, out: Any) -> None:  # in the engine's thread, while A decodes
            if arriving and arriving[0].seen is None and arriving[0] not in engine.scheduler._queue:
                engine.scheduler.submit(arriving)

        chat.model.register_forward_hook(arrive)
        engine.scheduler.run_here(queued)
        return [r.future.result()[0] for r in queued + arriving], engine.decoder.held_static.cache.length

    (a_alone,), short = run((1, 40))
    (b_alone,), _ = run((2, 300))
    (a, b), grown = run((1, 40), (2, 300))
    assert (short, grown) == (256, 512)
    assert a == a_alone and len(a) == 40
    assert b == b_alone and len(b) == 300


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_greedy_replies_on_refilled_static_slots_are_the_dynamic_paths(attention: str) -> None:
    """Temperature 0 (no uniforms at all): 8 replies in 3 static slots equal the dynamic path's, with
    sdpa attention (a boolean mask) and eager attention (an additive one)."""
    greedy = [SAMPLING.model_copy(update={"temperature": 0.0, "max_tokens": 3 + i}) for i in range(8)]
    out = {}
    for static in (False, True):
        chat = chat_with(3, static=static)
        chat.model.set_attn_implementation(attention)
        exact_lengths(chat)
        out[static] = replies(chat, chats(8), greedy)
    assert [c.token_ids for c in out[True]] == [c.token_ids for c in out[False]]
    assert [len(c.token_ids or []) for c in out[True]] == [3 + i for i in range(8)]
    for s, d in zip(out[True], out[False], strict=True):
        assert s.token_logprobs == pytest.approx(d.token_logprobs, abs=1e-5)
