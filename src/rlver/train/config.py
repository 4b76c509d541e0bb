"""``TrainConfig``: everything a training run depends on, validated, with no unknown keys allowed.

A run's config is written next to its checkpoints (``config.yaml``, secrets redacted), so a run can be
resumed and audited from its folder alone. Presets live in ``rlver/train/presets/*.yaml``; a preset
is just a config file (``rlver train --config ppo-think``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rlver.config import MAX_COUNT, load_config
from rlver.env.dialogue import EnvConfig
from rlver.env.rewards import RewardSpec
from rlver.env.thinking import AGENT_PROMPT_NAMES, read_prompt_file
from rlver.errors import ConfigError
from rlver.limits import check_dialogues
from rlver.migrate import nest_flat_eval_rules, renamed, upgrade_rollout, upgrade_update_keys
from rlver.rollout.runner import RolloutConfig
from rlver.rules import BENCHMARK_TEXT, TRAINING, DialogueRules, asks_published_text
from rlver.seeding import Seed
from rlver.simulator.factory import SimulatorSpec
from rlver.simulator.llm.protocols import LLMUserPrompts
from rlver.simulator.spec import asks_prompt_set
from rlver.train.algorithms import ALGORITHMS, settings_for
from rlver.train.algorithms.base import AlgorithmSettings
from rlver.train.algorithms.ppo import PPOSettings
from rlver.train.backends.settings import BackendSettings

#: Default positions per chunk of the log-prob/entropy computation (``update.logit_chunk_tokens``;
#: ``rlver.train.batch.policy_forward``). Here, not beside that code, so reading a config needs no torch.
LOGIT_CHUNK_TOKENS = 1024


class _Strict(BaseModel):
    # no inf/NaN in any number: ``optim.actor_lr=1e999`` trained until the non-finite guard stopped it
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


#: Adam's beta: torch refuses one outside [0, 1) only when the optimiser is built, after the model loaded
Beta = Annotated[float, Field(ge=0.0, lt=1.0)]


class LoraSettings(_Strict):
    """LoRA via peft. With LoRA on, the reference policy is the base model (adapter disabled)."""

    enabled: bool = Field(default=False, description="Train a LoRA adapter instead of the whole model.")
    r: int = Field(default=16, ge=1, le=MAX_COUNT, description="LoRA's rank.")
    alpha: int = Field(default=32, ge=1, le=MAX_COUNT, description="LoRA's scaling (alpha / r).")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Dropout on the LoRA layers.")
    target_modules: list[str] | str = Field(
        default="all-linear",
        description=(
            "The modules LoRA adapts (peft's ``target_modules``; ``all-linear``: every linear layer)."
        ),
    )


class ModelSettings(_Strict):
    """The policy. ``path="tiny"`` builds the bundled 2-layer model (tests, demo, CPU)."""

    path: str = Field(
        default="tiny",
        description=(
            "The policy: ``tiny`` (the bundled test model), a fetchable name (``rlver models``), a folder"
            " or a hub id."
        ),
    )
    tiny_seed: Seed = Field(
        default=0, description="``path: tiny`` only: the seed its weights are built with."
    )
    tiny_size: Literal["tiny", "small"] = Field(default="tiny", description="``path: tiny`` only: its size.")
    dtype: Literal["float32", "bfloat16"] = Field(
        default="float32",
        description="The weights' dtype (``bfloat16``: bf16 autocast over fp32 master weights).",
    )
    device: str | None = Field(default=None, description="None: cuda when available, else cpu")
    gradient_checkpointing: bool = Field(
        default=False, description="Recompute activations in the backward pass (less memory, more time)."
    )
    lora: LoraSettings = Field(default_factory=LoraSettings, description="LoRA via peft (off by default).")
    max_length: int = Field(
        default=8192, ge=16, le=MAX_COUNT, description="tokens per dialogue; longer ones lose turns"
    )
    generation_batch_size: int | None = Field(
        default=None,
        ge=1,
        le=MAX_COUNT,
        description="The local engine's slots (replies decoded at once; a freed slot takes the next "
        "waiting request). ``null``: sized from the memory free when the engine is built and the KV "
        "cost of a ``max_length``-token dialogue (``rlver.llm.slots``), which moves with what else "
        "runs; set it to pin the batches a resumed run's log-probs depend on in their last bits.",
    )


class OptimSettings(_Strict):
    actor_lr: float = Field(default=1e-6, gt=0.0, description="The policy's learning rate (AdamW).")
    critic_lr: float = Field(default=5e-6, gt=0.0, description="The critic's learning rate (PPO).")
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW's weight decay.")
    betas: tuple[Beta, Beta] = Field(default=(0.9, 0.999), description="AdamW's betas, each in [0, 1).")
    eps: float = Field(default=1e-8, gt=0.0, description="AdamW's epsilon.")
    max_grad_norm: float | None = Field(
        default=1.0, gt=0.0, description="Clip the gradient norm to this; ``null``: no clipping."
    )
    #: A step whose gradient norm is inf/NaN is skipped (as verl's FSDP workers do); this many skipped
    #: optimiser steps in a row stop the run, since the weights or the data are then broken for good.
    max_nonfinite_in_a_row: int = Field(
        default=3, ge=1, le=MAX_COUNT, description="non-finite gradient steps in a row that stop the run"
    )
    schedule: Literal["constant", "linear", "cosine"] = Field(
        default="constant",
        description="The learning-rate schedule after warm-up (``cosine``: to 0 over the run).",
    )
    warmup_steps: int = Field(default=0, ge=0, le=MAX_COUNT, description="linear lr warm-up, both optimisers")
    # verl's `optim.lr_warmup_steps_ratio`, per optimiser: warm-up = int(ratio * run.steps) steps
    actor_warmup_ratio: float = Field(
        default=0.0, ge=0.0, le=1.0, description="actor warm-up, share of steps"
    )
    critic_warmup_ratio: float = Field(
        default=0.0, ge=0.0, le=1.0, description="critic warm-up, share of steps"
    )

    @model_validator(mode="after")
    def _one_warmup(self) -> OptimSettings:
        if self.warmup_steps and (self.actor_warmup_ratio or self.critic_warmup_ratio):
            raise ValueError(
                "optim.warmup_steps and optim.{actor,critic}_warmup_ratio both set: use one of the two"
            )
        return self

    def warmup(self, which: Literal["actor", "critic"], total_steps: int) -> int:
        """Warm-up steps of one optimiser: ``warmup_steps``, or ``int(ratio * total_steps)`` as verl does."""
        ratio = self.actor_warmup_ratio if which == "actor" else self.critic_warmup_ratio
        return self.warmup_steps or int(ratio * total_steps)


class UpdateSettings(_Strict):
    """How the update is cut to fit the device's memory: the *system* knobs of the update, apart from
    the algorithm's (``algorithm:``), since neither changes the maths, only the memory and the time.

    ``micro_batch_tokens``: each minibatch is split into micro-batches of at most this many padded
    tokens whose gradients are accumulated over the whole minibatch's action tokens, so the gradient is
    the full minibatch's (``rlver.train.batch.micro_batches``; verl's ``ppo_max_token_len_per_gpu``).
    ``logit_chunk_tokens``: positions whose full-vocabulary logits are alive at once
    (``rlver.train.batch.policy_forward``). Gradient checkpointing stays ``model.gradient_checkpointing``:
    it is how the model is built (``train/loading.py``), and verl sets it on its model block too.
    Written under ``algorithm:`` in older configs; ``rlver.migrate.upgrade_update_keys`` moves it here.
    """

    micro_batch_tokens: int = Field(
        default=16384, ge=16, le=MAX_COUNT, description="padded tokens per forward pass"
    )
    logit_chunk_tokens: int = Field(
        default=LOGIT_CHUNK_TOKENS,
        ge=16,
        le=MAX_COUNT,
        description="positions whose full-vocabulary logits are alive at once when scoring and updating "
        "(memory; the numbers do not depend on it)",
    )


class RolloutSettings(_Strict):
    """Which users, how many dialogues, how they run, and what they are worth."""

    profiles: str = Field(
        default="en-train", description="a profile set name (``rlver profiles list``) or a file"
    )
    exclude_personas_of: str | None = Field(
        default=None,
        description=(
            "A profile set (e.g. ``sage``) whose personas are left out of the training profiles, word for "
            "word (``rlver profiles overlap``: 54 of the 100 SAGE test personas are among the 500 "
            "published training profiles). ``null`` (default): none, as the published run trained."
        ),
    )
    # Prompts (profiles) per step, as verl's `data.train_batch_size` counts them: a step runs
    # batch_size x n_per_profile dialogues (the published GRPO run: 32 x 4 = 128).
    batch_size: int = Field(
        default=32, ge=1, le=MAX_COUNT, description="profiles per step; dialogues = this x n_per_profile"
    )
    n_per_profile: int = Field(default=1, ge=1, le=MAX_COUNT, description="GRPO group size")
    rules: DialogueRules = Field(
        default=TRAINING,
        description=(
            "How a training dialogue runs and ends (docs/protocol.md): rlver's bounded training dialogue "
            "by default; ``rules: {preset: published_training}`` the published dynamics; keys beside "
            "``preset`` change single rules (``rules.max_assistant_turns: 2``)."
        ),
    )
    think: bool = Field(
        default=False, description="Think mode: the policy writes a <think> block before each reply."
    )
    think_context: Literal["full", "visible"] = Field(
        default="full",
        description=(
            "Think mode only. ``full``: later turns see earlier replies raw (one training sequence per "
            "dialogue). ``visible``: later turns see only their visible text, as the published think-mode"
            " rollout does; then every assistant turn is its own training sample (prompt = what the "
            "policy saw, response = its sampled ids) carrying the dialogue's reward."
        ),
    )
    agent_prompt: str = Field(
        default="coaching",
        min_length=1,
        description=(
            "The policy's system prompt: ``neutral``, ``coaching`` (rlver's default), ``published`` (the "
            "published training's friend-chat prompt, in our words; the four published presets) or the "
            "path of a UTF-8 text file used as it is (think mode adds nothing to it)."
        ),
    )
    temperature: float = Field(
        default=1.0,
        ge=0.0,
        description=(
            "0 samples greedily (the local sampler's argmax; the update then scores at temperature 1)"
        ),
    )
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="The policy's nucleus sampling.")
    max_new_tokens: int = Field(
        default=512, ge=1, le=MAX_COUNT, description="The most tokens one policy reply may have."
    )
    reward: RewardSpec = Field(
        default_factory=RewardSpec,
        description=(
            "What a dialogue is worth (``reward: {mode: final|delta|mixed, format_penalty, mixed_weight}``)."
        ),
    )
    simulator_concurrency: int = Field(
        default=64, ge=1, le=MAX_COUNT, description="Simulator calls in flight at once."
    )
    #: What samples the policy's replies (``rlver.train.backends``): ``hf``, the local sampler on the
    #: trained model itself; a registered engine with its own weights is synced after each update.
    backend: str = Field(default="hf", description="rollout backend (rlver.train.backends.BACKENDS)")
    #: The named backend's own knobs, read with its settings class (``hf``: ``compile_decode``); an
    #: unknown key is refused under this path. Declared after ``backend``, whose value it reads.
    backend_settings: SerializeAsAny[BackendSettings] = Field(
        default_factory=BackendSettings,
        validate_default=True,
        description="the rollout backend's own settings (its settings_class)",
    )
    max_failed_share: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description=(
            "A step whose share of failed dialogues is above this stops the run, naming the errors: the "
            "update would otherwise train on whichever dialogues happened to survive (an outage of the "
            "simulator, or a failure mode that hits long dialogues). 1.0 stops only when none finished."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _read_older_shapes(cls, data: Any) -> Any:
        # config.yaml of runs written before ``reward:`` and ``rules:`` nested (``--resume``): rlver.migrate
        return upgrade_rollout(data, TRAINING)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        from rlver.train.backends import BACKENDS  # imports no backend module

        return BACKENDS.check(value)

    @field_validator("backend_settings", mode="before")
    @classmethod
    def _backend_own_settings(cls, data: Any, info: ValidationInfo) -> Any:
        name = info.data.get("backend")
        if name is None:  # the name was refused; that error says so
            return data
        from rlver.train.backends import settings_for  # imports the named backend's module only

        return settings_for(name, data)

    @field_validator("agent_prompt")
    @classmethod
    def _prompt_name_or_file(cls, value: str) -> str:
        if value not in AGENT_PROMPT_NAMES:
            read_prompt_file(value)  # fails now, naming the file, rather than at the first dialogue
        return value

    def prompt_settings(self) -> dict[str, Any]:
        """``agent_prompt`` as EnvConfig fields: a built-in name, or a file's text as ``system_prompt``."""
        if self.agent_prompt in AGENT_PROMPT_NAMES:
            return {"agent_prompt": self.agent_prompt}
        return {"system_prompt": read_prompt_file(self.agent_prompt)}

    @property
    def profiles_per_step(self) -> int:
        return self.batch_size

    @property
    def dialogues_per_step(self) -> int:
        return self.batch_size * self.n_per_profile


