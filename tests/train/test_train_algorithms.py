"""The RL algorithms: the maths against small cases worked out by hand (the numbers in comments are
the working), and the algorithm table both engines read (registry, config validation, dual-clip, the
context budget, a new algorithm added with one class and one registry line)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from pydantic import Field

from helpers import add_for_test, count_optimiser_steps
from rlver.env.rewards import RewardSpec, episode_reward, turn_rewards
from rlver.errors import ConfigError
from rlver.registry import UnknownName
from rlver.train.algorithms import ALGORITHMS, core, entry, get_algorithm
from rlver.train.algorithms.base import (
    ActorLossInputs,
    AdvantageInputs,
    Advantages,
    Algorithm,
    CriticLossInputs,
    unmapped_knobs,
)
from rlver.train.algorithms.core import (
    broadcast_to_tokens,
    entropy_from_logits,
    gae_advantages,
    group_advantages,
    kl_k1,
    kl_k3,
    logprobs_from_logits,
    masked_mean,
    masked_whiten,
    policy_loss,
    token_rewards,
    value_loss,
)
from rlver.train.algorithms.grpo import GRPOSettings
from rlver.train.algorithms.ppo import PPOSettings
from rlver.train.config import AlgorithmSettings, TrainConfig, load_train_config
from rlver.train.context_budget import cut_to_turns
from test_env_rewards import make_episode

approx = pytest.approx


def test_masked_mean_all_and_per_row() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    assert masked_mean(x, m).item() == approx(10 / 3)  # (1 + 3 + 6) / 3
    assert masked_mean(x, m, dim=1).tolist() == approx([2.0, 6.0])
    assert masked_mean(x, m, normalizer=5).item() == approx(2.0)  # 10 / 5
    assert masked_mean(x, torch.zeros_like(m)).item() == 0.0  # empty mask: 0, not NaN


def test_masked_whiten() -> None:
    x = torch.tensor([[1.0, 100.0, 3.0, 6.0]])
    m = torch.tensor([[1.0, 0.0, 1.0, 1.0]])
    # mean 10/3; deviations -7/3, -1/3, 8/3; unbiased var = (49 + 1 + 64) / 9 / 2 = 57/9
    std = math.sqrt(57 / 9)
    out = masked_whiten(x, m)
    assert out.tolist()[0] == approx([(-7 / 3) / std, 0.0, (-1 / 3) / std, (8 / 3) / std], rel=1e-5)


def test_gae_skips_user_tokens_and_scatters_back() -> None:
    # row 0: [system, a, a, user, a, a]; turn rewards 0.5 (turn 1 end) and 1.0 (turn 2 end)
    # row 1: three actions then padding
    mask = torch.tensor([[0, 1, 1, 0, 1, 1], [1, 1, 1, 0, 0, 0]], dtype=torch.float32)
    rewards = torch.tensor([[0, 0, 0.5, 0, 0, 1.0], [0, 0, 1.0, 0, 0, 0]])
    values = torch.tensor([[9.0, 0.1, 0.2, 9.0, 0.3, 0.4], [0.0, 0.0, 0.0, 7.0, 7.0, 7.0]])
    adv, ret = gae_advantages(rewards, values, mask, gamma=0.9, lam=0.5)
    # row 0 compacted: r = [0, .5, 0, 1], V = [.1, .2, .3, .4], gamma*lam = .45
    # j=3: delta = 1 - .4 = .6                      A3 = .6
    # j=2: delta = 0 + .9*.4 - .3 = .06             A2 = .06 + .45*.6 = .33
    # j=1: delta = .5 + .9*.3 - .2 = .57            A1 = .57 + .45*.33 = .7185
    # j=0: delta = 0 + .9*.2 - .1 = .08             A0 = .08 + .45*.7185 = .403325
    assert adv[0].tolist() == approx([0, 0.403325, 0.7185, 0, 0.33, 0.6], abs=1e-6)
    assert ret[0].tolist() == approx([0, 0.503325, 0.9185, 0, 0.63, 1.0], abs=1e-6)
    # row 1 with gamma = .9, lam = .5 and V = 0: A2 = 1, A1 = .45, A0 = .2025
    assert adv[1].tolist() == approx([0.2025, 0.45, 1.0, 0, 0, 0], abs=1e-6)


@pytest.mark.parametrize("whiten", [True, False])
def test_ppo_value_targets_are_the_returns_before_whitening(whiten: bool) -> None:
    """The critic learns the GAE returns (advantage + value, from the advantages as GAE computed them);
    whitening rescales only what the policy sees. Targets rebuilt from the whitened advantages would
    teach the critic a unit-variance quantity unrelated to the rewards (verl 0.9.1 computes ``returns``
    before ``masked_whiten``, ``core_algos.compute_gae_advantage_return``). Same row as the hand
    computation above."""
    mask = torch.tensor([[0, 1, 1, 0, 1, 1]], dtype=torch.float32)
    rewards = torch.tensor([[0, 0, 0.5, 0, 0, 1.0]])
    values = torch.tensor([[9.0, 0.1, 0.2, 9.0, 0.3, 0.4]])
    inputs = AdvantageInputs(mask, rewards, rewards.sum(dim=1), torch.tensor([0]), values=values)
    out = get_algorithm("ppo").advantages(inputs, PPOSettings(gamma=0.9, lam=0.5, whiten_advantages=whiten))
    assert out.returns is not None
    assert out.returns[0].tolist() == approx([0, 0.503325, 0.9185, 0, 0.63, 1.0], abs=1e-6)
    raw = torch.tensor([[0, 0.403325, 0.7185, 0, 0.33, 0.6]])
    assert torch.allclose(out.advantages, masked_whiten(raw, mask) if whiten else raw, atol=1e-6)


def test_gae_gamma_lambda_one_is_reward_to_go_minus_value() -> None:
    mask = torch.tensor([[1, 0, 1, 1]], dtype=torch.float32)
    rewards = torch.tensor([[0.2, 0, 0, 0.7]])
    values = torch.tensor([[0.5, 3.0, 0.25, 0.0]])
    adv, ret = gae_advantages(rewards, values, mask, gamma=1.0, lam=1.0)
    # returns are the undiscounted reward-to-go: .9, .7, .7
    assert ret[0].tolist() == approx([0.9, 0, 0.7, 0.7])
    assert adv[0].tolist() == approx([0.4, 0, 0.45, 0.7])


def test_group_advantages() -> None:
    scores = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 7.0])
    groups = [0, 0, 0, 1, 1, 2]
    adv = group_advantages(scores, groups, eps=0.0 + 1e-6)
    # group 0: mean 2, unbiased std 1 -> -1, 0, 1; group 1: all equal -> 0; group 2 alone -> 0
    assert adv.tolist() == approx([-1.0, 0.0, 1.0, 0.0, 0.0, 0.0], abs=1e-5)
    # two members: [0.2, 0.6] -> mean .4, std sqrt(.08) = .28284 -> -/+ .70711
    adv2 = group_advantages(torch.tensor([0.2, 0.6]), [3, 3], eps=0.0)
    assert adv2.tolist() == approx([-0.70711, 0.70711], abs=1e-4)
    assert group_advantages(torch.tensor([0.2, 0.6]), [3, 3], scale=False).tolist() == approx([-0.2, 0.2])
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert broadcast_to_tokens(adv2, mask).flatten().tolist() == approx(
        [0, -0.70711, -0.70711, 0.70711, 0, 0], abs=1e-4
    )


def test_policy_loss_clipping_and_gradient() -> None:
    ratios = torch.tensor([[1.5, 0.5, 1.0, 1.1]])
    old = torch.zeros(1, 4)
    logp = torch.log(ratios).clone().requires_grad_(True)
    adv = torch.tensor([[1.0, 1.0, -1.0, -2.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    out = policy_loss(logp, old, adv, mask, clip_eps=0.2)
    # tok0: max(-1.5, -1.2) = -1.2 (clipped); tok1: max(-.5, -.8) = -.5; tok2: max(1, 1) = 1; tok3 masked
    assert out.loss.item() == approx((-1.2 - 0.5 + 1.0) / 3)
    assert out.clip_fraction.item() == approx(1 / 3)
    out.loss.backward()
    assert logp.grad is not None
    # d/dlogp of -A*ratio is -A*ratio: tok0 clipped -> 0; tok1 -> -.5/3; tok2 -> +1/3; tok3 masked -> 0
    assert logp.grad.tolist()[0] == approx([0.0, -0.5 / 3, 1 / 3, 0.0])
    # micro-batching: normalising by the minibatch's token count (6) halves this micro-batch's share
    half = policy_loss(logp.detach(), old, adv, mask, normalizer=6)
    assert half.loss.item() == approx(-0.7 / 6)


def test_policy_loss_pushes_logprob_in_advantage_direction() -> None:
    logp = torch.zeros(1, 2, requires_grad=True)
    out = policy_loss(logp, torch.zeros(1, 2), torch.tensor([[2.0, -3.0]]), torch.ones(1, 2))
    out.loss.backward()
    assert logp.grad is not None
    assert logp.grad.tolist()[0] == approx([-1.0, 1.5])  # descent raises logp where A > 0


def test_value_loss_with_clipping() -> None:
    values = torch.tensor([[1.0, 0.5, 1.0, 9.0]])
    old = torch.tensor([[0.5, 0.5, 0.5, 0.0]])
    ret = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    out = value_loss(values, old, ret, mask, clip_range=0.2)
    # tok0: err 1, clipped V .7 -> .49, max 1; tok1: .25 both; tok2: err 0, clipped V .7 -> .09
    assert out.loss.item() == approx(0.5 * (1.0 + 0.25 + 0.09) / 3)
    assert out.clip_fraction.item() == approx(1 / 3)
    unclipped = value_loss(values, old, ret, mask, clip_range=None)
    assert unclipped.loss.item() == approx(0.5 * (1.0 + 0.25 + 0.0) / 3)


def test_the_value_clip_fraction_counts_only_tokens_the_clip_moved() -> None:
    """Every new value within ``clip_range`` of its old value: nothing is clipped, so the fraction is 0
    exactly. ``V_old + clamp(V - V_old)`` rounds away from ``V`` by an ulp when ``V`` is much smaller
    than ``V_old`` and counted that noise as clipping (5.2 % of these tokens); the clamp of ``V`` itself
    does not."""
    g = torch.Generator().manual_seed(0)
    values = 1e-3 * torch.randn(64, 48, generator=g)  # a young critic: values near 0
    old = values + 0.19 * (2 * torch.rand(64, 48, generator=g) - 1)  # within ±0.2 of the new values
    returns = torch.randn(64, 48, generator=g)
    mask = (torch.rand(64, 48, generator=g) > 0.2).float()
    assert value_loss(values, old, returns, mask, clip_range=0.2).clip_fraction.item() == 0.0
    moved = old + 0.3 * torch.sign(torch.randn(64, 48, generator=g))  # every token past the bound
    frac = value_loss(moved, old, returns, mask, clip_range=0.2).clip_fraction.item()
    err, err_clipped = (moved - returns) ** 2, (old + 0.2 * torch.sign(moved - old) - returns) ** 2
    assert frac == approx(masked_mean((err_clipped > err).float(), mask).item())


def test_entropy_logprobs_and_kl() -> None:
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]])
    # uniform: ln 2; [1/4, 3/4]: .25 ln 4 + .75 ln(4/3) = .562335
    assert entropy_from_logits(logits).tolist() == approx([math.log(2), 0.562335], abs=1e-6)
    assert logprobs_from_logits(logits, torch.tensor([1, 1])).tolist() == approx(
        [math.log(0.5), math.log(0.75)]
    )
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    assert kl_k1(logp, ref).item() == approx(math.log(2))
    # k3 = q/p - log(q/p) - 1 = .5 + ln 2 - 1
    assert kl_k3(logp, ref).item() == approx(0.5 + math.log(2) - 1)
    assert kl_k3(ref, ref).item() == 0.0


def test_token_rewards_land_on_turn_ends() -> None:
    out = token_rewards([[0.1, 0.3], [0.9]], [[2, 5], [1]], (2, 6))
    assert out.flatten().tolist() == approx([0, 0, 0.1, 0, 0, 0.3, 0, 0.9, 0, 0, 0, 0])


# ----------------------------------------------------------------------------------------------
# the algorithm table


def test_every_algorithm_declares_what_both_engines_need() -> None:
    for name, cls in ALGORITHMS.items():
        assert issubclass(cls, Algorithm) and cls.name == name
        assert isinstance(cls.needs_critic, bool) and cls.kl_in in ("reward", "loss")
        assert cls.min_group_size >= 1 and cls.verl_adv_estimator
        assert unmapped_knobs(cls) == [], f"{name}: every own setting mapped or refused under verl"
        assert ALGORITHMS.settings_class(name) is cls.settings_class  # the entry's settings column
    assert ALGORITHMS.get("ppo").needs_critic and not ALGORITHMS.get("grpo").needs_critic
    assert ALGORITHMS.get("grpo").min_group_size == 2


def test_unknown_algorithm_is_a_config_error_naming_the_choices() -> None:
    known = ", ".join(ALGORITHMS)
    with pytest.raises(ConfigError, match=rf"algorithm\.name.*unknown algorithm 'a2c'; known: {known}"):
        load_train_config("tiny-offline", ["algorithm.name=a2c"])
    with pytest.raises(UnknownName, match="unknown algorithm 'gpro'; did you mean 'grpo'"):
        get_algorithm("gpro")


def test_grpo_refuses_groups_of_one_on_every_engine() -> None:
    with pytest.raises(ConfigError, match="n_per_profile >= 2"):
        load_train_config("tiny-offline", ["rollout.n_per_profile=1", "rollout.batch_size=4"])
    ppo = load_train_config("tiny-offline", ["algorithm.name=ppo", "rollout.n_per_profile=1"])
    assert ppo.rollout.n_per_profile == 1


def _inputs() -> AdvantageInputs:
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0, 0.0]])
    rewards = torch.zeros_like(mask)
    rewards[0, 4], rewards[1, 4], rewards[2, 2] = 0.6, 0.2, 0.4
    return AdvantageInputs(
        mask=mask,
        token_rewards=rewards,
        scores=torch.tensor([0.6, 0.2, 0.4]),
        groups=torch.tensor([0, 0, 1]),
        values=torch.full_like(mask, 0.1),
    )


def test_strategies_compute_their_advantages() -> None:
    ppo = get_algorithm("ppo").advantages(_inputs(), PPOSettings(whiten_advantages=False))
    # gamma = lam = 1: A = reward-to-go - V on each action token
    assert ppo.advantages[0].tolist() == pytest.approx([0.0, 0.5, 0.5, 0.0, 0.5])
    assert ppo.returns is not None and ppo.returns[0, 1].item() == pytest.approx(0.6)
    grpo = get_algorithm("grpo").advantages(_inputs(), GRPOSettings(grpo_lone_sample="zero"))
    # group 0: (0.6, 0.2) -> +-0.7071; group 1 has one member -> 0 (lone "zero") and counts as flat
    assert grpo.advantages[0, 1].item() == pytest.approx(0.70711, abs=1e-4)
    assert grpo.advantages[1, 4].item() == pytest.approx(-0.70711, abs=1e-4)
    assert grpo.advantages[2].abs().sum().item() == 0.0
    assert grpo.returns is None and grpo.stats["train/flat_groups"] == 1.0


def test_the_kl_goes_where_kl_in_says() -> None:
    """One truth for the KL: ``kl_in`` alone decides where ``kl_coef`` acts, through the shared
    ``Algorithm.actor_loss`` (loss) and ``Algorithm.with_reward_kl`` (reward), which the trainer calls."""
    inputs = _inputs()
    old = torch.zeros_like(inputs.mask)
    inputs.old_logp, inputs.ref_logp = old, old - 0.5  # k1(old || ref) = 0.5 on every token
    ppo, grpo = get_algorithm("ppo"), get_algorithm("grpo")
    paid = ppo.with_reward_kl(inputs, PPOSettings(kl_coef=0.1))
    # 0.1 × 0.5 per action token; row 0 has 3 action tokens: its score 0.6 - 3 × 0.05
    assert paid.token_rewards[0].tolist() == pytest.approx([0.0, -0.05, -0.05, 0.0, 0.55])
    assert paid.scores.tolist() == pytest.approx([0.45, 0.05, 0.25])
    assert ppo.with_reward_kl(inputs, PPOSettings()) is inputs  # kl_coef 0: untouched
    assert grpo.with_reward_kl(inputs, GRPOSettings(kl_coef=0.1)) is inputs  # GRPO's KL is in the loss


def test_the_trainer_puts_ppos_kl_in_the_rewards(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The learner applies ``with_reward_kl`` before PPO's advantages: at step 2 (the policy has moved
    off its reference) every action token's reward is ``-kl_coef × k1``, plus a turn's reward on at most
    one token per turn."""
    from rlver.train.trainer import Trainer
    from test_train_loop import _config

    seen: list[AdvantageInputs] = []
    ppo = ALGORITHMS.get("ppo")
    original = ppo.advantages

    def spy(self: Algorithm, inputs: AdvantageInputs, settings: PPOSettings) -> Advantages:
        seen.append(inputs)
        return original(self, inputs, settings)

    monkeypatch.setattr(ppo, "advantages", spy)
    extra = ("algorithm.name=ppo", "rollout.n_per_profile=1", "algorithm.kl_coef=0.1", "run.steps=2")
    Trainer(_config(*extra, "eval.every=0"), tmp_path).train()
    x = seen[-1]
    assert x.old_logp is not None and x.ref_logp is not None
    k1 = (x.old_logp - x.ref_logp) * x.mask
    assert k1.abs().max() > 0, "the policy moved off the reference in step 1"
    rest = (x.token_rewards + 0.1 * k1) * x.mask  # what is left once the KL is paid back: turn rewards
    assert int((rest.abs() > 1e-6).sum(dim=1).max()) <= 2  # max_assistant_turns=2 in the tiny config


