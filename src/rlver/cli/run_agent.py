"""A training run given as the agent (``rlver eval --agent-local RUN``, ``rlver chat --local RUN``):
the think mode and agent prompt its held-out agent was given, read from the run's manifest.

A policy trained with ``rollout.think: true`` was trained, and evaluated during training, writing a
``<think>`` block under rlver's think instruction. Evaluated without think mode it meets another
system prompt and another reply layout, and scores something training never logged (the published
``grpo-think`` preset: 44.0 against a logged 52.17). So the run's own settings are the defaults here;
a flag that says otherwise wins, and one warning names the contradiction.

The manifest (line 1 of the run's ``transcript.jsonl``, ``held_out``) says what the held-out agent
got; a run without one (a run stopped before its first step) is read from its ``config.yaml``, which
the manifest was written from.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: How far above a checkpoint's folder a run folder may be (``RUN/checkpoints/step_N/policy``).
_LEVELS = 4


@dataclass(frozen=True)
class RunAgent:
    """What a training run's held-out agent was given."""

    folder: Path
    think: bool
    #: ``{"agent_prompt": NAME}`` or ``{"system_prompt": TEXT}`` (a prompt file's text)
    prompt: dict[str, Any]
    #: the held-out profile set and simulator kind the prompt was chosen for
    profiles: str | None
    simulator: str | None

    def prompt_name(self) -> str:
        return str(self.prompt.get("agent_prompt", "a prompt file"))


def run_folder(path: Path) -> Path | None:
    """The training run ``path`` is in (a folder with ``checkpoints/`` and ``config.yaml``), or None."""
    folder = path.expanduser()
    if not folder.is_dir():  # a hub id or a model name: never the folder it is typed in
        return None
    folder = folder.resolve()
    for _ in range(_LEVELS):
        if (folder / "checkpoints").is_dir() and (folder / "config.yaml").is_file():
            return folder
        folder = folder.parent
    return None


def run_agent(path: Path) -> RunAgent | None:
    """The held-out agent's settings of the training run ``path`` is in; None for any other folder."""
    folder = run_folder(path)
    if folder is None:
        return None
    held = _held_out(folder)
    if held.get("think") is None or held.get("agent_prompt") in (None, "custom"):
        return _from_config(folder)
    return RunAgent(
        folder,
        bool(held["think"]),
        {"agent_prompt": held["agent_prompt"]},
        held.get("profiles"),
        held.get("simulator"),
    )


def _held_out(folder: Path) -> dict[str, Any]:
    """The manifest's ``held_out`` record (``{}`` without a readable training manifest)."""
    from rlver.errors import InputError
    from rlver.manifest import RunManifest

    transcript = folder / "transcript.jsonl"
    if not transcript.is_file():
        return {}
    try:
        manifest = RunManifest.read(transcript)
    except InputError:
        return {}
    return dict(manifest.held_out or {}) if manifest.kind == "train" else {}


def _from_config(folder: Path) -> RunAgent:
    from rlver.train.config import load_train_config

    cfg = load_train_config(str(folder / "config.yaml"))
    env = cfg.env_config(evaluation=True)
    prompt = {"system_prompt": env.system_prompt} if env.system_prompt else {"agent_prompt": env.agent_prompt}
    return RunAgent(folder, env.think, prompt, cfg.eval.profiles, cfg.eval_simulator().kind)


def env_layer(run: RunAgent, profiles: str, simulator_kind: str | None) -> dict[str, Any]:
    """The ``env`` keys a run gives an evaluation of its policy: its think mode always; its agent
    prompt when the evaluation runs where its held-out evaluation ran (the same profiles and simulator
    kind), where that prompt is what ``rlver eval`` would choose for the run's settings."""
    env: dict[str, Any] = {"think": run.think}
    if profiles == run.profiles and simulator_kind == run.simulator:
        env.update(run.prompt)
    return env


def warn_contradictions(run: RunAgent, env: Any, layer: dict[str, Any], flag: str) -> None:
    """One warning naming each setting of the evaluation (``env``, an EnvConfig) that contradicts the
    run's (``layer``, from :func:`env_layer`): the score is then not the run's logged ``eval/score``."""
    said = []
    if env.think != run.think:
        said.append(f"think mode {'on' if env.think else 'off'} (the run's: {'on' if run.think else 'off'})")
    if "agent_prompt" in layer and (
        env.system_prompt is not None or env.agent_prompt != layer["agent_prompt"]
    ):
        given = "a system prompt of its own" if env.system_prompt is not None else env.agent_prompt
        said.append(f"agent prompt {given} (the run's: {layer['agent_prompt']})")
    if "system_prompt" in layer and env.system_prompt != layer["system_prompt"]:
        said.append("another agent prompt than the run's prompt file")
    if said:
        warnings.warn(
            f"{flag} {run.folder}: evaluating with {'; '.join(said)}, as asked; the score is not "
            "comparable with the run's logged eval/score",
            stacklevel=2,
        )


def evaluated_as_run(run: RunAgent, cfg: Any, reload: Callable[[Any], Any], flag: str) -> Any:
    """``cfg`` (an EvalConfig) again with the run's settings beneath every layer the user gave:
    ``reload(layer)`` loads the config with ``layer`` first. Warns of each contradiction."""
    from rlver.config import ConfigLayer

    layer = env_layer(run, cfg.profiles, cfg.simulator.kind)
    evaluated = reload(ConfigLayer(f"the training run {run.folder}", {"env": layer}))
    warn_contradictions(run, evaluated.env, layer, flag)
    return evaluated


def run_training_env(path: Path) -> dict[str, Any]:
    """The dialogue a training run's held-out evaluation ran on the training protocol (its
    ``config.yaml``: ``eval.dialogue: training`` with that run's turns, start and prompt), as
    ``env`` keys (``rlver eval --dialogue training --agent-local RUN``); ``{}`` when ``path`` is not
    in a training run folder."""
    folder = run_folder(path)
    if folder is None:
        return {}
    from rlver.train.config import load_train_config

    cfg = load_train_config(str(folder / "config.yaml"), ["eval.dialogue=training"])
    return cfg.env_config(evaluation=True).model_dump(mode="json")


def local_think(path: Path | None, think: bool | None) -> bool:
    """``rlver chat --play-user --local PATH``'s think mode: ``--think/--no-think`` when given (a
    training run's contrary mode named in a warning), else the run's own, else off."""
    run = run_agent(path) if path is not None else None
    if run is None:
        return bool(think)
    if think is not None and think != run.think:
        state = "on" if think else "off"
        warnings.warn(
            f"--local {run.folder}: think mode {state} as asked; the run was trained and evaluated "
            f"with it {'on' if run.think else 'off'}",
            stacklevel=2,
        )
        return think
    return run.think
