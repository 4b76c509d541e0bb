"""`rlver audit` (registered on the root app by :func:`register`).

Re-derives every emotion value of one or more transcripts — ours or published result files — and lists
each inconsistency with its dialogue and turn. Exit code 0: all consistent; 1: inconsistencies found;
2: a file could not be read.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rlver.cli import checks
from rlver.errors import RlverError


class AuditFailed(RlverError):
    """At least one transcript has inconsistent emotion numbers (exit code 1)."""

    exit_code = 1


def audit_command(
    transcripts: list[Path] = typer.Argument(
        ..., help="Run folders or transcript files (ours or published results)."
    ),
    start: int | None = typer.Option(
        None,
        "--start",
        min=0,
        max=100,
        help="Expected start emotion (default: from the manifest; 40 for published files).",
    ),
    max_change: int | None = typer.Option(
        None,
        "--max-change",
        min=1,
        max=100,
        help="Per-turn change bound (default: from the manifest, else 10).",
    ),
    max_turns: int | None = checks.max_assistant_turns_option(
        "Assistant-turn limit (default: from the manifest, else 10)."
    ),
    max_turns_old: int | None = checks.OLD_MAX_TURNS,
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Check that every emotion number follows from the start value and the recorded changes."""
    from rlver.transcripts.audit import audit_file, report_to_json
    from rlver.transcripts.files import transcript_path

    # A run folder written by `rlver eval` stands for its transcript.jsonl (as in score/report).
    transcripts = [transcript_path(p) for p in transcripts]

    turns = checks.turn_limit(max_turns, max_turns_old)
    overrides = {"start_emotion": start, "max_change": max_change, "max_assistant_turns": turns}
    reports = [audit_file(p, overrides=overrides) for p in transcripts]
    total = sum(len(r.findings) for r in reports)
    if as_json:
        typer.echo(report_to_json(reports))
    else:
        for r in reports:
            for finding in r.findings:
                typer.echo(str(finding))
            status = (
                "OK" if r.ok else f"{len(r.findings)} inconsistenc{'y' if len(r.findings) == 1 else 'ies'}"
            )
            failed = f" (and {r.failed} failed record(s), not counted as dialogues)" if r.failed else ""
            typer.echo(
                f"{r.path} ({r.format}): {r.dialogues} dialogues{failed}, {r.appraisals} appraisals "
                f"checked: {status}"
            )
    if total:
        raise AuditFailed(
            f"{total} inconsistenc{'y' if total == 1 else 'ies'} found in {len(transcripts)} file(s)"
        )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("audit")(audit_command)
