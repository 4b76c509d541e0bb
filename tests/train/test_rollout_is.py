"""Truncated importance sampling (``algorithm.rollout_is``, issue 33): the weights against a hand
computation, the loss they weigh, off by default with the loss unchanged, and a real training step on
each side (the weights reach the gradient; the step logs them and the run's manifest records them).

tests/integrations/test_verl_algorithms.py checks the same numbers against verl 0.9.1's own function
and the keys rlver writes for verl."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlver.train.algorithms import get_algorithm
from rlver.train.algorithms.base import ActorLossInputs, AlgorithmSettings
from rlver.train.algorithms.core import policy_loss, rollout_is_weights
from rlver.train.algorithms.grpo import GRPOSettings
from rlver.train.algorithms.ppo import PPOSettings

NAN = float("nan")
#: three action tokens (the last position is padding); the sampler's log-prob of token 3 is unknown
OLD = torch.tensor([[-1.0, -0.5, -2.0, -0.7, 0.0]])
SAMPLED = torch.tensor([[-1.5, -0.5, -0.2, NAN, -9.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])


def test_token_weights_by_hand() -> None:
    w = rollout_is_weights(OLD, SAMPLED, MASK, "token", threshold=1.5)
    # log ratios 0.5, 0, -1.8, unknown (-> 1): exp = 1.6487 (cut to 1.5), 1, 0.16530, 1; padding 0
    assert w.weights[0].tolist() == pytest.approx([1.5, 1.0, math.exp(-1.8), 1.0, 0.0])
    assert w.clipped[0].tolist() == [True, False, False, False, False]


def test_sequence_weight_by_hand() -> None:
    w = rollout_is_weights(OLD, SAMPLED, MASK, "sequence", threshold=2.0)
    # one weight per row: exp(0.5 + 0 - 1.8) = exp(-1.3) = 0.27253 on every action token
    assert w.weights[0].tolist() == pytest.approx([math.exp(-1.3)] * 4 + [0.0])
    assert not w.clipped.any()
    high = rollout_is_weights(OLD, OLD - 0.4, MASK, "sequence", threshold=2.0)  # exp(4 x 0.4) = 4.95
    assert high.weights[0].tolist() == pytest.approx([2.0] * 4 + [0.0]) and int(high.clipped.sum()) == 4


def test_the_weights_multiply_each_tokens_clipped_loss() -> None:
    """On-policy (ratio 1) the per-token loss is -A; TIS makes it -A × w before the token mean."""
    adv = torch.tensor([[1.0, -1.0, 2.0, 0.5, 7.0]])
    w = rollout_is_weights(OLD, SAMPLED, MASK, "token", threshold=1.5).weights
    out = policy_loss(OLD, OLD, adv, MASK, is_weights=w)
    by_hand = (-1.0 * 1.5 + 1.0 * 1.0 - 2.0 * math.exp(-1.8) - 0.5 * 1.0) / 4
    assert out.loss.item() == pytest.approx(by_hand)
    logp = OLD.clone().requires_grad_(True)
    policy_loss(logp, OLD, adv, MASK, is_weights=w).loss.backward()
    assert logp.grad is not None  # d/dlogp of -A × ratio × w at ratio 1 is -A × w / n
    assert logp.grad[0].tolist() == pytest.approx([-1.5 / 4, 0.25, -2 * math.exp(-1.8) / 4, -0.125, 0.0])


def test_the_weights_multiply_the_loss_after_the_dual_clip() -> None:
    """verl 0.9.1 caps a negative-advantage token's loss at ``-A·c`` first, then weighs it
    (``compute_policy_loss_vanilla``: ``pg_losses * rollout_is_weights`` after the dual clip). A token
    with A = -1, ratio 5 and weight 2: max(5, 1.2) = 5, capped at c = 3, weighed: 6. Weighing first
    would give min(10, 3) = 3, and a weight could never raise a capped token's loss."""
    logp = torch.log(torch.tensor([[5.0, 5.0, 0.5]]))
    old, mask = torch.zeros(1, 3), torch.ones(1, 3)
    adv = torch.tensor([[-1.0, 1.0, -1.0]])
    weights = torch.tensor([[2.0, 2.0, 0.5]])
    out = policy_loss(logp, old, adv, mask, clip_eps=0.2, dual_clip=3.0, is_weights=weights)
    # tok0: min(max(5, 1.2), 3) x 2 = 6; tok1: max(-5, -1.2) x 2 = -2.4; tok2: max(.5, .8) x .5 = .4
    assert out.loss.item() == pytest.approx((6.0 - 2.4 + 0.4) / 3)


