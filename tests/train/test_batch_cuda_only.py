"""What only a CUDA device can show: tensors made or moved to the device they must live on, and the bf16
autocast region on the device. On a CPU every one of these holds whatever the code does (a tensor left
on the CPU is where a CPU run wants it; CPU autocast is bf16 by default), so the file is skipped there.

They are the killing tests of the mutants ``bench/mutant_labels.py`` lists as CPU-untestable (``CPU_UNTESTABLE``:
``.to(None)``, ``device=None``, an autocast without its dtype). ``python bench/cuda_mutants.py`` applies
each of those mutants to a copy of ``src/`` and runs this file against it on a GPU machine, without
mutmut: a mutant is killed when a test here fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA = torch.device("cuda")


def _seqs() -> list:
    from rlver.train.tokenize import TokenizedEpisode

    return [
        TokenizedEpisode([5, 6, 7, 8, 9], [0, 0, 1, 1, 1], [4], 1),
        TokenizedEpisode([5, 6, 7], [0, 1, 1], [2], 1),
    ]


def test_collate_puts_every_tensor_on_the_device() -> None:
    """``batch.collate``: ids, attention mask and action mask all moved (collate mutants 41-43)."""
    from rlver.train.batch import collate

    mb = collate(_seqs(), [0, 1], pad_id=0, device=CUDA)
    assert {t.device.type for t in (mb.input_ids, mb.attention_mask, mb.action_mask)} == {"cuda"}


def test_a_batch_row_slice_comes_to_the_micro_batchs_device() -> None:
    """``Batch.rows``: the CPU batch's rows moved to the micro-batch's device (rows mutant 1)."""
    from rlver.train.batch import collate
    from rlver.train.learner import Batch

    mb = collate(_seqs(), [1], pad_id=0, device=CUDA)
    rows = Batch.rows(torch.arange(8.0).view(2, 4), mb)
    assert rows.device.type == "cuda" and rows.tolist() == [[4.0, 5.0]]


def test_a_learner_scores_and_updates_on_the_device(tmp_path: Path) -> None:
    """A PPO learner on CUDA: scoring and an update over two minibatches run (the micro-batches are
    collated onto the model's device: ``PPOUpdate._micro_batch`` mutant 6) and change the weights."""
    from test_learner_mutants import four, learner

    lr = learner(tmp_path, "algorithm.name=ppo", "model.device=cuda", minibatch_samples=2)
    assert next(lr.parts.policy.parameters()).device.type == "cuda"
    before = [p.detach().clone() for p in lr.parts.policy.parameters() if p.requires_grad]
    stats = lr.update(lr.score(four()), 1, torch.Generator().manual_seed(0))
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    after = [p for p in lr.parts.policy.parameters() if p.requires_grad]
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_gae_runs_on_the_device_and_equals_the_cpu() -> None:
    """``core.compact``'s positions on the mask's device (compact mutants 25, 27): GAE of CUDA tensors."""
    from rlver.train.algorithms.core import gae_advantages

    mask = torch.tensor([[0, 1, 1, 0, 1, 1], [1, 1, 1, 0, 0, 0]], dtype=torch.float32)
    rewards = torch.tensor([[0, 0, 0.5, 0, 0, 1.0], [0, 0, 1.0, 0, 0, 0]])
    values = torch.tensor([[9.0, 0.1, 0.2, 9.0, 0.3, 0.4], [0.0, 0.0, 0.0, 7.0, 7.0, 7.0]])
    on_cpu = gae_advantages(rewards, values, mask, gamma=0.9, lam=0.5)
    on_cuda = gae_advantages(rewards.to(CUDA), values.to(CUDA), mask.to(CUDA), gamma=0.9, lam=0.5)
    for a, b in zip(on_cpu, on_cuda, strict=True):
        assert b.device.type == "cuda" and torch.allclose(a, b.cpu(), atol=1e-6)


def test_group_advantages_of_device_scores() -> None:
    """``core.group_advantages`` with scores on CUDA and group ids as a list: the advantages on CUDA, as
    on the CPU. (Its mutants 7 and 9, the ids made on the CPU, survived this on an H200: CUDA indexes
    with a CPU index tensor too, so they are listed as equivalent in bench/mutants.py.)"""
    from rlver.train.algorithms.core import group_advantages

    scores = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 7.0])
    groups = [0, 0, 0, 1, 1, 2]
    on_cuda = group_advantages(scores.to(CUDA), groups, eps=1e-6, lone="raw")
    assert on_cuda.device.type == "cuda"
    assert torch.allclose(on_cuda.cpu(), group_advantages(scores, groups, eps=1e-6, lone="raw"))


def test_row_uniforms_are_on_the_device_even_for_no_rows() -> None:
    """``sampling.row_uniforms`` returns its uniforms on the decode device (mutant 17), an empty
    batch's too (mutants 4, 7)."""
    from rlver.llm.sampling import row_uniforms

    drawn = row_uniforms([torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)], 3, CUDA)
    assert drawn.device.type == "cuda" and drawn.shape == (2, 3)
    empty = row_uniforms([], 3, CUDA)
    assert empty.device.type == "cuda" and empty.shape == (0, 3)


def test_the_split_forward_computes_in_bf16_on_cuda() -> None:
    """``batch._compute_region`` enters the bf16 autocast the model's own forward would: on CUDA an
    autocast without a dtype is fp16 (mutants 7, 9). A matmul inside the region says which."""
    from rlver.llm.precision import compute_in_bf16
    from rlver.models.tiny import tiny_model_and_tokenizer
    from rlver.train.batch import _compute_region

    model = compute_in_bf16(tiny_model_and_tokenizer(0)[0].to(CUDA).eval(), CUDA)
    x = torch.randn(4, 4, device=CUDA)
    with _compute_region(model):
        assert torch.mm(x, x).dtype == torch.bfloat16
