"""What an RL algorithm is, to both engines: a small strategy object, one file per algorithm.

Each algorithm states (as class attributes, readable without running anything):

* ``needs_critic``: whether a value model is trained (PPO) or not (GRPO);
* ``kl_in``: where ``algorithm.kl_coef`` goes, ``"reward"`` (a k1 penalty on each action token's
  reward, before advantages) or ``"loss"`` (a k3 term added to the policy loss);
* ``min_group_size``: the smallest ``rollout.n_per_profile`` it accepts (GRPO needs siblings to have a
  baseline: a group of one has none, so it is refused on both engines rather than given 0 locally and its
  raw score under verl);
* ``loss_terms``: the terms of its loss, in the order the trainer adds them (documentation and tests);
* ``verl_adv_estimator``: the ``algorithm.adv_estimator`` verl runs for it.

and computes its advantages (:meth:`Algorithm.advantages`) from one :class:`AdvantageInputs`. The local
trainer calls ``advantages``; ``rlver.integrations.verl.config`` reads the attributes. Adding an
algorithm = one new file here + one line in :data:`rlver.train.algos.ALGORITHMS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal

import torch

if TYPE_CHECKING:
    from rlver.train.config import AlgorithmSettings

Tensor = torch.Tensor


@dataclass
class AdvantageInputs:
    """Everything an algorithm may use, on the trainer's shifted ``[B, T]`` grid.

    ``token_rewards`` holds each turn's reward on that turn's last action token; ``scores`` is the
    episode reward per dialogue ``[B]``; ``groups`` a group id per dialogue ``[B]`` (the profile it was
    sampled for). ``values``/``old_logp``/``ref_logp`` are ``None`` when not computed (no critic, on-policy
    without KL, no KL).
    """

    mask: Tensor
    token_rewards: Tensor
    scores: Tensor
    groups: Tensor
    values: Tensor | None = None
    old_logp: Tensor | None = None
    ref_logp: Tensor | None = None


@dataclass
class Advantages:
    advantages: Tensor  # [B, T], 0 outside the mask
    returns: Tensor | None = None  # [B, T] value targets, only when the algorithm trains a critic
    stats: dict[str, float] = field(default_factory=dict)


class Algorithm:
    """Base class: subclasses set the class attributes and implement :meth:`advantages`."""

    name: ClassVar[str]
    needs_critic: ClassVar[bool]
    kl_in: ClassVar[Literal["reward", "loss"]]
    min_group_size: ClassVar[int] = 1
    loss_terms: ClassVar[tuple[str, ...]]
    verl_adv_estimator: ClassVar[str]

    def advantages(self, inputs: AdvantageInputs, settings: AlgorithmSettings) -> Advantages:
        raise NotImplementedError
