"""What an RL algorithm is, to both engines: a small strategy object, one file per algorithm.

Each algorithm states (as class attributes, readable without running anything):

* ``needs_critic``: whether a value model is trained (PPO) or not (GRPO);
* ``kl_in``: where ``algorithm.kl_coef`` goes, ``"reward"`` (a k1 penalty on each action token's
  reward, before advantages: :meth:`Algorithm.with_reward_kl`, which the trainer calls) or ``"loss"``
  (a k3 term added to the policy loss by :meth:`Algorithm.actor_loss`). Both engines follow this one
  attribute: no algorithm applies the KL in code of its own;
* ``min_group_size``: the smallest ``rollout.n_per_profile`` it accepts (GRPO needs siblings to have a
  baseline: a group of one has none, so it is refused on both engines; a group that comes down to one
  sample at run time gets what ``grpo_lone_sample`` says, verl's raw score by default);
* ``verl_adv_estimator``: the ``algorithm.adv_estimator`` verl runs for it;
* ``verl_knobs``: its own settings (fields of its settings class beyond :class:`AlgorithmSettings`)
  that :meth:`Algorithm.verl_overrides` maps or :meth:`Algorithm.verl_refusals` refuses. Under
  ``--trainer verl`` an own setting not listed is refused whatever its value (:func:`unmapped_knobs`):
  verl would otherwise run without it, silently.

Each algorithm's own settings are a subclass of :class:`AlgorithmSettings` (``PPOSettings`` in
``ppo.py``, ``GRPOSettings`` in ``grpo.py``: TRL's layout), named by ``settings_class``; a config's
``algorithm:`` block is read with the class of the algorithm it names (``rlver.train.algorithms.settings_for``).

and computes, for the local trainer, its advantages (:meth:`Algorithm.advantages`, from one
:class:`AdvantageInputs`) and its loss on one micro-batch (:meth:`Algorithm.actor_loss`, and
:meth:`Algorithm.critic_loss` when it trains a critic). ``rlver.integrations.verl.config`` reads the
attributes. Adding an algorithm = one new file beside this one + one line in
:data:`rlver.train.algorithms.ALGORITHMS`.

The tensor maths (``core``, and torch with it) are imported inside the methods that compute: a
config's ``algorithm:`` block is read with the settings classes alone, so ``rlver train`` refuses a
bad value before torch is imported (seconds, not the minute torch takes on a loaded machine).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from rlver.config import MAX_COUNT

if TYPE_CHECKING:  # the settings classes are read with every config: torch only where tensors are
    from torch import Tensor

    from rlver.train.algorithms.core import Aggregation

#: verl's ``loss_agg_mode`` names (``core.LOSS_AGG_MODES``, which imports torch: kept equal by a test)
LossAggMode = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


class AlgorithmSettings(BaseModel):
    """The settings every algorithm shares: which one (``name``), the clipped policy loss they all use,
    the KL and entropy terms, the discount, and how a batch is cut into optimiser steps.

    An algorithm's own knobs live in its subclass beside it (``PPOSettings``, ``GRPOSettings``). Only
    knobs that change the maths belong here: how the update is cut to fit memory (micro-batch tokens,
    logit chunks) is ``rlver.train.config.UpdateSettings``, the config's ``update:`` block.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # no inf/NaN coefficient

    #: checked against the registry where a config is read (``rlver.train.algorithms.settings_for``)
    name: str = Field(default="ppo", description="a key of rlver.train.algorithms.ALGORITHMS")
    clip_eps: float = Field(default=0.2, gt=0.0, description="PPO clip range of the policy ratio (below 1).")
    clip_eps_high: float | None = Field(
        default=None,
        gt=0.0,
        description=(
            "The upper clip range when it differs from ``clip_eps`` (clip-higher); ``null``: ``clip_eps``."
        ),
    )
    dual_clip: float | None = Field(
        default=3.0,
        gt=1.0,
        description="dual-clip bound c (Ye et al., 2020) for negative advantages; verl's clip_ratio_c; "
        "null: off on both engines",
    )
    kl_coef: float = Field(default=0.0, ge=0.0, description="PPO: k1 penalty in the reward; GRPO: k3 loss")
    entropy_coef: float = Field(
        default=0.0, ge=0.0, description="Weight of the entropy bonus in the actor loss."
    )
    # the discount of GAE (PPO); verl reads algorithm.gamma/lam whatever the estimator, so they stay here
    gamma: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="The discount of GAE (PPO); verl reads it whatever the estimator.",
    )
    lam: float = Field(
        default=1.0, ge=0.0, le=1.0, description="GAE's lambda (PPO); verl reads it whatever the estimator."
    )
    epochs: int = Field(default=1, ge=1, le=MAX_COUNT, description="passes over each batch of dialogues")
    minibatches: int = Field(
        default=1,
        ge=1,
        le=MAX_COUNT,
        description="a mini-batch holds (dialogues per step / minibatches) samples, one optimiser step "
        "each: `minibatches` steps per epoch with one sample per dialogue, about turns x minibatches "
        "with one per assistant turn (think_context visible), as verl counts (docs/protocol.md)",
    )
    #: CleanRL's ``target_kl``: a step's remaining minibatch updates are skipped once one minibatch's
    #: approximate KL (``train/approx_kl``, k3 as CleanRL's; not ``train/ppo_kl``, verl's k1) passes
    #: it. ``None``: every update runs.
    target_kl: float | None = Field(
        default=None, gt=0.0, description="stop the step's updates once approx_kl passes this (null: off)"
    )
    #: Truncated importance sampling (verl 0.9.1's ``algorithm.rollout_correction.rollout_is``): weigh
    #: each token's policy loss by min(exp(trainer log-prob − sampler log-prob), threshold), per token
    #: or per sequence, to correct for a sampler that computes differently from the trainer (bf16).
    rollout_is: Literal["token", "sequence"] | None = Field(
        default=None, description="truncated importance sampling: null (off), token or sequence"
    )
    rollout_is_threshold: float = Field(
        default=2.0, gt=0.0, description="upper bound on an importance weight (verl's default 2.0)"
    )
    #: How each loss term's per-token values become one number (:meth:`Algorithm.aggregation`), by
    #: verl's ``actor.loss_agg_mode`` names; the logged statistics stay token means whatever it says.
    loss_agg_mode: LossAggMode = Field(
        default="token-mean",
        description="how a loss's per-token values are aggregated, by verl's loss_agg_mode names: "
        "token-mean (over the minibatch's action tokens), seq-mean-token-sum, seq-mean-token-mean (the "
        "mean over samples of each one's token sum or mean), seq-mean-token-sum-norm (Dr. GRPO: each "
        "sample's token sum, summed, / (samples x loss_scale_factor))",
    )
    loss_scale_factor: int | None = Field(
        default=None,
        ge=1,
        description="seq-mean-token-sum-norm's constant (verl's loss_scale_factor, TRL's "
        "max_completion_length); null: the run's model.max_length",
    )


