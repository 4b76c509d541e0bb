"""`rlver profiles list|show|validate` through the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def rlver(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "rlver", *args], capture_output=True, text=True, timeout=120, env=full_env
    )


def test_validate_bad_file_lists_every_problem_and_exits_2(tmp_path: Path) -> None:
    good = {"id": "a", "persona": "P", "background": "B", "goal": "G", "hidden_need": "H"}
    lines = [
        json.dumps(good),
        json.dumps({**good, "id": "b", "style": 3}),
        "{oops",
        json.dumps({**good, "id": "a"}),
        json.dumps({"id": "c", "persona": "P", "background": "B", "goal": "G"}),
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    result = rlver("profiles", "validate", str(bad))
    assert result.returncode == 2, result.stderr
    err = " ".join(result.stderr.split())  # rich may wrap long lines
    for piece in (
        f"{bad}:2: style:",
        f"{bad}:3: not valid JSON",
        f"{bad}:4: id: duplicate",
        f"{bad}:5: hidden_need: missing",
    ):
        assert piece in err, piece
    assert "Traceback" not in result.stderr
    assert "OK" not in result.stdout


def test_validate_good_file(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("- {id: a, persona: P, background: B, goal: G, hidden_need: H, opening: hi}\n")
    result = rlver("profiles", "validate", str(good))
    assert result.returncode == 0, result.stderr
    assert "OK: 1 profiles" in result.stdout and "1 with an opening line" in result.stdout


def test_validate_real_benchmark_file(shared_data: Path) -> None:
    result = rlver("profiles", "validate", str(shared_data / "sage_test_profiles.jsonl"))
    assert result.returncode == 0, result.stderr
    assert "OK: 100 profiles (zh; 100 with an opening line)" in result.stdout


def test_list_default_shows_bundled_sets_with_counts(tmp_path: Path) -> None:
    result = rlver("profiles", "list", env={"RLVER_DATA_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    for name, count in (("en-train", "18"), ("en-test", "8"), ("zh-train", "7"), ("zh-test", "3")):
        row = next(line for line in result.stdout.splitlines() if f" {name} " in line)
        assert count in row


def test_list_one_set_and_show(tmp_path: Path) -> None:
    result = rlver("profiles", "list", "zh-test")
    assert result.returncode == 0, result.stderr
    assert "zh-er-nurse-complaint" in result.stdout and "validation" in result.stdout
    shown = rlver("profiles", "show", "en-icu-nurse", "--set", "en-train", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == "en-icu-nurse-burnout"
    missing = rlver("profiles", "show", "no-such-id", "--set", "en-test")
    assert missing.returncode == 2 and "no profile with this id in en-test" in missing.stderr


@pytest.mark.parametrize(
    "args", [("profiles", "list", "nope-set"), ("profiles", "validate", "/nonexistent.jsonl")]
)
def test_bad_arguments_are_clean_errors(args: tuple[str, ...]) -> None:
    result = rlver(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr and "error:" in result.stderr
