"""``rlver score``, ``rlver report`` and ``rlver judge``: the commands that read finished runs.

Why apart from ``rlver eval`` (:mod:`rlver.cli.eval_cmd`): these three only read run folders or
transcript files (scores, an HTML/Markdown report, an LLM judge's ratings); none starts a dialogue, so
none needs eval's agent, simulator and protocol flags. Heavy imports (rich tables, the report's plots,
the judge's client) happen inside the command functions so that ``rlver --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rlver.cli import checks
from rlver.errors import EXIT_CODES_HELP, EXIT_SOME_FAILED, ConfigError, InputError, Problem
from rlver.tables import output_console


def score_command(
    transcripts: list[Path] = typer.Argument(
        ..., help="Run folders or transcript files (ours or the published format)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print metrics as JSON."),
    compare: bool = typer.Option(
        False, "--compare", help="Also compare each run with the first, dialogue by dialogue."
    ),
) -> None:
    """Score transcripts: score = mean final emotion, success = final ≥ 100, failure = final < 10."""
    from rlver.eval.metrics import paired_comparison
    from rlver.eval.runs import load_run, unique_names

    if compare and len(transcripts) < 2:
        raise ConfigError(
            "--compare needs two or more runs: the first is the baseline the others are compared with"
        )
    runs = [load_run(p) for p in transcripts]
    unique_names(runs)
    from rlver.transcripts.audit import audit_hint
    from rlver.transcripts.files import transcript_path

    hints = [h for h in (audit_hint(transcript_path(p)) for p in transcripts) if h]
    comparisons = (
        [(r.name, paired_comparison(r.episodes, runs[0].episodes)) for r in runs[1:]] if compare else []
    )
    if as_json:
        _print_scores_json(runs, comparisons if compare else None)
    else:
        from rlver.tables import print_fitting

        console = output_console()
        print_fitting(console, _scores_table(runs))
        if comparisons:
            print_fitting(console, _comparison_table(runs[0].name, comparisons))
    for hint in hints:
        typer.echo(f"warning: {hint}", err=True)


def _print_scores_json(runs: list[Any], comparisons: list[tuple[str, Any]] | None) -> None:
    """``rlver score --json``: each run's metrics, and the comparisons when asked for."""
    from rlver.io import dumps_strict

    out: dict[str, Any] = {
        "runs": [
            {"run": r.name, "path": str(r.path), "format": r.format, **r.metrics.model_dump(mode="json")}
            for r in runs
        ]
    }
    if comparisons is not None:
        out["comparisons"] = [
            {"run": n, "baseline": runs[0].name, **c.model_dump(mode="json")} for n, c in comparisons
        ]
    typer.echo(dumps_strict(out, indent=2))


def _scores_table(runs: list[Any]) -> Any:
    """One row per run: n, score, success, failure, failed runs, CI, turns (and format when mixed)."""
    from rich.table import Table

    formats = sorted({r.format for r in runs})
    table = Table(
        title="Sentient Benchmark", caption=f"format: {', '.join(formats)} · errors = failed runs, excluded"
    )
    show_format = len(formats) > 1
    cols = [
        "run",
        *(["format"] if show_format else []),
        "n",
        "score",
        "success",
        "failure",
        "errors",
        "95% CI",
        "turns",
    ]
    for col in cols:
        table.add_column(
            col,
            justify="left" if col in ("run", "format") else "right",
            overflow="fold",
            no_wrap=col != "run",
            min_width=min(24, max(len(r.name) for r in runs)) if col == "run" else None,
        )
    for r in runs:
        m = r.metrics
        table.add_row(
            r.name,
            *([r.format] if show_format else []),
            str(m.n),
            "-" if m.score_rounded is None else f"{m.score_rounded:.1f}" + ("" if m.complete else " partial"),
            str(m.success),
            str(m.failure),
            str(m.n_failed_runs),
            f"{m.score_ci_low:.1f}–{m.score_ci_high:.1f}" if m.score_ci_low is not None else "-",
            f"{m.mean_turns:.1f}",
        )
    return table


def _comparison_table(baseline: str, comparisons: list[tuple[str, Any]]) -> Any:
    """``--compare``: each run against the first, dialogue by dialogue."""
    from rich.table import Table

    ct = Table(title=f"Paired comparison against {baseline}")
    for col in ("run", "pairs", "Δ", "95% CI", "wins/ties/losses", "sign test p"):
        ct.add_column(col, justify="left" if col == "run" else "right")
    for name, c in comparisons:
        if c.n_pairs == 0:
            ct.add_row(name, "0", "-", "-", "-", "-")
            continue
        ct.add_row(
            name,
            str(c.n_pairs),
            f"{c.mean_diff:+.1f}",
            f"[{c.diff_ci_low:+.1f}, {c.diff_ci_high:+.1f}]",
            f"{c.wins}/{c.ties}/{c.losses}",
            f"{c.sign_test_p:.3g}",
        )
    return ct


