"""The loss-aggregation hook (``core.Aggregation``, ``Algorithm.aggregation``) and Dr. GRPO on it.

* Dr. GRPO's actor loss equals TRL's ``loss_type="dr_grpo"`` on random batches, written here from
  TRL's formula (``trl/trainer/grpo_trainer.py``, ``GRPOTrainer._compute_loss``, and the "Loss types"
  section of https://huggingface.co/docs/trl/main/grpo_trainer): with
  ``r = exp(logp - old)``, ``per_token = -min(r A, clip(r, 1 - eps, 1 + eps) A) + beta k3``, the loss is
  ``sum(per_token * mask) / (rows * max_completion_length)``. It is computed here over micro-batches,
  as the learner does, so the test also holds the minibatch counts on ``ActorLossInputs``.
* Every aggregation adds up over micro-batches to the whole minibatch's loss and gradient.
* The logged statistics are token means whatever the aggregation.
* A ``dr_grpo`` config: the constant is ``model.max_length`` unless set, and verl is told the same.

verl's own ``agg_loss`` on the same batches: ``tests/integrations/test_verl_maths.py``.
"""

from __future__ import annotations

from typing import get_args

import pytest
import torch

from rlver.train.algorithms import ALGORITHMS, get_algorithm
from rlver.train.algorithms.base import ActorLossInputs, CriticLossInputs, LossAggMode
from rlver.train.algorithms.core import LOSS_AGG_MODES, Aggregation, aggregate
from rlver.train.algorithms.dr_grpo import DrGRPOSettings
from rlver.train.algorithms.ppo import PPOSettings
from rlver.train.config import TrainConfig

BATCHES = 50


def _batch(g: torch.Generator, rows: int = 6, width: int = 11) -> dict[str, torch.Tensor]:
    """Random micro-batch tensors: every row has at least one action token (TRL's rows all do)."""
    mask = (torch.rand(rows, width, generator=g) < 0.6).float()
    mask[:, 0] = 1.0
    old = -torch.rand(rows, width, generator=g) * 3
    return {
        "mask": mask,
        "old": old,
        "logp": old + (torch.rand(rows, width, generator=g) - 0.5) * 0.8,  # ratios in and past the clip
        "ref": old + (torch.rand(rows, width, generator=g) - 0.5) * 0.4,
        "adv": torch.randn(rows, generator=g).unsqueeze(1).expand(rows, width).clone(),
        "entropy": torch.rand(rows, width, generator=g),
    }


def _trl_dr_grpo(
    t: dict[str, torch.Tensor], eps: float, beta: float, max_completion_length: int
) -> torch.Tensor:
    """TRL's Dr. GRPO loss, from its formula (see the module docstring)."""
    coef_1 = torch.exp(t["logp"] - t["old"])
    coef_2 = torch.clamp(coef_1, 1 - eps, 1 + eps)
    per_token = -torch.min(coef_1 * t["adv"], coef_2 * t["adv"])
    per_token_kl = torch.exp(t["ref"] - t["logp"]) - (t["ref"] - t["logp"]) - 1
    per_token = per_token + beta * per_token_kl
    return (per_token * t["mask"]).sum() / (per_token.size(0) * max_completion_length)


def _micro_batched_loss(t: dict[str, torch.Tensor], settings: object, cut: int) -> torch.Tensor:
    """The algorithm's loss summed over two micro-batches (rows ``:cut`` and ``cut:``), each told the
    whole minibatch's counts, as ``Learner._minibatch_step`` tells them."""
    algo = get_algorithm(settings.name)  # type: ignore[attr-defined]
    n_tok, n_seq = float(t["mask"].sum()), float((t["mask"].sum(dim=1) > 0).sum())
    total = torch.zeros(())
    for rows in (slice(0, cut), slice(cut, None)):
        x = ActorLossInputs(
            t["mask"][rows], n_tok, t["logp"][rows], t["old"][rows], t["adv"][rows], t["entropy"][rows],
            t["ref"][rows], None, n_seq,
        )  # fmt: skip
        total = total + algo.actor_loss(x, settings).loss
    return total


def test_dr_grpo_equals_trls_dr_grpo_loss_on_random_batches() -> None:
    g = torch.Generator().manual_seed(0)
    for _ in range(BATCHES):
        t = _batch(g)
        horizon = int(torch.randint(11, 64, (1,), generator=g))
        s = DrGRPOSettings(kl_coef=0.05, dual_clip=None, loss_scale_factor=horizon)
        ours = _micro_batched_loss(t, s, cut=int(torch.randint(1, 6, (1,), generator=g)))
        theirs = _trl_dr_grpo(t, s.clip_eps, s.kl_coef, horizon)
        assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-7), (ours, theirs)


