"""Profile generation commands (being written)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add generate/stats commands to the profiles app."""