class EvalSettings(_Strict):
    """Periodic evaluation on held-out profiles: one dialogue each, fixed seed.

    ``dialogue: benchmark`` (the default) runs the dialogues exactly as ``rlver eval`` does — the
    published Sentient Benchmark protocol of ``EnvConfig.evaluation()`` (start emotion 40, 10 replies
    counting the one to the opening line, the last one unappraised, the eval's default agent prompt),
    with the user ``rlver eval`` builds (``TrainConfig.eval_simulator``: SAGE's own text with an LLM
    user on the SAGE profiles) — so ``eval/score`` equals ``rlver eval`` of the checkpoint on the same
    profiles, seed and sampling. ``training`` runs them like the training dialogues (start emotion,
    turns, appraisal and simulator of the training run).
    ``rules`` changes single rules of either dialogue (``eval.rules.max_assistant_turns: 4``);
    in a loaded ``TrainConfig`` it holds the whole rules the evaluation runs with, so ``config.yaml``
    states them (see :func:`eval_env`).
    """

    profiles: str = Field(default="en-test", description="The held-out profile set (a name or a file).")
    limit: int | None = Field(default=None, ge=1, le=MAX_COUNT, description="use the first N profiles only")
    samples_per_profile: int = Field(
        default=1, ge=1, le=MAX_COUNT, description="dialogues per profile (less noise)"
    )
    every: int = Field(
        default=0, ge=0, le=MAX_COUNT, description="evaluate every k steps (0: only at the end)"
    )
    at_start: bool = Field(default=False, description="Also evaluate before the first step (the baseline).")
    temperature: float = Field(
        default=1.0, ge=0.0, description="The policy's sampling temperature during the evaluation."
    )
    dialogue: Literal["benchmark", "training"] = Field(
        default="benchmark",
        description="``benchmark``: as ``rlver eval`` runs it; ``training``: like the training dialogues.",
    )
    rules: DialogueRules | None = Field(
        default=None,
        description=(
            "``None``: the ``dialogue``'s rules; keys given change those rules (also ``{preset: ...}``)."
        ),
    )
    seed: Seed = Field(
        default=12345, description="The evaluation's seed, fixed so every evaluation sees the same dialogues."
    )

    @model_validator(mode="before")
    @classmethod
    def _read_older_shapes(cls, data: Any) -> Any:
        # flat ``max_assistant_turns``/``start_emotion`` of an older config.yaml, and its
        # ``protocol`` (now ``dialogue``): rlver.migrate
        return renamed(nest_flat_eval_rules(data), "protocol", "dialogue", where="eval.")


