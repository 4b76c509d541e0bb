"""Our training config → verl's Hydra overrides.

One config file drives both engines: ``rlver train --config ppo-think`` trains on one machine,
``rlver train --trainer verl --config ppo-think`` hands the same settings to verl. The verl-only
knobs (cluster shape, rollout engine, parallelism) live in an optional ``verl:`` section, so a
:class:`VerlTrainConfig` is a :class:`~rlver.train.config.TrainConfig` plus that section.

How our settings map to verl (see docs/multinode.md for the table against the published run):

* ``algorithm.name`` is looked up in the algorithm table (:data:`rlver.train.algorithms.ALGORITHMS`), the
  same one the local trainer reads: its ``verl_adv_estimator`` (``gae`` for PPO, ``grpo`` for GRPO), its
  ``needs_critic``, its ``kl_in`` and its ``min_group_size`` (``rollout.n = rollout.n_per_profile``
  for group algorithms) decide the overrides, so a new algorithm cannot silently run as another one.
  Its own settings are the algorithm's to map: this module writes what its ``verl_overrides`` gives and
  refuses what its ``verl_refusals`` names (PPO: ``value_clip`` → ``critic.cliprange_value``,
  ``whiten_advantages: false`` refused; GRPO: ``grpo_scale_by_std`` → ``norm_adv_by_std_in_grpo``, a
  ``grpo_eps`` other than verl's fixed 1e-6 and ``grpo_lone_sample: zero`` refused), and an own setting the algorithm does not list
  in ``verl_knobs`` is refused, so none is dropped silently. No algorithm's settings class is imported here.
* ``algorithm.rollout_is``/``rollout_is_threshold`` (truncated importance sampling) →
  ``algorithm.rollout_correction.rollout_is``/``rollout_is_threshold``: verl weighs the policy loss by
  min(exp(old log-prob − vLLM's log-prob), threshold), the local trainer by the same against its sampler.
* ``algorithm.dual_clip`` → ``actor.clip_ratio_c`` (verl's default 3.0 is ours too; ``null`` turns it
  off on both engines).
* ``optim``: ``betas``, ``eps`` (through ``override_optimizer_config``) and ``max_grad_norm``
  (``optim.clip_grad``) for both optimisers. A ``target_kl`` is refused: verl has no key for it.
* ``optim.schedule``: ``constant`` and ``cosine`` map to verl's ``lr_scheduler_type`` (cosine decays to
  0, ``min_lr_ratio=0``); ``linear`` has no verl FSDP scheduler and is refused. Each optimiser's warm-up
  (``warmup_steps``, or ``{actor,critic}_warmup_ratio × run.steps``) → its ``lr_warmup_steps`` (both
  engines ramp as ``step / warmup`` from a 0-indexed step).
* Failed dialogues: a dialogue that fails takes its GRPO group with it and verl refills the group with a
  fresh prompt (``trainer.v1.sampler.sync_refill_failed_groups``), see ``agent_loop.py``.
* ``rollout.batch_size`` counts prompts (profiles) per step, as verl's ``data.train_batch_size`` does;
  a step runs ``batch_size x n_per_profile`` dialogues (verl's ``rollout.n``).
* ``kl_coef``: PPO puts it in the reward (``algorithm.use_kl_in_reward``), GRPO in the loss
  (``actor.use_kl_loss``, k3 = ``low_var_kl``), as in our local trainer. With 0 (the published
  setting) verl builds no reference model.
* Dialogue rules, the simulator, the reward and the per-reply token limit travel in the dataset rows
  (:class:`~.settings.DialogueTask`), not in verl's config, because the agent loop reads them there.
* ``rollout.backend`` and ``rollout.backend_settings``: verl samples with its own engine
  (``verl.rollout_engine``), so the backend states what it would not honour
  (``RolloutBackend.verl_refusals``: any backend but ``hf``, and an ``hf`` knob away from its default),
  refused before anything is written.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlver.config import MAX_COUNT
from rlver.errors import ConfigError
from rlver.llm.sampling import is_greedy
from rlver.train.algorithms import ALGORITHMS
from rlver.train.algorithms.base import unmapped_knobs
from rlver.train.backends import verl_refusals
from rlver.train.config import TrainConfig


class VerlSettings(BaseModel):
    """The verl-only part of a config (``verl:`` section). Defaults fit one 8-GPU node."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    out_dir: str = Field(default="runs/verl", description="where the parquet, YAML and overrides are written")
    nnodes: int = Field(default=1, ge=1, le=MAX_COUNT, description="Nodes in the Ray cluster.")
    gpus_per_node: int = Field(default=8, ge=1, le=MAX_COUNT, description="GPUs on each node.")
    ray_address: str | None = Field(
        default=None, description="an existing Ray cluster ('auto', 'ray://head:10001'); None starts one"
    )
    rollout_engine: Literal["vllm", "sglang"] = Field(
        default="vllm", description="The engine verl samples the policy with."
    )
    tensor_parallel_size: int = Field(default=1, ge=1, le=MAX_COUNT, description="GPUs per rollout replica")
    gpu_memory_utilization: float = Field(
        default=0.5, gt=0.0, le=1.0, description="Share of each GPU's memory the rollout engine may take."
    )
    agent_workers: int = Field(
        default=8, ge=1, le=MAX_COUNT, description="agent-loop worker actors (dialogues are split among them)"
    )
    max_prompt_tokens: int | None = Field(
        default=None,
        ge=16,
        le=MAX_COUNT,
        description="system prompt + opening line; default min(2048, model.max_length / 4)",
    )
    param_offload: bool = Field(default=False, description="Offload the parameters to the CPU (FSDP).")
    optimizer_offload: bool = Field(
        default=False, description="Offload the optimiser states to the CPU (FSDP)."
    )
    project: str = Field(default="rlver", description="verl's project name (its loggers group runs by it).")
    experiment: str | None = Field(
        default=None, description="verl's experiment name (default: one made from the run)."
    )
    transcripts: bool = Field(
        default=True,
        description=(
            "Also write each finished dialogue (an Episode with its appraisals) under out_dir/transcripts."
        ),
    )
    overrides: list[str] = Field(
        default_factory=list,
        description="Extra Hydra overrides appended last (``key=value``), for anything not mapped here.",
    )


