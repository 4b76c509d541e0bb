"""No run of :data:`RUN` identical lines appears twice in ``src``: text written twice is a decision with
two homes (two published simulators' declarations once shared a signature and a reply reader).

Lines are compared stripped of indentation, blank lines skipped. Import statements are left out: two
modules that need the same names say so in the same words, and that is no second home of anything.
A run repeated inside one file counts too, as long as the two runs do not overlap.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
RUN = 6


def _lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, stripped text)`` of the file's non-blank lines outside import statements."""
    text = path.read_text(encoding="utf-8")
    skipped: set[int] = set()
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skipped.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    numbered = enumerate(text.splitlines(), start=1)
    return [(n, line.strip()) for n, line in numbered if line.strip() and n not in skipped]


def repeated_runs(root: Path = SRC) -> list[str]:
    """Each run of :data:`RUN` lines seen before, as ``first place ~ second place: first line``."""
    first_seen: dict[tuple[str, ...], tuple[Path, int]] = {}
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        lines = _lines(path)
        for k in range(len(lines) - RUN + 1):
            run = tuple(text for _, text in lines[k : k + RUN])
            here = (path, lines[k][0])
            seen = first_seen.setdefault(run, here)
            if seen == here:
                continue
            same_file_overlap = seen[0] == path and here[1] <= _end(lines, seen[1])
            if not same_file_overlap:
                where = f"{seen[0].relative_to(root)}:{seen[1]} ~ {path.relative_to(root)}:{here[1]}"
                found.append(f"{where}: {run[0]}")
    return found


def _end(lines: list[tuple[int, str]], start: int) -> int:
    """The line number of the last line of the run that starts at line ``start``."""
    numbers = [n for n, _ in lines]
    return numbers[numbers.index(start) + RUN - 1]


def test_no_run_of_identical_lines_is_written_twice() -> None:
    found = repeated_runs()
    assert not found, (
        f"runs of {RUN} identical lines written twice in src/ (give the shared text one home):\n"
        + "\n".join(found[:20])
    )


def test_the_scan_finds_a_repeat_across_files_and_inside_one(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(RUN))
    (tmp_path / "a.py").write_text(
        f"import os\nimport re\ndef f():\n{body}\n\ndef g():\n{body}", encoding="utf-8"
    )
    (tmp_path / "b.py").write_text(f"import os\nimport re\ndef h():\n{body}", encoding="utf-8")
    (tmp_path / "c.py").write_text("def k():\n" + "    y = 1\n" * (RUN + 3), encoding="utf-8")
    found = repeated_runs(tmp_path)
    assert [f.split(":")[0] for f in found] == ["a.py", "a.py"], found
    assert found[0].startswith("a.py:4 ~ a.py:13") and found[1].startswith("a.py:4 ~ b.py:4"), found