def test_each_algorithm_computes_its_loss_terms() -> None:
    g = torch.Generator().manual_seed(0)
    mask = (torch.rand(3, 6, generator=g) > 0.3).float()
    n = float(mask.sum())
    old, ref = torch.randn(3, 6, generator=g), torch.randn(3, 6, generator=g)
    logp, adv, ent = (
        old + 0.3 * torch.randn(3, 6, generator=g),
        torch.randn(3, 6, generator=g),
        torch.rand(3, 6),
    )
    x = ActorLossInputs(mask, n, logp, old, adv, ent, ref)
    s, g_s = PPOSettings(kl_coef=0.1, entropy_coef=0.01), GRPOSettings(kl_coef=0.1, entropy_coef=0.01)
    surrogate = policy_loss(
        logp, old, adv, mask, clip_eps=s.clip_eps, normalizer=n, dual_clip=s.dual_clip
    ).loss
    bonus = 0.01 * masked_mean(ent, mask)
    grpo = get_algorithm("grpo").actor_loss(x, g_s)  # policy_clip, kl_k3 (in the loss), entropy
    assert grpo.loss.item() == pytest.approx(
        (surrogate - bonus + 0.1 * masked_mean(kl_k3(logp, ref), mask)).item()
    )
    assert set(grpo.stats) == {"policy_loss", "clip_fraction", "approx_kl", "ppo_kl", "entropy", "kl_loss"}
    ppo = get_algorithm("ppo").actor_loss(x, s)  # PPO's KL sits in the reward, not in the loss
    assert ppo.loss.item() == pytest.approx((surrogate - bonus).item()) and "kl_loss" not in ppo.stats
    values, returns = torch.randn(3, 6, generator=g), torch.randn(3, 6, generator=g)
    v = CriticLossInputs(mask, n, values, values + 0.5, returns)
    expected = value_loss(values, values + 0.5, returns, mask, clip_range=s.value_clip, normalizer=n)
    assert get_algorithm("ppo").critic_loss(v, s).loss.item() == pytest.approx(expected.loss.item())
    with pytest.raises(NotImplementedError, match="grpo trains no critic"):
        get_algorithm("grpo").critic_loss(v, g_s)


