"""Length-sorted micro-batches compute less padding and leave the update's numbers as they were; the
update's MFU formula, its peak table, and its absence on a CPU.

Why the numbers cannot change: every per-token quantity goes back to its row by index, and each
micro-batch's loss is divided by the whole minibatch's action-token count, so the grouping only
reorders a sum. The test below runs one real minibatch step (tiny model, a real rollout) grouped both
ways, from the same weights, and compares the logged loss terms and every parameter's gradient.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import torch

from helpers import TINY_TRAIN_SETS
from rlver.train import learner as learner_mod
from rlver.train import perf as perf_mod
from rlver.train import update as update_mod
from rlver.train.batch import collate, micro_batches
from rlver.train.config import load_train_config
from rlver.train.learner import Batch
from rlver.train.perf import ModelFlops, UpdatePerf, mfu, peak_tflops
from rlver.train.tokenize import TokenizedEpisode

#: The tiny run of every test (later keys win), longer: 3 profiles, 2 replies of up to 24 tokens.
ONE_STEP = [
    *TINY_TRAIN_SETS,
    "rollout.batch_size=3",
    "rollout.rules.max_assistant_turns=2",
    "rollout.max_new_tokens=24",
    "update.micro_batch_tokens=300",  # several micro-batches per minibatch
    "optim.max_grad_norm=null",  # compare the raw gradients (clipping is the same either way)
    "run.steps=1",
    "run.checkpoint_every=0",
]


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _padded(lengths: list[int], groups: list[list[int]]) -> int:
    return sum(len(g) * max(lengths[i] for i in g) for g in groups)


def test_length_sorted_groups_hold_every_index_once_and_pad_less() -> None:
    lengths = [300, 40, 290, 35, 310, 50, 280, 45]
    for by_length in (True, False):
        groups = micro_batches(lengths, range(len(lengths)), 700, by_length=by_length)
        assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
        assert all(len(g) * max(lengths[i] for i in g) <= 700 or len(g) == 1 for g in groups)
    plain = micro_batches(lengths, range(len(lengths)), 700, by_length=False)
    packed = micro_batches(lengths, range(len(lengths)), 700)
    assert packed[0] == [4, 0]  # longest first: the widest micro-batch (the memory peak) runs first
    assert _padded(lengths, packed) < _padded(lengths, plain)
    assert micro_batches([5, 900, 7], [0, 1, 2], 100) == [[1], [2, 0]]  # too long for the budget: alone


def test_a_micro_batchs_rows_come_in_its_packed_order() -> None:
    """P2 (issue 42): ``Batch.rows`` must take the rows in the micro-batch's own order, the length order
    ``micro_batches`` packs them in, not sorted by index; otherwise advantages, old log-probs and values
    land on other sequences' tokens whenever a micro-batch holds its indices out of order."""
    lengths = [4, 9, 6, 9]
    (group,) = micro_batches(lengths, range(4), 100)
    assert group == [1, 3, 2, 0]  # longest first, ties in index order: not ascending
    seqs = [TokenizedEpisode(list(range(n)), [0] + [1] * (n - 1), [n - 1], 1) for n in lengths]
    mb = collate(seqs, group, 0, torch.device("cpu"))
    x = torch.arange(4 * 8, dtype=torch.float32).view(4, 8)  # row i holds 8i .. 8i + 7
    rows = Batch.rows(x, mb)
    assert rows.shape == (4, 8) and rows[:, 0].tolist() == [8.0, 24.0, 16.0, 0.0]
    # each row's action mask and its picked values describe the same sequence
    assert mb.action_mask.sum(1).tolist() == [lengths[i] - 1 for i in group]


def _step_grads(trainer: Any, batch: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, float], list]:
    """One minibatch step over the whole batch, optimiser step held back: its stats and the gradients."""
    from rlver.train.grid import GridCheck

    learner = trainer.learner
    monkeypatch.setattr(learner.parts.optimisers, "step", lambda: None)
    learner.parts.policy.train()
    learner.critic.train()
    stats = learner._minibatch_step(batch, list(range(len(batch.samples))), GridCheck(), 1)
    models = [learner.parts.policy] + ([learner.parts.critic] if learner.parts.critic is not None else [])
    grads = [p.grad.detach().clone() for m in models for p in m.parameters() if p.grad is not None]
    return stats, grads


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_sorted_micro_batches_give_the_same_loss_and_gradients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    from rlver.train.trainer import Trainer, profiles_at

    trainer = Trainer(load_train_config("tiny-offline", [f"algorithm.name={algorithm}", *ONE_STEP]), tmp_path)
    profiles = profiles_at(trainer.train_profiles, 0, trainer.cfg.rollout.profiles_per_step, 0)
    episodes = trainer._run_dialogues(profiles, evaluation=False, seed=1)
    samples, _ = trainer._trainable(1, episodes)
    batch = trainer.learner.score(samples)
    lengths = [len(s.seq) for s in samples]
    idx = list(range(len(samples)))
    plain = micro_batches(lengths, idx, 300, by_length=False)
    packed = micro_batches(lengths, idx, 300)
    assert len(set(lengths)) > 2 and len(plain) > 1, lengths
    assert plain != packed and _padded(lengths, packed) <= _padded(lengths, plain)

    # 300: several micro-batches, each in index order; 1200 (P2, issue 42): one micro-batch whose rows
    # the length order puts out of index order, where a row lookup by sorted index would misplace them
    assert any(g != sorted(g) for g in micro_batches(lengths, idx, 1200)), micro_batches(lengths, idx, 1200)
    for budget in (300, 1200):
        trainer.learner.parts.update = trainer.learner.parts.update.model_copy(
            update={"micro_batch_tokens": budget}
        )
        packed_stats, packed_grads = _step_grads(trainer, batch, monkeypatch)
        with monkeypatch.context() as m:
            for module in (learner_mod, update_mod):  # scoring's grouping and the update step's
                m.setattr(module, "micro_batches", functools.partial(micro_batches, by_length=False))
            plain_stats, plain_grads = _step_grads(trainer, batch, monkeypatch)
        _same_step(algorithm, (packed_stats, packed_grads), (plain_stats, plain_grads))


