"""An unset device means one thing everywhere (issue 44): ``rlver.models.devices.default_device``.

The chat-model wrapper, the training loader and the memory guard's probe used to decide "CUDA if
available" each on their own; these tests hold that only the one home makes the choice and that the
loader and the guard agree with it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from rlver.models.devices import default_device
from rlver.train.loading import resolve_device
from rlver.train.memory_guard import device_memory

SRC = Path(__file__).resolve().parents[2] / "src" / "rlver"


def default_device_choices(root: Path = SRC) -> list[str]:
    """Modules that pick a device with ``X if <...>.cuda.is_available() else Y`` (an if-expression)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.IfExp) and "cuda.is_available" in ast.unparse(node.test):
                found.append(str(path.relative_to(root)))
    return found


def test_only_the_home_chooses() -> None:
    assert default_device_choices() == ["models/devices.py"]


def test_the_scan_sees_a_second_choice(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\nd = 'cuda' if torch.cuda.is_available() else 'cpu'\n")
    assert default_device_choices(tmp_path) == ["a.py"]


def test_loader_and_guard_agree_with_the_home() -> None:
    expected = default_device()
    assert expected == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device(None).type == expected
    probe = device_memory(None)
    assert probe is not None and probe == device_memory(expected) and probe.type == expected
    import rlver.llm.local as local

    assert local.default_device is default_device  # the wrapper reads the same rule
