"""No issue numbers in ``src``: the code says why in its own words; the history of a change lives in
git and in docs/notes, not in a docstring a reader cannot follow."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ISSUE_NUMBER = re.compile(r"\bissues? ?#? ?\d+", re.IGNORECASE)


def issue_numbers(root: Path = SRC) -> list[str]:
    """``path:line: text`` of every line under ``root`` (any text file) that cites an issue number."""
    found: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary data file
        for number, line in enumerate(text.splitlines(), start=1):
            if ISSUE_NUMBER.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_src_cites_no_issue_numbers() -> None:
    found = issue_numbers()
    assert not found, "issue numbers in src/ (say why in words; link notes from docs/):\n" + "\n".join(found)


def test_the_scan_sees_each_spelling(tmp_path: Path) -> None:
    lines = ["# fixed in issue 23", '"""Issue #7 said so."""', "x = 1  # issues 4 and 5", "issued 3 times"]
    (tmp_path / "m.py").write_text("\n".join(lines), encoding="utf-8")
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfeissue 9")
    assert [f.split(":")[1] for f in issue_numbers(tmp_path)] == ["1", "2", "3"]