def test_dual_clip_bounds_negative_advantage_tokens() -> None:
    ratios = torch.tensor([[5.0, 5.0, 0.5]])
    logp = torch.log(ratios).requires_grad_(True)
    old, mask = torch.zeros(1, 3), torch.ones(1, 3)
    adv = torch.tensor([[-1.0, 1.0, -1.0]])
    plain = policy_loss(logp, old, adv, mask, clip_eps=0.2)
    dual = policy_loss(logp, old, adv, mask, clip_eps=0.2, dual_clip=3.0)
    # tok0: max(5, 1.2) = 5, dual-clipped to min(5, 3) = 3; tok1: max(-5, -1.2) = -1.2; tok2: max(.5, .8) = .8
    assert plain.loss.item() == pytest.approx((5.0 - 1.2 + 0.8) / 3)
    assert dual.loss.item() == pytest.approx((3.0 - 1.2 + 0.8) / 3)
    dual.loss.backward()
    assert logp.grad is not None and logp.grad[0, 0].item() == 0.0  # the capped token pushes no more
    assert AlgorithmSettings().dual_clip == 3.0  # verl's clip_ratio_c default, on both engines


def test_dual_clip_matches_verl() -> None:
    core = pytest.importorskip("verl.trainer.ppo.core_algos")
    from omegaconf import OmegaConf

    g = torch.Generator().manual_seed(0)
    old = torch.randn(4, 9, generator=g)
    logp = old + 1.5 * torch.randn(4, 9, generator=g)
    adv = torch.randn(4, 9, generator=g)
    mask = (torch.rand(4, 9, generator=g) > 0.3).float()
    ours = policy_loss(logp, old, adv, mask, clip_eps=0.2, clip_eps_high=0.28, dual_clip=3.0)
    cfg = OmegaConf.create(
        {
            "clip_ratio": 0.2,
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.28,
            "clip_ratio_c": 3.0,
            "global_batch_info": {},
        }
    )
    theirs = core.compute_policy_loss_vanilla(
        old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask,
        loss_agg_mode="token-mean", config=cfg,
    )  # fmt: skip
    assert ours.loss.item() == pytest.approx(theirs[0].item(), abs=1e-6)


