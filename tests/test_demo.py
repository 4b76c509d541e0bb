"""``rlver demo`` end to end as a real subprocess (short budget): report, transcripts, summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlver.transcripts.native import read_transcript


@pytest.mark.slow
def test_demo_writes_report_and_transcripts(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "demo", "--out", str(out), "--minutes", "0.5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"report: {out / 'report.html'}" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] >= 1
    for stage in ("before", "after"):
        assert summary[stage]["n"] == 16  # 8 held-out users x 2 dialogues
        transcript = read_transcript(out / stage / "transcript.jsonl")
        assert len(transcript.episodes) == 16
    assert summary["peak_rss_mb"] < 4096
    page = (out / "report.html").read_text()
    assert "data:image/png;base64," in page and "<script" not in page
    assert "reward_curve.png" in (out / "report.md").read_text()
    assert (out / "reward_curve.png").stat().st_size > 1000
    assert (out / "run" / "metrics.jsonl").exists()
    # the standard benchmark report of the two evaluations, linked from the demo page
    assert f"before/after dialogues: {out / 'compare.html'}" in proc.stdout
    assert 'href="compare.html"' in page
    compare = (out / "compare.html").read_text()
    assert "before training" in compare and "Paired comparison" in compare


@pytest.mark.slow
def test_demo_default_is_a_fixed_step_count_and_reproduces(tmp_path: Path) -> None:
    """The headline is reproducible (issue 16, defect 10): a fixed number of steps, not a time budget,
    so two runs with the same seed print the same numbers (CPU, float32)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    outputs = []
    for name in ("a", "b"):
        proc = subprocess.run(
            [sys.executable, "-m", "rlver", "demo", "--out", str(tmp_path / name), "--steps", "2"],
            capture_output=True, text=True, env=env, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "training it for 2 GRPO steps" in proc.stdout
        outputs.append(proc.stdout.splitlines())
    heads = [next(line for line in out if line.startswith("held-out score")) for out in outputs]
    assert heads[0] == heads[1] and heads[0].endswith("(2 steps)")
    a, b = (json.loads((tmp_path / n / "summary.json").read_text()) for n in ("a", "b"))
    assert (a["before"], a["after"], a["steps"]) == (b["before"], b["after"], b["steps"])

    from rlver.train.demo import DEMO_STEPS

    both = subprocess.run(
        [sys.executable, "-m", "rlver", "demo", "--out", str(tmp_path / "c"), "--steps", "1", "--minutes", "1"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert both.returncode == 2 and "not both" in both.stderr
    assert DEMO_STEPS >= 10
