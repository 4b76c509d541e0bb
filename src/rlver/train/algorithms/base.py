"""What an RL algorithm is, to both engines: a small strategy object, one file per algorithm.

Each algorithm states (as class attributes, readable without running anything):

* ``needs_critic``: whether a value model is trained (PPO) or not (GRPO);
* ``kl_in``: where ``algorithm.kl_coef`` goes, ``"reward"`` (a k1 penalty on each action token's
  reward, before advantages) or ``"loss"`` (a k3 term added to the policy loss);
* ``min_group_size``: the smallest ``rollout.n_per_profile`` it accepts (GRPO needs siblings to have a
  baseline: a group of one has none, so it is refused on both engines rather than given 0 locally and its
  raw score under verl);
* ``loss_terms``: the terms of its loss, in the order the trainer adds them;
* ``verl_adv_estimator``: the ``algorithm.adv_estimator`` verl runs for it.

and computes, for the local trainer, its advantages (:meth:`Algorithm.advantages`, from one
:class:`AdvantageInputs`) and its loss on one micro-batch (:meth:`Algorithm.actor_loss`, and
:meth:`Algorithm.critic_loss` when it trains a critic). ``rlver.integrations.verl.config`` reads the
attributes. Adding an algorithm = one new file beside this one + one line in
:data:`rlver.train.algorithms.ALGORITHMS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal

import torch

from rlver.train.algorithms import core

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


@dataclass
class ActorLossInputs:
    """One micro-batch of the policy update, every tensor ``[b, t]`` on the shifted grid.

    ``normalizer`` is the whole minibatch's action-token count, so that the gradients accumulated over
    its micro-batches equal the full-minibatch gradient (see ``core``). ``ref_logp`` is ``None`` without
    a KL term.
    """

    mask: Tensor
    normalizer: float
    logp: Tensor
    old_logp: Tensor
    advantages: Tensor
    entropy: Tensor
    ref_logp: Tensor | None = None


@dataclass
class CriticLossInputs:
    """One micro-batch of the value update: the critic's values now, at scoring time, and the targets."""

    mask: Tensor
    normalizer: float
    values: Tensor
    old_values: Tensor
    returns: Tensor


@dataclass
class LossTerms:
    """``loss`` is what the trainer backwards; ``stats`` what it logs (``train/<key>``, averaged)."""

    loss: Tensor
    stats: dict[str, Tensor]


class Algorithm:
    """Base class: subclasses set the class attributes and implement :meth:`advantages`.

    :meth:`actor_loss` here is the part PPO and GRPO share: the clipped surrogate minus the entropy
    bonus. An algorithm with a loss-side KL term extends it (``grpo.py``).
    """

    name: ClassVar[str]
    needs_critic: ClassVar[bool]
    kl_in: ClassVar[Literal["reward", "loss"]]
    min_group_size: ClassVar[int] = 1
    loss_terms: ClassVar[tuple[str, ...]]
    verl_adv_estimator: ClassVar[str]

    def advantages(self, inputs: AdvantageInputs, settings: AlgorithmSettings) -> Advantages:
        raise NotImplementedError

    def actor_loss(self, x: ActorLossInputs, settings: AlgorithmSettings) -> LossTerms:
        """``policy_clip`` − ``entropy_coef`` × ``entropy`` (the entropy is logged either way)."""
        out = core.policy_loss(
            x.logp, x.old_logp, x.advantages, x.mask,
            clip_eps=settings.clip_eps, clip_eps_high=settings.clip_eps_high, normalizer=x.normalizer,
            dual_clip=settings.dual_clip,
        )  # fmt: skip
        entropy = core.masked_mean(x.entropy, x.mask, normalizer=x.normalizer)
        loss = out.loss
        if settings.entropy_coef > 0:
            loss = loss - settings.entropy_coef * entropy
        stats = {
            "policy_loss": out.loss,
            "clip_fraction": out.clip_fraction,
            "approx_kl": out.approx_kl,
            "entropy": entropy,
        }
        return LossTerms(loss, stats)

    def critic_loss(self, x: CriticLossInputs, settings: AlgorithmSettings) -> LossTerms:
        raise NotImplementedError(f"{self.name} trains no critic")
