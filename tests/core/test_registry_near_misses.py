"""Every registry of choices refuses a near-miss name the same way, through the real command line
(issue 44, item 1): one wording (``unknown X 'y'; did you mean 'z'? known: ...``), one ``error:`` line,
exit code 2, before any work starts. A config value goes through the config loader (``rlver config
show --set``, which reads a config as ``train`` and ``eval`` do); a flag through the command that
takes it; a command through the root app.

:func:`test_every_registry_in_the_package_is_walked_here` finds each module-level ``Registry`` in
``src/rlver`` from the source, so a new table (a rollout backend's, say) fails until it has a case here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import run_rlver
from rlver.cli import COMMANDS
from rlver.env.rewards import REWARD_MODES
from rlver.llm.spec import KINDS as MODEL_KINDS
from rlver.registry import Registry
from rlver.simulator.factory import kinds
from rlver.simulator.llm.protocols import PROTOCOLS
from rlver.simulator.spec import SimulatorSpec
from rlver.train.algorithms import ALGORITHMS
from rlver.train.backends import BACKENDS

SRC = Path(__file__).resolve().parents[2] / "src" / "rlver"
SHOW = ("config", "show", "tiny-offline")
LLM_USER = (
    "--set", "simulator.kind=llm", "--set", "simulator.model.model=m", "--set", "simulator.model.base_url=http://127.0.0.1:9/v1",
)  # fmt: skip


@dataclass(frozen=True)
class Case:
    """A registry (as the place it is read offers it), one of its names, and the command line that
    hands it a name."""

    where: str  # module:NAME of the registry, for the coverage check
    choices: Callable[[], Registry[Any]]
    name: str
    argv: Callable[[str], tuple[str, ...]]


CASES: dict[str, Case] = {
    "algorithm": Case(
        "rlver.train.algorithms:ALGORITHMS",
        lambda: ALGORITHMS,
        "grpo",
        lambda n: (*SHOW, "--set", f"algorithm.name={n}"),
    ),
    "rollout backend": Case(
        "rlver.train.backends:BACKENDS",
        lambda: BACKENDS,
        "hf",
        lambda n: (*SHOW, "--set", f"rollout.backend={n}"),
    ),
    "reward mode": Case(
        "rlver.env.rewards:REWARD_MODES",
        lambda: REWARD_MODES,
        "delta",
        lambda n: (*SHOW, "--set", f"rollout.reward.mode={n}"),
    ),
    "simulator kind (config)": Case(
        "rlver.simulator.spec:KINDS",
        SimulatorSpec.from_blocks,  # a config may name only the kinds built from a spec
        "offline",
        lambda n: (*SHOW, "--set", f"simulator.kind={n}"),
    ),
    "simulator kind (flag)": Case(
        "rlver.simulator.spec:KINDS",
        kinds,  # chat offers the kinds built from a spec
        "llm",
        lambda n: ("chat", "--simulator", n),
    ),
    "model kind": Case(
        "rlver.llm.spec:KINDS",
        lambda: MODEL_KINDS,
        "local",
        lambda n: (*SHOW, *LLM_USER, "--set", f"simulator.model.kind={n}"),
    ),
    "protocol (config)": Case(
        "rlver.simulator.llm.protocols.base:PROTOCOLS",
        lambda: PROTOCOLS,
        "rlver-v1",
        lambda n: (*SHOW, *LLM_USER, "--set", f"simulator.prompts={n}"),
    ),
    "protocol (flag)": Case(
        "rlver.simulator.llm.protocols.base:PROTOCOLS",
        lambda: PROTOCOLS,
        "sage",
        lambda n: ("eval", "--agent-tiny", "--sim-prompts", n, "--out", "run"),
    ),
}


def near_miss(name: str) -> str:
    """``name`` with its middle letter dropped: a typo the nearest-name hint must fix."""
    middle = len(name) // 2
    return name[:middle] + name[middle + 1 :]


def rlver_main(
    argv: tuple[str, ...], cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """``rlver ARGV`` through the console script's own entry point (:func:`rlver.cli.main`), in this
    process (a subprocess per case took 7-9 s on a loaded 2-core machine): its exit code and stderr."""
    from rlver.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setattr("sys.argv", ["rlver", *argv])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit) as ended:
        main()
    return int(ended.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_near_miss_is_refused_with_did_you_mean_and_exit_2(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    c = CASES[case]
    choices = c.choices()
    assert c.name in choices, f"{case}: the case names an entry of its registry"
    typo = near_miss(c.name)
    code, err = rlver_main(c.argv(typo), tmp_path, monkeypatch, capsys)
    expected = choices.unknown_message(typo)
    assert f"did you mean {c.name!r}?" in expected and f"known: {', '.join(choices)}" in expected
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
    assert not any(tmp_path.iterdir()), "refused before any work (nothing written)"


def test_a_near_miss_command_is_refused_with_did_you_mean_and_exit_2(tmp_path: Path) -> None:
    """The command table (:data:`rlver.cli.COMMANDS`): each entry's commands are what a user types, and
    a typo of one gets the same wording, listing every command, from the root app and from a group
    (run as a real subprocess, ``python -m rlver``)."""
    assert "eval" in COMMANDS and "data" in COMMANDS
    proc = run_rlver("evl", cwd=tmp_path)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith("error: rlver: unknown command 'evl'; did you mean 'eval'? known: audit, ")
    for name in ("eval", "score", "train", "export", "data", "simulator"):
        assert f" {name}," in line or f" {name} (see" in line, (name, line)
    group = run_rlver("data", "dowload", cwd=tmp_path)
    assert group.returncode == 2
    assert group.stderr.strip() == (
        "error: rlver data: unknown command 'dowload'; did you mean 'download'? known: download, list "
        "(see rlver data --help)"
    )


def _module_registries() -> set[str]:
    """``module:NAME`` of every module-level assignment of a ``Registry(...)`` in ``src/rlver``."""
    found: set[str] = set()
    for path in sorted(SRC.rglob("*.py")):
        parts = ["rlver", *path.relative_to(SRC).with_suffix("").parts]
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            value: ast.expr | None
            if isinstance(node, ast.Assign):
                value, targets = node.value, node.targets
            elif isinstance(node, ast.AnnAssign):
                value, targets = node.value, [node.target]
            else:
                continue
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "Registry":
                found |= {f"{module}:{ast.unparse(t)}" for t in targets}
    return found


def test_every_registry_in_the_package_is_walked_here() -> None:
    walked = {c.where for c in CASES.values()} | {"rlver.cli:COMMANDS"}
    assert _module_registries() == walked


def test_every_registry_names_its_built_in_entries_lazily() -> None:
    """Each built-in entry of every module-level table names its target and settings class as
    ``"module:attr"`` (or has none), so adding one is a module plus a line: the table's module imports
    no entry's module, and an entry's module may import the table's without a cycle."""
    import importlib

    eager = []
    for where in sorted(_module_registries()):
        module, name = where.split(":")
        table: Registry[Any] = getattr(importlib.import_module(module), name)
        for entry in table.entries():
            for part in ("target", "settings"):
                value = getattr(entry, part)
                if value is not None and not isinstance(value, str):
                    eager.append(f"{where} {entry.name!r}: {part} {value!r}")
    assert not eager, "name these as 'module:attr':\n" + "\n".join(eager)
