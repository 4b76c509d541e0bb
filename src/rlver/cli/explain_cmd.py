"""`rlver explain` (registered on the root app by :func:`register`).

Lists every setting of a run that differs from the published protocol (the benchmark's for an
evaluation, the published training run's for a training folder), each with its docs/protocol.md row and
the effect rlver has measured, where it has measured one. The answer to "why does my score differ from
the paper?" starts here. Exit code 0 (differences are findings, not errors); 2: a run it cannot read.
"""

from __future__ import annotations

from pathlib import Path

import typer


def explain_command(
    runs: list[Path] = typer.Argument(
        ..., help="Run folders or transcripts of rlver eval / rlver train, or released SAGE result files."
    ),
) -> None:
    """Say which settings of a run differ from the published protocol, and what each is known to do."""
    from rlver.eval.explain import explain

    explanations = [explain(run) for run in runs]  # every run read before anything is printed
    for explanation in explanations:
        typer.echo(explanation.text())


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("explain")(explain_command)
