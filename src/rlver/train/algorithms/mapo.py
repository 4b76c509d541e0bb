"""MAPO-style turn-level credit (Zhang et al., 2026, arXiv:2603.06194): no critic; each assistant turn is
credited with the return from its own emotion change on, normalised twice, within the turn and over
the batch, and the two mixed.

RLVER's GRPO gives every token of a dialogue the same advantage, the dialogue's final score against
its group's: a reply that lifted the user and one that sank them earn the same credit when the
dialogue ends well. rlver records each turn's emotion change (``rollout.reward.mode: delta``), and
this algorithm credits each turn with what followed it. For dialogue ``i`` of group ``g`` (the
``n_per_profile`` dialogues of one profile), turn ``k`` with reward ``r_ik``:

    G_ik = sum_{j >= k} gamma^(j - k) r_ij                          the Monte Carlo return of turn k
    T_ik = (G_ik - mean_g,k G) / (std_g,k G + eps)                  turn level: the dialogues of group g
                                                                    that reached turn k (0 for fewer than 2)
    B_ik = (G_ik - mean G) / (std G + eps)                          batch level: every turn of the batch
    A_ik = mapo_turn_weight * T_ik + mapo_batch_weight * B_ik       on every action token of turn k

(std: the unbiased sample std, as GRPO's.) The turn-level term compares a reply with its siblings'
replies at the same point of the same user's dialogue, which is what a turn-level baseline can be
without a critic or a rollout tree; the batch-level term keeps a scale shared by every turn, so a turn
group whose returns barely differ (its std near 0) cannot blow its advantages up on its own.

What was followed, and what could not be: the paper's equations were not readable here (only its
abstract, v1 2026-03-06, and the v2 abstract, renamed MICA, 2026-05-05, whose per-turn reward is a
decrease of distance to a target state), so the estimator above is our reading of "Monte Carlo returns
of dense per-turn feedback" and "a mixed advantage estimator that combines turn-level normalization
with batch-level normalization" (v1 abstract). The defaults are the released code's launch settings
(github.com/2200xiaohu/MAPO, ``test_reinforce_pp_v5.sh``: ``turn_adv_weight=0.4``,
``batch_adv_weight=0.6``; its ``gamma=0.85``, here ``algorithm.gamma``, left at RLVER's 1.0 so a turn's
return is the emotion change from it to the end). The v2 abstract (MICA) normalises the immediate reward
and its return in separate scopes: ``mapo_turn_signal: reward`` does that (``mica.py`` sets it, with the
launch script's gamma and clips); the default, ``return``, normalises the return in both.

The loss is the shared clipped surrogate (``kl_in = "loss"``: a k3 term as GRPO's). Under
``--trainer verl`` it is refused: verl 0.9.1's advantage estimators take one score per sample
(``core_algos``), with no notion of a sample's turns.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from rlver.train.algorithms.base import AdvantageInputs, Advantages, Algorithm, AlgorithmSettings

if TYPE_CHECKING:  # torch is imported where it is used: reading a config must not load it
    from torch import Tensor


class MAPOSettings(AlgorithmSettings):
    """MAPO's own settings: the two weights of the mixed advantage, and its epsilon."""

    name: str = Field(default="mapo", description="``mapo``: turn-level advantages (see its own keys).")
    mapo_turn_weight: float = Field(
        default=0.4, ge=0.0, le=1.0, description="weight of the turn-level normalised return (MAPO's 0.4)"
    )
    mapo_batch_weight: float = Field(
        default=0.6, ge=0.0, le=1.0, description="weight of the batch-level normalised return (MAPO's 0.6)"
    )
    mapo_eps: float = Field(default=1e-6, gt=0.0, le=1.0, description="added to each std before dividing")
    mapo_turn_signal: Literal["return", "reward"] = Field(
        default="return",
        description="what the turn-level term normalises within (user, turn): return = the turn's "
        "Monte Carlo return (MAPO v1's reading); reward = the turn's own reward (MICA, v2: the "
        "immediate signal at turn scope, its return at batch scope)",
    )

    @model_validator(mode="after")
    def _some_weight(self) -> MAPOSettings:
        if self.mapo_turn_weight == 0 and self.mapo_batch_weight == 0:
            raise ValueError(
                "algorithm.mapo_turn_weight and algorithm.mapo_batch_weight are both 0: every advantage "
                "would be 0; give one of them a weight"
            )
        return self


def turns_of(inputs: AdvantageInputs) -> tuple[Tensor, Tensor]:
    """``inputs.dialogues`` and ``inputs.turn_index``; a ValueError when they were not filled (inputs
    built by hand: the learner fills both)."""
    if inputs.dialogues is None or inputs.turn_index is None:
        raise ValueError(
            "mapo needs AdvantageInputs.dialogues and .turn_index (rlver.train.learner fills both)"
        )
    return inputs.dialogues, inputs.turn_index


