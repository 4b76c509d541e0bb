"""A run can be scored per user behaviour mode (issue: user diversity), through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _eval(out: Path, *extra: str) -> None:
    cmd = [
        sys.executable, "-m", "rlver", "eval", "--agent-tiny", "--simulator", "offline",
        "--profiles", "en-test", "--limit", "3", "--agent-max-tokens", "24",
        "--set", "env.rules.max_assistant_turns=2", "--no-report", "--out", str(out), *extra,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow  # over 20 s: left out of CI's second, bare-copy pass
def test_behaviour_is_recorded_and_scored_per_mode(tmp_path: Path) -> None:
    _eval(tmp_path / "esc", "--behaviour", "escalating", "--difficulty", "hard")
    _eval(tmp_path / "coop")
    lines = (tmp_path / "esc" / "transcript.jsonl").read_text(encoding="utf-8").splitlines()
    episodes = [json.loads(x) for x in lines if json.loads(x).get("type") == "episode"]
    assert len(episodes) == 3
    assert {e["meta"]["behaviour"] for e in episodes} == {"escalating"}
    assert {e["meta"]["difficulty"] for e in episodes} == {"hard"}
    metrics = json.loads((tmp_path / "esc" / "metrics.json").read_text())
    assert set(metrics["breakdowns"]["behaviour"]) == {"escalating"}
    assert metrics["breakdowns"]["behaviour"]["escalating"]["n"] == 3

    # Two runs scored together: one row per mode.
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "score", str(tmp_path / "coop"), str(tmp_path / "esc"), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    scored = json.loads(proc.stdout)
    text = json.dumps(scored)
    assert "cooperative" in text and "escalating" in text


def test_unknown_behaviour_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "eval", "--agent-tiny", "--simulator", "offline",
         "--behaviour", "sarcastic", "--out", str(tmp_path / "x")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "sarcastic" in proc.stderr and "escalating" in proc.stderr
    assert "Traceback" not in proc.stderr