@dataclass
class AdvantageInputs:
    """Everything an algorithm may use, on the trainer's shifted ``[B, T]`` grid.

    ``token_rewards`` holds each turn's reward on that turn's last action token; ``scores`` is the
    episode reward per dialogue ``[B]``; ``groups`` a group id per dialogue ``[B]`` (the profile it was
    sampled for). ``values``/``old_logp``/``ref_logp`` are ``None`` when not computed (no critic, on-policy
    without KL, no KL).

    Where the turns are, for an algorithm that credits each assistant turn on its own (``mapo.py``):
    ``dialogues`` ``[B]`` says which dialogue each sample comes from (the samples of one dialogue share
    it: one per assistant turn in the thought-free layout), ``turn_index`` ``[B, T]`` the assistant turn
    (0, 1, ...) of the dialogue each action token belongs to (-1 elsewhere), and ``per_turn`` whether
    each sample is one turn earning the reward from its turn on (``learner.make_samples``), so that its
    token rewards sum to a return rather than to one turn's reward. ``None``: not filled (inputs built
    by hand for an algorithm that does not read them).
    """

    mask: Tensor
    token_rewards: Tensor
    scores: Tensor
    groups: Tensor
    values: Tensor | None = None
    old_logp: Tensor | None = None
    ref_logp: Tensor | None = None
    dialogues: Tensor | None = None
    turn_index: Tensor | None = None
    per_turn: bool = False