def turn_rewards_by_dialogue(inputs: AdvantageInputs) -> dict[int, dict[int, float]]:
    """Each dialogue's reward per assistant turn, ``{dialogue: {turn: r}}``, from the token rewards.

    A whole-dialogue sample holds turn ``k``'s reward on its turn-``k`` tokens. A per-turn sample
    (``inputs.per_turn``) earns the reward from its turn on, so ``r_k`` is its sum less the next turn's
    sample's; a dialogue whose late turns did not fit keeps their reward on its last kept turn (as a
    cut whole dialogue does, ``rlver.env.rewards.sample_rewards``)."""
    import torch

    dialogues, turn_index = turns_of(inputs)
    summed: dict[int, dict[int, float]] = defaultdict(dict)
    on = inputs.mask > 0
    for b in range(inputs.mask.shape[0]):
        d = int(dialogues[b])
        turns, rewards = turn_index[b][on[b]], inputs.token_rewards[b][on[b]]
        for k in torch.unique(turns).tolist():
            summed[d][k] = float(rewards[turns == k].sum())  # a turn is in one sample only
    if not inputs.per_turn:
        return dict(summed)
    out: dict[int, dict[int, float]] = {}
    for d, to_go in summed.items():
        ks = sorted(to_go)
        out[d] = {k: to_go[k] - (to_go[ks[i + 1]] if i + 1 < len(ks) else 0.0) for i, k in enumerate(ks)}
    return out


def monte_carlo_returns(
    rewards: dict[int, dict[int, float]], gamma: float
) -> tuple[list[tuple[int, int]], Tensor]:
    """Every (dialogue, turn) and its return ``G = r + gamma * G_next`` (0 after the last turn), as a flat
    tensor."""
    import torch

    keys: list[tuple[int, int]] = []
    returns: list[float] = []
    for d, by_turn in rewards.items():
        running = 0.0
        for k in sorted(by_turn, reverse=True):
            running = by_turn[k] + gamma * running
            keys.append((d, k))
            returns.append(running)
    return keys, torch.tensor(returns)


def turn_cells(
    keys: list[tuple[int, int]], dialogues: Tensor, groups: Tensor
) -> dict[tuple[int, int], list[int]]:
    """The positions in ``keys`` of each (group, turn) cell: the dialogues of one user (group) that
    reached turn k, the only ones a turn can be compared with without a critic."""
    group_of = dict(zip(dialogues.tolist(), groups.tolist(), strict=True))
    cells: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, (d, k) in enumerate(keys):
        cells[(group_of[d], k)].append(i)
    return dict(cells)


def on_turn_tokens(inputs: AdvantageInputs, keys: list[tuple[int, int]], values: Tensor) -> Tensor:
    """``values[i]`` (one per (dialogue, turn) of ``keys``) on every action token of that turn, 0 off
    the mask: a (dialogue, turn) table read at each token's dialogue and turn."""
    import torch

    dialogues, turn_index = turns_of(inputs)
    table = torch.zeros(int(dialogues.max()) + 1, int(turn_index.max()) + 1)
    table[[d for d, _ in keys], [k for _, k in keys]] = values.float()
    return table[dialogues.unsqueeze(1), turn_index.clamp(min=0)] * (inputs.mask > 0)


def normalised(values: Tensor, eps: float) -> Tensor:
    """``(x - mean) / (std + eps)``, unbiased std; 0 for fewer than two values (no baseline)."""
    import torch

    if values.numel() < 2:
        return torch.zeros_like(values)
    return (values - values.mean()) / (values.std() + eps)


class MAPO(Algorithm[MAPOSettings]):
    name = "mapo"
    needs_critic = False
    kl_in = "loss"
    min_group_size = 2
    reward_modes = frozenset({"delta", "mixed"})
    verl_adv_estimator = "grpo"  # never written: verl_refusals refuses the algorithm
    verl_knobs = frozenset({"mapo_turn_weight", "mapo_batch_weight", "mapo_eps", "mapo_turn_signal"})
    settings_class = MAPOSettings

    def advantages(self, inputs: AdvantageInputs, settings: MAPOSettings) -> Advantages:
        import torch

        dialogues, _ = turns_of(inputs)
        rewards = turn_rewards_by_dialogue(inputs)
        keys, g = monte_carlo_returns(rewards, settings.gamma)
        cells = turn_cells(keys, dialogues, inputs.groups)
        # the turn-scope signal: the return (MAPO v1's reading) or the turn's own reward (MICA, v2)
        turn_signal = (
            g if settings.mapo_turn_signal == "return" else torch.tensor([rewards[d][k] for d, k in keys])
        )
        turn_level = torch.zeros_like(g)
        for members in cells.values():
            turn_level[members] = normalised(turn_signal[members], settings.mapo_eps)
        batch_level = normalised(g, settings.mapo_eps)
        mixed = settings.mapo_turn_weight * turn_level + settings.mapo_batch_weight * batch_level
        lone = sum(1 for members in cells.values() if len(members) < 2)
        stats = {"train/turn_groups": float(len(cells)), "train/lone_turn_groups": float(lone)}
        return Advantages(on_turn_tokens(inputs, keys, mixed), None, stats)

    def verl_refusals(self, settings: MAPOSettings) -> list[str]:
        return [
            f"algorithm.name={self.name}: verl 0.9.1's advantage estimators take one score per sample and "
            "cannot credit a dialogue's turns apart (core_algos); train it with --trainer local"
        ]

    def verl_overrides(self, settings: MAPOSettings) -> dict[str, Any]:
        return {}
