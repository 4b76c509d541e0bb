"""The update's log-probs and entropy computed in chunks equal the whole-sequence computation.

Why chunks: the full-vocabulary tensors of a micro-batch (logits, fp32 copy, log-softmax, the entropy's
softmax) dominate an update's memory; ``policy_forward`` runs the head over ``chunk_tokens`` positions
at a time and checkpoints each chunk, so only one chunk's tensors live at once (docs/memory.md). The
numbers must not change: these tests compare values and gradients with the unchunked path. They
would all still pass with the checkpoint gone (plain autograd gives the same numbers), so one test
measures what the backward pass keeps instead (:func:`test_the_backward_keeps_no_full_vocabulary_tensor`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from rlver.llm.precision import compute_in_bf16
from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.train import batch as batch_mod
from rlver.train.batch import MicroBatch, policy_forward


def _micro_batch(vocab: int, rows: int = 3, width: int = 40) -> MicroBatch:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (rows, width), generator=g)
    attn = torch.ones_like(ids)
    attn[1, 30:] = 0  # a right-padded row
    amask = torch.ones((rows, width - 1))
    return MicroBatch(list(range(rows)), ids, attn, amask)


def _whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force the unchunked path (the model's own forward), the reference the chunks must equal."""
    monkeypatch.setattr(batch_mod, "_body_and_head", lambda model: None)


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("chunk", [7, 64, 10_000])
def test_chunked_logprobs_entropy_and_grads_equal_the_whole(
    monkeypatch: pytest.MonkeyPatch, bf16: bool, chunk: int
) -> None:
    model, tokenizer = tiny_model_and_tokenizer()
    if bf16:
        compute_in_bf16(model, torch.device("cpu"))
    mb = _micro_batch(len(tokenizer))
    assert batch_mod._body_and_head(model) is not None, "the tiny model must take the chunked path"

    def run() -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        logp, ent = policy_forward(model, mb, temperature=0.7, with_entropy=True, chunk_tokens=chunk)
        assert ent is not None
        (logp.sum() + 0.1 * ent.sum()).backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        return logp.detach(), ent.detach(), grads

    chunked = run()
    with monkeypatch.context() as m:
        _whole(m)
        whole = run()
    tol = 2e-2 if bf16 else 1e-5
    assert torch.allclose(chunked[0], whole[0], atol=tol), (chunked[0] - whole[0]).abs().max()
    assert torch.allclose(chunked[1], whole[1], atol=tol)
    assert len(chunked[2]) == len(whole[2]) > 0
    for a, b in zip(chunked[2], whole[2], strict=True):
        assert torch.allclose(a, b, atol=tol * 10, rtol=1e-3), (a - b).abs().max()


def test_no_grad_scoring_equals_and_entropy_without_grad(monkeypatch: pytest.MonkeyPatch) -> None:
    model, tokenizer = tiny_model_and_tokenizer()
    mb = _micro_batch(len(tokenizer))
    with torch.no_grad():
        chunked, _ = policy_forward(model, mb, chunk_tokens=16)
        _whole(monkeypatch)
        whole, _ = policy_forward(model, mb)
    assert torch.allclose(chunked, whole, atol=1e-5)
    monkeypatch.undo()
    logp, ent = policy_forward(model, mb, with_entropy=True, entropy_grad=False, chunk_tokens=16)
    assert logp.requires_grad and ent is not None and not ent.requires_grad


def test_a_model_with_soft_capped_logits_is_scored_through_its_own_forward() -> None:
    model, _ = tiny_model_and_tokenizer()
    model.config.final_logit_softcapping = 30.0
    assert batch_mod._body_and_head(model) is None


def _saved_activation_bytes(model: torch.nn.Module, run: Callable[[], object]) -> int:
    """Bytes of the tensors autograd keeps for the backward pass while ``run`` builds its graph, the
    model's own parameters left out (saving them costs nothing), each storage counted once."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()
    return sum(kept.values())


def test_the_backward_keeps_no_full_vocabulary_tensor() -> None:
    """The reason for the chunks, measured: what autograd saves for the backward of the chunked update
    (log-probs and entropy with gradients) is the transformer body's activations plus the chunks'
    hidden-state inputs, less than ONE chunk's ``[chunk, vocab]`` fp32 logits. Without the per-chunk
    checkpoint every chunk's logits, log-softmax and softmax stay alive (about 3 full-vocabulary
    tensors over the micro-batch: +2.8 MB here, against +31 kB), and the values and gradients above
    would still match, so this test is the one that notices."""
    model, tokenizer = tiny_model_and_tokenizer()
    mb = _micro_batch(len(tokenizer))
    chunk = 16
    parts = batch_mod._body_and_head(model)
    assert parts is not None
    body = parts[0]
    body_only = _saved_activation_bytes(
        model, lambda: body(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)
    )
    update = _saved_activation_bytes(
        model, lambda: policy_forward(model, mb, with_entropy=True, chunk_tokens=chunk)
    )
    one_chunk_of_logits = chunk * len(tokenizer) * 4
    assert update - body_only < one_chunk_of_logits, (
        f"the update keeps {update - body_only} bytes beyond the body's {body_only} for its backward, "
        f"more than one chunk's fp32 logits ({one_chunk_of_logits}): is the per-chunk checkpoint gone?"
    )
