"""``rlver.transcripts`` sits on the rollout layer, and the judge and the loaded run do not import each other.

Checked from the source (ast), imports inside functions included, so a lazy import cannot hide a break.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rlver

SRC = Path(rlver.__file__).parent
#: What the rollout/transcripts layer may not import (the layers above it).
ABOVE_TRANSCRIPTS = ("rlver.train", "rlver.eval", "rlver.integrations", "rlver.cli")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_transcripts_import_nothing_above_their_layer() -> None:
    files = sorted((SRC / "transcripts").glob("*.py"))
    assert {f.stem for f in files} >= {"native", "published", "files", "audit"}
    bad = [
        f"{f.relative_to(SRC)} imports {name}"
        for f in files
        for name in sorted(_imports(f))
        if name.startswith(ABOVE_TRANSCRIPTS)
    ]
    assert not bad, bad


def test_judge_does_not_import_the_loaded_run() -> None:
    """The judge names its files; ``eval.runs`` reads them. One direction only: no import loop."""
    assert "rlver.eval.runs" not in _imports(SRC / "eval" / "judge.py")
    assert "rlver.eval.judge" in _imports(SRC / "eval" / "runs.py")
