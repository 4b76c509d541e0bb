"""Tables a person can read (issue 25): files named by their shortest unique path suffix, and no cell
cut at 80 columns (a table that does not fit becomes one block per row)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlver.io import unique_suffixes
from test_calibrate import write_synthetic


def test_unique_suffixes_tell_same_named_files_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = tmp_path / "deepseek-v3-2024-1227_based_simulator" / "gpt-4.5_result.jsonl"
    b = tmp_path / "gpt-4o-2024-0806_based_simulator" / "gpt-4.5_result.jsonl"
    c = tmp_path / "gpt-4o-2024-0806_based_simulator" / "o1_result.jsonl"
    assert unique_suffixes([a, b, c], strip="_result.jsonl") == [
        "deepseek-v3-2024-1227_based_simulator/gpt-4.5",
        "gpt-4o-2024-0806_based_simulator/gpt-4.5",
        "gpt-4o-2024-0806_based_simulator/o1",
    ]
    assert unique_suffixes([c], strip="_result.jsonl") == ["o1"]
    assert unique_suffixes([a, b.parent / "o1_result.jsonl"]) == ["gpt-4.5_result.jsonl", "o1_result.jsonl"]
    # Run from inside a folder: relative paths are resolved, so no label starts with "/" or "..".
    b.parent.mkdir()
    monkeypatch.chdir(b.parent)
    labels = unique_suffixes(["gpt-4.5_result.jsonl", f"../{a.parent.name}/gpt-4.5_result.jsonl"])
    assert labels == [
        "gpt-4o-2024-0806_based_simulator/gpt-4.5_result.jsonl",
        f"{a.parent.name}/gpt-4.5_result.jsonl",
    ]
    assert unique_suffixes([a, a]) == ["gpt-4.5_result.jsonl", "gpt-4.5_result.jsonl"]


def _rlver(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rlver", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def _two_simulator_folders(tmp_path: Path) -> tuple[Path, Path]:
    a = tmp_path / "deepseek-v3-2024-1227_based_simulator" / "claude3.7_result.jsonl"
    b = tmp_path / "gpt-4o-2024-0806_based_simulator" / "claude3.7_result.jsonl"
    a.parent.mkdir()
    b.parent.mkdir()
    write_synthetic(a)
    shutil.copyfile(a, b)
    return a, b


def test_score_and_calibrate_name_files_whole_at_80_columns(tmp_path: Path) -> None:
    a, b = _two_simulator_folders(tmp_path)
    score = _rlver("score", a, b, "--compare", cwd=tmp_path)
    assert score.returncode == 0, score.stderr
    for text in (score.stdout,):
        assert "deepseek-v3-2024-1227_based_simulator/claude3.7" in text
        assert "gpt-4o-2024-0806_based_simulator/claude3.7" in text
        assert "claude3.7 (2)" not in text and "…" not in text
        assert "turns" in text and all(len(line) <= 80 for line in text.splitlines()), text
    calibrate = _rlver("calibrate", "--simulator", "replay", a, b, "--out", tmp_path / "cal", cwd=a.parent)
    assert calibrate.returncode == 0, calibrate.stderr
    assert "deepseek-v3-2024-1227_based_simulator/claude3.7\n" in calibrate.stdout
    assert "gpt-4o-2024-0806_based_simulator/claude3.7\n" in calibrate.stdout
    table = [line for line in calibrate.stdout.splitlines() if not line.startswith("wrote ")]  # paths
    assert "…" not in calibrate.stdout and all(len(line) <= 80 for line in table), calibrate.stdout
    # the per-folder rows name the folder even for the file given from inside it
    assert "all files / deepseek-v3-2024-1227_based_simulator\n" in calibrate.stdout
