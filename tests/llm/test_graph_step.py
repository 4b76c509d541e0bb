"""The static-cache decode step is one graph (``torch.compile(fullgraph=True)`` captures forward and
sampling without a break), also while freed slots are refilled between steps, and a step asks the host
one thing: its ids, read one step late.

On the CPU, with the tiny model: ``aot_eager`` traces the whole step as inductor would (a graph break
fails ``fullgraph=True`` the same way), without generating C++ (minutes on this box). The CUDA graph
itself needs a GPU (``make gpu-bench``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch.utils._python_dispatch import TorchDispatchMode

from rlver.llm.base import Completion, SamplingParams
from rlver.llm.graph_step import decode_step
from rlver.llm.local import LocalChatModel
from rlver.llm.static_slots import StaticSlots
from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.records import Message

torch.set_num_threads(1)

SAMPLING = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=10)
CHATS = [[Message(role="user", content=f"day {i}: " + "so tired " * i)] for i in range(4)]


def static_chat() -> LocalChatModel:
    """Two static slots for the four chats: the later ones refill slots the first ones leave."""
    net, tok = tiny_model_and_tokenizer(0)
    chat = LocalChatModel(net, tok, device="cpu", max_batch_size=2)
    chat.engine.decoder.static_cache = True  # the compiled path's cache, on the CPU
    return chat


def sample(chat: LocalChatModel) -> list[Completion]:
    samplings = [
        SAMPLING.model_copy(update={"seed": 40 + i, "max_tokens": 4 + 3 * i}) for i in range(len(CHATS))
    ]
    out = asyncio.run(chat.complete_each(CHATS, samplings))
    assert all(isinstance(c, Completion) for c in out), out
    return [c for c in out if isinstance(c, Completion)]


class HostSyncs(TorchDispatchMode):
    """Counts the ops that make the host wait for a value on the device (``.item()``, ``bool(t)``,
    data-dependent shapes)."""

    SYNCING = ("_local_scalar_dense", "is_nonzero", "nonzero", "equal")

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.__name__.split(".")[0] in self.SYNCING:
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.slow
def test_the_decode_step_compiles_whole_and_asks_the_host_once_a_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    eager = sample(static_chat())
    chat = static_chat()
    decoder = chat.engine.decoder
    backend = CompileCounterWithBackend("aot_eager")  # counts the graphs dynamo hands it
    compiled = torch.compile(decode_step, backend=backend, fullgraph=True, dynamic=False)
    steps: list[int] = []

    def counted(*args: Any) -> Any:  # counted outside the graph (a hook inside would be traced)
        steps.append(1)
        return compiled(*args)

    decoder.compiled_step = counted
    sample(chat)  # the first call traces the step (a graph break raises here)
    graphs = backend.frame_count
    turns: list[int] = []
    turn = StaticSlots.turn

    def counted_turn(self: StaticSlots, newcomers: list[Any]) -> Any:
        turns.append(len(newcomers))
        return turn(self, newcomers)

    monkeypatch.setattr(StaticSlots, "turn", counted_turn)
    reads: list[str] = []
    for name in ("tolist", "item", "cpu", "numpy"):
        original = getattr(torch.Tensor, name)

        def spy(self: torch.Tensor, *args: Any, _name: str = name, _f: Any = original, **kw: Any) -> Any:
            reads.append(_name)
            return _f(self, *args, **kw)

        monkeypatch.setattr(torch.Tensor, name, spy)
    steps.clear()
    with HostSyncs() as syncs:
        out = sample(chat)
    monkeypatch.undo()
    assert [c.token_ids for c in out] == [c.token_ids for c in eager]
    for c, e in zip(out, eager, strict=True):
        assert c.token_logprobs == pytest.approx(e.token_logprobs, abs=1e-5)
    assert len([n for n in turns if n]) >= 3  # the first two, then refills
    # one read a turn (the newcomers' first tokens, from their prefill, included), nothing else
    assert 0 < len(steps) <= len(turns)
    assert reads == ["tolist"] * len(turns), reads
    assert syncs.count == 0, syncs.count
    assert backend.frame_count == graphs  # refills changed no guard: the graph was not traced again


def test_the_static_path_samples_what_the_continuous_batch_samples() -> None:
    net, tok = tiny_model_and_tokenizer(0)
    dynamic = sample(LocalChatModel(net, tok, device="cpu", max_batch_size=4))
    static = sample(static_chat())
    for d, s in zip(dynamic, static, strict=True):
        assert s.token_ids == d.token_ids and s.finish_reason == d.finish_reason
        assert s.token_logprobs == pytest.approx(d.token_logprobs, abs=1e-5)
