"""The package's shape, checked from the source so that it cannot drift (docs/architecture.md).

* **Layers.** Every ``rlver`` import — module level or inside a function, absolute or relative — goes to
  the importer's own layer or a lower one. ``train`` and ``eval`` sit side by side and never import each
  other: a training run and a benchmark share the layers below them, not each other's code.
* **No import circles.** No modules import each other in a loop, counting every import: inside a
  function, under ``if TYPE_CHECKING:`` (a type-only import still ties two modules together) and
  relative ones; the failure names the circle's path. A lazy registry's ``"module:attr"`` is no import.
* **Function size.** No function body is over :data:`MAX_BODY_LINES` lines. The signature does not
  count (a typer command declares its options there); the docstring does.

Both checks read the files with :mod:`ast`, so they see imports hidden in functions too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rlver"

#: Layer of each top-level module or package of ``rlver``, lowest first. Equal numbers share a layer.
LAYERS: dict[str, int] = {
    "errors": 0,
    "records": 0,
    "io": 0,
    "config": 0,
    "config_errors": 0,  # what a config error says: the key, its file and line or flag, the range
    "redaction": 0,  # secrets masked in what is printed and written
    "rules": 0,
    "stats": 0,
    "seeding": 0,
    "interrupt": 0,
    "heartbeat": 0,
    "registry": 0,  # the one registry type every table of choices is built from (issue 44)
    "limits": 0,  # the sizes rlver accepts: a text field, the dialogues one run holds
    "migrate": 0,  # every older shape of a config block or manifest, upgraded at read time
    "tables": 0,  # terminal tables that are never cut (eval, calibrate)
    "charts": 0,  # static SVG charts (pygal): the report's figures and calibrate's
    "extras": 0,  # which optional extras are installed; the one refusal when a command needs one
    "llm": 1,
    "models": 1,
    "embedding": 1,
    "profiles": 2,
    "simulator": 3,
    "env": 4,
    "rollout": 5,
    "transcripts": 5,
    "manifest": 5,
    "testing": 5,
    "train": 6,
    "eval": 6,
    # Simulator fidelity (calibrate, appraisal fit, probes) measures the simulated user against released
    # transcripts: it reads the simulator, the environment and transcript files, beside train and eval.
    "fidelity": 6,
    "integrations": 7,
    "demo": 7,  # the demo's flow: train, evaluate, report (above both train and eval)
    "cli": 8,
    "__main__": 9,
    "__init__": 0,  # the package root: its version, nothing imported
}
#: Pairs on one layer that must not import each other.
SIBLINGS_APART = {frozenset({"train", "eval"})}
MAX_BODY_LINES = 80


@dataclass(frozen=True)
class Edge:
    importer: str  # path relative to src/rlver
    line: int
    target: str  # dotted module imported

    def __str__(self) -> str:
        return f"src/rlver/{self.importer}:{self.line} imports {self.target}"


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "data" not in p.relative_to(root).parts[:-1])


def rlver_imports(path: Path, root: Path = SRC) -> list[Edge]:
    """Every import of an ``rlver`` module in ``path``, resolved to its absolute dotted name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    edges: list[Edge] = []
    rel = str(path.relative_to(root))
    package = ["rlver", *path.relative_to(root).parts[:-1]]  # for resolving relative imports
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            edges += [Edge(rel, node.lineno, a.name) for a in node.names if a.name.startswith("rlver.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target == "rlver":  # `from rlver import x`: x is a module, or a name of the package root
                edges += [
                    Edge(rel, node.lineno, f"rlver.{_module_or_root(root, a.name)}") for a in node.names
                ]
            elif target.startswith("rlver."):
                edges.append(Edge(rel, node.lineno, target))
    return edges


def _module_or_root(root: Path, name: str) -> str:
    return name if (root / name).is_dir() or (root / f"{name}.py").is_file() else "__init__"


def layer_breaks(root: Path = SRC) -> list[str]:
    problems: list[str] = []
    for path in _modules(root):
        here = path.relative_to(root).parts[0].removesuffix(".py")
        for edge in rlver_imports(path, root):
            there = edge.target.split(".")[1]
            if there == here:
                continue
            if here not in LAYERS or there not in LAYERS:
                unknown = here if here not in LAYERS else there
                problems.append(f"{edge}: `{unknown}` has no layer in tests/test_architecture.py LAYERS")
            elif LAYERS[there] > LAYERS[here]:
                problems.append(
                    f"{edge}: layer {LAYERS[there]} `{there}` is above layer {LAYERS[here]} `{here}`"
                )
            elif frozenset({here, there}) in SIBLINGS_APART:
                problems.append(f"{edge}: `{here}` and `{there}` must not import each other")
    return problems


def long_functions(root: Path = SRC) -> list[str]:
    found: list[str] = []
    for path in _modules(root):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = (node.end_lineno or node.lineno) - node.body[0].lineno + 1
                if body > MAX_BODY_LINES:
                    where = f"src/rlver/{path.relative_to(root)}:{node.lineno}"
                    found.append(f"{where} {node.name}: {body} lines")
    return found


def test_the_import_layers_hold() -> None:
    problems = layer_breaks()
    assert not problems, "imports that break the layers (docs/architecture.md):\n" + "\n".join(problems)


def module_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Module → the rlver modules it imports: every import in the file, at module level, inside a
    function or under ``if TYPE_CHECKING:``, absolute or relative (a type-only import still ties the
    two modules together: neither can be read, moved or tested without the other). ``from pkg import
    mod`` is an edge to ``pkg.mod``, not to ``pkg``; an import of a package is an edge to its
    ``__init__``. A lazy registry's ``"module:attr"`` string is not an import."""
    names = {_dotted(root, p) for p in _modules(root)}
    graph: dict[str, set[str]] = {}
    for path in _modules(root):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = _dotted(root, path).split(".")
        if path.name != "__init__.py":
            package = package[:-1]
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, node.module] if node.module else base)
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    targets.add(sub if sub in names else module)
        here = _dotted(root, path)
        graph[here] = {t for t in targets if t in names and t != here}
    return graph