def test_a_dialogue_cut_by_the_budget_is_scored_as_cut() -> None:
    ep = make_episode(30, [45, 60, 90], think=True, replies=["<think>a</think>x", "y", "<think>c</think>z"])
    cut = cut_to_turns(ep, 2)
    assert cut.assistant_turns == 2 and cut.end_reason == "context_full"
    assert cut.final_emotion == 60 and cut.emotions == [45, 60]
    assert [m.role for m in cut.messages][-2:] == ["assistant", "user"]
    assert episode_reward(cut) == pytest.approx(0.60)
    assert turn_rewards(cut, RewardSpec(mode="delta", format_penalty=0.1)) == pytest.approx(
        [0.15, 0.15 - 0.1]
    )
    assert cut_to_turns(ep, 3) is ep


def test_a_sample_cut_by_the_budget_earns_what_the_cut_dialogue_earns() -> None:
    """The learner's samples: a dialogue longer than ``model.max_length`` keeps the turns that fit, is
    cut after the last of them (``context_full``) and earns the cut dialogue's reward, not the whole
    one's; the reward sits on the last kept turn's end token and is the sample's score."""
    from rlver.models.tiny import tiny_model_and_tokenizer
    from rlver.train.learner import make_samples, pad_batch

    _, tokenizer = tiny_model_and_tokenizer(0)
    ep = make_episode(30, [45, 20, 70], replies=["a b c", "d e f", "g h i"])
    rollout = load_train_config("tiny-offline", ["rollout.reward.mode=delta"]).rollout
    (whole,), _ = make_samples([ep], tokenizer, rollout, 4096)
    (sample,), dropped = make_samples([ep], tokenizer, rollout, whole.seq.turn_end_positions[1] + 2)
    assert dropped == 0 and sample.seq.kept_turns == 2 and sample.episode.end_reason == "context_full"
    assert sample.rewards == pytest.approx(turn_rewards(cut_to_turns(ep, 2), rollout.reward))
    assert sum(sample.rewards) == pytest.approx(-0.10) != pytest.approx(sum(whole.rewards))  # 30 -> 20
    batch = pad_batch([sample])
    assert batch.token_rewards[0, sample.seq.turn_end_positions[-1] - 1].item() == pytest.approx(
        -0.25
    )  # 45 -> 20
    assert batch.scores[0].item() == pytest.approx(-0.10)


