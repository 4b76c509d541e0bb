"""GRPO (Shao et al., 2024): no critic; each dialogue's score against its group's.

A group is the ``n_per_profile`` dialogues sampled for one profile in a step. Advantage of a dialogue =
``(score - group mean) / (group std + eps)`` (``grpo_scale_by_std=False``: no division, Dr. GRPO), the
same on every action token. With ``kl_coef > 0`` the loss gains ``kl_coef * k3(policy || ref)``
(``kl_in = "loss"``: added by the shared ``Algorithm.actor_loss``, as verl's ``use_kl_loss``).
Needs groups of two or more (``min_group_size``). A group can still come down to one sample locally
(its siblings could not be tokenised): ``grpo_lone_sample`` decides its advantage, verl's ``raw``
score by default (verl 0.9.1 ``core_algos.py:315-317`` gives a group of one mean 0 and std 1) or
``zero`` (no baseline, so nothing to learn; refused under ``--trainer verl``, which cannot do it).
verl refills groups that lost a dialogue (docs/training.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlver.train.algorithms.base import AdvantageInputs, Advantages, Algorithm, AlgorithmSettings

#: verl 0.9.1's GRPO normalisation epsilon (``compute_grpo_outcome_advantage(epsilon=1e-6)``): no
#: config key reaches it.
VERL_GRPO_EPS = 1e-6


class GRPOSettings(AlgorithmSettings):
    """GRPO's own settings (``algorithm:`` keys beside the shared ones; the ``grpo_`` prefix is kept
    so that configs and run folders written before this class keep their meaning)."""

    name: str = Field(default="grpo", description="``grpo``: group-normalised advantages, no critic.")
    grpo_scale_by_std: bool = Field(default=True, description="divide by the group's std (false: Dr. GRPO)")
    grpo_eps: float = Field(
        default=1e-6, gt=0.0, description="Added to the group's std before dividing by it."
    )
    grpo_lone_sample: Literal["raw", "zero"] = Field(
        default="raw",
        description="advantage of a group of one sample: raw = its score / (1 + eps), as verl 0.9.1; "
        "zero = none (no baseline to compare with; local engine only)",
    )


class GRPO(Algorithm[GRPOSettings]):
    name = "grpo"
    needs_critic = False
    kl_in = "loss"
    min_group_size = 2
    verl_adv_estimator = "grpo"
    verl_knobs = frozenset({"grpo_scale_by_std", "grpo_eps", "grpo_lone_sample"})
    settings_class = GRPOSettings

    def advantages(self, inputs: AdvantageInputs, settings: GRPOSettings) -> Advantages:
        import torch  # here, not at the top: reading GRPOSettings needs no torch

        from rlver.train.algorithms import core

        per_seq = core.group_advantages(
            inputs.scores,
            inputs.groups,
            eps=settings.grpo_eps,
            scale=settings.grpo_scale_by_std,
            lone=settings.grpo_lone_sample,
        )
        # groups whose dialogues all scored the same teach nothing: worth watching
        flat = sum(bool((per_seq[inputs.groups == g] == 0).all()) for g in torch.unique(inputs.groups))
        return Advantages(
            core.broadcast_to_tokens(per_seq, inputs.mask), None, {"train/flat_groups": float(flat)}
        )

    def verl_overrides(self, settings: GRPOSettings) -> dict[str, Any]:
        return {"algorithm.norm_adv_by_std_in_grpo": settings.grpo_scale_by_std}

    def verl_refusals(self, settings: GRPOSettings) -> list[str]:
        out = []
        if settings.grpo_eps != VERL_GRPO_EPS:
            out.append(
                f"algorithm.grpo_eps={settings.grpo_eps}: verl 0.9.1 divides by (std + {VERL_GRPO_EPS}) "
                f"with no key to change it; use {VERL_GRPO_EPS} with --trainer verl"
            )
        if settings.grpo_lone_sample != "raw":
            out.append(
                f"algorithm.grpo_lone_sample={settings.grpo_lone_sample}: verl 0.9.1 gives a group of one "
                "its score (core_algos.compute_grpo_outcome_advantage) with no key to change it; use raw "
                "with --trainer verl"
            )
        return out
