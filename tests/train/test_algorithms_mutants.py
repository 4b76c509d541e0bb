"""Tests that kill mutants of ``rlver.train.algorithms`` the first mutation run left alive (issue 42,
item 3; ``python bench/mutants.py algorithms``): the tensor maths of ``core`` against values worked out
by hand (the working in comments), and what each algorithm hands verl or refuses to."""

from __future__ import annotations

import math

import pytest
import torch

from rlver.registry import UnknownName
from rlver.train.algorithms import ALGORITHMS, core, get_algorithm, settings_for
from rlver.train.algorithms.base import ActorLossInputs, AdvantageInputs, AlgorithmSettings, CriticLossInputs
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
    assert ppo.verl_refusals(PPOSettings(whiten_advantages=False)) == [
        "algorithm.whiten_advantages=false: verl 0.9.1 always whitens GAE advantages over the batch "
        "(core_algos.compute_gae_advantage_return) and has no key to turn it off; use true with --trainer verl"
    ]
    assert grpo.verl_overrides(GRPOSettings(grpo_scale_by_std=False)) == {
        "algorithm.norm_adv_by_std_in_grpo": False
    }
    assert grpo.verl_refusals(GRPOSettings()) == []
    eps, lone = grpo.verl_refusals(GRPOSettings(grpo_eps=0.01, grpo_lone_sample="zero"))
    assert eps == (
        "algorithm.grpo_eps=0.01: verl 0.9.1 divides by (std + 1e-06) with no key to change it; "
        "use 1e-06 with --trainer verl"
    )
    assert lone == (
        "algorithm.grpo_lone_sample=zero: verl 0.9.1 gives a group of one its score "
        "(core_algos.compute_grpo_outcome_advantage) with no key to change it; use raw with --trainer verl"
    )


# ------------------------------------------------------------------------------------ core maths
def test_a_normaliser_replaces_the_count_per_row_too() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    assert core.masked_mean(x, m, dim=1, normalizer=2).tolist() == approx([2.0, 3.0])  # 4 / 2, 6 / 2


def test_gae_follows_each_rows_action_order_in_long_rows() -> None:
    """40 positions, actions scattered between user tokens: with gamma < 1 the advantages depend on the
    actions' order, which must be the row's own (a slow reference walks the actions back to front)."""
    g = torch.Generator().manual_seed(3)
    mask = (torch.rand(2, 40, generator=g) > 0.4).float()
    rewards = torch.randn(2, 40, generator=g) * mask
    adv, _ = core.gae_advantages(rewards, torch.zeros(2, 40), mask, gamma=0.9, lam=1.0)
    for b in range(2):
        running, want = 0.0, torch.zeros(40)
        for t in reversed(mask[b].nonzero().flatten().tolist()):
            running = float(rewards[b, t]) + 0.9 * running
            want[t] = running
        assert adv[b].tolist() == approx(want.tolist(), abs=1e-5)


def test_group_advantages_defaults_and_eps() -> None:
    """The defaults are verl's (eps 1e-6, scaled); eps is added to the std; a lone sample's raw score
    is divided by (1 + eps) only when scaling; a lone group does not stop the groups after it."""
    scores, groups = torch.tensor([0.2, 0.6]), [3, 3]  # mean .4, std .28284
    assert core.group_advantages(scores, groups).tolist() == approx([-0.70711, 0.70711], abs=2e-5)
    assert core.group_advantages(scores, groups, eps=0.5).tolist() == approx(
        [-0.2 / 0.78284, 0.2 / 0.78284], abs=1e-5
    )
    lone = core.group_advantages(torch.tensor([0.9, 0.2, 0.6]), [0, 1, 1], eps=0.5, scale=False, lone="raw")
    assert lone.tolist() == approx([0.9, -0.2, 0.2])


