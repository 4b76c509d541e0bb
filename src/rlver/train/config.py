"""``TrainConfig``: everything a training run depends on, validated, with no unknown keys allowed.

A run's config is written next to its checkpoints (``config.yaml``, secrets redacted), so a run can be
resumed and audited from its folder alone. Presets live in ``rlver/train/presets/*.yaml``; a preset
is just a config file (``rlver train --config ppo-think``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlver.env.rewards import RewardMode
from rlver.simulator.factory import SimulatorSpec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraSettings(_Strict):
    """LoRA via peft. With LoRA on, the reference policy is the base model (adapter disabled)."""

    enabled: bool = False
    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: list[str] | str = "all-linear"


class ModelSettings(_Strict):
    """The policy. ``path="tiny"`` builds the bundled 2-layer model (tests, demo, CPU)."""

    path: str = "tiny"
    tiny_seed: int = 0
    tiny_size: Literal["tiny", "small"] = "tiny"
    dtype: Literal["float32", "bfloat16"] = "float32"
    device: str | None = None  # None: cuda when available, else cpu
    gradient_checkpointing: bool = False
    lora: LoraSettings = Field(default_factory=LoraSettings)
    max_length: int = Field(default=8192, ge=16, description="tokens per dialogue; longer ones lose turns")
    generation_batch_size: int = Field(default=64, ge=1)


class AlgorithmSettings(_Strict):
    """PPO (GAE + critic) or GRPO (group-relative advantages); one shared clipped policy loss."""

    name: Literal["ppo", "grpo"] = "ppo"
    clip_eps: float = Field(default=0.2, gt=0.0)
    clip_eps_high: float | None = Field(default=None, gt=0.0)
    kl_coef: float = Field(default=0.0, ge=0.0, description="PPO: k1 penalty in the reward; GRPO: k3 loss")
    entropy_coef: float = Field(default=0.0, ge=0.0)
    gamma: float = Field(default=1.0, ge=0.0, le=1.0)
    lam: float = Field(default=1.0, ge=0.0, le=1.0)
    whiten_advantages: bool = True  # PPO only
    value_clip: float | None = Field(default=0.2, gt=0.0)
    grpo_scale_by_std: bool = True
    grpo_eps: float = Field(default=1e-6, gt=0.0)
    epochs: int = Field(default=1, ge=1, description="passes over each batch of dialogues")
    minibatches: int = Field(default=1, ge=1, description="optimiser steps per epoch")
    micro_batch_tokens: int = Field(default=16384, ge=16, description="padded tokens per forward pass")


class OptimSettings(_Strict):
    actor_lr: float = Field(default=1e-6, gt=0.0)
    critic_lr: float = Field(default=5e-6, gt=0.0)
    weight_decay: float = Field(default=0.0, ge=0.0)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    max_grad_norm: float | None = Field(default=1.0, gt=0.0)
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(default=0, ge=0)


class RolloutSettings(_Strict):
    """Which users, how many dialogues, how they run, and what they are worth."""

    profiles: str = "en-train"  # a profile set name (``rlver profiles list``) or a file
    batch_size: int = Field(default=32, ge=1, description="dialogues per step (profiles x n_per_profile)")
    n_per_profile: int = Field(default=1, ge=1, description="GRPO group size")
    max_assistant_turns: int = Field(default=8, ge=1)
    appraise_final_reply: bool = True
    start_emotion: int = Field(default=30, ge=0, le=100)
    think: bool = False
    #: Think mode only. ``full``: later turns see earlier replies raw (one training sequence per
    #: dialogue). ``visible``: later turns see only their visible text, as the published think-mode
    #: rollout does; then every assistant turn is its own training sample (prompt = what the policy
    #: saw, response = its sampled ids) carrying the dialogue's reward.
    think_context: Literal["full", "visible"] = "full"
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(default=512, ge=1)
    reward_mode: RewardMode = "final"
    format_penalty: float = Field(default=0.0, ge=0.0)
    mixed_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    simulator_concurrency: int = Field(default=64, ge=1)

    @model_validator(mode="after")
    def _groups_fit(self) -> RolloutSettings:
        if self.batch_size % self.n_per_profile:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a multiple of n_per_profile ({self.n_per_profile})"
            )
        return self

    @property
    def profiles_per_step(self) -> int:
        return self.batch_size // self.n_per_profile


class EvalSettings(_Strict):
    """Periodic evaluation on held-out profiles: one dialogue each, fixed seed."""

    profiles: str = "en-test"
    limit: int | None = Field(default=None, ge=1, description="use the first N profiles only")
    samples_per_profile: int = Field(default=1, ge=1, description="dialogues per profile (less noise)")
    every: int = Field(default=0, ge=0, description="evaluate every k steps (0: only at the end)")
    at_start: bool = False
    temperature: float = Field(default=1.0, ge=0.0)
    max_assistant_turns: int | None = Field(default=None, ge=1, description="default: the training value")
    start_emotion: int | None = Field(default=None, ge=0, le=100, description="default: the training value")
    seed: int = 12345


class RunSettings(_Strict):
    steps: int = Field(default=100, ge=1)
    seed: int = 0
    checkpoint_every: int = Field(default=10, ge=0, description="0: only at the end")
    keep_checkpoints: int = Field(default=2, ge=1)
    tensorboard: bool = True
    progress: bool = True


class TrainConfig(_Strict):
    """A whole training run. See docs/training.md for every field's meaning."""

    model: ModelSettings = Field(default_factory=ModelSettings)
    algorithm: AlgorithmSettings = Field(default_factory=AlgorithmSettings)
    optim: OptimSettings = Field(default_factory=OptimSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    simulator: SimulatorSpec = Field(default_factory=lambda: SimulatorSpec(kind="offline"))
    eval: EvalSettings = Field(default_factory=EvalSettings)
    run: RunSettings = Field(default_factory=RunSettings)


PRESETS_PACKAGE = "rlver.train.presets"


def preset_names() -> list[str]:
    folder = resources.files(PRESETS_PACKAGE)
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def resolve_config_path(name_or_path: str) -> Path:
    """A config file path, or the bundled preset of that name (``ppo-think`` → ``presets/ppo-think.yaml``)."""
    from rlver.errors import ConfigError

    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    name = name_or_path.removesuffix(".yaml")
    if name in preset_names():
        resource = resources.files(PRESETS_PACKAGE).joinpath(f"{name}.yaml")
        return Path(str(resource))
    raise ConfigError(
        f"{name_or_path}: neither a config file nor a preset; presets: {', '.join(preset_names())}"
    )


def load_train_config(name_or_path: str | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    from rlver.config import load_config

    path = resolve_config_path(name_or_path) if name_or_path else None
    return load_config(TrainConfig, path, overrides)
