"""The RL maths against small cases worked out by hand (the numbers in comments are the working)."""

from __future__ import annotations

import math

import pytest
import torch

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
