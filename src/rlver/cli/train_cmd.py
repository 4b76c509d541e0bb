"""``rlver train`` and ``rlver export`` (registered on the root app by :func:`register`).

torch/transformers are imported inside the commands so ``rlver --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rlver.cli import checks, simulator_flags
from rlver.errors import ConfigError, RlverError
from rlver.extras import require_extra
from rlver.heartbeat import activity, heartbeat, step_reporter
from rlver.interrupt import Interrupted
from rlver.migrate import deprecated_flag

if TYPE_CHECKING:  # imported where used: torch/pydantic stay out of `rlver --help`
    from rlver.train.config import TrainConfig


def train_command(
    config: str | None = typer.Option(
        None,
        "--config",
        "-c",
        help="A config YAML file or a preset: ppo-think, ppo-nothink, grpo-think, grpo-nothink, tiny-offline, "
        "smollm2-offline.",
    ),
    set_: list[str] = typer.Option(
        [], "--set", help="Override a key, e.g. --set optim.actor_lr=2e-6 (repeatable)."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Run folder: checkpoints, metrics.jsonl, transcript.jsonl, tensorboard/ [default: runs/train].",
        parser=checks.output_path("--out"),
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue from the latest checkpoint in --out (with its config.yaml when --config is not "
        "given); with no checkpoint there, start a new run (and say so), as rlver eval --resume does.",
    ),
    loop: str = typer.Option(
        "local", "--trainer", help="local (this machine) or verl (the multi-node path)."
    ),
    steps: int | None = checks.steps_option("Shortcut for --set run.steps=N."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="--trainer verl: write the dataset, agent-loop YAML and command, don't run."
    ),
    sim_base_url: str | None = simulator_flags.SIM_BASE_URL,
    sim_model: str | None = simulator_flags.TRAIN_SIM_MODEL,
    sim_key_env: str | None = simulator_flags.SIM_KEY_ENV,
    old_engine: str | None = typer.Option(None, "--engine", hidden=True),
) -> None:
    """Train a policy with PPO or GRPO against simulated users."""
    if old_engine is not None:  # the older name of --trainer (rlver.migrate): one deprecation line
        deprecated_flag("--engine")
        loop = old_engine
    require_extra("train", "rlver train")
    sim = simulator_flags.simulator_overrides(model=sim_model, base_url=sim_base_url, key_env=sim_key_env)
    overrides = sim + list(set_) + ([f"run.steps={steps}"] if steps else [])
    if loop == "verl":
        if importlib.util.find_spec("rlver.integrations.verl.launch") is None:
            raise RlverError("the verl integration is missing from this install")
        from rlver.integrations.verl import launch

        if out is not None:
            overrides.append(f"verl.out_dir={out}")
        code = launch.main(config, overrides, dry_run=dry_run)
        raise typer.Exit(code)
    if dry_run:
        raise ConfigError("--dry-run applies to --trainer verl only")
    out = out if out is not None else Path("runs/train")
    if loop != "local":
        raise ConfigError(f"--trainer {loop!r}: choose local or verl")

    cfg = checked_config(config, overrides, out, resume=resume)
    from rlver.train.checkpoint import latest_checkpoint  # torch: every value is checked by now

    fresh = resume and latest_checkpoint(out / "checkpoints") is None  # nothing to resume: a new run
    resume = resume and not fresh
    preflight(cfg, out, resume=resume)
    if fresh:
        checks.nothing_to_resume(out)
    from rlver.train.trainer import Trainer  # torch: imported once the cheap checks have passed

    existed = out.exists()
    trainer = None
    started = time.perf_counter()
    # A log (stdout not a terminal) sees no progress bar until it is done: plain lines instead.
    plain = not sys.stdout.isatty()
    try:
        with heartbeat(typer.echo, started) if plain else contextlib.nullcontext():
            activity.set_phase("loading the model")
            trainer = Trainer(cfg, out, resume=resume)
            typer.echo(
                f"training {cfg.algorithm.name} from step {trainer.step} to {cfg.run.steps}; run folder {out}"
            )
            report = step_reporter(
                typer.echo,
                cfg.run.steps,
                1,
                time.perf_counter(),  # the pace of steps, not of loading the model
                min_gap_s=30,
                first_step=trainer.step,
                with_eta=True,
            )
            trainer.train(on_step=report if plain else None)
    except KeyboardInterrupt:
        raise Interrupted(_interrupted_message(out, existed, trainer)) from None
    except BaseException:
        if _drop_if_untrained(out, existed):
            typer.echo(f"removed the run folder {out}: nothing was trained", err=True)
        raise
    last = trainer.eval_history[-1] if trainer.eval_history else None
    if last is not None:
        from rlver.rules import protocol_label

        label = protocol_label(cfg.env_config(evaluation=True).rules, cfg.eval.dialogue)
        score = "none: no dialogue finished" if last["score"] is None else f"{last['score']:.1f}"
        typer.echo(f"held-out score at step {last['step']}: {score} ({label})")
    typer.echo(f"checkpoints: {out / 'checkpoints'}   metrics: {out / 'metrics.jsonl'}")
    if cfg.run.transcript_every:
        typer.echo(f"dialogues: {out / 'transcript.jsonl'} (rlver inspect {out}; rlver report {out})")


def checked_config(config: str | None, overrides: list[str], out: Path, *, resume: bool) -> TrainConfig:
    """The run's config (``--config``, or with ``--resume`` alone the run folder's ``config.yaml``)
    with every value checked, before torch is imported: TrainConfig and the settings classes it reads
    are torch-free, so a bad ``--set`` is refused in seconds, not after the minute torch takes."""
    from rlver.train.config import load_train_config

    check_run_folder(out)
    saved = out / "config.yaml"
    if resume and config is None:
        if not saved.exists():
            raise ConfigError(
                f"--resume: nothing to resume in {out} (no {saved.name}) and no --config to start a new "
                "run from; give --config (a YAML file or a preset such as tiny-offline)"
            )
        cfg = load_train_config(str(saved), overrides)
    elif config is None:
        raise ConfigError("--config is required (a YAML file or a preset such as tiny-offline)")
    else:
        cfg = load_train_config(config, overrides)
    check_settings(cfg, out)
    return cfg


def check_settings(cfg: TrainConfig, out: Path) -> None:
    """The checks of the run's settings that the config model cannot make alone (the run folder, the
    profile sets, the model's folder), all before torch is imported: a bad value costs seconds.

    Each failure is a one-line ConfigError/InputError (exit 2) naming the flag, file or setting.
    """
    from rlver.llm.factory import check_model_source
    from rlver.profiles.sets import load_profile_set
    from rlver.simulator.factory import refuse_unfit_profiles

    check_run_folder(out)
    for setting, name in (("rollout.profiles", cfg.rollout.profiles), ("eval.profiles", cfg.eval.profiles)):
        if not load_profile_set(name):
            raise ConfigError(f"{setting}={name!r}: no profiles")
    # each user plays its own set: a published prompt set on profiles not in the published format
    # would fail every dialogue (the held-out ones only at the end of the run)
    held_out = load_profile_set(cfg.eval.profiles)[: cfg.eval.limit or None]
    refuse_unfit_profiles(
        cfg.simulator, load_profile_set(cfg.rollout.profiles), f"rollout.profiles={cfg.rollout.profiles}"
    )
    refuse_unfit_profiles(cfg.eval_simulator(), held_out, f"eval.profiles={cfg.eval.profiles}")
    check_model_source(cfg.model.path, "model.path")


def preflight(cfg: TrainConfig, out: Path, *, resume: bool) -> None:
    """What needs the run folder's checkpoints or the device but no model, done before one is loaded
    (which takes minutes for a 7B model): a new run into a folder with checkpoints, and the update's
    memory. After :func:`check_settings`; may import torch (the device is asked).
    """
    from rlver.train.checkpoint import latest_checkpoint
    from rlver.train.memory_guard import check_update_fits

    if not resume and out.is_dir() and latest_checkpoint(out / "checkpoints") is not None:
        raise ConfigError(
            f"--out {out} already holds a run's checkpoints: add --resume, or use another --out"
        )
    # the update's memory, from config.json alone: a run that cannot hold it stops here, not after
    # minutes of loading and a whole rollout (docs/training.md, "Memory of an update")
    check_update_fits(cfg)


def check_run_folder(out: Path) -> None:
    """``--out`` may be a new folder or a training run's: not a file, not an ``rlver eval`` folder."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: a file is there; the run folder must be a new or existing folder")
    checks.refuse_other_run(out, "train")