def test_dr_grpo_is_grpo_without_the_std_and_with_the_constant() -> None:
    s = DrGRPOSettings()
    assert (s.grpo_scale_by_std, s.loss_agg_mode) == (False, "seq-mean-token-sum-norm")
    assert ALGORITHMS.get("dr_grpo").verl_adv_estimator == "grpo"
    overrides = get_algorithm("dr_grpo").verl_overrides(s)
    assert overrides == {"algorithm.norm_adv_by_std_in_grpo": False}


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_every_aggregation_adds_up_over_micro_batches(mode: LossAggMode) -> None:
    """Loss and gradient of the minibatch equal the sums over its micro-batches: each micro-batch
    divides by the minibatch's counts (a micro-batch dividing by its own would differ by the cut)."""
    g = torch.Generator().manual_seed(1)
    for _ in range(10):
        t = _batch(g)
        t["mask"][2] = 0.0  # a sample without an action token counts for no mode
        logp = t["logp"].clone().requires_grad_(True)
        s = PPOSettings(loss_agg_mode=mode, loss_scale_factor=40, entropy_coef=0.01, dual_clip=None)
        whole = (
            get_algorithm("ppo")
            .actor_loss(
                ActorLossInputs(t["mask"], float(t["mask"].sum()), logp, t["old"], t["adv"], t["entropy"]), s
            )
            .loss
        )
        (grad_whole,) = torch.autograd.grad(whole, logp)
        logp2 = t["logp"].clone().requires_grad_(True)
        parts = _micro_batched_loss({**t, "logp": logp2}, s, cut=3)
        (grad_parts,) = torch.autograd.grad(parts, logp2)
        assert torch.allclose(whole, parts, atol=1e-6)
        assert torch.allclose(grad_whole, grad_parts, atol=1e-6)


def test_each_mode_by_hand() -> None:
    """Two samples, 1 and 3 action tokens, per-token values 4 and 1, 2, 3 (sum 10)."""
    per_token = torch.tensor([[4.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    by_hand = {
        "token-mean": 10 / 4,
        "seq-mean-token-sum": (4 + 6) / 2,
        "seq-mean-token-mean": (4 / 1 + 6 / 3) / 2,
        "seq-mean-token-sum-norm": (4 + 6) / (2 * 5),
    }
    for mode, value in by_hand.items():
        assert aggregate(per_token, mask, Aggregation(mode, horizon=5)).item() == pytest.approx(value), mode
    with pytest.raises(ValueError, match="loss_agg_mode 'token-sum'"):
        Aggregation("token-sum")


def test_statistics_are_token_means_whatever_the_aggregation() -> None:
    g = torch.Generator().manual_seed(2)
    t = _batch(g)
    n_tok = float(t["mask"].sum())
    stats = {}
    for mode in get_args(LossAggMode):
        s = DrGRPOSettings(loss_agg_mode=mode, loss_scale_factor=40, kl_coef=0.1)
        x = ActorLossInputs(
            t["mask"], n_tok, t["logp"], t["old"], t["adv"], t["entropy"], t["ref"], None, 6.0
        )
        out = get_algorithm("dr_grpo").actor_loss(x, s)
        stats[mode] = {k: float(v) for k, v in out.stats.items() if k != "policy_loss"}
    first = stats["token-mean"]
    assert first["entropy"] == pytest.approx(float((t["entropy"] * t["mask"]).sum()) / n_tok)
    assert all(other == pytest.approx(first) for other in stats.values())


def test_the_critic_loss_reads_the_same_aggregation() -> None:
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    values = torch.zeros(2, 3)
    returns = torch.tensor([[2.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # squared errors 4 | 1, 1, 1
    s = PPOSettings(loss_agg_mode="seq-mean-token-sum", value_clip=None)
    out = get_algorithm("ppo").critic_loss(CriticLossInputs(mask, 4.0, values, values, returns, 2.0), s)
    assert out.loss.item() == pytest.approx(0.5 * (4 + 3) / 2)


def test_a_dr_grpo_config_divides_by_model_max_length_unless_told() -> None:
    base = {"rollout": {"n_per_profile": 2}, "model": {"max_length": 900}}
    cfg = TrainConfig.model_validate({**base, "algorithm": {"name": "dr_grpo"}})
    assert type(cfg.algorithm) is DrGRPOSettings and cfg.algorithm.loss_scale_factor == 900
    assert TrainConfig.model_validate(cfg.model_dump(mode="json")) == cfg  # config.yaml reads back
    told = TrainConfig.model_validate({**base, "algorithm": {"name": "dr_grpo", "loss_scale_factor": 64}})
    assert told.algorithm.loss_scale_factor == 64
    grpo = TrainConfig.model_validate({**base, "algorithm": {"name": "grpo"}})
    assert (grpo.algorithm.loss_agg_mode, grpo.algorithm.loss_scale_factor) == ("token-mean", None)


def test_the_settings_name_the_same_modes_as_core() -> None:
    assert get_args(LossAggMode) == LOSS_AGG_MODES


def test_the_drilled_algorithm_picks_its_aggregation_as_a_settings_default() -> None:
    """The additions drill's algorithm (``tests/data/additions/algorithm.py.txt``), run here in a
    second: a settings default is all an algorithm writes to change how its loss is aggregated."""
    import runpy
    from pathlib import Path

    source = Path(__file__).parents[1] / "data" / "additions" / "algorithm.py.txt"
    module = runpy.run_path(str(source), run_name="loo_drill")
    settings = module["LOOSettings"](dual_clip=None)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    zeros = torch.zeros(2, 3)
    advantages = torch.tensor([[1.0, 0.0, 0.0], [2.0, 2.0, 2.0]])
    x = ActorLossInputs(mask, 4.0, zeros, zeros, advantages, zeros)
    loss = module["LOO"]().actor_loss(x, settings).loss
    assert settings.loss_agg_mode == "seq-mean-token-mean" and loss.item() == pytest.approx(-(1 + 2) / 2)
