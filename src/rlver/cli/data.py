"""`rlver data` commands: fetch the published profile files (and the published code whose prompts a run
sends) and show where they are."""

from __future__ import annotations

from pathlib import Path

import typer

from rlver.cli import checks
from rlver.cli.plain_help import add_group


def download_cmd(
    name: str = typer.Argument(
        ...,
        help="Which set: sage-test (100 benchmark profiles + SAGE's code), rlver-train (500 + RLVER's "
        "training code) or sage-released (SAGE's nine released result files, for score and calibrate).",
    ),
    dest: Path | None = typer.Option(
        None,
        "--dest",
        help="Folder to store it in (default: $RLVER_DATA_DIR or ~/.cache/rlver/data).",
        parser=checks.output_path("--dest"),
    ),
    base_url: str | None = typer.Option(
        None,
        "--base-url",
        help="Raw-file root to fetch from instead of Tencent/digitalhuman on GitHub.",
        parser=checks.base_url("--base-url"),
    ),
    source: Path | None = typer.Option(
        None,
        "--from",
        help="Take the files from this folder instead of the network (offline): as released (the "
        "repository's paths, or the files side by side) or as rlver stores them (a mirror of a data "
        "folder). Each is checked against its sha256; every missing file is named at once.",
    ),
    force: bool = typer.Option(False, "--force", help="Download even if a verified copy exists."),
) -> None:
    """Download a published profile file and the published code that goes with it (the prompts a
    benchmark or training run sends), check each sha256 and store it under its published name.

    Without network: --from FOLDER takes copies from a folder, --base-url a mirror of the raw files,
    or RLVER_SHARED_DATA names a folder that already holds them as rlver stores them."""
    from rlver.errors import ConfigError
    from rlver.profiles.download import candidate_dirs, sha256_of
    from rlver.profiles.published_code import check_set, copy_set, download_set, set_files

    if source is not None:
        if base_url is not None:
            raise ConfigError("give --from FOLDER or --base-url URL, not both")
        for path in copy_set(name, source, dest):
            typer.echo(f"{name}: verified and stored at {path}")
        return
    if dest is None and not force:
        # A verified copy anywhere on the search path (e.g. $RLVER_SHARED_DATA) is what eval/train use:
        # say so instead of failing offline.
        files = set_files(check_set(name))
        found = [
            next((d / f.filename for d in candidate_dirs() if (d / f.filename).is_file()), None)
            for f in files
        ]
        if all(
            p is not None and sha256_of(p.read_bytes()) == f.sha256 for p, f in zip(found, files, strict=True)
        ):
            where = next(d for d in candidate_dirs() if (d / files[0].filename).is_file())
            typer.echo(
                f"{name}: verified copies of all {len(files)} files are already in {where} (--force downloads anew)"
            )
            return
    paths = download_set(name, dest, base_url=base_url, force=force)
    for path in paths:
        typer.echo(f"{name}: verified and stored at {path}")


def list_cmd() -> None:
    """Show the published files, their checksums and where a local copy was found."""
    from rlver.profiles.download import DATA_FILES, candidate_dirs, find_data_file
    from rlver.profiles.published_code import CODE_OF_SET, find_published
    from rlver.profiles.sage_released import RELEASED_SETS

    for spec in DATA_FILES.values():
        found = find_data_file(spec.name)
        where = str(found) if found else f"not found (run `rlver data download {spec.name}`)"
        typer.echo(f"{spec.name:<12} {spec.rows:>4} rows  {spec.filename:<28} {where}")
        for code in CODE_OF_SET.get(spec.name, ()):
            path = find_published(code)
            typer.echo(f"  {code:<40} {path if path else 'not found'}")
    for name, files in RELEASED_SETS.items():
        here = next((d for d in candidate_dirs() if all((d / f.filename).is_file() for f in files)), None)
        where = (
            f"{here / files[0].filename.split('/')[0]}"
            if here
            else f"not found (run `rlver data download {name}`)"
        )
        typer.echo(f"{name:<12} {len(files):>4} files {'':<28} {where}")


#: The group's line in ``rlver --help``.
HELP = "Download and locate the published profile data and SAGE's released results."


def register(app: typer.Typer) -> None:
    """Add the ``data`` command group to the root app."""
    add_group(app, "data", HELP, {"download": download_cmd, "list": list_cmd})
