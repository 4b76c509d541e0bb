"""`rlver chat` commands (registered on the root app by :func:`register`)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