def _drop_if_untrained(out: Path, existed: bool) -> bool:
    """Remove a run folder this command created when it failed before anything worth keeping.

    A failed start (bad simulator endpoint, a config error found late) used to leave a folder with
    only the built base model and config.yaml: nothing to resume, and the next try with the same
    --out then looks like a second run. Kept when it has a checkpoint or logged steps.
    """
    import shutil

    from rlver.train.checkpoint import latest_checkpoint

    if existed or not out.is_dir():
        return False
    metrics = out / "metrics.jsonl"
    if latest_checkpoint(out / "checkpoints") is not None or (metrics.exists() and metrics.stat().st_size):
        return False
    shutil.rmtree(out, ignore_errors=True)
    return True


def _interrupted_message(out: Path, existed: bool, trainer: object | None) -> str:
    """What a Ctrl-C kept: the step in flight abandoned or finished, the checkpoint, the resume command."""
    import shlex

    from rlver.train.checkpoint import latest_checkpoint

    if _drop_if_untrained(out, existed):
        return f"interrupted before the first step finished: nothing was saved (removed {out})"
    ckpt = latest_checkpoint(out / "checkpoints")
    step = getattr(trainer, "step", None)
    at = f" at step {step}" if step is not None else ""
    if ckpt is None:
        return (
            f"interrupted{at}: no checkpoint was written (metrics so far: {out / 'metrics.jsonl'}); "
            f"start again with the same command (use a new --out, or delete {out})"
        )
    # the trainer's note says what became of the step in flight and what it saved
    note = getattr(trainer, "interrupt_note", "")
    kept = f": {note}" if note else f"{at}: the last checkpoint is {ckpt}"
    # --resume reads the run's config.yaml, so the command needs nothing else
    return f"interrupted{kept}; continue with: rlver train --resume --out {shlex.quote(str(out))}"


def export_command(
    checkpoint: Path = typer.Argument(
        ..., help="A checkpoint folder or a run folder (its latest checkpoint)."
    ),
    out_dir: Path = typer.Argument(
        ..., help="Where to write the Hugging Face model folder.", parser=checks.output_path("OUT_DIR")
    ),
    dtype: str | None = typer.Option(
        None, "--dtype", help="float32, bfloat16 or float16 (default: the run's model.dtype)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Write into a non-empty folder that is not an earlier export."
    ),
) -> None:
    """Export a checkpoint as a plain Hugging Face model folder (LoRA merged)."""
    require_extra("train", "rlver export")
    if dtype not in (None, "float32", "bfloat16", "float16"):
        raise ConfigError(f"--dtype {dtype!r}: choose float32, bfloat16 or float16")
    from rlver.train.export import export_checkpoint

    path = export_checkpoint(checkpoint, out_dir, dtype=dtype, force=force)
    typer.echo(f"exported to {path}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("train")(train_command)
    app.command("export")(export_command)
