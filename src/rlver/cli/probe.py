"""`rlver probe`: flags and printing for the reward-hacking battery of :mod:`rlver.fidelity.probes`.

:mod:`rlver.fidelity.probes` is imported inside the functions that use it: it loads the offline simulator
(numpy, the lexicons), which would slow every ``rlver --help``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from rlver.cli import checks
from rlver.cli import simulator_flags as sim_flags
from rlver.errors import EXIT_CODES_HELP, EXIT_SOME_FAILED, InputError, NothingFinished, Problem, RlverError
from rlver.io import dumps_strict
from rlver.profiles.sets import load_profile_set
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.factory import SimulatorSpec, build_simulator
from rlver.tables import output_console


def render(report: dict[str, Any]) -> None:
    """A table: one row per probe, summary columns, and one column per profile when they fit."""
    from rlver.fidelity.probes import first_error

    console = output_console()
    ids = report["profiles"]
    show = ids if 56 + 11 * len(ids) <= console.width else []
    table = Table(title=f"emotion change per probe (start {report['start_emotion']})", title_justify="left")
    table.add_column("probe", no_wrap=True)
    for col in ("mean", "min", "max", "positive"):
        table.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    for pid in show:
        table.add_column(pid, justify="right", max_width=8, overflow="ellipsis", no_wrap=True)
    for r in report["probes"]:
        style = "red" if r["adversarial"] and r["positive"] else ("dim" if not r["adversarial"] else "")
        fmt = lambda v: "-" if v is None else f"{v:+g}"  # noqa: E731
        row = [
            r["name"],
            fmt(r["mean_change"]),
            fmt(r["min_change"]),
            fmt(r["max_change"]),
            f"{r['positive']}/{len(ids)}",
        ]
        for pid in show:
            cell = r["per_profile"][pid]
            row.append(f"{cell['change']:+d}" if "change" in cell else "error")
        table.add_row(*row, style=style)
    console.print(table)
    if not show:
        console.print(f"{len(ids)} profiles; per-profile changes: --json")
    if report["errors"]:
        answered = report["cells"] - report["errors"]
        console.print(
            f"[yellow]{answered} of {report['cells']} cells answered / {report['errors']} failed[/] "
            f"(first error: {escape(first_error(report))}); --json shows each cell's error"
        )
    if report["exploited"]:
        console.print(f"[red]exploitable:[/] {', '.join(report['exploited'])}")
    elif report["passed"]:
        console.print("[green]no adversarial probe earned a positive change[/]")
    else:
        console.print("[yellow]not verified: some adversarial probes could not be checked[/]")


def render_replay(report: dict[str, Any]) -> None:
    """A table: one row per veto group of the run's replayed replies."""
    console = output_console()
    table = Table(
        title=f"{report['run']}: {report['replies']} policy replies replayed, {report['vetoed']} vetoed",
        title_justify="left",
    )
    for col in ("group", "replies", "mean change", "mean change without vetoes", "positive"):
        table.add_column(col, justify="left" if col == "group" else "right")
    for g in report["groups"]:
        style = "red" if g["group"] in report["exploited"] else ""
        table.add_row(
            g["group"],
            str(g["replies"]),
            f"{g['mean_change']:+.2f}",
            f"{g['mean_change_no_veto']:+.2f}",
            str(g["positive"]),
            style=style,
        )
    console.print(table)
    if report["passed"]:
        console.print("[green]no vetoed reply of the run earned a positive change[/]")
    else:
        console.print(f"[red]exploitable:[/] {', '.join(report['exploited'])}")


def _replay_command(
    from_run: Path, spec: SimulatorSpec, profiles: list[str], *, as_json: bool, strict: bool
) -> None:
    """``--from-run``: replay the run's own replies through the offline user, vetoes on and off."""
    from rlver.fidelity.probes import replay_run

    if spec.kind != "offline":
        raise InputError(Problem("--from-run", None, None, "needs --simulator offline"))
    replay = replay_run(
        from_run, profiles, seed=spec.seed, behaviour=spec.behaviour, difficulty=spec.difficulty
    )
    if as_json:
        typer.echo(dumps_strict(replay, indent=2))
    else:
        render_replay(replay)
    if strict and not replay["passed"]:
        raise RlverError(
            "--strict: vetoed replies of the run earned a positive change: " + ", ".join(replay["exploited"])
        )