@dataclass
class Advantages:
    advantages: Tensor  # [B, T], 0 outside the mask
    returns: Tensor | None = None  # [B, T] value targets, only when the algorithm trains a critic
    stats: dict[str, float] = field(default_factory=dict)


@dataclass
class ActorLossInputs:
    """One micro-batch of the policy update, every tensor ``[b, t]`` on the shifted grid.

    ``normalizer`` is the whole minibatch's action-token count and ``samples`` its count of samples
    with an action token, so that the gradients accumulated over its micro-batches equal the
    full-minibatch gradient under every loss aggregation (see ``core.Aggregation``; ``samples=None``:
    counted on this micro-batch, right only when it is the minibatch). ``ref_logp`` is ``None`` without
    a KL term, ``is_weights`` without truncated importance sampling (``core.rollout_is_weights``).
    """

    mask: Tensor
    normalizer: float
    logp: Tensor
    old_logp: Tensor
    advantages: Tensor
    entropy: Tensor
    ref_logp: Tensor | None = None
    is_weights: Tensor | None = None
    samples: float | None = None


@dataclass
class CriticLossInputs:
    """One micro-batch of the value update: the critic's values now, at scoring time, and the targets;
    the minibatch's counts as in :class:`ActorLossInputs`."""

    mask: Tensor
    normalizer: float
    values: Tensor
    old_values: Tensor
    returns: Tensor
    samples: float | None = None


@dataclass
class LossTerms:
    """``loss`` is what the trainer backwards; ``stats`` what it logs (``train/<key>``, averaged)."""

    loss: Tensor
    stats: dict[str, Tensor]


S = TypeVar("S", bound=AlgorithmSettings)


def own_knobs(settings_class: type[AlgorithmSettings]) -> set[str]:
    """The settings an algorithm adds to the shared ones (``name`` is shared)."""
    return set(settings_class.model_fields) - set(AlgorithmSettings.model_fields)


def unmapped_knobs(algo: type[Algorithm[Any]]) -> list[str]:
    """The algorithm's own settings that neither its verl mapping nor its verl refusals handle."""
    return sorted(own_knobs(algo.settings_class) - set(algo.verl_knobs))