def test_a_new_algorithm_is_one_class_and_one_registry_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """docs/architecture.md: adding an algorithm, with settings of its own, = one file (its strategy
    class and its settings class) + one line in ALGORITHMS; nothing else changes.

    A leave-one-out baseline (RLOO) with its own knob, written against the interface only and registered
    at run time: the config reads its ``algorithm:`` block with its settings class (validated, written
    to the run's config.yaml and read back from there), and its setting reaches a real training step.
    Under ``--trainer verl`` the knob is refused while the algorithm does not map it, and reaches verl's
    keys once it does (``Algorithm.verl_overrides``; tests/integrations/test_verl_algorithms.py
    composes those keys with real verl).
    """
    from rlver.integrations.verl.config import verl_overrides
    from rlver.integrations.verl.launch import load_verl_config, prepare
    from rlver.train.trainer import Trainer
    from test_train_loop import _config

    seen: list[tuple[int, float]] = []

    class LeaveOneOutSettings(AlgorithmSettings):
        name: str = "rloo"
        baseline_weight: float = Field(default=1.0, ge=0.0)  # share of the others' mean subtracted

    class LeaveOneOut(ALGORITHMS.get("grpo")):  # type: ignore[misc,valid-type]
        name = "rloo"
        settings_class = LeaveOneOutSettings

        def advantages(self, inputs: AdvantageInputs, settings: LeaveOneOutSettings) -> Advantages:
            scores, groups = inputs.scores, inputs.groups
            per_seq = torch.zeros_like(scores)
            for g in torch.unique(groups):
                members = groups == g
                n = int(members.sum())
                others = (scores[members].sum() - scores[members]) / max(n - 1, 1)
                per_seq[members] = scores[members] - settings.baseline_weight * others
            seen.append((len(scores), settings.baseline_weight))
            return Advantages(core.broadcast_to_tokens(per_seq, inputs.mask), None, {})

    add_for_test(monkeypatch, ALGORITHMS, entry(LeaveOneOut, "a leave-one-out baseline"))
    assert "rloo" in ALGORITHMS
    with pytest.raises(ConfigError, match=f"known: {', '.join(ALGORITHMS)}"):
        load_train_config("tiny-offline", ["algorithm.name=nope"])
    with pytest.raises(ConfigError, match=r"algorithm\.baseline_weight"):
        load_train_config("tiny-offline", ["algorithm.name=rloo", "algorithm.baseline_weight=-1"])
    cfg = _config("algorithm.name=rloo", "algorithm.baseline_weight=0.5", "run.steps=1", "eval.every=0")
    assert type(cfg.algorithm) is LeaveOneOutSettings
    trainer = Trainer(cfg, tmp_path / "run")
    written = load_train_config(str(tmp_path / "run" / "config.yaml"))  # what --resume reads
    assert type(written.algorithm) is LeaveOneOutSettings and written.algorithm == cfg.algorithm
    metrics = trainer.train_step()
    assert seen and seen[0][0] >= 2, "the registered algorithm computed the step's advantages"
    assert seen[0][1] == 0.5, "with its own setting, from the config"
    assert metrics["train/advantage_abs_mean"] > 0 and metrics["train/grad_norm_actor"] > 0
    assert "train/grad_norm_critic" not in metrics  # no critic: the class said so, the trainer asked

    # under verl: refused while unmapped (exit 2: a ConfigError), mapped once the algorithm says how
    verl_args = [f"verl.out_dir={tmp_path / 'verl'}", "algorithm.name=rloo", "algorithm.baseline_weight=0.5"]
    with pytest.raises(ConfigError, match=r"algorithm\.baseline_weight.*no verl mapping.*LeaveOneOut"):
        prepare(load_verl_config("tiny-offline", verl_args))

    class MappedLeaveOneOut(LeaveOneOut):
        verl_adv_estimator = "rloo"
        verl_knobs = frozenset({"baseline_weight"})

        def verl_overrides(self, settings: LeaveOneOutSettings) -> dict[str, Any]:  # type: ignore[override]
            return {}  # verl's rloo estimator has no key for the weight: checked below instead

        def verl_refusals(self, settings: LeaveOneOutSettings) -> list[str]:  # type: ignore[override]
            ok = settings.baseline_weight == 1.0  # verl's rloo subtracts the whole leave-one-out mean
            return [] if ok else [f"algorithm.baseline_weight={settings.baseline_weight}: verl has 1.0 only"]

    add_for_test(monkeypatch, ALGORITHMS, entry(MappedLeaveOneOut, "a leave-one-out baseline, mapped"))
    with pytest.raises(ConfigError, match=r"algorithm\.baseline_weight=0\.5: verl has 1\.0 only"):
        prepare(load_verl_config("tiny-offline", verl_args))
    overrides = verl_overrides(
        load_verl_config("tiny-offline", verl_args[:-1]),
        model_path="m", train_files="t.parquet", val_files="v.parquet", agent_loop_yaml="a.yaml",
        n_train_profiles=16,
    )  # fmt: skip
    assert "algorithm.adv_estimator=rloo" in overrides


