"""PPO (Schulman et al., 2017): a critic, per-token rewards, GAE advantages.

Rewards sit on each turn's last token; with ``kl_coef > 0`` every action token's reward also pays
``kl_coef * k1(old || ref)`` (the KL lives in the reward, as in InstructGPT and verl's
``use_kl_in_reward``). GAE runs over the assistant tokens only, then advantages are whitened over the
batch (``whiten_advantages``). Loss: clipped policy surrogate (dual-clip as configured) + optional
entropy bonus (:meth:`Algorithm.actor_loss`), and the clipped value loss on the critic.

Logged beside the advantages: ``train/explained_variance`` of the critic's values for the returns
(CleanRL's ``ppo.py``): 1 is a perfect critic, 0 no better than the mean return, below 0 worse.
"""

from __future__ import annotations

from pydantic import Field

from rlver.train.algorithms import core
from rlver.train.algorithms.base import (
    AdvantageInputs,
    Advantages,
    Algorithm,
    AlgorithmSettings,
    CriticLossInputs,
    LossTerms,
)


class PPOSettings(AlgorithmSettings):
    """PPO's own settings (``algorithm:`` keys beside the shared ones)."""

    name: str = "ppo"
    whiten_advantages: bool = True
    value_clip: float | None = Field(default=0.2, gt=0.0, description="the critic's clip range (null: off)")


class PPO(Algorithm[PPOSettings]):
    name = "ppo"
    needs_critic = True
    kl_in = "reward"
    loss_terms = ("policy_clip", "value_clip", "entropy")
    verl_adv_estimator = "gae"
    settings_class = PPOSettings

    def advantages(self, inputs: AdvantageInputs, settings: PPOSettings) -> Advantages:
        mask, rewards = inputs.mask, inputs.token_rewards
        assert inputs.values is not None, "PPO needs the critic's values"
        if settings.kl_coef > 0 and inputs.ref_logp is not None and inputs.old_logp is not None:
            rewards = rewards - settings.kl_coef * core.kl_k1(inputs.old_logp, inputs.ref_logp) * mask
        adv, ret = core.gae_advantages(rewards, inputs.values, mask, gamma=settings.gamma, lam=settings.lam)
        stats = {
            "train/value_mean": core.masked_mean(inputs.values, mask).item(),
            "train/return_mean": core.masked_mean(ret, mask).item(),
        }
        explained = core.explained_variance(inputs.values, ret, mask)
        if explained is not None:
            stats["train/explained_variance"] = explained
        if settings.whiten_advantages:
            adv = core.masked_whiten(adv, mask)
        return Advantages(adv, ret, stats)

    def critic_loss(self, x: CriticLossInputs, settings: PPOSettings) -> LossTerms:
        """``value_clip``: 0.5 × max((V − R)², (V_clipped − R)²) over the action tokens."""
        out = core.value_loss(
            x.values, x.old_values, x.returns, x.mask, clip_range=settings.value_clip, normalizer=x.normalizer
        )
        return LossTerms(out.loss, {"value_loss": out.loss, "value_clip_fraction": out.clip_fraction})
