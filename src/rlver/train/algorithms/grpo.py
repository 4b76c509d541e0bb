"""GRPO (Shao et al., 2024): no critic; each dialogue's score against its group's.

A group is the ``n_per_profile`` dialogues sampled for one profile in a step. Advantage of a dialogue =
``(score - group mean) / (group std + eps)`` (``grpo_scale_by_std=False``: no division, Dr. GRPO), the
same on every action token. With ``kl_coef > 0`` the loss gains ``kl_coef * k3(policy || ref)``.
Needs groups of two or more (``min_group_size``); a group that lost members to failures still gets 0
for a lone survivor locally, and verl refills failed groups (docs/training.md).
"""

from __future__ import annotations

import torch
from pydantic import Field

from rlver.train.algorithms import core
from rlver.train.algorithms.base import (
    ActorLossInputs,
    AdvantageInputs,
    Advantages,
    Algorithm,
    AlgorithmSettings,
    LossTerms,
)


class GRPOSettings(AlgorithmSettings):
    """GRPO's own settings (``algorithm:`` keys beside the shared ones; the ``grpo_`` prefix is kept
    so that configs and run folders written before this class keep their meaning)."""

    name: str = "grpo"
    grpo_scale_by_std: bool = Field(default=True, description="divide by the group's std (false: Dr. GRPO)")
    grpo_eps: float = Field(default=1e-6, gt=0.0)


class GRPO(Algorithm[GRPOSettings]):
    name = "grpo"
    needs_critic = False
    kl_in = "loss"
    min_group_size = 2
    loss_terms = ("policy_clip", "kl_k3", "entropy")
    verl_adv_estimator = "grpo"
    settings_class = GRPOSettings

    def advantages(self, inputs: AdvantageInputs, settings: GRPOSettings) -> Advantages:
        per_seq = core.group_advantages(
            inputs.scores, inputs.groups, eps=settings.grpo_eps, scale=settings.grpo_scale_by_std
        )
        # groups whose dialogues all scored the same teach nothing: worth watching
        flat = sum(bool((per_seq[inputs.groups == g] == 0).all()) for g in torch.unique(inputs.groups))
        return Advantages(
            core.broadcast_to_tokens(per_seq, inputs.mask), None, {"train/flat_groups": float(flat)}
        )

    def actor_loss(self, x: ActorLossInputs, settings: GRPOSettings) -> LossTerms:
        """The shared surrogate and entropy bonus, plus ``kl_coef`` × k3(policy ‖ reference)."""
        terms = super().actor_loss(x, settings)
        if settings.kl_coef > 0 and x.ref_logp is not None:
            kl = core.masked_mean(core.kl_k3(x.logp, x.ref_logp), x.mask, normalizer=x.normalizer)
            terms.loss = terms.loss + settings.kl_coef * kl
            terms.stats["kl_loss"] = kl
        return terms