@pytest.mark.parametrize("name", ["ppo", "grpo"])
def test_off_by_default_and_the_loss_is_bit_identical(name: str) -> None:
    """Off (the default), the loss is the unweighted one exactly; weights of 1 change no bit either."""
    assert AlgorithmSettings().rollout_is is None and AlgorithmSettings().rollout_is_threshold == 2.0
    g = torch.Generator().manual_seed(1)
    old = torch.randn(3, 7, generator=g)
    logp = old + 0.3 * torch.randn(3, 7, generator=g)
    adv, mask = torch.randn(3, 7, generator=g), (torch.rand(3, 7, generator=g) > 0.3).float()
    settings = PPOSettings() if name == "ppo" else GRPOSettings()
    x = ActorLossInputs(mask, float(mask.sum()), logp, old, adv, torch.zeros(3, 7))
    plain = get_algorithm(name).actor_loss(x, settings).loss
    unweighted = policy_loss(logp, old, adv, mask, normalizer=float(mask.sum()), dual_clip=3.0).loss
    assert torch.equal(plain, unweighted)
    ones = ActorLossInputs(mask, float(mask.sum()), logp, old, adv, torch.zeros(3, 7), None, torch.ones(3, 7))
    assert torch.equal(get_algorithm(name).actor_loss(ones, settings).loss, plain)
    halves = ActorLossInputs(
        mask, float(mask.sum()), logp, old, adv, torch.zeros(3, 7), None, torch.full((3, 7), 0.5)
    )
    assert get_algorithm(name).actor_loss(halves, settings).loss.item() == pytest.approx(0.5 * plain.item())


def _step(tmp_path, *extra: str) -> dict[str, float]:
    from rlver.train.trainer import Trainer
    from test_train_loop import _config

    torch.manual_seed(0)
    cfg = _config("run.steps=1", "eval.every=0", "run.transcript_every=1", *extra)
    return Trainer(cfg, tmp_path).train_step()


def test_a_training_step_weighs_its_loss_and_logs_the_weights(tmp_path) -> None:
    """The tiny model in fp32 samples as the trainer scores (gap ~1e-5), so every raw weight is ~1: a
    threshold of 0.5 cuts each to exactly 0.5, which halves the on-policy gradient; a threshold of 2
    leaves it (weights ~1, none cut). Off, nothing is logged."""
    off = _step(tmp_path / "off")
    assert "rollout/is_weight_mean" not in off and off["rollout/logprob_diff_max"] < 1e-3
    half = _step(tmp_path / "half", "algorithm.rollout_is=token", "algorithm.rollout_is_threshold=0.5")
    assert half["rollout/is_weight_mean"] == pytest.approx(0.5) and half["rollout/is_clipped_frac"] == 1.0
    assert half["train/grad_norm_actor"] == pytest.approx(0.5 * off["train/grad_norm_actor"], rel=1e-4)
    seq = _step(tmp_path / "seq", "algorithm.rollout_is=sequence")
    assert (
        seq["rollout/is_weight_mean"] == pytest.approx(1.0, abs=1e-2) and seq["rollout/is_clipped_frac"] == 0
    )
    assert seq["train/grad_norm_actor"] == pytest.approx(off["train/grad_norm_actor"], rel=1e-2)
    manifest = json.loads((tmp_path / "seq" / "transcript.jsonl").read_text().splitlines()[0])
    assert manifest["rollout_is"] == {"level": "sequence", "threshold": 2.0}


def test_off_policy_minibatches_weigh_by_the_log_probs_from_before_the_update(tmp_path) -> None:
    """T1 (issue 42): the weights compare the sampler with the policy that scored the batch, before the
    update, not with the policy being updated. Two epochs make the second off-policy (the first step has
    moved the weights); the tiny model in fp32 samples as the trainer scores, so every weight against
    the pre-update log-probs is within 1e-4 of 1 and none passes a threshold of 1.001, where weights
    from the moved policy would."""
    stats = _step(
        tmp_path, "algorithm.epochs=2", "algorithm.rollout_is=token", "algorithm.rollout_is_threshold=1.001"
    )
    assert stats["train/optimizer_steps"] == 2 and stats["train/approx_kl"] > 1e-4  # the policy moved
    assert stats["rollout/is_clipped_frac"] == 0.0
    assert stats["rollout/is_weight_mean"] == pytest.approx(1.0, abs=1e-4)
