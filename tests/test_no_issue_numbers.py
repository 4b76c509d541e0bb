"""No issue numbers in ``src`` or in the reference pages under ``docs/``: the code and the docs say why in
their own words; the history of a change lives in git and in the dated notes under docs/notes/, not in a
docstring or a reference page a reader cannot follow. The reference pages hold no "Round N" sections
either: a measurement round is a dated note."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOCS = ROOT / "docs"
ISSUE_NUMBER = re.compile(r"\bissues? ?#? ?\d+", re.IGNORECASE)
#: A section named after a round of work: a Markdown heading, or a bold run-in heading, "Round 5 ...".
ROUND_SECTION = re.compile(r"^(?:#{1,6}\s+|\*\*)round\s+\d+", re.IGNORECASE)


def issue_numbers(root: Path = SRC) -> list[str]:
    """``path:line: text`` of every line under ``root`` (any text file) that cites an issue number."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return issue_numbers_in(files, root)


def issue_numbers_in(files: list[Path], root: Path) -> list[str]:
    """``path:line: text`` (path relative to ``root``) of every line of ``files`` citing an issue number."""
    found: list[str] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary data file
        for number, line in enumerate(text.splitlines(), start=1):
            if ISSUE_NUMBER.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def reference_pages(docs: Path = DOCS) -> list[Path]:
    """The reference pages: every ``docs/*.md``; the dated notes under ``docs/notes/`` are history."""
    return sorted(docs.glob("*.md"))


def round_sections(pages: list[Path]) -> list[str]:
    """``page:line: heading`` of every section of ``pages`` named after a round of work."""
    found = []
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if ROUND_SECTION.match(line.strip()):
                found.append(f"{page.name}:{number}: {line.strip()}")
    return found


def test_src_cites_no_issue_numbers() -> None:
    found = issue_numbers()
    assert not found, "issue numbers in src/ (say why in words; link notes from docs/):\n" + "\n".join(found)


def test_the_scan_sees_each_spelling(tmp_path: Path) -> None:
    lines = ["# fixed in issue 23", '"""Issue #7 said so."""', "x = 1  # issues 4 and 5", "issued 3 times"]
    (tmp_path / "m.py").write_text("\n".join(lines), encoding="utf-8")
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfeissue 9")
    assert [f.split(":")[1] for f in issue_numbers(tmp_path)] == ["1", "2", "3"]


def test_the_reference_pages_cite_no_issue_numbers() -> None:
    found = issue_numbers_in(reference_pages(), DOCS)
    assert not found, (
        "issue numbers in docs/*.md (say why in words; history goes in docs/notes/):\n" + "\n".join(found)
    )


def test_the_reference_pages_have_no_round_sections() -> None:
    found = round_sections(reference_pages())
    assert not found, "sections named after a round (move them to a dated note):\n" + "\n".join(found)


def test_the_docs_scans_see_a_planted_issue_number_and_round(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "notes").mkdir(parents=True)
    (docs / "page.md").write_text("# Page\n\n## Round 2: what moved (see below)\n\nas issue 24 said\n")
    (docs / "other.md").write_text("**Round 5** (a run-in heading)\n\nround 3 in a sentence is fine\n")
    (docs / "notes" / "2026-01-01-history.md").write_text("## Round 1 (issue 9)\n")
    pages = reference_pages(docs)
    assert [p.name for p in pages] == ["other.md", "page.md"]
    assert round_sections(pages) == [
        "other.md:1: **Round 5** (a run-in heading)",
        "page.md:3: ## Round 2: what moved (see below)",
    ]
    found = issue_numbers_in(pages, docs)
    assert found == ["page.md:5: as issue 24 said"]
