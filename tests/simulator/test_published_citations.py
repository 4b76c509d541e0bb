"""Every ``file:line`` citation of the fetched published code, in ``src`` docstrings, comments and field
descriptions (docs/config.md is printed from them) and in every docs page, points at a line that holds
what it cites.

A citation names its file (``simulator_response.py:150``, ``SAGE/test_npc.py:107``, ``dsv3 :91``,
``hard_player_simulator_dsv3.py lines 210-213``, ``SAGE :57``), or is a bare ``:N`` that continues the
file named last before it in the same docstring, comment or table cell (or in the table column's
header). Each citation states what it supports: one space after the cited lines (after the backquotes
that close them), a code span holding a token the cited lines must hold, an identifier, a constant or
a key name (``simulator_response.py:43`` ``"emo_point": 40``, ``dsv3 :219`` ``int(planning["change"])``). A citation
without a token fails, and so does one whose token is not on its lines: a citation moved to another
line fails even where that line is cited elsewhere. A bare ``:N`` whose file cannot be told is
refused: write the file.

The published files are read from ``../shared/data/published_code`` (the test skips without them). A
citation of another published file (the RLVER rollouts, the dataset code, the training script) is
checked when ``RLVER_PUBLISHED_REPO`` names a checkout of zzjweb/digitalhuman.
"""

from __future__ import annotations

import ast
import functools
import io
import os
import re
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The names a citation gives the fetched files, and the file each is.
FETCHED = {
    "simulator_response.py": "sage/simulator_response.py",
    "npc_response.py": "sage/npc_response.py",
    "test_npc.py": "sage/test_npc.py",
    "hard_player_simulator_dsv3.py": "rlver/hard_player_simulator_dsv3.py",
    "dsv3": "rlver/hard_player_simulator_dsv3.py",
    "system_prompt.py": "rlver/system_prompt.py",
}
#: Other published files a citation may name, by their path in zzjweb/digitalhuman.
REPO = {
    "vllm_rollout_spmd_think.py": "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
    "vllm_rollout_spmd.py": "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py",
    "rl_dataset.py": "RLVER/code/verl/utils/dataset/rl_dataset.py",
    "url_environment.py": "RLVER/code/verl/environments/url_environment.py",
    "train_rlver.sh": "RLVER/code/train_rlver.sh",
}
#: Names that are files but not published code (rlver's own, or verl's): a bare ``:N`` after one of
#: them is that file's and is not checked here.
ELSEWHERE = (
    "ray_trainer.py", "fsdp_workers.py", "dp_actor.py", "core_algos.py", "torch_functional.py",
    "ppo_trainer.yaml", "README.md", "loaders.py", "sage_en.py", "sage_zh.py", "sage.py", "replay_buffer.py",
)  # fmt: skip
_NAMES = "|".join(re.escape(n) for n in sorted([*FETCHED, *REPO, *ELSEWHERE], key=len, reverse=True))
#: The token a citation states: one space after the cited lines (and the backquotes closing them),
#: then a code span that the cited lines must hold.
_TOKEN = r"(?:`{0,2} ``?[^`\n]+``?)"
_CITE = re.compile(
    rf"(?P<file>(?<![\w.])(?:{_NAMES}))(?P<lines>(?:`?\s?(?:lines?\s)?:?\d+(?:-\d+)?{_TOKEN}?)"
    rf"(?:,\s?`{{0,2}}:?\d+(?:-\d+)?{_TOKEN}?`{{0,2}})*)?"
    rf"|(?P<sage>SAGE\s?`?:)(?P<sage_lines>\d+(?:-\d+)?{_TOKEN}?)"
    rf"|(?<![\w`.\[\]\)\d'\"])`{{0,2}}:(?P<bare>\d+(?:-\d+)?{_TOKEN}?)"
)
#: One cited line or range and the token stated after it, if any.
_LINES = re.compile(r"(\d+(?:-\d+)?)(?:`{0,2} ``?([^`\n]+)``?)?")


