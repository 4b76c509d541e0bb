"""CTC-GRPO (Zhu et al., 2026, "A Simulator-Based Benchmark and Turn-Credit RL for Emotion Management",
EIBench, arXiv:2606.15532): GRPO's outcome advantage plus a centred turn credit from the simulated
user's per-turn state change.

For dialogue ``i`` of group ``g`` (the ``n_per_profile`` dialogues of one user) and its assistant turn
``k``, with ``r_ik`` the user's emotion change / 100 after that reply (``rollout.reward.mode: delta``):

    O_i   = sum_k r_ik                                    the outcome: (final - start emotion) / 100
    A_i   = (O_i - mean_g O) / (std_g O + eps)            GRPO's group advantage (its settings:
                                                          grpo_scale_by_std, grpo_eps, grpo_lone_sample)
    C_ik  = (r_ik - mean_g,k r) / (std_g,k r + eps)       the turn credit, centred on the dialogues of g
                                                          that reached turn k (0 for fewer than 2); the
                                                          std division only with ctc_scale_by_std
    Adv_ik = A_i + ctc_turn_weight * C_ik                 on every action token of turn k

What was followed, and what could not be: only the paper's abstract was readable here ("the final state
gives the outcome reward, while the per-turn state updates provide turn credit"); its method section's
equations, its weight and its centring scope were not (docs/algorithms.md). The credit above is our
reading of "centred turn credit": centred where a critic-free method can centre it, among the same
user's replies at the same turn, as MAPO's turn level (``mapo.py``); scaled by the cell's std by default
so that it sits on the outcome advantage's scale (an emotion change / 100 is some 0.05, a GRPO advantage
about 1: unscaled, the credit would be noise beside it).

Under ``--trainer verl`` it is refused: verl 0.9.1's estimators take one score per sample.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from rlver.train.algorithms.base import AdvantageInputs, Advantages, Algorithm
from rlver.train.algorithms.grpo import GRPOSettings

if TYPE_CHECKING:  # torch is imported where it is used: reading a config must not load it
    from torch import Tensor


class CTCGRPOSettings(GRPOSettings):
    """GRPO's settings (for the outcome term) and the turn credit's weight and scale."""

    name: str = Field(default="ctc_grpo", description="``ctc_grpo``: GRPO plus a centred turn credit.")
    ctc_turn_weight: float = Field(
        default=1.0, ge=0.0, le=100.0, description="weight of the centred turn credit beside the outcome"
    )
    ctc_scale_by_std: bool = Field(
        default=True, description="divide each turn's centred credit by its (user, turn) cell's std"
    )


def centred_turn_credit(
    r: Tensor, cells: dict[tuple[int, int], list[int]], eps: float, scale: bool
) -> Tensor:
    """Each turn's reward less its (user, turn) cell's mean (over the cell's std + ``eps`` with
    ``scale``); 0 in a cell of one, which has nothing to centre on."""
    import torch

    credit = torch.zeros_like(r)
    for members in cells.values():
        if len(members) < 2:
            continue
        centred = r[members] - r[members].mean()
        credit[members] = centred / (r[members].std() + eps) if scale else centred
    return credit


class CTCGRPO(Algorithm[CTCGRPOSettings]):
    name = "ctc_grpo"
    needs_critic = False
    kl_in = "loss"
    min_group_size = 2
    reward_modes = frozenset({"delta"})  # the outcome is the sum of the turns' changes
    verl_adv_estimator = "grpo"  # never written: verl_refusals refuses the algorithm
    verl_knobs = frozenset(
        {"grpo_scale_by_std", "grpo_eps", "grpo_lone_sample", "ctc_turn_weight", "ctc_scale_by_std"}
    )
    settings_class = CTCGRPOSettings

    def advantages(self, inputs: AdvantageInputs, settings: CTCGRPOSettings) -> Advantages:
        import torch

        from rlver.train.algorithms import core
        from rlver.train.algorithms.mapo import on_turn_tokens, turn_cells, turn_rewards_by_dialogue, turns_of

        dialogues, _ = turns_of(inputs)
        rewards = turn_rewards_by_dialogue(inputs)
        group_of = dict(zip(dialogues.tolist(), inputs.groups.tolist(), strict=True))
        order = sorted(rewards)  # one outcome per dialogue, whatever the sample layout
        outcome = core.group_advantages(
            torch.tensor([sum(rewards[d].values()) for d in order]),
            torch.tensor([group_of[d] for d in order]),
            eps=settings.grpo_eps,
            scale=settings.grpo_scale_by_std,
            lone=settings.grpo_lone_sample,
        )
        outcome_of = dict(zip(order, outcome.tolist(), strict=True))
        keys = [(d, k) for d in order for k in sorted(rewards[d])]
        r = torch.tensor([rewards[d][k] for d, k in keys])
        cells = turn_cells(keys, dialogues, inputs.groups)
        credit = centred_turn_credit(r, cells, settings.grpo_eps, settings.ctc_scale_by_std)
        adv = torch.tensor([outcome_of[d] for d, _ in keys]) + settings.ctc_turn_weight * credit
        lone = sum(1 for members in cells.values() if len(members) < 2)
        stats = {"train/turn_groups": float(len(cells)), "train/lone_turn_groups": float(lone)}
        return Advantages(on_turn_tokens(inputs, keys, adv), None, stats)

    def verl_refusals(self, settings: CTCGRPOSettings) -> list[str]:
        return [
            "algorithm.name=ctc_grpo: verl 0.9.1's advantage estimators take one score per sample and "
            "cannot credit a dialogue's turns apart (core_algos); train it with --trainer local"
        ]

    def verl_overrides(self, settings: CTCGRPOSettings) -> dict[str, Any]:
        return {}
