"""`rlver profiles` commands: list, show and validate profile sets and files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from rlver.cli import profiles_gen
from rlver.cli.plain_help import add_group
from rlver.tables import output_console


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def list_cmd(
    set_or_path: str | None = typer.Argument(
        None, help="A set (en-train, en-test, zh-train, zh-test, bundled-test, sage, rlver-train) or a file."
    ),
) -> None:
    """Without an argument: every profile set with its size. With one: a table of its profiles."""
    from rich.table import Table

    from rlver.profiles.download import find_data_file
    from rlver.profiles.sets import BUNDLED_SETS, PRIMARY_SETS, PUBLISHED_SETS, load_profile_set

    console = output_console()
    if set_or_path is None:
        table = Table(title="profile sets")
        for col in ("set", "profiles", "languages", "with opening", "source"):
            table.add_column(col)
        for name in PRIMARY_SETS:
            if name in PUBLISHED_SETS and find_data_file(PUBLISHED_SETS[name]) is None:
                table.add_row(
                    name, "-", "zh", "-", f"not downloaded: rlver data download {PUBLISHED_SETS[name]}"
                )
                continue
            profiles = load_profile_set(name)
            langs = ",".join(sorted({p.language for p in profiles}))
            opened = sum(1 for p in profiles if p.opening)
            source = "bundled (ours)" if name in BUNDLED_SETS else "published (Tencent, MIT)"
            table.add_row(name, str(len(profiles)), langs, str(opened), source)
        console.print(table)
        console.print(
            "Also: bundled-train, bundled-test, bundled (unions of the bundled sets), or any file path."
        )
        return
    profiles = load_profile_set(set_or_path)
    table = Table(title=f"{set_or_path}: {len(profiles)} profiles")
    for col in ("id", "lang", "style", "need", "topic"):
        table.add_column(col, overflow="fold")
    for p in profiles:
        table.add_row(p.id, p.language, p.style, p.need_type or "-", _short(p.topic or p.goal, 40))
    console.print(table)


def show_cmd(
    profile_id: str = typer.Argument(..., help="Profile id (or a unique prefix of one)."),
    set_name: list[str] = typer.Option(
        [], "--set", help="Set or file to search (repeatable; default: all available sets)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the profile as one JSON object."),
) -> None:
    """Print one profile in full."""
    from rich.markup import escape

    from rlver.profiles.sets import find_profile

    profile = find_profile(profile_id, set_name or None)
    if as_json:
        typer.echo(profile.model_dump_json(indent=2, exclude_none=True))
        return
    console = output_console()
    for field, value in profile.model_dump(exclude_none=True).items():
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        text = str(value)
        if "\n" in text:
            console.print(f"[bold]{field}[/]:")
            console.print(escape(text), highlight=False)
        else:
            console.print(f"[bold]{field}[/]: {escape(text)}", highlight=False)


def validate_cmd(
    path: str = typer.Argument(..., help="A profile file (.jsonl native or published, .yaml)."),
) -> None:
    """Check every row of a profile file; print OK and the count, or every problem (exit code 2)."""
    from rlver.profiles.loaders import load_profiles

    profiles = load_profiles(path)  # raises InputError (exit 2) listing every bad row
    langs = ", ".join(sorted({p.language for p in profiles}))
    with_opening = sum(1 for p in profiles if p.opening)
    typer.echo(f"OK: {len(profiles)} profiles ({langs}; {with_opening} with an opening line) in {path}")


def overlap_cmd(
    first: str = typer.Argument(..., help="A profile set or file (e.g. sage)."),
    second: str = typer.Argument(..., help="Another profile set or file (e.g. rlver-train)."),
    threshold: float = typer.Option(
        0.6, "--threshold", min=0.0, max=1.0, help="Near-duplicate threshold (character n-gram Jaccard)."
    ),
    show: int = typer.Option(5, "--show", min=0, help="Pairs to list of each kind."),
) -> None:
    """How many personas of the first set appear in the second: word for word, or nearly."""
    from rlver.profiles.overlap import persona_overlap
    from rlver.profiles.sets import load_profile_set

    found = persona_overlap(load_profile_set(first), load_profile_set(second), threshold)
    typer.echo(
        f"{len(found.exact)} of {found.n_a} profiles of {first} have a persona of {second} ({found.n_b} "
        f"profiles) word for word; {len(found.near)} more nearly ({found.measure()})"
    )
    for a, b in found.exact[:show]:
        typer.echo(f"  exact  {a}  =  {b}")
    for a, b, sim in found.near[:show]:
        typer.echo(f"  near   {a}  ~  {b}  (Jaccard {sim})")


def register(app: typer.Typer) -> None:
    """Add the ``profiles`` command group to the root app: list, show and validate here, generate and
    stats from :mod:`rlver.cli.profiles_gen`."""
    commands: dict[str, Callable[..., Any]] = {
        "list": list_cmd,
        "show": show_cmd,
        "validate": validate_cmd,
        "overlap": overlap_cmd,
        "generate": profiles_gen.generate_cmd,
        "stats": profiles_gen.stats_cmd,
    }
    add_group(app, "profiles", "List, show and validate user profiles.", commands)