def report_command(
    runs: list[Path] = typer.Argument(
        ..., help="Run folders or transcript files; several give a side-by-side comparison."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="The report file: .html (a .md twin is written next to it) or .md (with an .html "
        "twin); any other suffix is refused. Its folder may be new, its folder's folder must exist.",
        parser=checks.output_path("--out", "file"),
    ),
    title: str = typer.Option("Sentient Benchmark report", "--title", help="Report title."),
) -> None:
    """Write a self-contained HTML report (and Markdown) for one or more runs."""
    from rlver.eval.report import write_report
    from rlver.eval.runs import load_run, unique_names

    if out is not None:
        _check_report_out(out)
    loaded = [load_run(p) for p in runs]
    unique_names(loaded)
    if out is None:
        out = (runs[0] / "report.html") if len(runs) == 1 and runs[0].is_dir() else Path("report.html")
    html, md = write_report(loaded, out.with_suffix(".html"), title=title)
    typer.echo(f"report: {html}\nmarkdown: {md}")


#: The formats ``rlver report`` writes, by the suffix of ``--out``; the other one is written beside it.
REPORT_SUFFIXES = (".html", ".md")


def _check_report_out(out: Path) -> None:
    """``report --out`` names a file. A folder there is refused; so is a path whose folder is missing
    more than one level deep (``/missing/dir/x.html`` used to create both folders silently, hiding a
    typo). One new folder in an existing one (``--out cmp/report.html``) is made, as ``mkdir`` would."""
    if out.is_dir():
        raise ConfigError(
            f"--out {out}: a folder is there; give the HTML file to write, e.g. {out / 'report.html'}"
        )
    if out.suffix.lower() not in REPORT_SUFFIXES:
        # ``r.pdf`` got HTML under a .pdf name, without a word
        hint = "for a PDF, print the HTML from a browser" if out.suffix else f"e.g. {out}.html"
        raise ConfigError(
            f"--out {out}: a report is written as .html or .md (its suffix picks the format), not "
            f"{out.suffix or 'a name without a suffix'}; {hint}"
        )
    if not out.parent.is_dir() and not out.parent.parent.is_dir():
        raise ConfigError(f"--out {out}: the folder {out.parent.parent} does not exist; create it first")


def judge_command(
    run: Path = typer.Argument(..., help="A run folder written by `rlver eval`."),
    judge_base_url: str | None = typer.Option(
        None,
        "--judge-base-url",
        help="OpenAI-compatible endpoint of the judge.",
        parser=checks.base_url("--judge-base-url"),
    ),
    judge_model: str = typer.Option(..., "--judge-model", help="Judge model id."),
    judge_key_env: str | None = typer.Option(
        None,
        "--judge-key-env",
        help="Variable holding the judge's key ('' for none; default OPENAI_API_KEY, if set).",
        parser=checks.key_env("--judge-key-env"),
    ),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Judge calls in flight."),
    temperature: float = checks.temperature_option(0.0, "Judge temperature."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Judge only the first N dialogues."),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Do not use the response cache (judge_cache.sqlite)."
    ),
    no_report: bool = typer.Option(False, "--no-report", help="Do not rebuild the run's report."),
) -> None:
    """Rate each dialogue on five capabilities and place the agent on the social cognition coordinate."""
    from rlver.eval.judge import run_judge

    checks.endpoint_given("--judge-model", judge_model, "--judge-base-url", judge_base_url)
    if not run.is_dir():
        raise InputError(Problem(str(run), None, None, "expected a run folder written by `rlver eval`"))
    summary = run_judge(
        run,
        base_url=judge_base_url,
        model=judge_model,
        api_key_env="OPENAI_API_KEY" if judge_key_env is None else (judge_key_env or None),
        concurrency=concurrency,
        temperature=temperature,
        limit=limit,
        cache=not no_cache,
    )
    from rich.table import Table

    from rlver.errors import NothingFinished
    from rlver.eval.judge import CAPABILITIES, CAPABILITY_LABELS

    details = run / "judge.jsonl"
    if summary.n_judged == 0:
        if summary.n_errors == 0:
            raise NothingFinished(f"nothing to judge: {run} has no finished dialogue")
        raise NothingFinished(
            f"no dialogue was judged: all {summary.n_errors} judge call(s) failed; the errors are in "
            f"{details} (field `error`); fix the judge endpoint and rerun to retry them"
        )

    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    table = Table(title=f"Capabilities of {summary.run} (judge: {summary.judge_model})")
    table.add_column("capability")
    table.add_column("mean (1–5)", justify="right")
    for c in CAPABILITIES:
        table.add_row(CAPABILITY_LABELS[c], num(summary.capabilities[c], ".2f"))
    table.add_row("orientation (−1 empathy … +1 solution)", num(summary.orientation, "+.2f"))
    table.add_row("style (−1 structured … +1 creative)", num(summary.style, "+.2f"))
    console = output_console()
    console.print(table)
    console.print(
        f"judged {summary.n_judged} / failed {summary.n_errors} dialogue(s); details in {details}"
        + ("; rerun to retry the failed ones" if summary.n_errors else "")
    )
    if not no_report:
        from rlver.eval.runner import write_run_report

        console.print(f"report: {write_run_report(run)}")
    if summary.n_errors:
        raise typer.Exit(EXIT_SOME_FAILED)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("score")(score_command)
    app.command("report")(report_command)
    app.command("judge", epilog=EXIT_CODES_HELP)(judge_command)
