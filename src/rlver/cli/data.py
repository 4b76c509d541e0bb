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
        help="Which set: sage-test (100 benchmark profiles + SAGE's code) or rlver-train (500 + RLVER's training code).",
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
    from rlver.profiles.download import DATA_FILES, find_data_file, sha256_of
    from rlver.profiles.published_code import (
        CODE_OF_SET,
        PUBLISHED_CODE,
        copy_set,
        download_set,
        find_published,
    )

    if source is not None:
        if base_url is not None:
            raise ConfigError("give --from FOLDER or --base-url URL, not both")
        for path in copy_set(name, source, dest):
            typer.echo(f"{name}: verified and stored at {path}")
        return
    if dest is None and not force and name in DATA_FILES:
        # A verified copy anywhere on the search path (e.g. $RLVER_SHARED_DATA) is what eval/train use:
        # say so instead of failing offline.
        found = [(find_data_file(name), DATA_FILES[name].sha256)] + [
            (find_published(code), PUBLISHED_CODE[code].sha256) for code in CODE_OF_SET.get(name, ())
        ]
        if all(path is not None and sha256_of(path.read_bytes()) == digest for path, digest in found):
            where = found[0][0].parent if found[0][0] is not None else "?"
            typer.echo(
                f"{name}: verified copies of all {len(found)} files are already in {where} (--force downloads anew)"
            )
            return
    paths = download_set(name, dest, base_url=base_url, force=force)
    for path in paths:
        typer.echo(f"{name}: verified and stored at {path}")


def list_cmd() -> None:
    """Show the published files, their checksums and where a local copy was found."""
    from rlver.profiles.download import DATA_FILES, find_data_file
    from rlver.profiles.published_code import CODE_OF_SET, find_published

    for spec in DATA_FILES.values():
        found = find_data_file(spec.name)
        where = str(found) if found else f"not found (run `rlver data download {spec.name}`)"
        typer.echo(f"{spec.name:<12} {spec.rows:>4} rows  {spec.filename:<28} {where}")
        for code in CODE_OF_SET.get(spec.name, ()):
            path = find_published(code)
            typer.echo(f"  {code:<40} {path if path else 'not found'}")


#: The group's line in ``rlver --help``.
HELP = "Download and locate the published profile data."


def register(app: typer.Typer) -> None:
    """Add the ``data`` command group to the root app."""
    add_group(app, "data", HELP, {"download": download_cmd, "list": list_cmd})
