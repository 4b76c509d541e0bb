"""Each clip of the update on its own: the policy ratio's low bound, its high bound (clip-higher), the
dual clip, and the value clip around the values *at scoring time*.

Why: a symmetric setting cannot tell the low bound from the high one, and a test that only reads the
loss cannot tell a clipped token from one whose ratio happens to sit inside. Here every bound binds on a
token of its own, and the gradient of each token is checked (0 where a bound binds, −A·ratio/N where it
does not). The value clip is checked through the learner's critic, whose values have moved since the
batch was scored: a review planted the clip taken around the current values (then it never binds) and
no test failed.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from rlver.train.algorithms import core, get_algorithm
from rlver.train.algorithms.base import ActorLossInputs
from rlver.train.algorithms.grpo import GRPOSettings
from rlver.train.batch import collate
from test_learner_mutants import learner, sample

#: (advantage, ratio) per token, under low 0.1, high 0.3, dual clip 3, and what each token shows
TOKENS = [
    (+1.0, 0.85),  # below the low bound, A > 0: the min picks the unclipped term, gradient flows
    (-1.0, 0.85),  # below the low bound, A < 0: the LOW bound binds (0.9), gradient 0
    (+1.0, 1.25),  # inside the high bound only: unclipped (a high bound of 0.1 would clip it)
    (+1.0, 1.40),  # above the high bound, A > 0: the HIGH bound binds (1.3), gradient 0
    (-1.0, 1.20),  # above 1, A < 0: unclipped (the clipped term is smaller)
    (-1.0, 5.00),  # far above, A < 0: the DUAL clip binds (-A * 3), gradient 0
    (-1.0, 2.50),  # above 1, A < 0, under the dual clip's 3: unclipped
]
#: each token's loss and d(loss)/d(log-prob) × N, worked out by hand from the rows above
LOSS = [-0.85, 0.9, -1.25, -1.3, 1.2, 3.0, 2.5]
GRAD = [-0.85, 0.0, -1.25, 0.0, 1.2, 0.0, 2.5]


def _loss(settings: GRPOSettings) -> tuple[float, list[float], float]:
    adv = torch.tensor([[a for a, _ in TOKENS]])
    logp = torch.log(torch.tensor([[r for _, r in TOKENS]], dtype=torch.float64)).float().requires_grad_()
    old, mask = torch.zeros_like(adv), torch.ones_like(adv)
    x = ActorLossInputs(mask, float(len(TOKENS)), logp, old, adv, torch.zeros_like(adv))
    terms = get_algorithm("grpo").actor_loss(x, settings)
    terms.loss.backward()
    assert logp.grad is not None
    return terms.loss.item(), (logp.grad[0] * len(TOKENS)).tolist(), terms.stats["clip_fraction"].item()


def test_each_policy_clip_bound_binds_on_its_own_token() -> None:
    settings = GRPOSettings(clip_eps=0.1, clip_eps_high=0.3, dual_clip=3.0, entropy_coef=0.0)
    loss, grad, clipped = _loss(settings)
    assert loss == pytest.approx(sum(LOSS) / len(TOKENS), abs=1e-6)
    assert grad == pytest.approx(GRAD, abs=1e-6)
    assert clipped == pytest.approx(2 / len(TOKENS))  # tokens 1 and 3; the dual clip is not counted


def test_the_low_bound_alone() -> None:
    """A high bound far out and no dual clip: only token 1 (low bound) and none above 1 is clipped."""
    settings = GRPOSettings(clip_eps=0.1, clip_eps_high=10.0, dual_clip=None, entropy_coef=0.0)
    _, grad, clipped = _loss(settings)
    assert grad == pytest.approx([-0.85, 0.0, -1.25, -1.4, 1.2, 5.0, 2.5], abs=1e-6)
    assert clipped == pytest.approx(1 / len(TOKENS))


def test_the_high_bound_alone() -> None:
    """A low bound far out (0.99: the ratio may fall to 0.01) and no dual clip: only token 3 is clipped."""
    settings = GRPOSettings(clip_eps=0.99, clip_eps_high=0.3, dual_clip=None, entropy_coef=0.0)
    _, grad, clipped = _loss(settings)
    assert grad == pytest.approx([-0.85, 0.85, -1.25, 0.0, 1.2, 5.0, 2.5], abs=1e-6)
    assert clipped == pytest.approx(1 / len(TOKENS))


def test_the_dual_clip_alone() -> None:
    """Both bounds far out: only the dual clip binds, on token 5 (-A · ratio = 5 > 3)."""
    settings = GRPOSettings(clip_eps=0.99, clip_eps_high=10.0, dual_clip=3.0, entropy_coef=0.0)
    loss, grad, clipped = _loss(settings)
    assert grad == pytest.approx([-0.85, 0.85, -1.25, -1.4, 1.2, 0.0, 2.5], abs=1e-6)
    assert loss == pytest.approx((-0.85 + 0.85 - 1.25 - 1.4 + 1.2 + 3.0 + 2.5) / len(TOKENS), abs=1e-6)
    assert clipped == 0.0


def test_the_value_clip_is_around_the_values_at_scoring_time(tmp_path: Path) -> None:
    """PPO's critic scores the batch (its head starts at 0, so every value is 0), then moves (its head's
    bias set to 1) before the value update: V = 1, V_old = 0, clip 0.2, so V_clipped = 0.2. A token
    whose return is above 0.6 is then clipped ((0.2 − R)² > (1 − R)²); around the current values the
    clip could never bind."""
    lrn = learner(tmp_path, "algorithm.name=ppo", "algorithm.value_clip=0.2")
    samples = [sample(9, 3, r, f"p{i // 2}", k=i) for i, r in enumerate([0.9, 0.8, 0.95, 0.1])]
    batch = lrn.score(samples)
    assert batch.values is not None and batch.returns is not None
    assert float(batch.values.abs().max()) == 0.0
    critic = lrn.critic.model  # type: ignore[attr-defined]
    with torch.no_grad():
        critic.head.bias.fill_(1.0)
    rows = list(range(len(samples)))
    mb = collate(batch.seqs, rows, lrn.parts.pad_id, lrn.parts.device)
    n_tok = float(mb.action_mask.sum())
    stats = lrn.critic.backward(mb, (n_tok, float(len(rows))), batch)  # (tokens, samples)
    now = torch.ones_like(mb.action_mask)
    returns = batch.rows(batch.returns, mb)
    want = core.value_loss(now, batch.rows(batch.values, mb), returns, mb.action_mask, 0.2, normalizer=n_tok)
    high = float(((returns > 0.6).float() * mb.action_mask).sum()) / n_tok
    assert high > 0.5  # the test has power: most tokens' returns lie above 0.6
    assert stats["value_clip_fraction"] == pytest.approx(high)
    assert stats["value_loss"] == pytest.approx(want.loss.item(), rel=1e-5)
    unclipped = 0.5 * core.masked_mean((now - returns) ** 2, mb.action_mask, normalizer=n_tok).item()
    assert not math.isclose(stats["value_loss"], unclipped, rel_tol=1e-3)
