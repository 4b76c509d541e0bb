"""How a training config differs from the published run it mirrors, as a run's manifest records it.

The four published presets (``ppo-think``, ``ppo-nothink``, ``grpo-think``, ``grpo-nothink``) hold the
published run's settings, each with its file:line in docs/protocol.md. A training run is compared,
setting by setting, with the preset of its algorithm and think mode (``ppo`` for an algorithm that was
not published), and the settings that differ go into the manifest's ``published_run`` record, which
``rlver explain`` prints (row ``training-settings``): the model, the batch size, the steps,
``max_length``, the group size per algorithm (published GRPO 4, PPO 1), the optimiser, the reward;
and what the run does with a failed dialogue and its group (``failed_dialogue``,
``rlver.rollout.failed_groups``; row ``retries``).

Settings that other rows of ``rlver explain`` compare from the manifest's own records (the dialogue's
rules, the simulator, the agent prompt, think mode, the profiles, the held-out evaluation) and settings
that do not change what is trained are not compared here: :data:`NAMED_ELSEWHERE` and
:data:`NOT_SCORED` name each (``tests/eval/test_explain.py`` walks every field of a training config
against them).
"""

from __future__ import annotations

from typing import Any

from rlver.rollout import failed_groups
from rlver.train.algorithms import ALGORITHMS
from rlver.train.config import TrainConfig, load_train_config

#: The algorithms a published run used; any other is compared with the PPO preset.
PUBLISHED_ALGORITHMS = ("ppo", "grpo")

#: Settings that do not change what is trained, each with the reason (a dotted path, or a prefix
#: ending in ``.``): not compared, and not named by ``rlver explain``.
NOT_SCORED: dict[str, str] = {
    "model.tiny_seed": "read only for model.path tiny (the path is compared)",
    "model.tiny_size": "read only for model.path tiny (the path is compared)",
    "model.device": "where the model runs",
    "model.gradient_checkpointing": "memory, not the maths",
    "model.generation_batch_size": "sampling is seeded per dialogue, never per batch",
    "model.lora.r": "read only with model.lora.enabled, which is compared (then it is compared too)",
    "model.lora.alpha": "read only with model.lora.enabled, which is compared (then it is compared too)",
    "model.lora.dropout": "read only with model.lora.enabled, which is compared (then it is compared too)",
    "model.lora.target_modules": "read only with model.lora.enabled, which is compared (then it is compared too)",
    "update.": "how the update fits the device's memory, not the maths",
    "optim.max_nonfinite_in_a_row": "when a run whose gradients broke stops",
    "rollout.simulator_concurrency": "simulator calls in flight; each dialogue's calls run in order",
    "rollout.backend": "which engine samples the replies (seeded the same way)",
    "rollout.backend_settings.": "how the rollout engine runs",
    "rollout.max_failed_share": "when a run whose dialogues fail stops",
    "run.seed": "which random draws a run makes",
    "run.checkpoint_every": "when checkpoints are written",
    "run.keep_checkpoints": "how many checkpoints are kept",
    "run.tensorboard": "where metrics are logged",
    "run.progress": "what the terminal shows",
    "run.wandb.": "where metrics are logged",
    "run.transcript_every": "which steps' dialogues are written down",
    "run.reply_table_every": "which sample replies are logged",
    "run.memory_guard": "a check before the run, not the run",
    "run.device_memory_gib": "a check before the run, not the run",
}
#: Settings ``rlver explain`` compares from the manifest's other records, by its row: not compared here.
NAMED_ELSEWHERE: dict[str, str] = {
    "rollout.profiles": "profiles",
    "rollout.rules.": "start-emotion, turn-limit, end-rules",
    "rollout.think": "the preset compared with (think or not)",
    "rollout.think_context": "think-context",
    "rollout.agent_prompt": "agent-prompt",
    "simulator.": "simulator, simulator-options, simulator-sampling, user-behaviour, language, retries",
    "eval.": "held-out",
}


def preset_for(cfg: TrainConfig) -> str:
    """The published preset a run is compared with: its algorithm (``ppo`` for one never published)
    and its think mode."""
    algorithm = cfg.algorithm.name if cfg.algorithm.name in PUBLISHED_ALGORITHMS else "ppo"
    return f"{algorithm}-{'think' if cfg.rollout.think else 'nothink'}"


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_leaves(item, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value}


def listed(path: str, table: dict[str, str]) -> str | None:
    """``path``'s entry in ``table`` (by its path or a prefix ending in ``.``), or None."""
    for key, why in table.items():
        if path == key or (key.endswith(".") and path.startswith(key)):
            return why
    return None


def published_run(cfg: TrainConfig) -> dict[str, Any]:
    """``{"preset": name, "differences": {path: {"run": value, "published": value}}}``: every compared
    setting of ``cfg`` whose value is not the published preset's (a key only one side has is compared
    with ``None``; LoRA's shape only when LoRA is on)."""
    name = preset_for(cfg)
    run = _leaves(cfg.model_dump(mode="json"))
    published = _leaves(load_train_config(name).model_dump(mode="json"))
    lora = cfg.model.lora.enabled
    differences = {}
    for path in sorted(set(run) | set(published)):
        if listed(path, NAMED_ELSEWHERE) or (
            listed(path, NOT_SCORED) and not (lora and path.startswith("model.lora."))
        ):
            continue
        if run.get(path) != published.get(path):
            differences[path] = {"run": run.get(path), "published": published.get(path)}
    # the published user never fails (it retries each call): what this run does when one does
    failed = failed_groups.rule(ALGORITHMS.get(cfg.algorithm.name).min_group_size)
    return {"preset": name, "differences": differences, "failed_dialogue": failed}
