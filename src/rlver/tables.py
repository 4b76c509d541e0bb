"""Terminal tables that are never cut: a rich table when it fits the width, else one block per row.

Rich shrinks a table wider than the terminal by cutting cells (``turns`` lost at 80 columns, file names
ending in ``…``). Here the table is measured first; when even its narrowest layout does not fit, each
row is printed as a heading (its first cell, whole) followed by ``column value`` pairs, wrapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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
