"""MICA (Zhang et al., 2026, "Multi-granularity Intertemporal Credit Assignment", arXiv:2603.06194 v2,
the renamed MAPO): MAPO's estimator (``mapo.py``) with the scopes v2 gives its two signals, and the
released launch script's settings as defaults.

* Turn scope: each assistant turn's own reward (v2's Incremental Distance Reward: how much the turn
  brought the user's state nearer its target; here the emotion change / 100 of
  ``rollout.reward.mode: delta``), normalised against the same user's dialogues at the same turn.
* Batch scope: the turn's Monte Carlo return, discounted once per assistant turn, normalised over every
  turn of the batch.
* The two mixed, 0.4 x turn + 0.6 x batch (``turn_adv_weight`` / ``batch_adv_weight``, released
  ``test_reinforce_pp_v5.sh:30-31``), on every action token of the turn.

Defaults from the same script: ``gamma`` 0.85 (line 112), clip-higher ``clip_eps_high`` 0.28 over
``clip_eps`` 0.2 (lines 38-39), the dual clip ``clip_ratio_c`` 10 (line 191), no KL (lines 33-36). The
equations' term-by-term reading, and where rlver differs from the paper and the released code, are in
docs/algorithms.md. This class adds no code, only its settings' defaults (as ``dr_grpo.py`` to GRPO).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlver.train.algorithms.mapo import MAPO, MAPOSettings


class MICASettings(MAPOSettings):
    """MAPO's settings with MICA's scopes and the released launch script's defaults."""

    name: str = Field(default="mica", description="``mica``: MAPO with v2's scopes (see mapo_turn_signal).")
    mapo_turn_signal: Literal["return", "reward"] = Field(
        default="reward", description="MICA: the turn's own reward at turn scope, its return at batch scope"
    )
    gamma: float = Field(
        default=0.85, ge=0.0, le=1.0, description="the return's discount per assistant turn (MICA's 0.85)"
    )
    clip_eps_high: float | None = Field(
        default=0.28, gt=0.0, description="clip-higher: the upper clip range (MICA's 0.28)"
    )
    dual_clip: float | None = Field(
        default=10.0, gt=1.0, description="dual-clip bound for negative advantages (MICA's clip_ratio_c 10)"
    )


class MICA(MAPO):
    name = "mica"
    settings_class = MICASettings