class Algorithm(Generic[S]):
    """Base class: subclasses set the class attributes and implement :meth:`advantages`.

    :meth:`actor_loss` here is the part PPO and GRPO share: the clipped surrogate minus the entropy
    bonus. An algorithm with a loss-side KL term extends it (``grpo.py``).
    """

    name: ClassVar[str]
    needs_critic: ClassVar[bool]
    kl_in: ClassVar[Literal["reward", "loss"]]
    min_group_size: ClassVar[int] = 1
    #: the ``rollout.reward.mode`` values it can learn from (``None``: any); config validation refuses
    #: the others (an algorithm whose credit is each turn's own reward has nothing to use under ``final``)
    reward_modes: ClassVar[frozenset[str] | None] = None
    verl_adv_estimator: ClassVar[str]
    #: own settings handled by :meth:`verl_overrides` / :meth:`verl_refusals` (see :func:`unmapped_knobs`)
    verl_knobs: ClassVar[frozenset[str]] = frozenset()
    #: the class that reads this algorithm's ``algorithm:`` block (its own settings beside the shared ones)
    settings_class: ClassVar[type[AlgorithmSettings]] = AlgorithmSettings

    def advantages(self, inputs: AdvantageInputs, settings: S) -> Advantages:
        raise NotImplementedError

    def with_reward_kl(self, inputs: AdvantageInputs, settings: S) -> AdvantageInputs:
        """``kl_in == "reward"``: every action token's reward pays ``kl_coef`` × k1(old ‖ ref), and each
        sample's score the sum of its tokens' (InstructGPT; verl's ``use_kl_in_reward``). The trainer
        calls this before :meth:`advantages`, so the KL sits where ``kl_in`` says for any algorithm."""
        if (
            self.kl_in != "reward"
            or settings.kl_coef <= 0
            or inputs.ref_logp is None
            or inputs.old_logp is None
        ):
            return inputs
        from rlver.train.algorithms import core

        penalty = settings.kl_coef * core.kl_k1(inputs.old_logp, inputs.ref_logp) * inputs.mask
        return replace(
            inputs, token_rewards=inputs.token_rewards - penalty, scores=inputs.scores - penalty.sum(dim=1)
        )

    def aggregation(self, normalizer: float, samples: float | None, settings: S) -> Aggregation:
        """How this algorithm's loss terms become one number over a minibatch of ``normalizer`` action
        tokens in ``samples`` samples: ``settings.loss_agg_mode`` (token mean unless set; Dr. GRPO's
        settings default to its constant normaliser). The one hook an aggregation goes through: the
        policy, entropy and KL terms and the critic's loss all read it, as verl's ``agg_loss`` serves
        each of its terms."""
        from rlver.train.algorithms import core

        return core.Aggregation(settings.loss_agg_mode, normalizer, samples, settings.loss_scale_factor)

    def actor_loss(self, x: ActorLossInputs, settings: S) -> LossTerms:
        """The clipped surrogate (weighted by ``x.is_weights`` under truncated importance sampling)
        − ``entropy_coef`` × entropy (logged either way), + ``kl_coef`` × k3(policy ‖ reference) when
        ``kl_in == "loss"`` (verl's ``use_kl_loss`` with ``low_var_kl``), each aggregated by
        :meth:`aggregation`. The logged entropy, KL and clip statistics are token means over the
        minibatch whatever the aggregation (``policy_loss`` is the aggregated loss)."""
        from rlver.train.algorithms import core

        agg = self.aggregation(x.normalizer, x.samples, settings)
        out = core.policy_loss(
            x.logp, x.old_logp, x.advantages, x.mask,
            clip_eps=settings.clip_eps, clip_eps_high=settings.clip_eps_high, normalizer=x.normalizer,
            dual_clip=settings.dual_clip, is_weights=x.is_weights, agg=agg,
        )  # fmt: skip
        entropy = core.masked_mean(x.entropy, x.mask, normalizer=x.normalizer)
        loss = out.loss
        if settings.entropy_coef > 0:
            loss = loss - settings.entropy_coef * core.aggregate(x.entropy, x.mask, agg)
        stats = {
            "policy_loss": out.loss,
            "clip_fraction": out.clip_fraction,
            "approx_kl": out.approx_kl,
            "ppo_kl": out.ppo_kl,
            "entropy": entropy,
        }
        if self.kl_in == "loss" and settings.kl_coef > 0 and x.ref_logp is not None:
            k3 = core.kl_k3(x.logp, x.ref_logp)
            loss = loss + settings.kl_coef * core.aggregate(k3, x.mask, agg)
            stats["kl_loss"] = core.masked_mean(k3.detach(), x.mask, normalizer=x.normalizer)
        return LossTerms(loss, stats)

    # ------------------------------------------------------------------------------ under verl
    def verl_overrides(self, settings: S) -> dict[str, Any]:
        """verl 0.9.1 Hydra keys for this algorithm's own settings (full dotted paths), beside the shared
        ones ``rlver.integrations.verl.config`` writes; list each setting handled in ``verl_knobs``."""
        return {}

    def verl_refusals(self, settings: S) -> list[str]:
        """Why verl cannot run these settings as the local trainer does (one sentence each, naming the
        ``algorithm.<key>=<value>`` and what to use instead); empty when it can."""
        return []

    def critic_loss(self, x: CriticLossInputs, settings: S) -> LossTerms:
        raise NotImplementedError(f"{self.name} trains no critic")
