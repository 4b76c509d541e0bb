"""docs/reproduce.md's table of SAGE's released result files: each checksum is the file's, and each
score / success / failure is what ``rlver score`` prints for it; benchmark.md's example is one of them
(it once quoted 54.8 / 19 / 24, which matches none of the nine). Skips without the published data."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `([^`]+)` \| `[^`]+` \| `([0-9a-f]{64})` \| ([\d.]+) / (\d+) / (\d+) \|$")


def _rows() -> dict[str, tuple[str, str, str, str]]:
    text = (REPO / "docs" / "reproduce.md").read_text(encoding="utf-8")
    return {m.group(1): m.groups()[1:] for m in map(ROW.match, text.splitlines()) if m}  # type: ignore[misc]


def test_the_checksums_and_scores_are_the_files(shared_data_dir: Path) -> None:
    rows = _rows()
    folder = shared_data_dir / "sage_released"
    assert len(rows) == 9 and {str(p.relative_to(folder)) for p in folder.glob("*/*.jsonl")} == set(rows)
    for name, (sha, *_) in rows.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == sha, name
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "score", *sorted(rows)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) > 5 and cells[1] == "100":
            printed[cells[0]] = (cells[2], cells[3], cells[4])
    for name, (_, score, success, failure) in rows.items():
        shown = next(v for k, v in printed.items() if name.removesuffix("_result.jsonl").endswith(k))
        assert shown == (score, success, failure), (name, shown)


def test_benchmark_md_quotes_a_row_of_the_table() -> None:
    text = (REPO / "docs" / "benchmark.md").read_text(encoding="utf-8")
    example = re.search(r"\(for example\s+([\d.]+ / \d+ / \d+) for [^`]*`([^`]+)`", text)
    assert example, "benchmark.md should quote one released file's score / success / failure"
    quoted = [row for name, row in _rows().items() if name.endswith("/" + example.group(2))]
    assert quoted and " / ".join(quoted[0][1:]) == example.group(1)
