"""`rlver calibrate` (registered on the root app by :func:`register`).

Measures how closely a simulator agrees with the published SAGE simulator on released result files
(see :mod:`rlver.fidelity.calibrate`). Exit code 0: done (with ``--simulator replay``: every trajectory
reproduced); 1: replay found a trajectory it could not reproduce; 2: bad input.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rlver.cli import checks
from rlver.cli import simulator_flags as sim_flags
from rlver.errors import ConfigError, InputError, Problem, RlverError
from rlver.simulator.factory import KINDS, build_simulator, simulator_kind
from rlver.simulator.llm.protocols.sage import SageProtocol

#: ``--sim-option`` names: the sage prompt options (spec keys of the same names).
PROMPT_OPTIONS = SageProtocol.option_names()

if TYPE_CHECKING:  # rlver.fidelity.calibrate loads numpy: imported where used, so `rlver --help` stays fast
    from rlver.fidelity.released import FileData
    from rlver.simulator.base import UserSimulator


class ReplayMismatch(RlverError):
    """``--simulator replay`` did not reproduce every recorded trajectory (exit code 1)."""

    exit_code = 1


def calibrate_command(
    files: list[Path] = typer.Argument(
        ..., metavar="FILE", help="Released SAGE result files (*_result.jsonl)."
    ),
    simulator: str | None = sim_flags.simulator_option(from_spec=False),
    sim_base_url: str | None = sim_flags.SIM_BASE_URL,
    sim_model: str | None = sim_flags.SIM_MODEL,
    sim_key_env: str | None = sim_flags.SIM_KEY_ENV,
    sim_temperature: float | None = typer.Option(
        None,
        "--sim-temperature",
        min=0.0,
        callback=checks.finite("--sim-temperature"),
        help="Simulator temperature (llm; default 0.7).",
    ),
    behaviour: str | None = sim_flags.BEHAVIOUR,
    difficulty: str | None = sim_flags.DIFFICULTY,
    set_: list[str] = sim_flags.SET,
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Simulator calls in flight."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N dialogues of each file."),
    seed: int = checks.seed_option(0, "Base seed (a per-turn seed is derived from it)."),
    out: Path = typer.Option(
        Path("calibration"),
        "--out",
        help="Output folder (resumed when it exists).",
        parser=checks.output_path("--out"),
    ),
    sim_option: list[str] = typer.Option(
        [],
        "--sim-option",
        help="Turn on one sage-prompt option (llm; repeatable): "
        + ", ".join(PROMPT_OPTIONS)
        + ". Each shows the simulator something SAGE's did not (docs/protocol.md).",
    ),
) -> None:
    """Teacher-forced agreement of a simulator with the recorded SAGE appraisals (and, with
    --simulator replay, a free run of rlver's environment that must reproduce every trajectory)."""
    from rlver.fidelity.calibrate import calibrate
    from rlver.fidelity.calibrate_report import print_table
    from rlver.fidelity.released import check_result_file

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: a file is there; the output must be a new or existing folder")
    for f in files:  # before the simulator is built: a bad file fails in a second
        check_result_file(str(f))

    raw = sim_flags.simulator_block(
        simulator, model=sim_model, base_url=sim_base_url, key_env=sim_key_env, from_spec=False
    )
    kind = raw.setdefault("kind", sim_flags.DEFAULT_KIND)
    raw.update(_prompt_options(sim_option, kind))
    raw = sim_flags.with_sets(raw, set_)  # replay reads no options: any --set is refused there
    factory, info = _simulator_factory(raw, behaviour, difficulty, seed, sim_temperature)

    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task = progress.add_task("teacher-forced turns", total=None)

        def on_turn(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        summary = asyncio.run(
            calibrate(
                [str(f) for f in files],
                factory,
                info,
                out,
                replay=kind == "replay",
                concurrency=concurrency,
                seed=seed,
                limit=limit,
                on_turn=on_turn,
                durable_each=simulator_kind(kind).needs_model,  # each answer costs a model call: keep it
            )
        )
    print_table(summary, kind)
    typer.echo(f"wrote {out / 'predictions.jsonl'}, {out / 'calibration.json'}, {out / 'calibration.html'}")
    if kind == "replay":
        bad = [(r["path"], m) for r in summary["files"] for m in r.get("trajectory_mismatches", [])]
        for path, m in bad[:20]:
            typer.echo(f"{path}: {m['dialogue_id']}: {'; '.join(m['problems'])}", err=True)
        if bad:
            raise ReplayMismatch(f"{len(bad)} recorded trajectorie(s) not reproduced (see calibration.json)")


def _prompt_options(names: list[str], kind: str) -> dict[str, bool]:
    """``--sim-option NAME ...`` as simulator spec keys, each ``True``; an unknown name exits 2."""
    for name in names:
        if name not in PROMPT_OPTIONS:
            raise InputError(
                Problem(
                    "--sim-option", None, None, f"expected one of {', '.join(PROMPT_OPTIONS)}, got {name!r}"
                )
            )
    if names and "prompts" not in simulator_kind(kind).options:  # a kind with prompts reads ``prompts``
        prompted = ", ".join(k for k in KINDS if "prompts" in simulator_kind(k).options)
        raise InputError(
            Problem("--sim-option", None, None, f"prompt options apply to --simulator {prompted}, not {kind}")
        )
    return dict.fromkeys(names, True)


def _simulator_factory(
    raw: dict[str, Any],
    behaviour: str | None,
    difficulty: str | None,
    seed: int,
    temperature: float | None,
) -> tuple[Callable[[FileData], UserSimulator], dict[str, Any]]:
    """The simulator for each file, and how it describes itself.

    ``replay`` is built per file from its recorded judgements; any other kind is built once from the
    flags, and that one object serves every file (it holds the model client and its concurrency).
    """
    if raw["kind"] == "replay":
        from rlver.fidelity.replay_check import replay_simulator_for

        return replay_simulator_for, {"name": "replay"}
    raw["seed"] = seed
    if behaviour is not None:
        raw["behaviour"] = behaviour
    if difficulty is not None:
        raw["difficulty"] = difficulty
    if temperature is not None and "sampling" in simulator_kind(raw["kind"]).options:
        raw["sampling"] = {"temperature": temperature}
    built = build_simulator(sim_flags.parse_simulator_spec(raw, "rlver calibrate"))

    def factory(_fd: FileData) -> UserSimulator:
        return built

    return factory, built.describe()


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("calibrate")(calibrate_command)
