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

from rlver.registry import Entry, Registry

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

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """A mistyped command is refused in the one wording every rlver registry uses (``unknown
        command 'evl'; did you mean 'eval'? known: ...``, exit 2), not click's own."""
        name = args[0] if args else ""
        plain = name and not name.startswith("-") and ctx.token_normalize_func is None
        if plain and not ctx.resilient_parsing and self.get_command(ctx, name) is None:
            ctx.fail(self.command_choices(ctx).unknown_message(name))
        return super().resolve_command(ctx, args)

    def command_choices(self, ctx: Any) -> Registry[Any]:
        """This group's visible commands as a registry (name, first sentence, the command)."""
        commands = ((name, self.get_command(ctx, name)) for name in self.list_commands(ctx))
        return Registry(
            "command",
            [Entry(n, c.get_short_help_str(_NO_LIMIT), c) for n, c in commands if c and not c.hidden],
        )


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
