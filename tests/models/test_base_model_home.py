"""A training run's base model has one home (issue 37): ``rlver.models.reference.base_model_folder``.

The local trainer (``train/loading.py``) and verl's launcher (``integrations/verl/launch.py``) both ask
it, so ``model.path: tiny`` is built into the same ``base_model/`` folder of a run under either engine
(verl's launcher once wrote ``tiny-model/``), and a fetchable name resolves the same way.
"""

from __future__ import annotations

import ast
from pathlib import Path

from rlver.models.reference import BASE_MODEL_DIR, base_model_folder

SRC = Path(__file__).resolve().parents[2] / "src" / "rlver"


def _calls(name: str, root: Path = SRC) -> dict[str, int]:
    """Calls of a function named ``name`` (plain or as an attribute), by module under ``root``."""
    found: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if called == name:
                    key = str(path.relative_to(root))
                    found[key] = found.get(key, 0) + 1
    return found


def test_both_engines_ask_the_one_home() -> None:
    assert _calls("base_model_folder") == {"integrations/verl/launch.py": 1, "train/loading.py": 1}
    # the tiny model is built for a run only there; eval's tiny *agent* (``--agent-tiny``) is not a
    # run's base model and keeps its own folder
    assert _calls("ensure_tiny_model") == {"eval/runner.py": 1, "models/reference.py": 1}


def test_no_second_folder_name() -> None:
    named = [
        str(p.relative_to(SRC))
        for p in sorted(SRC.rglob("*.py"))
        if '"tiny-model"' in p.read_text(encoding="utf-8") or "'tiny-model'" in p.read_text(encoding="utf-8")
    ]
    assert named == []


def test_the_count_sees_a_second_caller(tmp_path: Path) -> None:
    """The count above finds what it looks for, so it can fail."""
    (tmp_path / "a.py").write_text("import x\nx.base_model_folder('tiny', p)\nbase_model_folder('t', p)\n")
    assert _calls("base_model_folder", tmp_path) == {"a.py": 2}


def test_the_engines_agree_on_the_folder(tmp_path: Path) -> None:
    """Same config, same run folder: the same base model for the local trainer and for verl."""
    from rlver.integrations.verl.launch import _model_path, load_verl_config

    cfg = load_verl_config("tiny-offline", [])
    local = base_model_folder(cfg.model.path, tmp_path, tiny_seed=cfg.model.tiny_seed)
    assert local == tmp_path / BASE_MODEL_DIR and (local / "model.safetensors").is_file()
    assert _model_path(cfg, tmp_path) == str(local.resolve())
    assert base_model_folder("/some/model/folder", tmp_path) == "/some/model/folder"
