"""``rlver demo`` end to end as a real subprocess (short budget): report, transcripts, summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlver.rollout.transcripts import read_transcript


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
