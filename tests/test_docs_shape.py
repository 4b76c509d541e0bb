"""The docs' shape: a README a newcomer reads in one go, reference pages of a readable size, and links
that lead somewhere. Each check reads the files as they are, so a page that grows past its limit, a
heading renamed under a link, or a link to the old performance page fails here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: The longest the README may be, in lines: it is the first page a newcomer reads.
README_MAX_LINES = 120
#: The longest a reference page (every ``docs/*.md``) may be: one that grows past it is split into
#: pages of their own subjects, and its measurement rounds go to dated notes under docs/notes/.
PAGE_MAX_LINES = 500


def max_lines(root: Path = ROOT) -> dict[Path, int]:
    """Each capped page and its limit: the README, and every reference page (not the dated notes)."""
    return {root / "README.md": README_MAX_LINES} | {
        p: PAGE_MAX_LINES for p in sorted((root / "docs").glob("*.md"))
    }


def too_long(root: Path = ROOT) -> list[str]:
    """``page has N lines; at most M`` for every capped page over its limit."""
    found = []
    for path, limit in max_lines(root).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(root)} has {lines} lines; at most {limit}")
    return found


_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
_INLINE_CODE = re.compile(r"`+[^`]*`+")


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks: a ``#`` in a shell block is not a heading."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (word characters, spaces and
    hyphens kept), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page offers: its headings' slugs (a repeated one numbered as GitHub numbers it)
    and explicit ``<a id=...>`` anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = path.read_text(encoding="utf-8")
    for _, line in prose_lines(text):
        found.update(_HTML_ANCHOR.findall(line))
        heading = _HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, target) of every Markdown link and image on the page, outside code."""
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        line = _INLINE_CODE.sub("", line)
        for pattern in (_LINK, _IMAGE):
            for match in pattern.finditer(line):
                yield number, match.group(1)


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """Relative links of ``path`` whose file does not exist, or whose ``#anchor`` is not a heading
    (or explicit anchor) of the page it names. Web addresses are not followed."""
    problems = []
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not linked.is_relative_to(root.resolve()):  # beside the checkout: not in a fresh clone
            problems.append(f"{where}: outside the repository")
        elif not linked.exists():
            problems.append(f"{where}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{where}: no heading with anchor #{anchor} in {linked.name}")
    return problems


def test_the_readme_and_every_reference_page_stay_within_their_length() -> None:
    assert too_long() == []


def test_the_length_check_sees_every_reference_page_and_skips_the_notes(tmp_path: Path) -> None:
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    (tmp_path / "README.md").write_text("# rlver\n" * README_MAX_LINES)
    (tmp_path / "docs" / "short.md").write_text("line\n" * PAGE_MAX_LINES)
    (tmp_path / "docs" / "long.md").write_text("line\n" * (PAGE_MAX_LINES + 1))
    (tmp_path / "docs" / "notes" / "2026-01-01-round.md").write_text("line\n" * 900)
    assert too_long(tmp_path) == [f"docs/long.md has {PAGE_MAX_LINES + 1} lines; at most {PAGE_MAX_LINES}"]
    (tmp_path / "README.md").write_text("# rlver\n" * (README_MAX_LINES + 1))
    assert len(too_long(tmp_path)) == 2


def readme_history(text: str) -> list[str]:
    """What belongs in a dated note or a reference page, not in the README: issue numbers, dates, the
    machines a figure was measured on ("the 2-core box") and agreement coefficients."""
    found = re.findall(r"\bissues?\s+\d+\b|(?<![\w&])#\d+\b", text, re.IGNORECASE)
    found += re.findall(r"\b\d{4}-\d{2}-\d{2}\b", text)
    found += re.findall(r"\b(?:dev )?box(?:es)?\b|\bSpearman\b|\bPearson\b", text, re.IGNORECASE)
    return found


def test_the_readme_holds_no_issue_numbers_dates_box_names_or_coefficients() -> None:
    assert readme_history(README.read_text(encoding="utf-8")) == []


def test_the_history_check_can_fail() -> None:
    assert readme_history("measured 2026-11-27 (issue 43); see #12")
    assert readme_history("as issues 3 and 4 said") == ["issues 3"]
    assert readme_history("on the 2-core box: per-turn Spearman 0.65") == ["box", "Spearman"]
    assert not readme_history("held-out score 12.9, 30 steps, 48/48 replies, Python 3.10")


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(path: Path) -> None:
    problems = broken_links(path)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "b.md").write_text("# The demo (`rlver demo`)\n\n## Run it\n\n## Run it\n")
    (tmp_path / "x.md").write_text("# beside the checkout\n")
    page = root / "docs" / "a.md"
    page.write_text(
        "[ok](b.md#the-demo-rlver-demo) [ok](b.md#run-it-1) [web](https://x.org/y.md) `[code](no.md)`\n"
        "[gone](c.md) [moved](b.md#the-demo)\n```\n[fenced](no.md)\n```\n[beside](../../x.md)\n"
    )
    problems = broken_links(page, root=root)
    assert len(problems) == 3, problems
    assert "docs/a.md:2: c.md" in problems[0] and "#the-demo " in problems[1]
    assert "outside the repository" in problems[2]


def test_nothing_points_at_the_old_performance_page() -> None:
    """docs/benchmarks.md became docs/performance.md (docs/benchmark.md, the Sentient Benchmark, is
    another page): no file of the repository names the old one."""
    stale = []
    for folder in ("src", "tests", "bench", "docs", ".ci"):
        for path in sorted((ROOT / folder).rglob("*")):
            if (DOCS / "notes") in path.parents:  # dated notes are history: they may name old files
                continue
            if any(part.endswith(".egg-info") for part in path.parts):  # pip's build output, not ours
                continue
            if path.suffix in {".py", ".md", ".toml", ".yaml", ".yml", ".txt", ""} and path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                if re.search(r"\bbenchmarks\.md\b", text) and path != Path(__file__).resolve():
                    stale.append(str(path.relative_to(ROOT)))
    for name in ("README.md", "Makefile", "pyproject.toml"):
        if re.search(r"\bbenchmarks\.md\b", (ROOT / name).read_text(encoding="utf-8")):
            stale.append(name)
    assert not stale, "files that still name docs/benchmarks.md: " + ", ".join(stale)
    assert (DOCS / "performance.md").is_file() and not (DOCS / "benchmarks.md").exists()


def pages_named_in_code(root: Path = ROOT) -> list[str]:
    """Every ``docs/<page>.md`` that a module, message or test under src/, bench/ or tests/ names and
    that does not exist (a page moved or renamed without its readers)."""
    missing = []
    for folder in ("src", "bench", "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            if path == Path(__file__).resolve():  # this file's own examples
                continue
            text = path.read_text(encoding="utf-8")
            for match in re.finditer(r"\bdocs/([A-Za-z0-9_./-]+?\.md)\b", text):
                if not (root / "docs" / match.group(1)).is_file():
                    line = text.count("\n", 0, match.start()) + 1
                    missing.append(f"{path.relative_to(root)}:{line}: {match.group(0)}")
    return missing


def test_every_docs_page_the_code_names_exists() -> None:
    assert pages_named_in_code() == []


def test_the_named_page_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("# here\n", encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text('"""see docs/here.md and\ndocs/gone.md"""\n', encoding="utf-8")
    assert pages_named_in_code(tmp_path) == ["src/m.py:2: docs/gone.md"]
