"""``rlver eval``'s progress and summary: a bar on a terminal, plain lines for a log, the closing
summary, and what an interrupted run kept.

Apart from :mod:`rlver.cli.eval_cmd` (which turns flags into an :class:`~rlver.eval.config.EvalConfig`)
because this is the other half of the command: it runs a checked config and reports on it, and it is
what a reader of the console output looks for.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rlver.errors import EXIT_SOME_FAILED
from rlver.heartbeat import Pace, activity, duration, heartbeat, say_line
from rlver.interrupt import Interrupted
from rlver.tables import output_console

if TYPE_CHECKING:
    from rlver.manifest import RunManifest


def run_with_progress(cfg: Any, *, resume: bool) -> None:
    """Run the evaluation ``cfg`` describes with a progress display, then print its summary (exit
    :data:`~rlver.errors.EXIT_SOME_FAILED` when some dialogues failed)."""
    from rlver.eval.runner import run_eval

    console = output_console(stderr=True)
    started = time.perf_counter()
    # A log (stderr not a terminal) sees a bar only once it is done: plain lines on stdout instead.
    plain = not console.is_terminal
    show, start, bar = _plain_progress(started) if plain else _bar_progress(console)
    try:
        with bar, heartbeat(_say, started) if plain else contextlib.nullcontext():
            activity.set_phase("loading the agent and the profiles")
            result = run_eval(cfg, resume=resume, on_progress=show, on_start=start)
    except KeyboardInterrupt:
        # An RlverError (not typer.Exit, whose code is lost under standalone_mode=False) so the
        # root main() prints it and exits 130 (143 for SIGTERM).
        raise Interrupted(interrupted_note(cfg.out_dir)) from None
    m = result.metrics
    if m.n == 0:
        from rlver.errors import NothingFinished

        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(m.failed_run_kinds.items())) or "none run"
        raise NothingFinished(
            f"no dialogue finished ({m.n_failed_runs} failed: {kinds}); the errors are in "
            f"{result.transcript} (field `error`); fix the cause and rerun with --resume"
        )
    console.print(f"[bold]{m.headline()}[/]  95% CI [{m.score_ci_low:.1f}, {m.score_ci_high:.1f}]")
    console.print(f"{m.counts()} dialogue(s) · {result.manifest.dialogue or 'dialogue not recorded'}")
    console.print(f"{m.truncation()}" + _cap_note(result.manifest))
    from rlver.eval.vetoes import print_veto_line  # most replies vetoed: which veto, how many

    print_veto_line(console, result.transcript)
    if m.n_failed_runs:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(m.failed_run_kinds.items()))
        console.print(
            f"[yellow]{m.n_failed_runs} dialogue(s) failed[/] ({kinds}), excluded from the score: the "
            f"score is partial, not comparable with a complete run; the errors are in "
            f"{result.transcript}; --resume re-runs them (exit code {EXIT_SOME_FAILED})"
        )
    console.print(f"transcript: {result.transcript}")
    console.print(f"metrics:    {result.out_dir / 'metrics.json'}")
    if result.report is not None:
        console.print(f"report:     {result.report}")
    if m.n_failed_runs:  # a script tells a partial run from a whole one (0) and a dead one (1)
        raise typer.Exit(EXIT_SOME_FAILED)


def interrupted_note(out_dir: Path) -> str:
    """What an interrupted eval kept, naming only files that exist."""
    from rlver.transcripts.files import TRANSCRIPT_NAME
    from rlver.transcripts.native import read_transcript

    transcript = out_dir / TRANSCRIPT_NAME
    done = 0
    if transcript.exists():
        done = sum(ep.error is None for ep in read_transcript(transcript).episodes)
    if done:
        return (
            f"interrupted: {done} finished dialogue(s) are saved in {transcript}; "
            "run the same command with --resume to continue"
        )
    if transcript.exists():  # its first line is the manifest: what --resume checks its settings against
        return (
            f"interrupted before any dialogue finished: nothing to keep yet; {out_dir} holds the run's "
            "settings, and the same command with --resume starts it"
        )
    if out_dir.is_dir() and not any(out_dir.iterdir()):
        return f"interrupted before the run started: nothing was written ({out_dir} is empty)"
    return "interrupted before the run started: nothing was written"


def _bar_progress(console: Any) -> tuple[Callable[[Any], None], Callable[[Any], None], Any]:
    """A rich bar on a terminal: ``(on_progress, on_start, context)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("mean emotion {task.fields[mean]} · failed {task.fields[failed]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    # The task (and so the bar) appears only once the run has validated its settings, loaded the
    # profiles and built the models: a config error never follows a half-drawn `0/?` bar.
    tasks: list[Any] = []

    def show(p: Any) -> None:
        mean = "–" if p.mean_emotion is None else f"{p.mean_emotion:.1f}"
        if not tasks:
            tasks.append(bar.add_task("eval", total=p.total, mean=mean, failed=p.failed))
        # p.finished includes the dialogues a resumed run found already done
        bar.update(tasks[0], total=p.total, completed=p.finished + p.failed, mean=mean, failed=p.failed)

    def start(p: Any) -> None:
        if p.already_done:
            console.print(f"resuming: {p.already_done} of {p.total} dialogues already finished")
        show(p)

    return show, start, bar


def _say(line: str) -> None:
    typer.echo(line, err=True)


def _plain_progress(started: float) -> tuple[Callable[[Any], None], Callable[[Any], None], Any]:
    """Plain lines for a log: one as each dialogue ends (done/total, mean, elapsed, time left at the
    pace between endings: :class:`rlver.heartbeat.Pace`), and :func:`rlver.heartbeat.heartbeat` lines
    in between. On stderr, beside the summary, as the bar is: stdout stays free for what a script
    reads."""
    pace = Pace()

    def show(p: Any) -> None:
        done = p.finished + p.failed
        mean = "–" if p.mean_emotion is None else f"{p.mean_emotion:.1f}"
        now = time.perf_counter()
        elapsed = now - started
        left = pace.left(done, p.total, now)
        say_line(
            _say,
            f"  eval {done}/{p.total} dialogues  mean emotion {mean}  failed {p.failed}  "
            f"({duration(elapsed)}{left})",
        )

    def start(p: Any) -> None:
        if p.already_done:
            _say(f"resuming: {p.already_done} of {p.total} dialogues already finished")
        activity.set_phase(f"generating ({p.total - p.already_done} dialogues to run)")
        _say(f"eval: {p.total - p.already_done} dialogue(s) to run; a line as each one ends")

    return show, start, contextlib.nullcontext()


def _cap_note(manifest: RunManifest) -> str:
    """`` (agent max_tokens N, simulator max_tokens M)`` from a run's manifest."""
    agent, sim = manifest.agent_max_tokens, manifest.simulator_max_tokens
    parts = [f"agent max_tokens {agent if agent is not None else 'server default'}"]
    if sim is not None:
        parts.append(f"simulator max_tokens {sim}")
    return f" ({', '.join(parts)})"
