"""Tests that kill mutants of ``rlver.train.algorithms`` the first mutation run left alive (issue 42,
item 3; ``python bench/mutants.py algorithms``): the tensor maths of ``core`` against values worked out
by hand (the working in comments), and what each algorithm hands verl or refuses to."""

from __future__ import annotations

import pytest
import torch

from rlver.train.algorithms import core, get_algorithm
from rlver.train.algorithms.base import ActorLossInputs, AdvantageInputs
from rlver.train.algorithms.grpo import GRPOSettings
from rlver.train.algorithms.ppo import PPOSettings

approx = pytest.approx


def test_masked_var_at_one_two_and_three_values() -> None:
    """Bessel's correction n / (n - 1) needs two values: one value has variance 0 (not 0/0)."""
    x = torch.tensor([[2.0, 7.0, 4.0, 9.0]])
    one = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    two = torch.tensor([[1.0, 0.0, 1.0, 0.0]])  # 2, 4: population var 1, sample var 2
    assert core.masked_var(x, one).item() == 0.0
    assert core.masked_var(x, two).item() == approx(2.0)
    assert core.masked_var(x, two, unbiased=False).item() == approx(1.0)


def test_whitening_without_shifting_keeps_the_mean() -> None:
    """``shift_mean=False`` scales the spread to 1 but leaves the values centred where they were; a
    constant input whitens to 0 (eps keeps 0 / 0 away)."""
    x = torch.tensor([[1.0, 100.0, 3.0, 5.0]])
    m = torch.tensor([[1.0, 0.0, 1.0, 1.0]])  # 1, 3, 5: mean 3, sample var 4, std 2
    assert core.masked_whiten(x, m, shift_mean=False)[0].tolist() == approx([2.0, 0.0, 3.0, 4.0], rel=1e-6)
    assert core.masked_whiten(torch.full((1, 3), 7.0), torch.ones(1, 3)).abs().max().item() == 0.0


def test_the_reward_kl_needs_both_log_probs() -> None:
    """PPO's reward-side KL is paid only where it can be computed: without the reference's or the old
    log-probs (an on-policy step without a KL term scores neither) the rewards are left as they are."""
    ppo = get_algorithm("ppo")
    mask = torch.ones(1, 3)
    base = AdvantageInputs(mask, torch.zeros(1, 3), torch.zeros(1), torch.zeros(1, dtype=torch.long))
    logp = torch.full((1, 3), -1.0)
    for old, ref in [(logp, None), (None, logp)]:
        inputs = AdvantageInputs(**{**vars(base), "old_logp": old, "ref_logp": ref})
        assert ppo.with_reward_kl(inputs, PPOSettings(kl_coef=0.5)) is inputs


def test_no_kl_term_without_a_kl_coefficient() -> None:
    """GRPO with ``kl_coef = 0`` logs no ``kl_loss`` even when reference log-probs are at hand; with
    ``entropy_coef = 0`` the entropy is logged but not in the loss."""
    mask = torch.ones(1, 2)
    logp = torch.tensor([[-1.0, -2.0]])
    x = ActorLossInputs(
        mask, 2.0, logp, logp, torch.tensor([[1.0, -3.0]]), torch.tensor([[0.5, 0.7]]), logp - 1
    )
    terms = get_algorithm("grpo").actor_loss(x, GRPOSettings())
    assert "kl_loss" not in terms.stats
    assert terms.loss.item() == approx(1.0)  # -(1 - 3) / 2 at ratio 1
    assert terms.stats["entropy"].item() == approx(0.6)


def test_what_each_algorithm_hands_verl() -> None:
    """verl's keys for the algorithms' own settings, and what verl 0.9.1 cannot do, in one sentence each
    naming the setting and the way out."""
    ppo, grpo = get_algorithm("ppo"), get_algorithm("grpo")
    assert ppo.verl_overrides(PPOSettings(value_clip=0.3)) == {"critic.cliprange_value": 0.3}
    assert ppo.verl_overrides(PPOSettings(value_clip=None)) == {"critic.cliprange_value": 1e9}  # off
    assert ppo.verl_refusals(PPOSettings()) == []
    (why,) = ppo.verl_refusals(PPOSettings(whiten_advantages=False))
    assert why.startswith("algorithm.whiten_advantages=false: verl 0.9.1 always whitens")
    assert why.endswith("use true with --engine verl")
    assert grpo.verl_overrides(GRPOSettings(grpo_scale_by_std=False)) == {
        "algorithm.norm_adv_by_std_in_grpo": False
    }
    assert grpo.verl_refusals(GRPOSettings()) == []
    eps, lone = grpo.verl_refusals(GRPOSettings(grpo_eps=0.01, grpo_lone_sample="zero"))
    assert eps == (
        "algorithm.grpo_eps=0.01: verl 0.9.1 divides by (std + 1e-06) with no key to change it; "
        "use 1e-06 with --engine verl"
    )
    assert lone.startswith("algorithm.grpo_lone_sample=zero: verl 0.9.1 gives a group of one its score")
    assert lone.endswith("use raw with --engine verl")
