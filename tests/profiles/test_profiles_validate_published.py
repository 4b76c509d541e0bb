"""`rlver profiles validate` names the missing or mistyped fields of a published-format row (issue 16.9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": "p1",
        "player": "* 姓名：小云",
        "scene": "她和朋友吵架了。\n####隐藏主题:\n希望被倾听",
        "main_cha": "情绪型",
        "cha_group": ["敏感", "直接"],
        "task": "倾诉",
        "first_talk": "我好难过",
    }
    row.update(over)
    return row


def test_published_row_missing_scene_and_mistyped_fields_are_named(tmp_path: Path) -> None:
    missing_scene = _row(id="p2")
    del missing_scene["scene"]
    lines = [_row(), missing_scene, _row(id="p3", player=5, cha_group=7)]
    path = tmp_path / "published.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "rlver", "profiles", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert result.returncode == 2, result.stderr
    err = " ".join(result.stderr.split())
    assert f"{path}:2: scene: missing" in err
    assert f"{path}:3: player: expected text, got int" in err
    assert "not in the published format like line 1" not in err
    assert "Traceback" not in result.stderr


def test_native_row_in_a_published_file_is_still_called_out(tmp_path: Path) -> None:
    native = {"id": "n", "persona": "P", "background": "B", "goal": "G", "hidden_need": "H"}
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(_row(), ensure_ascii=False) + "\n" + json.dumps(native) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "rlver", "profiles", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert result.returncode == 2
    assert f"{path}:2: not in the published format like line 1" in " ".join(result.stderr.split())