class WandbSettings(_Strict):
    """Weights & Biases logging (the ``[wandb]`` extra: ``pip install -e '.[wandb]'`` in the checkout), next to metrics.jsonl and TensorBoard.

    The API key comes from ``WANDB_API_KEY`` or ``wandb login``, never from this file; the run's config
    is sent redacted, like config.yaml.
    """

    enabled: bool = Field(default=False, description="Log to Weights & Biases.")
    project: str = Field(default="rlver", description="The W&B project.")
    entity: str | None = Field(default=None, description="The W&B entity (default: your own).")
    name: str | None = Field(default=None, description="default: the run folder's name")
    mode: Literal["online", "offline", "disabled"] | None = Field(
        default=None, description="default: $WANDB_MODE, else online"
    )


class RunSettings(_Strict):
    steps: int = Field(default=100, ge=1, le=MAX_COUNT, description="Training steps.")
    seed: Seed = Field(default=0, description="The run's seed (weights, sampling, data order).")
    checkpoint_every: int = Field(default=10, ge=0, le=MAX_COUNT, description="0: only at the end")
    keep_checkpoints: int = Field(
        default=2, ge=1, le=MAX_COUNT, description="How many of the latest checkpoints are kept."
    )
    tensorboard: bool = Field(default=True, description="Write TensorBoard events beside metrics.jsonl.")
    progress: bool = Field(
        default=True, description="Show progress (a bar on a terminal, plain lines elsewhere)."
    )
    wandb: WandbSettings = Field(
        default_factory=WandbSettings, description="Weights & Biases logging (off by default)."
    )
    #: The training dialogues go to the run folder's transcript.jsonl (``rlver inspect/audit/score/
    #: report`` read it); a long run of long think-mode dialogues may keep every k-th step only.
    transcript_every: int = Field(
        default=1,
        ge=0,
        le=MAX_COUNT,
        description="write every k-th step's dialogues to transcript.jsonl (0: never)",
    )
    #: A few (profile, reply, reward) rows to TensorBoard's TEXT tab and W&B, as TRL logs completions.
    reply_table_every: int = Field(
        default=10, ge=0, le=MAX_COUNT, description="log a table of sample replies every k steps (0: never)"
    )
    #: Before any weights load, ``rlver train`` predicts the update's peak memory from config.json and
    #: refuses (exit 2) a run that will not fit the device (``rlver.train.memory_guard``).
    memory_guard: bool = Field(default=True, description="refuse a run whose update will not fit the device")
    device_memory_gib: float | None = Field(
        default=None, gt=0.0, description="device memory the guard compares with (default: measured)"
    )


