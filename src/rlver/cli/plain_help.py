"""Help that is never cut: plain text (no rich tables), command summaries wrapped instead of shortened.

Rich's option table cut a long word at 80 columns (``leaderboard-compar…``) and click shortens each
command's summary to fit one line (``Check that every emotion number follows from the start value...``).
Every ``typer.Typer`` of the CLI is built with :func:`plain_typer` so ``--help`` reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

#: Large enough that a command's first sentence is never shortened; the formatter wraps it instead.
_NO_LIMIT = 10_000


class PlainGroup(TyperGroup):
    """A command group whose listing shows each command's whole first sentence, wrapped."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(_NO_LIMIT)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def plain_typer(**kwargs: Any) -> typer.Typer:
    """``typer.Typer(**kwargs)`` with plain, uncut help and no pretty tracebacks."""
    kwargs.setdefault("add_completion", False)
    kwargs.setdefault("pretty_exceptions_enable", False)
    # click caps help at 80 columns; a wider terminal gets up to 120 (wrapping still follows the width).
    kwargs.setdefault("context_settings", {"max_content_width": 120})
    return typer.Typer(cls=PlainGroup, rich_markup_mode=None, **kwargs)


def add_group(app: typer.Typer, name: str, help: str, commands: dict[str, Callable[..., Any]]) -> None:
    """Add the command group ``rlver NAME`` with these subcommands, in this order (how every group
    registers: one table per group, so a subcommand is one line)."""
    group = plain_typer(no_args_is_help=True, help=help)
    for command, function in commands.items():
        group.command(command)(function)
    app.add_typer(group, name=name)