def _texts() -> Iterator[tuple[str, str, str | None]]:
    """``(where, text, column header)``: each docstring and comment block of ``src``, and each line
    (each cell of a table row, with its column's header) of docs/protocol.md."""
    for path in sorted((ROOT / "src").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f"{where}:{getattr(node, 'lineno', 1)}", doc, None
        block: list[str] = []
        last = -2
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.COMMENT:
                continue
            if block and tok.start[0] != last + 1:
                yield f"{where}:{last}", "\n".join(block), None
                block = []
            block.append(tok.string)
            last = tok.start[0]
        if block:
            yield f"{where}:{last}", "\n".join(block), None
        yield from _descriptions(source, where)
    for page in sorted((ROOT / "docs").glob("*.md")):
        yield from _page(page)


def _descriptions(source: str, where: str) -> Iterator[tuple[str, str, None]]:
    """Each ``description=`` string of a ``Field`` (docs/config.md is printed from them)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "description":
                    text = _joined(keyword.value)
                    if text:
                        yield f"{where}:{keyword.value.lineno}", text, None


def _joined(node: ast.expr) -> str:
    """A description's text: a string, or strings joined by ``+`` / implicit concatenation."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _joined(node.left) + _joined(node.right)
    return ""


def _page(page: Path) -> Iterator[tuple[str, str, str | None]]:
    """Each paragraph of a docs page, and each cell of its tables with its column's header."""
    name = f"docs/{page.name}"
    header: list[str] | None = None
    paragraph: list[str] = []
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fenced ^= line.startswith("```")
        if fenced or line.startswith("```"):  # commands, not citations
            continue
        if not line.startswith("|"):
            header = None
            if line.strip():
                paragraph.append(line)
            elif paragraph:
                yield f"{name}:{number - 1}", "\n".join(paragraph), None
                paragraph = []
            continue
        cells = line.strip().strip("|").split("|")
        if set(line) <= set("|-: "):
            continue
        header = header or cells
        for column, cell in enumerate(cells):
            yield f"{name}:{number}", cell, header[column] if column < len(header) else None
    if paragraph:
        yield f"{name}:end", "\n".join(paragraph), None


@functools.cache
def citations() -> tuple[tuple[str, str | None, str, str | None], ...]:
    """``(where, file name or None, lines, token or None)`` for every citation; file ``None``: a bare
    ``:N`` whose file cannot be told; token ``None``: none stated. Read once a session: every source
    file and docs page is parsed."""
    return tuple(_citations())


def _citations() -> Iterator[tuple[str, str | None, str, str | None]]:
    for where, text, column in _texts():
        named = re.search(rf"(?<![\w.])({_NAMES})", column or "")
        last = named.group(1) if named else None
        for m in _CITE.finditer(text):
            if m.group("file"):
                last = m.group("file")
                cited = m.group("lines") or ""
            elif m.group("sage"):
                last = "simulator_response.py"
                cited = m.group("sage_lines")
            else:
                cited = m.group("bare")
            for lines, token in _LINES.findall(cited):
                yield where, last, lines, token or None


def _span(lines: str) -> tuple[int, int]:
    first, _, last = lines.partition("-")
    return int(first), int(last or first)


def _check(files: dict[str, str], read: Callable[[str], str]) -> list[str]:
    """Every citation of ``files`` that states no token, or whose cited lines do not hold it."""
    wrong = []
    for where, name, lines, token in citations():
        if name is None:
            wrong.append(f"{where}: ':{lines}' names no file; write the file before it")
            continue
        if name not in files:
            continue
        if token is None:
            wrong.append(f"{where}: {name}:{lines} states no token: write `{name}:{lines}` `TOKEN`")
            continue
        first, last = _span(lines)
        cited = "\n".join(read(files[name]).splitlines()[first - 1 : last])
        if token not in cited:
            wrong.append(f"{where}: {name}:{lines} does not hold {token!r}")
    return sorted(set(wrong))


def test_every_citation_of_the_fetched_code_holds_what_it_cites(shared_data: Path) -> None:
    code = shared_data / "published_code"
    wrong = _check(FETCHED, lambda f: (code / f).read_text(encoding="utf-8"))
    assert not wrong, "\n".join(wrong)


@pytest.mark.skipif(not os.environ.get("RLVER_PUBLISHED_REPO"), reason="RLVER_PUBLISHED_REPO not set")
def test_every_citation_of_the_other_published_files_holds_what_it_cites() -> None:
    repo = Path(os.environ["RLVER_PUBLISHED_REPO"])
    wrong = _check(REPO, lambda f: (repo / f).read_text(encoding="utf-8"))
    assert not wrong, "\n".join(wrong)
