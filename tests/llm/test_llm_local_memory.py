"""What the local sampler keeps in memory: prefill logits of the sampled position only, one bf16 cast of
the weights per generation, and rows that run out of memory sampled again in fewer slots (never a dropped dialogue)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rlver.errors import PolicyOutOfMemoryError
from rlver.llm.base import SamplingParams
from rlver.llm.local import LocalChatModel
from rlver.llm.precision import compute_in_bf16
from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.records import Message

CONVS = [[Message(role="user", content=text)] for text in ("hello there", "I feel sad today", "ok")]
SAMPLING = SamplingParams(temperature=1.0, max_tokens=6, seed=0)


def _generate(llm: LocalChatModel, convs: list[list[Message]] = CONVS) -> list[Any]:
    return asyncio.run(llm.complete_many(convs, SAMPLING))


def test_prefill_computes_logits_for_the_last_position_only() -> None:
    net, tok = tiny_model_and_tokenizer()
    shapes: list[tuple[int, ...]] = []
    inner = net.forward

    def recording(*args: Any, **kwargs: Any) -> Any:
        out = inner(*args, **kwargs)
        shapes.append(tuple(out.logits.shape))
        return out

    net.forward = recording  # type: ignore[method-assign]
    llm = LocalChatModel(net, tok, device="cpu")
    _generate(llm)
    assert shapes, "no forward pass seen"
    assert shapes[0][:2] == (len(CONVS), 1), f"prefill logits {shapes[0]}: every prompt position computed"


class _CastCounter(TorchDispatchMode):
    """Counts fp32 -> bf16 copies of 2-D tensors (the weight matrices) as they run."""

    def __init__(self) -> None:
        super().__init__()
        self.casts = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default:
            src = args[0]
            if src.dtype == torch.float32 and kwargs.get("dtype") == torch.bfloat16 and src.dim() == 2:
                self.casts += 1
        return func(*args, **kwargs)


def test_bf16_weights_are_cast_once_per_generation_not_per_step() -> None:
    net, tok = tiny_model_and_tokenizer()
    compute_in_bf16(net, torch.device("cpu"))
    matrices = sum(1 for p in net.parameters() if p.dim() == 2)
    llm = LocalChatModel(net, tok, device="cpu")
    with _CastCounter() as counter:
        outs = _generate(llm)
    steps = max(len(o.token_ids) for o in outs)
    assert steps > 2, "the reply must span several decode steps for the count to mean anything"
    assert counter.casts <= matrices + 2, f"{counter.casts} weight casts for {matrices} matrices"


@pytest.mark.parametrize("static", [False, True], ids=["dynamic cache", "static slots"])
def test_out_of_memory_halves_the_slots_and_samples_the_same_tokens(static: bool) -> None:
    """The device fails any forward of more than one row (the model's own forward raises, as an
    allocation would): the rows in flight go back to the queue, the slots halve to one, and every row
    samples the tokens it samples with room to spare (its seed alone decides them). The same on the
    static slots of ``compile_decode`` (their cache is made again for the fewer slots)."""
    net, tok = tiny_model_and_tokenizer()
    llm = LocalChatModel(net, tok, device="cpu")
    llm.engine.decoder.static_cache = static
    want = [o.token_ids for o in _generate(llm)]
    sizes: list[int] = []

    def tight(mod: Any, args: Any, kwargs: Any) -> None:
        sizes.append(int(kwargs["input_ids"].shape[0]))
        if sizes[-1] > 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 54.00 GiB")

    net.register_forward_pre_hook(tight, with_kwargs=True)
    got = _generate(llm)
    assert all(not isinstance(o, BaseException) for o in got)
    assert [o.token_ids for o in got] == want  # a row's sample depends on its own seed only
    assert sizes[0] == 3 and set(sizes[1:]) == {1}


def test_a_single_row_out_of_memory_fails_the_call_naming_what_to_lower() -> None:
    net, tok = tiny_model_and_tokenizer()
    llm = LocalChatModel(net, tok, device="cpu")

    def never(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    net.register_forward_pre_hook(never, with_kwargs=True)
    with pytest.raises(PolicyOutOfMemoryError, match=r"rollout\.max_new_tokens"):
        _generate(llm)
