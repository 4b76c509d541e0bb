"""Dr. GRPO (Liu et al., 2025, "Understanding R1-Zero-Like Training", arXiv:2503.20783): GRPO without
its two length and difficulty biases.

* The advantage is the score minus its group's mean, with no division by the group's std (a group
  whose scores barely differ is not blown up): ``grpo_scale_by_std`` defaults to false.
* The loss is each sample's token **sum**, summed over the minibatch's samples and divided by a
  constant, samples × ``loss_scale_factor`` (``loss_agg_mode: seq-mean-token-sum-norm``), not each
  sample's token mean: a long wrong reply is not penalised less per token than a short one. TRL's
  ``GRPOConfig(loss_type="dr_grpo")`` divides by rows × ``max_completion_length``; verl 0.9.1's
  ``seq-mean-token-sum-norm`` by samples × ``loss_scale_factor``; ``loss_scale_factor`` left unset is
  ``model.max_length`` (``TrainConfig``), written into the run's config.

Everything else is GRPO's (``grpo.py``): groups of two or more, the k3 KL in the loss, verl's
``grpo`` estimator. The aggregation is the one hook of ``Algorithm.aggregation``: this class adds no
code, only its settings' defaults.
"""

from __future__ import annotations

from pydantic import Field

from rlver.train.algorithms.base import LossAggMode
from rlver.train.algorithms.grpo import GRPO, GRPOSettings


class DrGRPOSettings(GRPOSettings):
    """GRPO's settings with Dr. GRPO's defaults: no std division, the constant normaliser."""

    name: str = Field(default="dr_grpo", description="``dr_grpo``: GRPO without the std or length bias.")
    grpo_scale_by_std: bool = Field(default=False, description="divide by the group's std (Dr. GRPO: no)")
    loss_agg_mode: LossAggMode = Field(
        default="seq-mean-token-sum-norm",
        description="Dr. GRPO's aggregation: the samples' token sums / (samples x loss_scale_factor)",
    )


class DrGRPO(GRPO):
    name = "dr_grpo"
    settings_class = DrGRPOSettings