def _same_step(
    algorithm: str, packed: tuple[dict[str, float], list], plain: tuple[dict[str, float], list]
) -> None:
    """The logged loss terms and every gradient of two groupings of one minibatch step agree."""
    (packed_stats, packed_grads), (plain_stats, plain_grads) = packed, plain
    for key in ("train/policy_loss", "train/entropy", "train/approx_kl", "train/clip_fraction"):
        assert packed_stats[key] == pytest.approx(plain_stats[key], rel=1e-5, abs=1e-7), key
    if algorithm == "ppo":
        assert packed_stats["train/value_loss"] == pytest.approx(plain_stats["train/value_loss"], rel=1e-5)
    assert len(packed_grads) == len(plain_grads) > 0
    for a, b in zip(packed_grads, plain_grads, strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7), (a - b).abs().max()
    assert any(g.abs().sum() > 0 for g in packed_grads)  # a real gradient, not zeros on both sides


def test_the_update_logs_padding_and_no_mfu_on_cpu(tmp_path: Path) -> None:
    from rlver.train.trainer import Trainer

    # on the CPU even where CUDA is at hand (a CUDA run logs perf/mfu: that is the point)
    trainer = Trainer(load_train_config("tiny-offline", [*ONE_STEP, "model.device=cpu"]), tmp_path)
    metrics = trainer.train_step()
    assert "perf/mfu" not in metrics  # a CPU has no peak: absent, not 0
    assert 0.0 <= metrics["perf/padding_share"] < 0.5


def test_peak_table_matches_device_names() -> None:
    assert peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert peak_tflops("NVIDIA H100 NVL") == 835.0
    assert peak_tflops("NVIDIA H200") == 989.0
    assert peak_tflops("NVIDIA GH200 480GB") == 989.0
    assert peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert peak_tflops("NVIDIA L40S") == 362.0
    assert peak_tflops("NVIDIA L4") == 121.0
    assert peak_tflops("NVIDIA GeForce RTX 4090") == 165.0
    assert peak_tflops("NVIDIA A10G") is None and peak_tflops("Some Future GPU") is None
    assert perf_mod.device_peak_flops(torch.device("cpu")) is None


def test_the_flops_formula_on_the_tiny_model_and_with_a_given_peak() -> None:
    from rlver.models.tiny import tiny_model_and_tokenizer

    model, _ = tiny_model_and_tokenizer()
    c = model.config
    embed = c.vocab_size * c.hidden_size
    total = sum(p.numel() for p in model.parameters())
    n = total - embed + (embed if c.tie_word_embeddings else 0)
    d_attn = c.num_attention_heads * (getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads)
    f = ModelFlops.of(model)
    assert (f.matmul_params, f.per_param, f.layers, f.attn_width) == (n, 6.0, c.num_hidden_layers, d_attn)
    assert f.sequence(100) == 6 * n * 100 + 6 * c.num_hidden_layers * d_attn * 100**2
    # frozen base (LoRA): no weight gradients, c = 4
    model.requires_grad_(False)
    assert ModelFlops.of(model).per_param == 4.0
    # a given peak: 2 sequences of 10 tokens, N = 1000, L = 2, d = 8, in 1 ms on a 1 TFLOP/s card
    tiny = ModelFlops(matmul_params=1000, per_param=6.0, layers=2, attn_width=8)
    flops = tiny.sequences([10, 10])
    assert flops == 2 * (6 * 1000 * 10 + 6 * 2 * 8 * 10**2) == 139_200
    assert mfu(flops, 1e-3, 1e12) == pytest.approx(139_200 / 1e-3 / 1e12)


def test_update_perf_reports_mfu_only_with_a_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlver.models.tiny import tiny_model_and_tokenizer

    model, _ = tiny_model_and_tokenizer()
    clock = iter([100.0, 102.0])
    monkeypatch.setattr(perf_mod.time, "perf_counter", lambda: next(clock))
    perf = UpdatePerf([model], torch.device("cpu"))
    perf.add([30, 20], padded=60)
    without = perf.metrics()
    assert "perf/mfu" not in without and without["perf/padding_share"] == pytest.approx(1 - 50 / 60)
    clock = iter([10.0, 12.0])
    perf.peak = 1e9
    perf.start()
    perf.add([30, 20], padded=60)
    expected = ModelFlops.of(model).sequences([30, 20]) / 2.0 / 1e9
    assert perf.metrics()["perf/mfu"] == pytest.approx(expected)
