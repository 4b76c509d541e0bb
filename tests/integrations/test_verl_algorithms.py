"""Against real verl 0.9.1 (the ``.venv-verl`` venv, ``make verl-test``): truncated importance sampling
computes what verl's ``rollout_corr_helper`` computes and reaches verl's keys, and an algorithm's own
setting is the algorithm's to map (a runtime-registered one composes with verl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl")

import torch
from omegaconf import OmegaConf
from pydantic import Field
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights

from helpers import add_for_test
from rlver.errors import ConfigError
from rlver.integrations.verl.launch import compose_verl_config, load_verl_config, prepare
from rlver.train.algorithms import ALGORITHMS, core, entry
from rlver.train.algorithms.base import AdvantageInputs, Advantages, Algorithm, AlgorithmSettings
from rlver.train.algorithms.core import policy_loss, rollout_is_weights
from verl_schema import schema_problem, verl_schema


def _tensors(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(4, 9, generator=g) * 3
    sampled = old + 0.4 * torch.randn(4, 9, generator=g)  # a sampler that computes differently
    logp = old + 0.2 * torch.randn(4, 9, generator=g)
    adv = torch.randn(4, 9, generator=g)
    mask = (torch.rand(4, 9, generator=g) > 0.3).float()
    return old, sampled, logp, adv, mask


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("threshold", [1.2, 2.0])
def test_weights_and_loss_match_verl(level: str, threshold: float) -> None:
    old, sampled, logp, adv, mask = _tensors(0)
    ours = rollout_is_weights(old, sampled, mask, level, threshold)
    theirs, metrics = compute_rollout_correction_weights(
        old - sampled, mask, rollout_is=level, rollout_is_threshold=threshold
    )
    assert torch.allclose(ours.weights, theirs, atol=1e-6)
    assert float(ours.weights.sum() / mask.sum()) == pytest.approx(metrics["rollout_is_mean"], abs=1e-6)
    if level == "token":  # verl's share of raw weights above the threshold: our clipped fraction
        clipped = float(ours.clipped.sum() / mask.sum())
        assert clipped == pytest.approx(metrics["rollout_is_ratio_fraction_high"], abs=1e-6)
    cfg = OmegaConf.create(
        {
            "clip_ratio": 0.2,
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.2,
            "clip_ratio_c": 3.0,
            "global_batch_info": {},
        }
    )
    their_loss, _ = compute_policy_loss_vanilla(
        old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask,
        loss_agg_mode="token-mean", config=cfg, rollout_is_weights=theirs,
    )  # fmt: skip
    our_loss = policy_loss(logp, old, adv, mask, clip_eps=0.2, dual_clip=3.0, is_weights=ours.weights).loss
    assert our_loss.item() == pytest.approx(their_loss.item(), abs=1e-6)


def _plan(tmp_path: Path, *overrides: str) -> Any:
    return prepare(load_verl_config("tiny-offline", [f"verl.out_dir={tmp_path / 'run'}", *overrides]))


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_a_tis_run_writes_verls_keys_with_the_same_values(tmp_path: Path, level: str) -> None:
    plan = _plan(tmp_path, f"algorithm.rollout_is={level}", "algorithm.rollout_is_threshold=1.5")
    keys = {o.split("=", 1)[0] for o in plan.overrides}
    assert {
        "algorithm.rollout_correction.rollout_is",
        "algorithm.rollout_correction.rollout_is_threshold",
    } <= keys
    assert not [p for k in keys if (p := schema_problem(k, verl_schema()))]
    vc = compose_verl_config(plan.overrides)
    corr = vc.algorithm.rollout_correction
    assert (corr.rollout_is, corr.rollout_is_threshold, corr.bypass_mode) == (level, 1.5, False)
    assert vc.actor_rollout_ref.rollout.calculate_log_probs  # verl needs the rollout's log-probs for it
    off = compose_verl_config(_plan(tmp_path / "off").overrides).algorithm.rollout_correction
    assert off.rollout_is is None  # off by default, as locally


class _WeightedSettings(AlgorithmSettings):
    name: str = "weighted"
    advantage_scale: float = Field(default=1.0, gt=0.0)


def test_an_algorithms_own_setting_is_mapped_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An algorithm registered at run time with a knob of its own: refused under verl until the algorithm
    maps it; mapped, its key reaches verl's composed config at its place in verl's schema."""

    class Weighted(Algorithm[_WeightedSettings]):
        """GRPO's advantages times a knob of its own."""

        name = "weighted"
        needs_critic, kl_in, min_group_size, verl_adv_estimator = False, "loss", 2, "grpo"
        settings_class = _WeightedSettings

        def advantages(self, inputs: AdvantageInputs, settings: _WeightedSettings) -> Advantages:
            per_seq = core.group_advantages(inputs.scores, inputs.groups) * settings.advantage_scale
            return Advantages(core.broadcast_to_tokens(per_seq, inputs.mask))

    add_for_test(monkeypatch, ALGORITHMS, entry(Weighted, "GRPO's advantages times a knob"))
    args = ["algorithm.name=weighted", "algorithm.advantage_scale=2.0"]
    with pytest.raises(ConfigError, match=r"algorithm\.advantage_scale have no verl mapping"):
        _plan(tmp_path, *args)
    assert not (tmp_path / "run").exists()  # refused before anything was written

    class MappedWeighted(Weighted):
        verl_knobs = frozenset({"advantage_scale"})

        def verl_overrides(self, settings: _WeightedSettings) -> dict[str, Any]:
            # a stand-in mapping onto a real verl key, to see it travel (not a claim about verl's maths)
            return {"algorithm.kl_ctrl.horizon": int(settings.advantage_scale * 1000)}

    add_for_test(monkeypatch, ALGORITHMS, entry(MappedWeighted, "the same, mapped onto verl"))
    plan = _plan(tmp_path, *args)
    assert "algorithm.kl_ctrl.horizon=2000" in plan.overrides
    assert compose_verl_config(plan.overrides).algorithm.kl_ctrl.horizon == 2000