def test_token_rewards_refuse_a_reward_without_a_turn_end() -> None:
    """One reward per turn end, per sample: a count that differs is a bug upstream, never dropped."""
    with pytest.raises(ValueError):
        core.token_rewards([[0.1, 0.3]], [[2]], (1, 4))
    with pytest.raises(ValueError):
        core.token_rewards([[0.1], [0.2]], [[2]], (2, 4))


def test_k3s_log_ratio_is_clamped_at_20_both_ways() -> None:
    """verl's ``low_var_kl`` clamps the log-ratio to ±20 before ``exp`` (visible without the cap)."""
    logp = torch.tensor([0.0, 0.0])
    ref = torch.tensor([25.0, -25.0])
    k3 = core.kl_k3(logp, ref, bound=None).tolist()
    assert k3 == approx([math.exp(20.0) - 21.0, math.exp(-20.0) + 19.0])


def test_the_upper_clip_bound_and_the_normalised_kl_diagnostic() -> None:
    """``clip_eps_high`` widens the upper bound only: ratio 1.25 with A > 0 is inside 1 + 0.28; the
    approximate KL is divided by the normaliser, as the loss is."""
    logp = torch.log(torch.tensor([[1.25, 0.7]]))
    adv, mask, old = torch.tensor([[1.0, 1.0]]), torch.ones(1, 2), torch.zeros(1, 2)
    wide = core.policy_loss(logp, old, adv, mask, clip_eps=0.2, clip_eps_high=0.28)
    assert wide.loss.item() == approx((-1.25 - 0.7) / 2)  # max(-1.25, -1.28); max(-0.7, -0.8)
    narrow = core.policy_loss(logp, old, adv, mask, clip_eps=0.2)
    assert narrow.loss.item() == approx((-1.2 - 0.7) / 2)  # 1.25 clipped to 1.2
    halved = core.policy_loss(logp, old, adv, mask, normalizer=4)
    assert halved.approx_kl.item() == approx(wide.approx_kl.item() / 2)


def test_value_loss_clips_both_ways_and_normalises() -> None:
    """V_clipped = V_old + clip(V - V_old, ±c), both ways; the loss and its clip share divide by the
    normaliser; the default range is PPO's (0.2)."""
    values = torch.tensor([[0.3, -0.5]])
    old = torch.tensor([[0.2, 0.0]])
    ret = torch.tensor([[0.0, -0.4]])
    mask = torch.ones(1, 2)
    out = core.value_loss(values, old, ret, mask, clip_range=0.2)
    # tok0: moved +0.1, inside: err .09 both; tok1: fell 0.5, clipped to -0.2: err .01, clipped .04
    assert out.loss.item() == approx(0.5 * (0.09 + 0.04) / 2)
    assert out.clip_fraction.item() == approx(0.5)
    assert core.value_loss(values, old, ret, mask).loss.item() == out.loss.item()
    assert PPOSettings().value_clip == 0.2
    by4 = core.value_loss(values, old, ret, mask, clip_range=0.2, normalizer=4)
    assert by4.loss.item() == approx(out.loss.item() / 2) and by4.clip_fraction.item() == approx(0.25)
    off = core.value_loss(values, old, ret, mask, clip_range=None, normalizer=4)
    assert off.loss.item() == approx(0.5 * (0.09 + 0.01) / 4) and off.clip_fraction.item() == 0.0


