"""The k3 KL term is capped per token at 10, as verl 0.9.1's ``low_var_kl`` (issue 42, item 4).

verl (``verl/trainer/ppo/core_algos.py:2239-2245``, ``kl_penalty_forward``): the log-ratio ref − policy
is clamped to ±20, ``kld = exp(r) - r - 1``, then ``torch.clamp(kld, min=-10, max=10)``. The numbers
below are by hand; ``tests/integrations/test_verl_maths.py`` checks the same inputs against verl's own
function under ``make verl-test``.
"""

from __future__ import annotations

import math

import pytest
import torch

from rlver.train.algorithms import get_algorithm
from rlver.train.algorithms.base import ActorLossInputs
from rlver.train.algorithms.core import KL_K3_BOUND, kl_k3, policy_loss
from rlver.train.algorithms.grpo import GRPOSettings

#: policy / reference log-probs of three tokens: close (k3 ≈ 0.1065), the reference far likelier
#: (ref − policy = 14.9: k3 = e^14.9 − 15.9, huge), the policy far likelier (−13: k3 = e^−13 + 12)
LOGP = torch.tensor([[-1.0, -15.0, -1.0]])
REF = torch.tensor([[-1.5, -0.1, -14.0]])


def test_each_tokens_k3_is_capped_at_verls_bound() -> None:
    assert KL_K3_BOUND == 10.0
    near = math.exp(-0.5) + 0.5 - 1.0  # 0.10653
    assert kl_k3(LOGP, REF)[0].tolist() == pytest.approx([near, 10.0, 10.0])
    uncapped = kl_k3(LOGP, REF, bound=None)[0].tolist()
    assert uncapped == pytest.approx([near, math.exp(14.9) - 15.9, math.exp(-13.0) + 12.0])


def test_a_capped_token_gives_no_gradient_and_the_others_theirs() -> None:
    logp = LOGP.clone().requires_grad_(True)
    kl_k3(logp, REF).sum().backward()
    assert logp.grad is not None
    # d/dlogp (e^(ref-logp) - (ref-logp) - 1) = 1 - e^(ref-logp): 1 - e^-0.5 on the first token
    assert logp.grad[0].tolist() == pytest.approx([1.0 - math.exp(-0.5), 0.0, 0.0])


def test_grpos_kl_loss_term_uses_the_capped_estimate() -> None:
    """The loss GRPO backwards (``kl_in = "loss"``): kl_coef × mean of the capped k3 over action tokens."""
    mask = torch.ones(1, 3)
    x = ActorLossInputs(mask, 3.0, LOGP, LOGP, torch.zeros(1, 3), torch.zeros(1, 3), REF)
    terms = get_algorithm("grpo").actor_loss(x, GRPOSettings(kl_coef=0.1))
    expected = (math.exp(-0.5) + 0.5 - 1.0 + 10.0 + 10.0) / 3
    assert terms.stats["kl_loss"].item() == pytest.approx(expected)
    assert terms.loss.item() == pytest.approx(0.1 * expected)  # zero advantages: the surrogate is 0


def test_the_approx_kl_diagnostic_is_not_capped() -> None:
    """``train/approx_kl`` (CleanRL's k3 of old ‖ new, read by ``target_kl``) keeps the whole value:
    verl computes no such k3, so there is no bound to match, and a cap would hide a runaway update."""
    mask = torch.ones(1, 3)
    out = policy_loss(REF, LOGP, torch.zeros(1, 3), mask)
    assert out.approx_kl.item() == pytest.approx(sum(kl_k3(LOGP, REF, bound=None)[0].tolist()) / 3)
    assert out.approx_kl.item() > KL_K3_BOUND