#: ``algorithm:`` as a run folder's config.yaml held it before each algorithm had its own settings class
OLD_FLAT_ALGORITHM = {
    "clip_eps": 0.2, "clip_eps_high": None, "dual_clip": 3.0, "kl_coef": 0.0, "entropy_coef": 0.001,
    "gamma": 1.0, "lam": 1.0, "whiten_advantages": True, "value_clip": 0.2, "grpo_scale_by_std": True,
    "grpo_eps": 1e-6, "epochs": 1, "minibatches": 1, "micro_batch_tokens": 16384, "logit_chunk_tokens": 1024,
}  # fmt: skip


@pytest.mark.parametrize("name", ["ppo", "grpo"])
def test_old_flat_algorithm_keys_are_still_read(name: str, recwarn: pytest.WarningsRecorder) -> None:
    """A config.yaml written before the split (every algorithm's keys flat, for --resume) reads as the
    named algorithm's settings class; the other algorithm's keys, at their defaults there, go quietly."""
    data = {**OLD_FLAT_ALGORITHM, "name": name, "value_clip": 0.5 if name == "ppo" else 0.2}
    cfg = TrainConfig.model_validate({"algorithm": data, "rollout": {"n_per_profile": 2}})
    assert type(cfg.algorithm) is (PPOSettings if name == "ppo" else GRPOSettings)
    own = {
        "ppo": {"whiten_advantages", "value_clip"},
        "grpo": {"grpo_scale_by_std", "grpo_eps", "grpo_lone_sample"},
    }[name]
    dumped = cfg.algorithm.model_dump()
    moved = {"micro_batch_tokens", "logit_chunk_tokens"}  # to update: (issue 44), at their defaults quietly
    assert set(dumped) == (
        set(data) - {"whiten_advantages", "value_clip", "grpo_scale_by_std", "grpo_eps"} - moved
    ) | own | {"target_kl", "rollout_is", "rollout_is_threshold", "loss_agg_mode", "loss_scale_factor"}
    assert cfg.update.model_dump() == {k: data[k] for k in moved}
    assert all(dumped[k] == data[k] for k in data if k in dumped)
    assert TrainConfig.model_validate(cfg.model_dump(mode="json")) == cfg  # the new config.yaml reads back
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)]