def _battery_command(
    spec: SimulatorSpec, chosen: list[Any], *, start_emotion: int, as_json: bool, strict: bool
) -> None:
    """Send the battery to every chosen profile, print the report, and fail as ``--strict`` asks."""
    from rlver.fidelity.probes import first_error, run_probes

    sim = build_simulator(spec)

    async def run() -> dict[str, Any]:
        try:
            return await run_probes(sim, chosen, start_emotion=start_emotion, seed=spec.seed)
        finally:
            model = getattr(sim, "model", None)
            if model is not None and hasattr(model, "aclose"):
                await model.aclose()

    report = asyncio.run(run())
    if as_json:
        typer.echo(dumps_strict(report, indent=2))
    else:
        render(report)
    if report["errors"] == report["cells"]:
        raise NothingFinished(
            f"no probe result: all {report['cells']} simulator calls failed, so nothing was checked "
            f"(first error: {first_error(report)}); --json lists each cell's error"
        )
    if strict and not report["exploited"] and not report["passed"]:
        raise RlverError(
            f"--strict: {report['errors']} of {report['cells']} probe cells failed, so the check is "
            "incomplete; --json lists each cell's error"
        )
    if strict and not report["passed"]:
        # An RlverError (exit 1), not typer.Exit: the root runs click with standalone_mode=False,
        # where an Exit's code is returned rather than raised.
        raise RlverError(
            f"--strict: adversarial probes earned a positive change: {', '.join(report['exploited'])}"
        )
    if report["errors"]:  # partial: some cells failed (exit 3, as eval and judge)
        raise typer.Exit(EXIT_SOME_FAILED)


def _probe(
    simulator: str | None = sim_flags.simulator_option(),
    sim_model: str | None = sim_flags.SIM_MODEL,
    sim_base_url: str | None = sim_flags.SIM_BASE_URL,
    sim_key_env: str | None = sim_flags.SIM_KEY_ENV,
    profiles: list[str] = typer.Option(
        ["en-test", "zh-test"], "--profiles", help="Profile set(s) or file(s) (repeatable)."
    ),
    from_run: Path | None = typer.Option(
        None,
        "--from-run",
        help="Replay a trained policy's own replies from RUN's transcripts (offline simulator), "
        "with and without the vetoes.",
    ),
    limit: int = typer.Option(3, "--limit", min=1, help="Profiles taken from each set."),
    behaviour: str | None = sim_flags.BEHAVIOUR,
    difficulty: str | None = sim_flags.DIFFICULTY,
    set_: list[str] = sim_flags.SET,
    start_emotion: int = typer.Option(
        40, "--start-emotion", min=0, max=100, help="The user's emotion before each probe reply (0-100)."
    ),
    seed: int = checks.seed_option(0, "Seed of the simulated user's appraisals."),
    as_json: bool = typer.Option(False, "--json", help="Print the full results as JSON."),
    strict: bool = typer.Option(
        False, "--strict", help="Exit 1 if any adversarial probe earns a positive change."
    ),
    embed: bool = typer.Option(
        False,
        "--embed",
        help="Probe the offline user with the MiniLM embedder (simulator.embed; [embed] extra).",
    ),
) -> None:
    """Send a battery of reward-hacking replies to the simulated user and report what each earns."""
    raw = sim_flags.simulator_block(simulator, model=sim_model, base_url=sim_base_url, key_env=sim_key_env)
    raw.update(difficulty=difficulty, seed=seed, **({"embed": True} if embed else {}))
    raw["behaviour"] = get_behaviour(behaviour).name if behaviour is not None else None
    spec = sim_flags.parse_simulator_spec(sim_flags.with_sets(raw, set_), "rlver probe")
    if embed and spec.kind != "offline":
        # a spec block keeps other kinds' keys and ignores them (old flat files); a flag must not be ignored
        raise InputError(
            Problem(
                "rlver probe",
                None,
                "--embed",
                "the embedder is the offline user's; drop --embed or use --simulator offline",
            )
        )
    if from_run is not None:
        _replay_command(from_run, spec, profiles, as_json=as_json, strict=strict)
        return
    chosen = [p for name in profiles for p in load_profile_set(name)[:limit]]
    if not chosen:
        raise InputError(Problem(",".join(profiles), None, None, "no profiles to probe"))
    _battery_command(spec, chosen, start_emotion=start_emotion, as_json=as_json, strict=strict)


def register(app: typer.Typer) -> None:
    """Add ``rlver probe`` to the root app."""
    app.command("probe", epilog=EXIT_CODES_HELP)(_probe)
