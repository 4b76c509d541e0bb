"""`rlver calibrate` (registered on the root app by :func:`register`).

Measures how closely a simulator agrees with the published SAGE simulator on released result files
(see :mod:`rlver.eval.calibrate`). Exit code 0: done (with ``--simulator replay``: every trajectory
reproduced); 1: replay found a trajectory it could not reproduce; 2: bad input.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from rlver.errors import ConfigError, RlverError


class ReplayMismatch(RlverError):
    """``--simulator replay`` did not reproduce every recorded trajectory (exit code 1)."""

    exit_code = 1


def calibrate_command(
    files: list[Path] = typer.Argument(..., help="Released SAGE result files (*_result.jsonl)."),
    simulator: str = typer.Option(
        "offline", "--simulator", help="replay (oracle: the recorded judgements), offline, or llm."
    ),
    sim_base_url: str | None = typer.Option(
        None, "--sim-base-url", help="OpenAI-compatible endpoint of the simulator."
    ),
    sim_model: str | None = typer.Option(None, "--sim-model", help="Simulator model id (with llm)."),
    sim_key_env: str | None = typer.Option(
        None, "--sim-key-env", help="Environment variable holding the simulator's key."
    ),
    sim_temperature: float | None = typer.Option(
        None, "--sim-temperature", min=0.0, help="Simulator temperature (llm; default 0.7)."
    ),
    behaviour: str | None = typer.Option(None, "--behaviour", help="User behaviour mode for every turn."),
    difficulty: str | None = typer.Option(None, "--difficulty", help="easy, normal or hard for every turn."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Simulator calls in flight."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N dialogues of each file."),
    seed: int = typer.Option(0, "--seed", help="Base seed (a per-turn seed is derived from it)."),
    out: Path = typer.Option(Path("calibration"), "--out", help="Output folder (resumed when it exists)."),
) -> None:
    """Teacher-forced agreement of a simulator with the recorded SAGE appraisals (and, with
    ``--simulator replay``, a free run of rlver's environment that must reproduce every trajectory)."""
    from rlver.eval.calibrate import FileData, calibrate, replay_simulator_for
    from rlver.eval.calibrate_report import print_table
    from rlver.simulator.base import UserSimulator

    if simulator not in ("replay", "offline", "llm"):
        raise ConfigError(f"--simulator {simulator!r}: choose replay, offline or llm")
    paths = [str(f) for f in files]
    factory: Callable[[FileData], UserSimulator]
    if simulator == "replay":
        info: dict[str, Any] = {"name": "replay"}
        factory = replay_simulator_for
    else:
        from rlver.simulator.factory import SimulatorSpec, build_simulator

        spec: dict[str, Any] = {"kind": simulator, "seed": seed}
        if behaviour is not None:
            spec["behaviour"] = behaviour
        if difficulty is not None:
            spec["difficulty"] = difficulty
        if simulator == "llm":
            if not sim_model:
                raise ConfigError("--simulator llm needs --sim-model (and usually --sim-base-url)")
            model: dict[str, Any] = {"kind": "openai", "model": sim_model, "base_url": sim_base_url}
            if sim_key_env is not None:
                model["api_key_env"] = sim_key_env or None
            spec["model"] = model
            if sim_temperature is not None:
                spec["sampling"] = {"temperature": sim_temperature}
        elif sim_base_url or sim_model or sim_key_env:
            raise ConfigError("--sim-base-url/--sim-model/--sim-key-env need --simulator llm")
        try:
            parsed = SimulatorSpec.model_validate(spec)
        except ValueError as exc:
            raise ConfigError(f"simulator options: {exc}") from None
        built = build_simulator(parsed)
        info = built.describe()
        # One simulator object serves every file: it holds the model client and its concurrency.

        def factory(_fd: FileData) -> UserSimulator:
            return built

    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task = progress.add_task("teacher-forced turns", total=None)

        def on_turn(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        summary = asyncio.run(
            calibrate(
                paths,
                factory,
                info,
                out,
                replay=simulator == "replay",
                concurrency=concurrency,
                seed=seed,
                limit=limit,
                on_turn=on_turn,
                durable_each=simulator == "llm",
            )
        )
    print_table(summary, simulator)
    typer.echo(f"wrote {out / 'predictions.jsonl'}, {out / 'calibration.json'}, {out / 'calibration.html'}")
    if simulator == "replay":
        bad = [(r["path"], m) for r in summary["files"] for m in r.get("trajectory_mismatches", [])]
        for path, m in bad[:20]:
            typer.echo(f"{path}: {m['dialogue_id']}: {'; '.join(m['problems'])}", err=True)
        if bad:
            raise ReplayMismatch(f"{len(bad)} recorded trajectorie(s) not reproduced (see calibration.json)")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("calibrate")(calibrate_command)
