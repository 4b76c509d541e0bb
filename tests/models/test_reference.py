"""A model reference is read in one place (issue 44): ``rlver.models.reference``.

The factory's source check, the memory guard, the training loader and verl's launcher each used to tell
``tiny`` / a fetchable name / a folder / a hub id apart and look into the Hugging Face cache their own
way. These tests hold the one home: what each kind resolves to, and that no other module of ``rlver``
touches the hub cache (imports ``huggingface_hub`` or names its cache settings).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from rlver.errors import ConfigError
from rlver.models.reference import hub_cached_file, resolve_reference

SRC = Path(__file__).resolve().parents[2] / "src" / "rlver"
HOME = "models/reference.py"
#: Names that mean "looking into the hub cache" when a module says them.
CACHE_WORDS = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "try_to_load_from_cache", "scan_cache_dir")


def hub_cache_lookups(root: Path = SRC) -> dict[str, list[str]]:
    """Per module under ``root``: its imports of ``huggingface_hub`` and the cache words it names."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        hits = [w for w in CACHE_WORDS if w in text]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("huggingface_hub"):
                hits.append(f"from {node.module} import")
            elif isinstance(node, ast.Import):
                hits += [f"import {a.name}" for a in node.names if a.name.startswith("huggingface_hub")]
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


def test_only_the_resolver_looks_into_the_hub_cache() -> None:
    assert set(hub_cache_lookups()) == {HOME}


def test_the_scan_sees_a_second_lookup(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n    from huggingface_hub import try_to_load_from_cache\n")
    (tmp_path / "b.py").write_text("import os\nos.environ.get('HF_HUB_CACHE')\n")
    (tmp_path / "c.py").write_text("import huggingface_hub.constants\n")
    assert set(hub_cache_lookups(tmp_path)) == {"a.py", "b.py", "c.py"}


def test_each_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # an empty cache
    monkeypatch.chdir(tmp_path)
    assert (resolve_reference("tiny").kind, resolve_reference("tiny").config_file()) == ("tiny", None)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8}))
    ref = resolve_reference(str(folder))
    assert (ref.kind, ref.folder, ref.config_file()) == ("folder", folder, folder / "config.json")
    gone = resolve_reference("./not/there")  # written like a path: a folder, even missing
    assert (gone.kind, gone.config_file()) == ("folder", None)
    hub = resolve_reference("Qwen/Qwen2.5-0.5B-Instruct")
    assert (hub.kind, hub.location, hub.folder, hub.config_file()) == (
        "hub",
        "Qwen/Qwen2.5-0.5B-Instruct",
        None,
        None,
    )


def test_a_fetchable_name_not_fetched_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLVER_DATA_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="rlver models fetch smollm2-135m-instruct"):
        resolve_reference("smollm2-135m-instruct")


def test_the_hub_cache_lookup_reads_a_cached_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config laid out as huggingface_hub caches it is found; the same id elsewhere is not."""
    cache = tmp_path / "hub"
    repo = cache / "models--org--name"
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    found = hub_cached_file("org/name", "config.json")
    assert found is not None and found.read_text() == "{}"
    assert resolve_reference("org/name").config_file() == found
    assert hub_cached_file("org/other") is None
