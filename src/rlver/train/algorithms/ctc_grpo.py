"""CTC-GRPO (Zhu et al., 2026, "A Simulator-Based Benchmark and Turn-Credit RL for Emotion Management",
EIBench, arXiv:2606.15532): GRPO's advantage of the dialogue's outcome, plus each turn's own state
change centred on the mean change of its dialogue's turns, times a fixed weight.

For dialogue ``i`` of group ``g`` (the ``n_per_profile`` dialogues of one user) and its assistant turn
``k``, with ``r_ik`` the user's emotion change / 100 after that reply (``rollout.reward.mode: delta``)
and ``K_i`` the dialogue's turns:

    O_i    = sum_k r_ik                                        the outcome: (final - start emotion) / 100
    A_i    = (O_i - mean_g O) / (max(std_g O, std_min) + eps)  GRPO over the group's dialogues, one value
                                                               each (ctc_std_min; grpo_eps, grpo_lone_sample)
    C_ik   = r_ik - mean_{k' in K_i} r_ik'                     the turn credit, centred within the dialogue
    Adv_ik = A_i + ctc_turn_weight * C_ik                      on every action token of turn k

The credit sums to 0 over a dialogue's turns: it moves credit between the turns of one dialogue and
leaves the dialogue's share, its outcome advantage, as GRPO gives it (what the authors' code comments
call a centred redistribution). A one-turn dialogue gets no credit (nothing to centre on).

Where this comes from: the paper's method section could not be read here; the authors' released code
(github.com/Tongyi-ConvAI/Qwen-Character, ``code/training/verl/trainer/ppo/ray_trainer.py``,
``compute_prompt_trace_grpo_advantage`` and ``_broadcast_trace_advantages``; the recipe in
``code/training/scripts/train_8b.sh``: ``TURN_CREDIT_ALPHA=15.0``, ``GRPO_STD_MIN=0.1``,
``ENTROPY_COEFF=0.001``, a symmetric clip of 0.2, no KL) is what is followed, term by term, with its
defaults. Where rlver differs (the outcome is the emotion change, not EIBench's anchor-based map of a
two-axis final state; the per-turn change is the one emotion, not the mean of an anger drop and a trust
gain): docs/algorithms.md.

Under ``--trainer verl`` it is refused: verl 0.9.1's estimators take one score per sample.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from pydantic import Field

from rlver.train.algorithms.base import AdvantageInputs, Advantages, Algorithm
from rlver.train.algorithms.grpo import GRPOSettings

if TYPE_CHECKING:  # torch is imported where it is used: reading a config must not load it
    from torch import Tensor


class CTCGRPOSettings(GRPOSettings):
    """GRPO's settings (for the outcome term), the outcome std's floor and the turn credit's weight;
    the released recipe's entropy bonus."""

    name: str = Field(default="ctc_grpo", description="``ctc_grpo``: GRPO plus a centred turn credit.")
    ctc_turn_weight: float = Field(
        default=15.0,
        ge=0.0,
        le=100.0,
        description="alpha: weight of each turn's change centred on its dialogue's mean (the released 15)",
    )
    ctc_std_min: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="floor on the group's outcome std before dividing by it (the released grpo_std_min 0.1)",
    )
    entropy_coef: float = Field(
        default=0.001, ge=0.0, description="entropy bonus (the released recipe's 0.001)"
    )


def centred_turn_credit(r: Tensor, turns_of_dialogue: dict[int, list[int]]) -> Tensor:
    """Each turn's reward less the mean reward of its dialogue's turns (the positions in ``r`` of each
    dialogue's turns): 0 for a dialogue of one turn."""
    import torch

    credit = torch.zeros_like(r)
    for members in turns_of_dialogue.values():
        credit[members] = r[members] - r[members].mean()
    return credit


class CTCGRPO(Algorithm[CTCGRPOSettings]):
    name = "ctc_grpo"
    needs_critic = False
    kl_in = "loss"
    min_group_size = 2
    reward_modes = frozenset({"delta"})  # the outcome is the sum of the turns' changes
    verl_adv_estimator = "grpo"  # never written: verl_refusals refuses the algorithm
    verl_knobs = frozenset(
        {"grpo_scale_by_std", "grpo_eps", "grpo_lone_sample", "ctc_turn_weight", "ctc_std_min"}
    )
    settings_class = CTCGRPOSettings

    def advantages(self, inputs: AdvantageInputs, settings: CTCGRPOSettings) -> Advantages:
        import torch

        from rlver.train.algorithms import core
        from rlver.train.algorithms.mapo import on_turn_tokens, turn_rewards_by_dialogue, turns_of

        dialogues, _ = turns_of(inputs)
        rewards = turn_rewards_by_dialogue(inputs)
        group_of = dict(zip(dialogues.tolist(), inputs.groups.tolist(), strict=True))
        order = sorted(rewards)  # one outcome per dialogue, whatever the sample layout
        outcomes = torch.tensor([sum(rewards[d].values()) for d in order])
        groups = torch.tensor([group_of[d] for d in order])
        outcome = core.group_advantages(
            outcomes,
            groups,
            eps=settings.grpo_eps,
            scale=settings.grpo_scale_by_std,
            lone=settings.grpo_lone_sample,
            std_min=settings.ctc_std_min,
        )
        outcome_of = dict(zip(order, outcome.tolist(), strict=True))
        keys = [(d, k) for d in order for k in sorted(rewards[d])]
        turns_of_dialogue: dict[int, list[int]] = defaultdict(list)
        for i, (d, _k) in enumerate(keys):
            turns_of_dialogue[d].append(i)
        r = torch.tensor([rewards[d][k] for d, k in keys])
        credit = centred_turn_credit(r, turns_of_dialogue)
        adv = torch.tensor([outcome_of[d] for d, _ in keys]) + settings.ctc_turn_weight * credit
        # groups whose outcome std the floor replaced: how often the floor, not the spread, scales them
        # (none without the std division: the floor then never acts)
        floored = settings.grpo_scale_by_std * sum(
            1
            for g in torch.unique(groups)
            if (groups == g).sum() > 1 and float(outcomes[groups == g].std()) < settings.ctc_std_min
        )
        return Advantages(on_turn_tokens(inputs, keys, adv), None, {"train/floored_groups": float(floored)})

    def verl_refusals(self, settings: CTCGRPOSettings) -> list[str]:
        return [
            "algorithm.name=ctc_grpo: verl 0.9.1's advantage estimators take one score per sample and "
            "cannot credit a dialogue's turns apart (core_algos); train it with --trainer local"
        ]

    def verl_overrides(self, settings: CTCGRPOSettings) -> dict[str, Any]:
        return {}