def test_another_algorithms_setting_warns_naming_its_class() -> None:
    with pytest.warns(FutureWarning, match=r"algorithm\.value_clip=0\.5 is a setting of ppo \(PPOSettings"):
        cfg = load_train_config("tiny-offline", ["algorithm.value_clip=0.5"])
    assert type(cfg.algorithm) is GRPOSettings and not hasattr(cfg.algorithm, "value_clip")
    with pytest.warns(FutureWarning, match=r"algorithm\.grpo_eps=0\.01 is a setting of grpo \(GRPOSettings"):
        load_train_config("ppo-think", ["algorithm.grpo_eps=0.01"])
    with pytest.raises(ConfigError, match=r"algorithm\.whiten: unknown key"):  # a typo is still named
        load_train_config("ppo-think", ["algorithm.whiten=true"])


def test_explained_variance_of_the_critic() -> None:
    """CleanRL's ``1 - Var(R - V) / Var(R)`` over the action tokens (population variances)."""
    returns = torch.tensor([[1.0, 2.0, 3.0, 4.0, 99.0]])
    values = torch.tensor([[1.0, 2.0, 3.0, 3.0, -50.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])  # the last position is no action: ignored
    # Var(R) = 1.25; R - V = (0, 0, 0, 1): Var = 0.1875; 1 - 0.1875 / 1.25 = 0.85
    assert core.explained_variance(values, returns, mask) == pytest.approx(0.85)
    assert core.explained_variance(returns, returns, mask) == pytest.approx(1.0)
    assert core.explained_variance(torch.full_like(returns, 2.5), returns, mask) == pytest.approx(0.0)
    assert core.explained_variance(values, torch.ones_like(returns), mask) is None  # returns do not vary
    inputs = _inputs()
    ppo = get_algorithm("ppo").advantages(inputs, PPOSettings())
    assert ppo.stats["train/explained_variance"] == pytest.approx(0.0, abs=1e-6)  # a constant critic
    assert "train/explained_variance" not in get_algorithm("grpo").advantages(inputs, GRPOSettings()).stats


def test_target_kl_stops_the_remaining_minibatch_updates(tmp_path) -> None:
    """CleanRL's ``target_kl``: once a minibatch's approximate KL passes it, no more optimiser steps
    this step (counted on the optimiser itself); off (null), every epoch x minibatch update runs."""
    from rlver.train.trainer import Trainer
    from test_train_loop import _config

    cfg = _config(
        "algorithm.minibatches=2", "algorithm.epochs=2", "algorithm.target_kl=1e-12", "eval.every=0"
    )
    trainer = Trainer(cfg, tmp_path / "run")
    steps = count_optimiser_steps(trainer)
    stopped = trainer.train_step()
    assert stopped["train/early_stopped"] == 1.0 and stopped["train/approx_kl"] > 0
    assert stopped["train/minibatch_updates"] == len(steps) < 4
    trainer.learner.settings = cfg.algorithm.model_copy(update={"target_kl": None})
    steps.clear()
    full = trainer.train_step()
    assert len(steps) == 4 and "train/early_stopped" not in full


def test_one_sample_per_dialogue_takes_minibatches_optimiser_steps(tmp_path) -> None:
    """No-think (one sample per dialogue): ``algorithm.minibatches`` optimiser steps per epoch, counted
    on the optimiser itself (the per-turn layout's count is in test_tokenize_exact)."""
    from rlver.train.trainer import Trainer
    from test_train_loop import _config

    trainer = Trainer(_config("algorithm.minibatches=2", "eval.every=0"), tmp_path / "run")
    steps = count_optimiser_steps(trainer)
    metrics = trainer.train_step()
    assert metrics["rollout/samples"] == trainer.cfg.rollout.dialogues_per_step
    assert len(steps) == metrics["train/optimizer_steps"] == 2


def _four_samples(tmp_path: Any, minibatch_samples: int) -> tuple[Any, list[Any]]:
    """A tiny trainer whose learner takes ``minibatch_samples`` samples per optimiser step, and one
    rollout's 4 samples (2 profiles x 2 dialogues, one sample each), with advantages that are not all 0."""
    from rlver.train.trainer import Trainer, profiles_at
    from test_train_loop import _config

    torch.manual_seed(0)
    trainer = Trainer(_config("eval.every=0"), tmp_path / "run")
    trainer.learner.parts.minibatch_samples = minibatch_samples
    profiles = profiles_at(trainer.train_profiles, 0, trainer.cfg.rollout.profiles_per_step, 0)
    samples, _ = trainer._trainable(1, trainer._run_dialogues(profiles, evaluation=False, seed=1))
    assert len(samples) == 4
    return trainer, samples


def test_a_partial_second_minibatch_is_off_policy(tmp_path) -> None:
    """M3 (issue 42): the minibatch count rounds up. Floored, 4 samples in minibatches of 3 would count
    as one minibatch, the on-policy shortcut would skip the old log-probs, and the second minibatch,
    trained after the first optimiser step, would take its own log-probs as the old ones: ratio 1
    exactly (approximate KL 0), so clipping could never act on it."""
    trainer, samples = _four_samples(tmp_path, 3)
    learner = trainer.learner
    assert [learner.minibatch_count(n) for n in (1, 3, 4, 5, 6, 7)] == [1, 1, 2, 2, 2, 3]
    assert not learner.on_policy(4) and learner.on_policy(3)
    batch = learner.score(samples)
    assert batch.old_logp is not None and batch.advantages.abs().sum() > 0
    stats = learner.update(batch, 1, torch.Generator().manual_seed(0))
    assert stats["train/optimizer_steps"] == 2
    # the first minibatch runs at ratio 1; the second, after a step, against the scored old log-probs
    # (measured: approximate KL 0.0135 there, 0.0068 as the mean of the two)
    assert stats["train/approx_kl"] > 1e-3


def test_the_last_partial_minibatch_is_trained(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """M4 (issue 42): 4 samples in minibatches of 3 take two optimiser steps, of 3 samples and of 1;
    every sample is trained once per epoch (dropping the partial minibatch would leave one untrained)."""
    trainer, samples = _four_samples(tmp_path, 3)
    learner = trainer.learner
    trained: list[list[int]] = []
    real = learner._minibatch_step

    def recorded(b: Any, idx: list[int], grid: Any, step: int) -> dict[str, float]:
        trained.append(list(idx))
        return real(b, idx, grid, step)

    monkeypatch.setattr(learner, "_minibatch_step", recorded)
    steps = count_optimiser_steps(trainer)
    stats = learner.update(learner.score(samples), 1, torch.Generator().manual_seed(0))
    assert [len(idx) for idx in trained] == [3, 1] and len(steps) == 2 == stats["train/optimizer_steps"]
    assert sorted(i for idx in trained for i in idx) == [0, 1, 2, 3]
