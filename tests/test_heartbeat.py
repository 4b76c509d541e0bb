"""Plain progress lines for logs (``rlver.heartbeat``): a heartbeat fills silences, step and eval lines
carry the time left, and ``rlver train`` writes them when its output goes to a file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlver.heartbeat import activity, duration, eta, heartbeat, say_line, step_reporter


def test_heartbeat_fills_silences_with_the_phase_and_tokens() -> None:
    said: list[str] = []
    activity.set_phase("step 3: rollout of 32 dialogues")
    activity.tokens = 0
    activity.add_tokens(1234)
    with heartbeat(said.append, time.perf_counter(), every_s=0.2):
        time.sleep(6.5)  # the beat checks every min(every_s, 5 s)
    assert said, "no heartbeat in 6 s at every_s=0.2"
    assert said[0].startswith("  still step 3: rollout of 32 dialogues: 1,234 tokens generated (")


def test_a_progress_line_postpones_the_heartbeat() -> None:
    said: list[str] = []
    with heartbeat(said.append, time.perf_counter(), every_s=3.0):
        for _ in range(6):
            say_line(said.append, "  step")
            time.sleep(0.5)
    assert said == ["  step"] * 6


def test_time_left_from_the_pace_so_far() -> None:
    assert eta(60.0, 0, 10) == ""  # nothing done: no pace yet
    assert eta(60.0, 2, 10) == ", about 4 min left"
    assert eta(60.0, 10, 10) == ""
    assert (duration(42), duration(600), duration(3 * 3600 + 300)) == ("42 s", "10 min", "3 h 05 min")
    said: list[str] = []
    report = step_reporter(said.append, 30, 1, time.perf_counter() - 20, first_step=10, with_eta=True)
    report(12, {"rollout/reward_mean": 0.25})
    assert said[0].startswith("  step 12/30  reward 0.250  (20 s, about ")


@pytest.mark.slow
def test_train_to_a_file_prints_a_line_per_step(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable, "-m", "rlver", "train", "--config", "tiny-offline", "--steps", "2",
            "--set", "eval.every=0", "--set", "eval.at_start=false", "--set", "run.tensorboard=false",
            "--out", str(tmp_path / "run"),
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    steps = [line for line in lines if line.startswith("  step ")]
    assert [s.split()[1] for s in steps] == ["1/2", "2/2"], proc.stdout
    assert "about" in steps[0] and "left" in steps[0]  # the time left after the first step
    assert "\x1b[" not in proc.stdout