def test_entropy_and_log_probs_over_the_last_axis_of_3d_logits() -> None:
    """The whole-model path scores ``[B, T, V]`` logits at once: both act on the vocabulary axis."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 4, generator=g)
    labels = torch.tensor([[0, 3, 1], [2, 2, 0]])
    p = torch.softmax(logits, dim=-1)
    assert torch.allclose(core.entropy_from_logits(logits), -(p * p.log()).sum(-1), atol=1e-6)
    want = torch.tensor([[float(p[b, t, labels[b, t]].log()) for t in range(3)] for b in range(2)])
    assert torch.allclose(core.logprobs_from_logits(logits, labels), want, atol=1e-6)


def test_the_sequence_is_warning_in_full() -> None:
    mask = torch.ones(1, core.SEQUENCE_IS_LONG_TOKENS + 4)
    assert core.sequence_is_warning(mask, "sequence", 2.0) == (
        "algorithm.rollout_is=sequence with samples of up to 260 action tokens: each weight is "
        "exp(sum of the row's per-token log-ratios), whose spread grows as sqrt(tokens), so past 256 tokens "
        "many weights clip at 2 or sit near 0 (docs/sampling.md); algorithm.rollout_is=token weighs each "
        "token alone"
    )


# ---------------------------------------------------------------------------- the algorithms
def test_actor_loss_passes_every_setting_and_the_normaliser_on() -> None:
    """The shared actor loss hands ``clip_eps_high``, ``dual_clip`` and the minibatch normaliser to the
    surrogate, and takes the entropy's mean over the same normaliser."""
    logp = torch.log(torch.tensor([[1.25, 5.0]]))
    old, mask = torch.zeros(1, 2), torch.ones(1, 2)
    adv, entropy = torch.tensor([[1.0, -1.0]]), torch.tensor([[0.4, 0.8]])
    x = ActorLossInputs(mask, 4.0, logp, old, adv, entropy)  # a micro-batch of a 4-token minibatch
    settings = GRPOSettings(clip_eps_high=0.28, dual_clip=3.0, entropy_coef=0.5)
    terms = get_algorithm("grpo").actor_loss(x, settings)
    # tok0: max(-1.25, -1.28) = -1.25; tok1: max(5, 1.2) = 5, dual-clipped to 3; over 4 tokens
    assert terms.stats["policy_loss"].item() == approx((-1.25 + 3.0) / 4)
    assert terms.stats["entropy"].item() == approx(1.2 / 4)
    assert terms.loss.item() == approx((-1.25 + 3.0) / 4 - 0.5 * 1.2 / 4)
    no_dual = get_algorithm("grpo").actor_loss(x, GRPOSettings(clip_eps_high=0.28, dual_clip=None))
    assert no_dual.stats["policy_loss"].item() == approx((-1.25 + 5.0) / 4)


def test_grpo_reads_its_own_settings() -> None:
    """``grpo_eps`` and ``grpo_scale_by_std`` reach the advantages; a group counts as flat when all
    its members' advantages are 0 (here one group of three)."""
    mask = torch.ones(6, 2)
    scores = torch.tensor([0.2, 0.6, 0.5, 0.5, 0.0, 1.0])
    inputs = AdvantageInputs(mask, torch.zeros(6, 2), scores, torch.tensor([0, 0, 1, 1, 2, 2]))
    eps = get_algorithm("grpo").advantages(inputs, GRPOSettings(grpo_eps=0.5))
    assert eps.advantages[0, 0].item() == approx(-0.2 / 0.78284, abs=1e-5)
    assert eps.stats["train/flat_groups"] == 1.0
    plain = get_algorithm("grpo").advantages(inputs, GRPOSettings(grpo_scale_by_std=False))
    assert plain.advantages[:, 0].tolist() == approx([-0.2, 0.2, 0.0, 0.0, -0.5, 0.5])


def test_ppo_advantages_read_gamma_lambda_whiten_and_log_the_critic() -> None:
    mask = torch.tensor([[1.0, 1.0, 1.0]])
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 0.25, 0.0]])
    inputs = AdvantageInputs(mask, rewards, torch.tensor([1.0]), torch.tensor([0]), values)
    ppo = get_algorithm("ppo")
    got = ppo.advantages(inputs, PPOSettings(gamma=0.5, lam=0.5, whiten_advantages=False))
    want, ret = core.gae_advantages(rewards, values, mask, gamma=0.5, lam=0.5)
    assert torch.allclose(got.advantages, want) and torch.allclose(got.returns, ret)
    assert got.stats["train/value_mean"] == approx(0.25)
    assert got.stats["train/return_mean"] == approx(float(ret.mean()))
    whitened = ppo.advantages(inputs, PPOSettings()).advantages
    assert float(whitened.mean()) == approx(0.0, abs=1e-6) and float(whitened.std()) == approx(1.0, abs=1e-5)
    with pytest.raises(AssertionError, match=r"^PPO needs the critic's values$"):
        ppo.advantages(AdvantageInputs(mask, rewards, torch.tensor([1.0]), torch.tensor([0])), PPOSettings())