class VerlTrainConfig(TrainConfig):
    """A training config with the optional ``verl:`` section."""

    verl: VerlSettings = Field(
        default_factory=VerlSettings,
        description="The part only ``--trainer verl`` reads: cluster, engine and offload settings.",
    )


_BARE = re.compile(r"^[A-Za-z0-9_./~+@-][A-Za-z0-9_./~+@:-]*$")
_RESERVED = {"true", "false", "null", "none", "inf", "nan"}


def hydra_value(value: Any) -> str:
    """Render a Python value as a Hydra override value (quoted where the grammar needs it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    looks_numeric = re.fullmatch(r"[-+]?[\d.eE_+-]+", text) is not None
    if _BARE.match(text) and text.lower() not in _RESERVED and not looks_numeric:
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _kv(key: str, value: Any) -> str:
    return f"{key}={hydra_value(value)}"


def prompt_budget(cfg: VerlTrainConfig) -> int:
    """Tokens for the opening context (verl's prompt); the rest of ``model.max_length`` is the dialogue."""
    budget = cfg.verl.max_prompt_tokens or min(2048, cfg.model.max_length // 4)
    if budget >= cfg.model.max_length - 16:
        raise ConfigError(
            f"verl.max_prompt_tokens ({budget}) leaves no room for the dialogue within "
            f"model.max_length ({cfg.model.max_length})"
        )
    return budget


def refuse_unsupported(cfg: VerlTrainConfig) -> None:
    """Settings the local trainer honours and verl 0.9.1 cannot: a clear error instead of a silent change.

    Every other training setting is mapped to a key verl reads (tests/integrations/test_verl_config.py
    walks them); an algorithm's own settings are its own to map or refuse (``Algorithm.verl_refusals``).
    """
    backend_refusals = verl_refusals(cfg)  # verl samples with its own engine (rlver.train.backends)
    if backend_refusals:
        raise ConfigError("; ".join(backend_refusals))
    if cfg.optim.schedule == "linear":
        raise ConfigError(
            "optim.schedule=linear: verl's FSDP workers have only 'constant' and 'cosine' learning-rate "
            "schedules; choose one of those to train with --trainer verl"
        )
    algo, spec = cfg.algorithm, ALGORITHMS.get(cfg.algorithm.name)
    unmapped = unmapped_knobs(spec)
    if unmapped:
        raise ConfigError(
            f"algorithm.name={spec.name}: its setting(s) {', '.join(f'algorithm.{k}' for k in unmapped)} "
            f"have no verl mapping, so --trainer verl would run without them; {spec.__name__} "
            f"({spec.__module__}) must map or refuse each in verl_overrides/verl_refusals and list it in "
            "verl_knobs"
        )
    refusals = spec().verl_refusals(algo)
    if refusals:
        raise ConfigError("; ".join(refusals))
    if algo.target_kl is not None:
        raise ConfigError(
            f"algorithm.target_kl={algo.target_kl}: verl 0.9.1's actor runs every minibatch update with no "
            "early stop on the approximate KL; use null with --trainer verl"
        )


def batches_per_epoch(n_profiles: int, prompts_per_step: int) -> int:
    """verl's train dataloader drops the last partial batch."""
    return max(1, n_profiles // prompts_per_step)


def verl_overrides(
    cfg: VerlTrainConfig,
    *,
    model_path: str,
    train_files: str | Path,
    val_files: str | Path,
    agent_loop_yaml: str | Path,
    n_train_profiles: int,
) -> list[str]:
    """The Hydra overrides (``key=value``) that turn verl's ``ppo_trainer`` into our run."""
    prompt_tokens = prompt_budget(cfg)
    refuse_unsupported(cfg)
    epochs = math.ceil(cfg.run.steps / batches_per_epoch(n_train_profiles, cfg.rollout.profiles_per_step))
    out: dict[str, Any] = {
        **_data_overrides(cfg, train_files, val_files, prompt_tokens),
        **_algorithm_overrides(cfg),
        **_actor_overrides(cfg, model_path),
        **_rollout_overrides(cfg, agent_loop_yaml),
        **_trainer_overrides(cfg, epochs),
    }
    if cfg.model.lora.enabled:
        out["actor_rollout_ref.model.lora_rank"] = cfg.model.lora.r
        out["actor_rollout_ref.model.lora_alpha"] = cfg.model.lora.alpha
        out["actor_rollout_ref.model.target_modules"] = cfg.model.lora.target_modules
    out.update(_critic_overrides(cfg, model_path))
    if cfg.verl.ray_address:
        out["+ray_kwargs.ray_init.address"] = cfg.verl.ray_address
    return [_kv(k, val) for k, val in out.items()] + list(cfg.verl.overrides)


def _schedule(cfg: VerlTrainConfig, which: Literal["actor", "critic"]) -> dict[str, Any]:
    """One optimiser's learning-rate schedule (the keys under ``<actor|critic>.optim``).

    Warm-up in steps, worked out as the local trainer does (``OptimSettings.warmup``), so the
    per-optimiser ratios of the published run (actor 2 %, critic 5 %) mean the same on both engines.
    """
    optim, steps = cfg.optim, cfg.run.steps
    return {
        "lr_scheduler_type": optim.schedule,
        "lr_warmup_steps": optim.warmup(which, steps) or -1,
        "lr_warmup_steps_ratio": 0.0,
        "min_lr_ratio": 0.0,
        "num_cycles": 0.5,
        "zero_indexed_step": True,
    }


def _adamw(cfg: VerlTrainConfig) -> dict[str, Any]:
    """AdamW's betas, eps and the gradient clip of one optimiser (the keys under ``<actor|critic>.optim``).

    verl 0.9.1 clips with ``optim.clip_grad`` (its ``actor.grad_clip``/``critic.grad_clip`` are kept in the
    schema but never read) and builds AdamW from ``lr``, ``weight_decay``, ``betas`` plus whatever
    ``override_optimizer_config`` holds, which is where ``eps`` goes (``workers/config/optimizer.py``).
    """
    optim = cfg.optim
    return {
        "betas": list(optim.betas),
        "clip_grad": optim.max_grad_norm or 1e9,  # None: no clipping, as the local trainer
        "override_optimizer_config": {"eps": optim.eps},
    }


def _data_overrides(
    cfg: VerlTrainConfig, train_files: str | Path, val_files: str | Path, prompt_tokens: int
) -> dict[str, Any]:
    """data: one row per profile; the agent loop reads the rest of the row."""
    return {
        "data.train_files": str(train_files),
        "data.val_files": str(val_files),
        "data.prompt_key": "prompt",
        "data.train_batch_size": cfg.rollout.profiles_per_step,
        "data.max_prompt_length": prompt_tokens,
        "data.max_response_length": cfg.model.max_length - prompt_tokens,
        "data.filter_overlong_prompts": True,
        "data.truncation": "error",
        "data.return_raw_chat": True,
        "data.seed": cfg.run.seed,
    }


def _algorithm_overrides(cfg: VerlTrainConfig) -> dict[str, Any]:
    """The shared algorithm keys, truncated importance sampling, then the algorithm's own mapping."""
    algo, spec = cfg.algorithm, ALGORITHMS.get(cfg.algorithm.name)
    return {
        "algorithm.adv_estimator": spec.verl_adv_estimator,
        "algorithm.gamma": algo.gamma,
        "algorithm.lam": algo.lam,
        "algorithm.use_kl_in_reward": spec.kl_in == "reward" and algo.kl_coef > 0,
        "algorithm.kl_ctrl.kl_coef": algo.kl_coef,
        # verl computes the weights from old_log_probs and the rollout's log-probs
        # (rollout.calculate_log_probs, on below); null leaves the loss unweighted, as locally
        "algorithm.rollout_correction.rollout_is": algo.rollout_is,
        "algorithm.rollout_correction.rollout_is_threshold": algo.rollout_is_threshold,
        **spec().verl_overrides(algo),
    }


def _actor_overrides(cfg: VerlTrainConfig, model_path: str) -> dict[str, Any]:
    """The policy: model, optimiser, clipped loss, KL and offload."""
    algo, optim, v, spec = cfg.algorithm, cfg.optim, cfg.verl, ALGORITHMS.get(cfg.algorithm.name)
    return {
        "actor_rollout_ref.model.path": model_path,
        "actor_rollout_ref.model.enable_gradient_checkpointing": cfg.model.gradient_checkpointing,
        "actor_rollout_ref.model.use_remove_padding": True,
        "actor_rollout_ref.actor.optim.lr": optim.actor_lr,
        "actor_rollout_ref.actor.optim.weight_decay": optim.weight_decay,
        **{f"actor_rollout_ref.actor.optim.{k}": val for k, val in _adamw(cfg).items()},
        **{f"actor_rollout_ref.actor.optim.{k}": val for k, val in _schedule(cfg, "actor").items()},
        # prompts; verl multiplies by rollout.n and counts samples (TrainConfig.minibatch_prompts)
        "actor_rollout_ref.actor.ppo_mini_batch_size": cfg.minibatch_prompts(),
        "actor_rollout_ref.actor.ppo_epochs": algo.epochs,
        "actor_rollout_ref.actor.use_dynamic_bsz": True,
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": max(
            cfg.update.micro_batch_tokens, cfg.model.max_length
        ),
        "actor_rollout_ref.actor.clip_ratio_low": algo.clip_eps,
        "actor_rollout_ref.actor.clip_ratio_high": algo.clip_eps_high or algo.clip_eps,
        # verl always applies dual-clip; a bound no ratio reaches turns it off
        "actor_rollout_ref.actor.clip_ratio_c": algo.dual_clip if algo.dual_clip is not None else 1e9,
        "actor_rollout_ref.actor.entropy_coeff": algo.entropy_coef,
        "actor_rollout_ref.actor.use_kl_loss": spec.kl_in == "loss" and algo.kl_coef > 0,
        "actor_rollout_ref.actor.kl_loss_coef": algo.kl_coef,
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
        # the one aggregation both engines read (Algorithm.aggregation; the critic's follows the actor's)
        "actor_rollout_ref.actor.loss_agg_mode": algo.loss_agg_mode,
        "actor_rollout_ref.actor.loss_scale_factor": algo.loss_scale_factor,
        "actor_rollout_ref.actor.fsdp_config.param_offload": v.param_offload,
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload": v.optimizer_offload,
        "actor_rollout_ref.ref.fsdp_config.param_offload": v.param_offload,
    }


def _rollout_overrides(cfg: VerlTrainConfig, agent_loop_yaml: str | Path) -> dict[str, Any]:
    """rollout: an async server engine driven by our agent loop."""
    ro, v = cfg.rollout, cfg.verl
    grouped = ALGORITHMS.get(cfg.algorithm.name).min_group_size > 1
    return {
        "actor_rollout_ref.rollout.name": v.rollout_engine,
        "actor_rollout_ref.rollout.mode": "async",
        "actor_rollout_ref.rollout.n": ro.n_per_profile if grouped else 1,
        "actor_rollout_ref.rollout.temperature": ro.temperature,
        "actor_rollout_ref.rollout.top_p": ro.top_p,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": v.tensor_parallel_size,
        "actor_rollout_ref.rollout.gpu_memory_utilization": v.gpu_memory_utilization,
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "actor_rollout_ref.rollout.val_kwargs.temperature": cfg.eval.temperature,
        "actor_rollout_ref.rollout.val_kwargs.do_sample": not is_greedy(cfg.eval.temperature),
        "actor_rollout_ref.rollout.val_kwargs.n": 1,
        "actor_rollout_ref.rollout.agent.num_workers": v.agent_workers,
        "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(agent_loop_yaml),
        "actor_rollout_ref.rollout.agent.default_agent_loop": "rlver_dialogue",
    }


def _trainer_overrides(cfg: VerlTrainConfig, epochs: int) -> dict[str, Any]:
    """trainer: logging, cluster shape, length of the run, checkpoints and validation."""
    run, v = cfg.run, cfg.verl
    return {
        "trainer.project_name": v.project,
        "trainer.experiment_name": v.experiment
        or f"{cfg.algorithm.name}{'-think' if cfg.rollout.think else ''}",
        "trainer.logger": ["console", "tensorboard"] if run.tensorboard else ["console"],
        "trainer.nnodes": v.nnodes,
        "trainer.n_gpus_per_node": v.gpus_per_node,
        "trainer.total_epochs": epochs,
        "trainer.total_training_steps": run.steps,
        "trainer.save_freq": run.checkpoint_every or -1,
        "trainer.max_actor_ckpt_to_keep": run.keep_checkpoints,
        "trainer.max_critic_ckpt_to_keep": run.keep_checkpoints,
        "trainer.test_freq": cfg.eval.every or -1,
        "trainer.val_before_train": cfg.eval.at_start,
        # absolute like every other path here: verl's workers may run in another working directory
        "trainer.default_local_dir": str(Path(v.out_dir).expanduser().resolve() / "checkpoints"),
        "trainer.critic_warmup": 0,
        # the v1 trainer: it stores each output of a per-turn list as a sample and reads rm_scores per token
        "trainer.use_v1": True,
        # a group with a failed dialogue is failed whole (agent_loop.py) and replaced by a fresh prompt
        "trainer.v1.sampler.sync_refill_failed_groups": True,
    }


def _critic_overrides(cfg: VerlTrainConfig, model_path: str) -> dict[str, Any]:
    """critic: off unless the algorithm needs one (PPO), then its model, optimiser and clipping."""
    if not ALGORITHMS.get(cfg.algorithm.name).needs_critic:
        return {"critic.enable": False}
    optim, v = cfg.optim, cfg.verl
    return {
        "critic.enable": True,
        "critic.model.path": model_path,
        "critic.model.enable_gradient_checkpointing": cfg.model.gradient_checkpointing,
        "critic.optim.lr": optim.critic_lr,
        "critic.optim.weight_decay": optim.weight_decay,
        **{f"critic.optim.{k}": val for k, val in _adamw(cfg).items()},
        **{f"critic.optim.{k}": val for k, val in _schedule(cfg, "critic").items()},
        "critic.ppo_max_token_len_per_gpu": max(cfg.update.micro_batch_tokens, cfg.model.max_length) * 2,
        "critic.fsdp.param_offload": v.param_offload,
        "critic.fsdp.optimizer_offload": v.optimizer_offload,
    }