def _dotted(root: Path, path: Path) -> str:
    parts = ["rlver", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of imports, one per group of modules that reach each other (strongly connected):
    the shortest path from the group's first module back to itself, as ``[a, b, ..., a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: set[str] = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle_through(graph, group) for group in groups]


def _circle_through(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest import path from the group's first module (by name) back to it, inside the group."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph.get(node, set()) & group):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no circle through {sorted(group)}")  # a strongly connected group has one


def test_no_import_cycles() -> None:
    """Package ``__init__`` files that re-export their modules are part of the graph, so keep them thin;
    a module that needs another's type for its hints only names it through a protocol of its own."""
    cycles = import_cycles(module_graph())
    assert not cycles, "modules that import each other (every import counts, TYPE_CHECKING ones too):\n" + (
        "\n".join(" -> ".join(c) for c in cycles)
    )


def test_no_function_body_is_over_the_limit() -> None:
    found = long_functions()
    assert not found, f"function bodies over {MAX_BODY_LINES} lines:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "from rlver.eval.metrics import compute_metrics\n",
            "imports rlver.eval.metrics: `train` and `eval`",
        ),
        ("def f():\n    from rlver.eval import report\n", "imports rlver.eval: `train` and `eval`"),
        ("from ..cli import main\n", "imports rlver.cli: layer 8 `cli` is above layer 6 `train`"),
        ("from rlver.newthing import x\n", "`newthing` has no layer"),
    ],
)
def test_the_layer_check_sees_every_kind_of_import(tmp_path: Path, source: str, expected: str) -> None:
    """The checker must catch a bad import at module level, inside a function, relative, or to an unknown layer."""
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "step.py").write_text(source, encoding="utf-8")
    problems = layer_breaks(tmp_path)
    assert len(problems) == 1 and expected in problems[0], problems


def test_the_size_check_counts_the_body_not_the_signature(tmp_path: Path) -> None:
    params = "".join(f"    p{i}: int = {i},\n" for i in range(100))
    short = f"def declared(\n{params}) -> None:\n    pass\n"
    long = "def long() -> None:\n" + "    x = 1\n" * (MAX_BODY_LINES + 1)
    (tmp_path / "mod.py").write_text(short + long, encoding="utf-8")
    assert [f.split()[1] for f in long_functions(tmp_path)] == ["long:"]


def test_the_cycle_check_finds_lazy_type_only_and_relative_loops(tmp_path: Path) -> None:
    """A loop closed by an import inside a function, by a type-only import or by a relative import is
    a circle; a lazy registry's ``"module:attr"`` string is not an import."""
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "eval" / "a.py").write_text("from rlver.eval import b\n", encoding="utf-8")
    (tmp_path / "eval" / "b.py").write_text("def f():\n    from rlver.eval.a import x\n", encoding="utf-8")
    (tmp_path / "eval" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nfrom rlver.eval import a\nif TYPE_CHECKING:\n    from rlver.eval.c2 import y\n",
        encoding="utf-8",
    )
    (tmp_path / "eval" / "c2.py").write_text("from .d import z\n", encoding="utf-8")
    (tmp_path / "eval" / "d.py").write_text(
        "from . import c\nLAZY = 'rlver.eval.a:thing'\n", encoding="utf-8"
    )
    assert import_cycles(module_graph(tmp_path)) == [
        ["rlver.eval.a", "rlver.eval.b", "rlver.eval.a"],
        ["rlver.eval.c", "rlver.eval.c2", "rlver.eval.d", "rlver.eval.c"],
    ]


def test_rlver_never_imports_the_verifiers_environment() -> None:
    """``src/rlver_sentient`` (the verifiers environment) sits above rlver: it imports rlver, and no
    rlver module imports it, so the core never needs verifiers."""
    found = []
    for path in _modules(SRC):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [
                f"src/rlver/{path.relative_to(SRC)}:{node.lineno}"
                for n in names
                if n.startswith("rlver_sentient")
            ]
    assert not found, found