def test_ppos_critic_loss_reads_its_clip_and_the_normaliser() -> None:
    """The value clip of the settings (not the function's default) and the minibatch normaliser."""
    mask = torch.ones(1, 2)
    x = CriticLossInputs(
        mask, 4.0, torch.tensor([[0.5, -0.5]]), torch.tensor([[0.0, 0.0]]), torch.zeros(1, 2)
    )
    terms = get_algorithm("ppo").critic_loss(x, PPOSettings(value_clip=0.1))
    # err .25 each; clipped V ±0.1: err .01, smaller: loss 0.5 × .5 / 4, nothing counted as clipped
    assert terms.loss.item() == approx(0.5 * 0.5 / 4)
    assert set(terms.stats) == {"value_loss", "value_clip_fraction"}
    assert terms.stats["value_loss"].item() == terms.loss.item()
    back = CriticLossInputs(mask, 4.0, torch.tensor([[0.5, 0.0]]), torch.tensor([[1.0, 0.0]]),
                            torch.tensor([[0.6, 0.0]]))  # fmt: skip
    clipped = get_algorithm("ppo").critic_loss(back, PPOSettings(value_clip=0.1))
    assert clipped.stats["value_clip_fraction"].item() == approx(0.25)  # clipped V .9: err .09 > .01
    assert clipped.loss.item() == approx(0.5 * 0.09 / 4)  # (0.2, the default, would give V .8: .04)


def test_the_registry_names_its_choices() -> None:
    with pytest.raises(UnknownName) as raised:
        get_algorithm("a2c")
    assert str(raised.value) == f"unknown algorithm 'a2c'; known: {', '.join(ALGORITHMS)}"
    assert ALGORITHMS.names()[:2] == ("ppo", "grpo")


def test_settings_objects_pass_through_or_become_their_algorithms_class() -> None:
    """A settings object of the right class is used as it is; the shared class naming an algorithm
    becomes that algorithm's class with the values that were set; another algorithm's setting set to
    a non-default value is dropped with a warning naming the algorithm the block is for."""
    own = PPOSettings(value_clip=0.3)
    assert settings_for(own) is own
    shared = settings_for(AlgorithmSettings(name="grpo", kl_coef=0.1))
    assert type(shared) is GRPOSettings and shared.kl_coef == 0.1
    with pytest.warns(FutureWarning, match=r"does nothing for algorithm\.name=grpo; it is ignored"):
        settings_for({"name": "grpo", "value_clip": 0.5})


# -- survivors of the run on the merged tree (the trainer-level tests deselected) -----------------------


def test_the_surrogates_log_ratio_is_bounded_at_20_both_ways() -> None:
    """``policy_loss`` bounds ``logp - old_logp`` to ±20 before ``exp`` (a stale token cannot make the
    ratio overflow): at +20.5 the unclipped term of a negative advantage is ``e^20``, at -20.5 that of
    a positive one is ``-e^-20``; the bound sits at 20 exactly (a bound of 21 would pass 20.5 through)."""
    mask, adv = torch.ones(1, 1), torch.tensor([[-1.0]])
    old = torch.zeros(1, 1)
    up = core.policy_loss(torch.tensor([[20.5]]), old, adv, mask)
    assert up.loss.item() == approx(math.exp(20.0), rel=1e-6)  # max(e^20, 1.2): without a bound e^20.5
    down = core.policy_loss(torch.tensor([[-20.5]]), old, -adv, mask)
    assert down.loss.item() == approx(-math.exp(-20.0), rel=1e-6)  # max(-e^-20, -0.8); unbounded e^-20.5


