"""PPO (Schulman et al., 2017): a critic, per-token rewards, GAE advantages.

Rewards sit on each turn's last token; with ``kl_coef > 0`` every action token's reward also pays
``kl_coef * k1(old || ref)`` (``kl_in = "reward"``: the trainer applies it before :meth:`PPO.advantages`,
:meth:`~rlver.train.algorithms.base.Algorithm.with_reward_kl`, as verl's ``use_kl_in_reward``). GAE runs over the assistant tokens only, then advantages are whitened over the
batch (``whiten_advantages``). Loss: clipped policy surrogate (dual-clip as configured) + optional
entropy bonus (:meth:`Algorithm.actor_loss`), and the clipped value loss on the critic.

Logged beside the advantages: ``train/explained_variance`` of the critic's values for the returns
(CleanRL's ``ppo.py``): 1 is a perfect critic, 0 no better than the mean return, below 0 worse.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

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

    name: str = Field(default="ppo", description="``ppo``: GAE with a learned critic.")
    whiten_advantages: bool = Field(
        default=True, description="Normalise the advantages over the batch (mean 0, std 1)."
    )
    value_clip: float | None = Field(default=0.2, gt=0.0, description="the critic's clip range (null: off)")


class PPO(Algorithm[PPOSettings]):
    name = "ppo"
    needs_critic = True
    kl_in = "reward"
    verl_adv_estimator = "gae"
    verl_knobs = frozenset({"whiten_advantages", "value_clip"})
    settings_class = PPOSettings

    def advantages(self, inputs: AdvantageInputs, settings: PPOSettings) -> Advantages:
        mask, rewards = inputs.mask, inputs.token_rewards  # the KL penalty is already in the rewards
        assert inputs.values is not None, "PPO needs the critic's values"
        from rlver.train.algorithms import core  # torch: not needed to read the settings

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
        from rlver.train.algorithms import core

        out = core.value_loss(
            x.values, x.old_values, x.returns, x.mask, clip_range=settings.value_clip,
            normalizer=x.normalizer, agg=self.aggregation(x.normalizer, x.samples, settings),
        )  # fmt: skip
        return LossTerms(out.loss, {"value_loss": out.loss, "value_clip_fraction": out.clip_fraction})

    def verl_overrides(self, settings: PPOSettings) -> dict[str, Any]:
        """``value_clip`` → ``critic.cliprange_value`` (a bound no change reaches turns it off)."""
        return {"critic.cliprange_value": settings.value_clip or 1e9}

    def verl_refusals(self, settings: PPOSettings) -> list[str]:
        if settings.whiten_advantages:
            return []
        return [
            "algorithm.whiten_advantages=false: verl 0.9.1 always whitens GAE advantages over the batch "
            "(core_algos.compute_gae_advantage_return) and has no key to turn it off; use true with "
            "--trainer verl"
        ]