class TrainConfig(_Strict):
    """A whole training run. Every field's meaning: docs/config.md (printed from these models)."""

    model: ModelSettings = Field(
        default_factory=ModelSettings, description="The policy and how it is loaded."
    )
    algorithm: SerializeAsAny[AlgorithmSettings] = Field(
        default_factory=PPOSettings,
        description=(
            "the settings class of the algorithm named (``PPOSettings``, ``GRPOSettings``...: see "
            "``rlver.train.algorithms``), written out with its own fields"
        ),
    )
    update: UpdateSettings = Field(
        default_factory=UpdateSettings,
        description=(
            "how the update fits the device (micro-batches, logit chunks): memory and time, not the maths"
        ),
    )
    optim: OptimSettings = Field(
        default_factory=OptimSettings, description="The optimisers and their schedule."
    )
    rollout: RolloutSettings = Field(
        default_factory=RolloutSettings,
        description="Which users, how many dialogues per step, how they run and what they are worth.",
    )
    simulator: SimulatorSpec = Field(
        default_factory=lambda: SimulatorSpec(kind="offline"),
        description="The simulated user of the training dialogues.",
    )
    eval: EvalSettings = Field(
        default_factory=EvalSettings, description="Periodic evaluation on held-out profiles."
    )
    run: RunSettings = Field(default_factory=RunSettings, description="Steps, seed, checkpoints and logging.")

    @model_validator(mode="before")
    @classmethod
    def _read_older_shapes(cls, data: Any) -> Any:
        # ``algorithm.micro_batch_tokens``/``logit_chunk_tokens`` of older configs: rlver.migrate
        return upgrade_update_keys(data, UpdateSettings().model_dump())

    @field_validator("algorithm", mode="before")
    @classmethod
    def _algorithm_settings(cls, data: Any) -> Any:
        return settings_for(data)

    @model_validator(mode="after")
    def _eval_rules_in_full(self) -> TrainConfig:
        """``eval.rules`` as given (some keys) becomes the whole rules the evaluation runs, so the
        config.yaml written from this config reloads to the same dialogue whatever the protocol."""
        if self.eval.rules is not None:
            self.eval.rules = eval_env(self.env_config(), self.eval, self.simulator.kind).rules
        return self

    @model_validator(mode="after")
    def _what_the_algorithm_needs(self) -> TrainConfig:
        """What the algorithm needs of the rollouts: groups of ``min_group_size``, a reward mode it can use."""
        algo = ALGORITHMS.get(self.algorithm.name)
        if self.rollout.n_per_profile < algo.min_group_size:
            raise ValueError(
                f"algorithm.name={algo.name} needs rollout.n_per_profile >= {algo.min_group_size} "
                f"(got {self.rollout.n_per_profile}): a group of one has no baseline to compare with"
            )
        mode = self.rollout.reward.mode
        if algo.reward_modes is not None and mode not in algo.reward_modes:
            raise ValueError(
                f"algorithm.name={algo.name} credits each assistant turn with its own reward: "
                f"rollout.reward.mode must be one of {', '.join(sorted(algo.reward_modes))} (got {mode}, "
                "which puts the whole reward on the last turn)"
            )
        return self

    @model_validator(mode="after")
    def _loss_scale_factor(self) -> TrainConfig:
        """Dr. GRPO's constant (``seq-mean-token-sum-norm``) left unset is ``model.max_length``, the
        most tokens a sample holds: written into the config, so both engines and a resumed run divide
        by one number (verl would otherwise divide by each batch's padded width)."""
        a = self.algorithm
        if a.loss_agg_mode == "seq-mean-token-sum-norm" and a.loss_scale_factor is None:
            a.loss_scale_factor = self.model.max_length
        return self

    @model_validator(mode="after")
    def _counts_the_run_can_use(self) -> TrainConfig:
        """Counts that are each in range but cannot be used together: refused before any model loads
        rather than silently clamped (a mini-batch of no profile became one) or never reached."""
        r, m = self.rollout, self.model
        if r.max_new_tokens >= m.max_length:
            raise ValueError(
                f"rollout.max_new_tokens={r.max_new_tokens} must be below model.max_length={m.max_length}: "
                "one reply would fill the whole dialogue's tokens"
            )
        if self.algorithm.minibatches > r.batch_size:
            raise ValueError(
                f"algorithm.minibatches={self.algorithm.minibatches} must be at most rollout.batch_size="
                f"{r.batch_size}: a mini-batch holds at least one profile's dialogues"
            )
        check_dialogues(
            r.dialogues_per_step,
            f"rollout.batch_size {r.batch_size} x rollout.n_per_profile {r.n_per_profile}",
            "a step holds them all at once; lower either",
        )
        if self.optim.warmup_steps > self.run.steps:
            raise ValueError(
                f"optim.warmup_steps={self.optim.warmup_steps} must be at most run.steps={self.run.steps}: "
                "the learning rate would never reach optim.actor_lr"
            )
        return self

    def minibatch_prompts(self) -> int:
        """Prompts (profiles) per mini-batch, the one definition both engines use: the step's
        profiles divided by ``algorithm.minibatches``. An optimiser step trains on that many prompts ×
        ``n_per_profile`` *samples* (verl multiplies its ``ppo_mini_batch_size`` by ``rollout.n``:
        ``ray_trainer.py:1352-1353`` in verl 0.9.1, ``fsdp_workers.py:119-120`` in the published code).
        With one sample per dialogue that is ``minibatches`` steps per epoch; with one per assistant
        turn (think, ``think_context: visible``) about turns × ``minibatches``, as the published think
        run took (docs/protocol.md, "updates per step").
        """
        return max(1, self.rollout.profiles_per_step // self.algorithm.minibatches)

    def minibatch_samples(self) -> int:
        """Samples per optimiser step (see :meth:`minibatch_prompts`)."""
        return self.minibatch_prompts() * self.rollout.n_per_profile

    # -- the one mapping from this config to the environment, used by both engines -------------------
    def env_config(self, *, evaluation: bool = False) -> EnvConfig:
        """The dialogue rules of training dialogues, or (``evaluation``) of the held-out evaluation.

        The local trainer (:meth:`rollout_config`) and verl's launcher (training and validation rows)
        both read this, so the two engines cannot run different dialogues from one config.
        """
        r = self.rollout
        training = EnvConfig(
            rules=r.rules, think=r.think, think_context=r.think_context, **r.prompt_settings()
        )
        return eval_env(training, self.eval, self.simulator.kind) if evaluation else training

    def eval_simulator(self) -> SimulatorSpec:
        """The simulated user of the in-training evaluation.

        ``benchmark``: the user ``rlver eval --profiles <eval.profiles>`` builds with this run's
        simulator model, sampling and cache: an LLM user asks SAGE's own questions on the SAGE profiles
        (``sage-published``) and rlver's default protocol elsewhere, whatever protocol training used;
        so ``eval/score`` is what ``rlver eval`` of the same checkpoint scores. ``training``: the
        training simulator itself.
        """
        spec = self.simulator
        if self.eval.dialogue != "benchmark" or not asks_prompt_set(spec.kind):
            return spec
        published = asks_published_text(self.eval.profiles, True)
        protocol = LLMUserPrompts.model_validate({"name": BENCHMARK_TEXT} if published else {})
        return spec.model_copy(update={"prompts": protocol})  # {} above: the default protocol

    def rollout_config(self, *, evaluation: bool = False) -> RolloutConfig:
        """The local runner's settings: :meth:`env_config`, the group size and the reward spec."""
        return RolloutConfig(
            n_per_profile=self.eval.samples_per_profile if evaluation else self.rollout.n_per_profile,
            simulator_concurrency=self.rollout.simulator_concurrency,
            env=self.env_config(evaluation=evaluation),
            reward=self.rollout.reward,
        )


def eval_env(training: EnvConfig, e: EvalSettings, simulator_kind: str | None = None) -> EnvConfig:
    """The dialogue settings of in-training evaluation (see ``EvalSettings``).

    ``benchmark``: ``EnvConfig.evaluation()`` — the very defaults ``rlver eval`` runs with, agent prompt
    included (SAGE's own with an LLM user on the SAGE profiles, :func:`rlver.rules.asks_published_text`),
    so the two scores are comparable — keeping only the training's think mode (a think-mode policy is
    evaluated thinking, and, as in ``rlver eval``, later turns see only its visible text).
    """
    published = asks_published_text(e.profiles, asks_prompt_set(simulator_kind))
    prompt = {"agent_prompt": BENCHMARK_TEXT} if published else {}
    base = EnvConfig.evaluation(think=training.think, **prompt) if e.dialogue == "benchmark" else training
    if e.rules is None:
        return base
    # only the rules the block states change the protocol's (a whole block, e.g. config.yaml's, all)
    changed = {k: getattr(e.rules, k) for k in e.rules.model_fields_set}
    return base.model_copy(update={"rules": base.rules.but(**changed)})


PRESETS_PACKAGE = "rlver.train.presets"


def preset_names() -> list[str]:
    folder = resources.files(PRESETS_PACKAGE)
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def resolve_config_path(name_or_path: str) -> Path:
    """A config file path, or the bundled preset of that name (``ppo-think`` → ``presets/ppo-think.yaml``)."""
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
    path = resolve_config_path(name_or_path) if name_or_path else None
    return load_config(TrainConfig, path, overrides)
