"""docs/architecture.md, "Adding things": a rollout backend is one new module plus one registry line.

In a copy of the tree (``src/``, the architecture tests and ``pyproject.toml``) this test adds a
``toy`` backend the way a vLLM backend would join: ``src/rlver/train/backends/toy.py`` (a
``RolloutBackend`` subclass that samples from its own copy of the weights, with a setting of its own,
importing the registry's package as a real backend may) and one ``Entry`` line in ``BACKENDS``. Then,
in that copy, the layer and import-cycle tests pass and ``rlver train`` runs a real step with
``rollout.backend=toy``. The files that differ from the original tree are counted, and the count must
be the one docs/architecture.md's additions table states, so neither can change alone.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import run_rlver

REPO = Path(__file__).resolve().parents[2]
BACKENDS_INIT = Path("src/rlver/train/backends/__init__.py")
TOY = Path("src/rlver/train/backends/toy.py")

#: The new module, as a backend author writes it.
TOY_MODULE = '''"""``toy``: the local sampler on its own copy of the policy, synced after each update."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import Field

from rlver.llm.base import ChatModel
from rlver.train.backends import BACKENDS
from rlver.train.backends.base import BackendSettings, RolloutBackend


class ToySettings(BackendSettings):
    max_batch_size: int = Field(default=2, ge=1)


class ToyBackend(RolloutBackend[ToySettings]):
    settings_class = ToySettings

    def build(self, policy: Any, tokenizer: Any, device: Any) -> ChatModel:
        from rlver.llm.local import LocalChatModel

        self.engine = copy.deepcopy(policy)  # its own weights, as an inference engine keeps them
        self.synced = 0
        return LocalChatModel(
            self.engine, tokenizer, device=str(device), max_batch_size=self.settings.max_batch_size, name="toy"
        )

    def sync(self, policy: Any) -> None:
        self.engine.load_state_dict(policy.state_dict())
        self.synced += 1

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "about": BACKENDS.description(self.name), "synced": self.synced}
'''

#: The registry line.
TOY_ENTRY = (
    '        Entry("toy", "hf on its own copy of the weights", "rlver.train.backends.toy:ToyBackend"),'
)

STEP = [
    "rollout.batch_size=2", "rollout.n_per_profile=2", "rollout.rules.max_assistant_turns=2",
    "rollout.max_new_tokens=6", "eval.every=0", "eval.at_start=false", "run.steps=1",
    "run.progress=false", "run.tensorboard=false",
    "rollout.backend=toy", "rollout.backend_settings.max_batch_size=3",
]  # fmt: skip


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")
    }


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "src", dest / "src", ignore=ignore)
    (dest / "tests").mkdir()
    shutil.copy2(REPO / "tests" / "test_architecture.py", dest / "tests" / "test_architecture.py")
    shutil.copy2(REPO / "pyproject.toml", dest / "pyproject.toml")


def _add_the_backend(tree: Path) -> None:
    """The two edits: the new module, and one line before the registry's closing bracket."""
    (tree / TOY).write_text(TOY_MODULE, encoding="utf-8")
    init = tree / BACKENDS_INIT
    text = init.read_text(encoding="utf-8")
    closing = "\n    ],\n)\n"
    assert text.count(closing) == 1, "BACKENDS no longer ends its entries with '    ],\\n)'"
    init.write_text(text.replace(closing, f"\n{TOY_ENTRY}{closing}"), encoding="utf-8")


def _changed(original: dict[str, bytes], copy: dict[str, bytes]) -> list[str]:
    return sorted(k for k in original.keys() | copy.keys() if original.get(k) != copy.get(k))


def _documented_count() -> int:
    """The "files" column of the additions table's rollout-backend row."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    (row,) = [line for line in text.splitlines() if line.startswith("| a rollout backend")]
    return int(row.split("|")[2].strip())


@pytest.mark.slow
def test_a_rollout_backend_is_one_module_and_one_registry_line(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _copy_tree(tree)
    original = _files(tree)
    _add_the_backend(tree)
    changed = _changed(original, _files(tree))
    assert changed == sorted([str(BACKENDS_INIT), str(TOY)])
    assert len(changed) == _documented_count() == 2
    diff = difflib.ndiff(
        original[str(BACKENDS_INIT)].decode().splitlines(),
        (tree / BACKENDS_INIT).read_text(encoding="utf-8").splitlines(),
    )
    assert [line for line in diff if line[:2] in ("+ ", "- ")] == [f"+ {TOY_ENTRY}"]

    env = {"PYTHONPATH": str(tree / "src")}
    arch = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_architecture.py"],
        capture_output=True, text=True, cwd=tree, timeout=300, env={**_clean_env(), **env},
    )  # fmt: skip
    assert arch.returncode == 0, arch.stdout[-3000:]
    assert re.search(r"\b\d+ passed", arch.stdout) and "failed" not in arch.stdout

    sets = [arg for key in STEP for arg in ("--set", key)]
    proc = run_rlver("train", "--config", "tiny-offline", "--out", "run", *sets, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "run"
    manifest = json.loads((run / "transcript.jsonl").read_text(encoding="utf-8").splitlines()[0])
    agent = manifest["agent"]
    assert agent["rollout_backend"] == "toy" and agent["about"] == "hf on its own copy of the weights"
    assert agent["name"] == "toy" and agent["max_batch_size"] == 3  # its own setting reached the sampler
    rollout = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))["rollout"]
    assert rollout["backend"] == "toy" and rollout["backend_settings"] == {"max_batch_size": 3}
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [s["step"] for s in steps] == [1]


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
