"""Terminal output that is never cut: a rich table when it fits the width, else one block per row; and
consoles that do not wrap what goes to a file or a pipe.

Rich shrinks a table wider than the terminal by cutting cells (``turns`` lost at 80 columns, file names
ending in ``…``). Here the table is measured first; when even its narrowest layout does not fit, each
row is printed as a heading (its first cell, whole) followed by ``column value`` pairs, wrapped.

Rich also lays out to 80 columns when its stream is not a terminal, so ``rlver inspect RUN > file``
broke ids, messages and table cells over several lines: :func:`output_console` gives a file
or a pipe a console as wide as :data:`UNWRAPPED`, where each line is as long as its content.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

#: The width a console lays out to when its output is a file or a pipe: no line of ours is longer, so
#: nothing is wrapped. Renderables that fill the width (a rule, a padding) go through :func:`rule` and
#: :func:`indented`, which keep to their content there.
UNWRAPPED = 100_000


def output_console(*, stderr: bool = False, **kwargs: Any) -> Any:
    """A ``rich.console.Console`` for the command's output: the terminal's width on a terminal, a width
    the user set in ``COLUMNS``, else (a file, a pipe) :data:`UNWRAPPED`."""
    from rich.console import Console

    console = Console(stderr=stderr, **kwargs)
    if console.is_terminal or os.environ.get("COLUMNS", "").strip():
        return console
    return Console(stderr=stderr, width=UNWRAPPED, **kwargs)


def unwrapped(console: Any) -> bool:
    """Whether ``console`` is an :func:`output_console` for a file or a pipe."""
    return bool(console.width >= UNWRAPPED)


def rule(console: Any, style: str = "dim") -> Any:
    """A horizontal rule: the terminal's width, or 80 columns in a file (not :data:`UNWRAPPED`)."""
    from rich.rule import Rule
    from rich.text import Text

    return Text("─" * 80, style=style) if unwrapped(console) else Rule(style=style)


def indented(console: Any, text: Any, indent: int = 2) -> Any:
    """``text`` (a ``rich.text.Text``) indented by ``indent``: a padding on a terminal (wrapped lines stay
    indented), each line prefixed in a file (a padding there would fill every line with spaces)."""
    from rich.padding import Padding
    from rich.text import Text

    if not unwrapped(console):
        return Padding(text, (0, 0, 0, indent))
    lines = text.split("\n", allow_blank=True)
    return Text("\n").join(Text(" " * indent) + line for line in lines)


def print_fitting(console: Any, table: Any) -> None:
    """Print ``table`` (a ``rich.table.Table`` with plain-text cells) whole, in a narrower layout
    when it does not fit ``console``'s width."""
    from rich.measure import Measurement

    # Measured as if the width were unlimited: rich clamps a measurement to the width it is given.
    needed = Measurement.get(console, console.options.update_width(10_000), table).minimum
    if needed <= console.width:
        console.print(table)
        return
    headers = [str(c.header) for c in table.columns]
    cells = [[str(x) for x in c.cells] for c in table.columns]
    if table.title:
        console.print(str(table.title), style="bold", markup=False)
    for i in range(table.row_count):
        row = [col[i] for col in cells]
        console.print(row[0], style="bold", markup=False, highlight=False)
        for line in _pairs(headers[1:], row[1:], console.width):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if table.caption:
        console.print(str(table.caption), markup=False, highlight=False)


def _pairs(headers: Sequence[str], values: Sequence[str], width: int) -> list[str]:
    """``  n 100 · score 61.3 · ...`` in lines of at most ``width``; blank values left out and a pair
    never broken across lines."""
    pairs = [f"{h} {v}" for h, v in zip(headers, values, strict=True) if v.strip()]
    lines: list[str] = []
    line = ""
    for pair in pairs:
        candidate = f"{line} · {pair}" if line else f"  {pair}"
        if line and len(candidate) > width:
            lines.append(line + " ·")
            candidate = f"  {pair}"
        line = candidate
    return [*lines, line] if line else lines
