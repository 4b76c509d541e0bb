"""Against real verl 0.9.1 (``make verl-test``; skipped without verl): the capped k3 term and the
advantage of a GRPO group of one are verl's own numbers (issue 42, item 4).

``tests/train/test_kl_clamp.py`` and ``tests/train/test_grpo_lone_sample.py`` hold the same points by
hand on every machine."""

from __future__ import annotations

import numpy as np
import pytest
import torch

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")

from rlver.train.algorithms.core import group_advantages, kl_k3  # noqa: E402


def test_k3_matches_verls_low_var_kl_with_its_cap() -> None:
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(4, 9, generator=g) * 20  # wide enough that some tokens pass the cap of 10
    ref = -torch.rand(4, 9, generator=g) * 20
    theirs = core_algos.kl_penalty(logp, ref, "low_var_kl")
    assert bool((theirs == 10.0).any()), "the inputs reach verl's cap"
    assert torch.allclose(kl_k3(logp, ref), theirs, atol=1e-6)


@pytest.mark.parametrize("scale", [True, False])
def test_a_group_of_one_gets_verls_advantage(scale: bool) -> None:
    scores = torch.tensor([0.7, 0.2, 0.9, 0.4, 0.1, 0.3])
    groups = [0, 0, 1, 2, 2, 2]  # group 1 has one sample
    rewards = torch.zeros(6, 3)
    rewards[:, -1] = scores
    theirs, _ = core_algos.compute_grpo_outcome_advantage(
        rewards, torch.ones(6, 3), np.array(groups), epsilon=1e-6, norm_adv_by_std_in_grpo=scale
    )
    ours = group_advantages(scores, groups, eps=1e-6, scale=scale, lone="raw")
    assert torch.allclose(ours, theirs[:, 0], atol=1e-6)