def test_the_clip_fraction_is_over_the_normaliser() -> None:
    """A micro-batch's clip fraction is its share of the minibatch's tokens, as the loss is."""
    logp = torch.log(torch.tensor([[1.5, 1.0]]))
    adv, mask, old = torch.tensor([[1.0, 1.0]]), torch.ones(1, 2), torch.zeros(1, 2)
    own = core.policy_loss(logp, old, adv, mask)
    assert own.clip_fraction.item() == approx(0.5)  # the first token's ratio 1.5 is clipped
    assert core.policy_loss(logp, old, adv, mask, normalizer=4).clip_fraction.item() == approx(0.25)


def test_a_normaliser_of_one_divides_by_one() -> None:
    """``max(normalizer, 1)``: a one-token minibatch's sum is its mean (a floor of 2 would halve it)."""
    assert core.masked_mean(torch.tensor([3.0, 5.0]), torch.tensor([1.0, 0.0]), normalizer=1).item() == 3.0


def test_actor_loss_hands_clip_eps_on() -> None:
    """``clip_eps`` reaches the surrogate: a ratio of 1.15 is inside 1 ± 0.2 and clipped at 1 ± 0.1."""
    logp = torch.log(torch.tensor([[1.15]]))
    x = ActorLossInputs(
        torch.ones(1, 1), 1.0, logp, torch.zeros(1, 1), torch.tensor([[1.0]]), torch.zeros(1, 1)
    )
    terms = get_algorithm("grpo").actor_loss(x, GRPOSettings(clip_eps=0.1, dual_clip=None))
    assert terms.stats["policy_loss"].item() == approx(-1.1)  # max(-1.15, -1.1)


def test_the_kl_loss_is_over_the_normaliser() -> None:
    """GRPO's k3 loss term is a share of the minibatch's tokens, as the surrogate is."""
    logp, ref = torch.tensor([[0.0, 0.0]]), torch.tensor([[math.log(2.0), 0.0]])
    mask = torch.ones(1, 2)
    x = ActorLossInputs(mask, 4.0, logp, logp.clone(), torch.zeros(1, 2), torch.zeros(1, 2), ref_logp=ref)
    terms = get_algorithm("grpo").actor_loss(x, GRPOSettings(kl_coef=0.5))
    k3 = 2.0 - 1.0 - math.log(2.0)  # exp(ref - logp) - (ref - logp) - 1 at ref - logp = log 2
    assert terms.stats["kl_loss"].item() == approx(k3 / 4)
    assert terms.loss.item() == approx(0.5 * k3 / 4)


def test_every_algorithm_has_a_description() -> None:
    """``--help`` and the registry's listing print each algorithm's one line."""
    from rlver.train.algorithms import ALGORITHMS

    for name in ALGORITHMS:
        assert isinstance(ALGORITHMS.description(name), str) and ALGORITHMS.description(name).strip()


def test_ppo_kl_is_k1_of_old_and_new_over_the_minibatchs_tokens() -> None:
    """``ppo_kl`` (verl's ``actor/ppo_kl``): mean(old - new log-prob), positive when the new policy finds
    the tokens less likely (by 0.5 and 0.25 here: 0.375), over the given normaliser (8 tokens: 0.1875)."""
    old = torch.tensor([[-1.0, -2.0, 0.0]])
    new = old - torch.tensor([[0.5, 0.25, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    adv = torch.zeros(1, 3)
    assert core.policy_loss(new, old, adv, mask).ppo_kl.item() == approx(0.375)
    assert core.policy_loss(new, old, adv, mask, normalizer=4.0).ppo_kl.item() == approx(0.1875)
