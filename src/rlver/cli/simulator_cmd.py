"""`rlver simulator fit`: rebuild the learned appraisal of the offline user from released SAGE files."""

from __future__ import annotations

from pathlib import Path

import typer

from rlver.cli import checks
from rlver.cli.plain_help import add_group
from rlver.errors import ConfigError
from rlver.tables import output_console


def fit_cmd(
    data: Path = typer.Option(..., "--data", help="Folder of released *_result.jsonl files (or one file)."),
    out: Path = typer.Option(
        ..., "--out", help="Where to write the artefact (JSON).", parser=checks.output_path("--out", "file")
    ),
    validate: bool = typer.Option(
        True, "--validate/--no-validate", help="Leave-model-out and leave-profiles-out validation."
    ),
    joint: bool = typer.Option(
        False, "--joint-holdout", help="Also validate holding out a model and profiles at once (slow)."
    ),
) -> None:
    """Fit the Chinese learned appraisal on released judgements; same data, same bytes."""

    from rlver.fidelity.appraisal_fit import dump_artefact, fit_artefact
    from rlver.io import atomic_write_bytes

    if out.is_dir():
        raise ConfigError(
            f"--out {out}: a folder is there; give the JSON file to write, e.g. {out / 'appraisal.json'}"
        )
    console = output_console(stderr=True)
    artefact = fit_artefact(
        data, settings={"joint_holdout": joint}, validate=validate, log=lambda m: console.print(m)
    )
    atomic_write_bytes(out, dump_artefact(artefact))
    for name, report in artefact["validation"].items():
        for part, fig in report.items():
            console.print(
                f"{name:30s} {part:24s} turns {fig['turns']:5d}  spearman {fig['spearman']:+.3f}  "
                f"sign {fig['sign_agreement']:.3f}  model-ranking {fig['model_ranking_spearman']}"
            )
    console.print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


def register(app: typer.Typer) -> None:
    """Add the ``simulator`` command group to the root app."""
    add_group(app, "simulator", "The offline simulated user's learned appraisal.", {"fit": fit_cmd})
