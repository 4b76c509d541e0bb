"""What a researcher does on day one, end to end through the real ``rlver`` command in subprocesses.

Journey 1 benchmarks an agent behind an OpenAI-compatible endpoint against an LLM simulated user (both
played by a real local HTTP server whose *text* is scripted), resumes the run, scores it, compares it
with a published-format copy, writes the HTML report, audits it and reads one dialogue in the terminal.
Journey 2 trains the tiny model for two steps, exports it and benchmarks the exported folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import train_argv
from rlver.testing.openai_server import FakeChatServer
from rlver.testing.responders import POLICY_TEXT, policy_and_simulator
from rlver.transcripts.native import read_transcript
from rlver.transcripts.published import write_published


def rlver(
    *args: str | Path, cwd: Path, timeout: float = 120, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_API_KEY", None)  # a real key must never travel to the test server
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
        input=stdin,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    # every HTTP session is closed (aiohttp warns on stderr about one left open)
    assert "Unclosed client session" not in proc.stderr, proc.stderr[-3000:]
    return proc


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    return proc.stdout


@pytest.fixture()
def endpoint() -> Iterator[str]:
    """One local server answers as the agent (model "policy") and as the simulated user (any other)."""
    with FakeChatServer(policy_and_simulator) as server:
        yield server.url


def test_benchmark_an_endpoint_then_score_report_audit_inspect(tmp_path: Path, endpoint: str) -> None:
    agent = ["--agent-base-url", endpoint, "--agent-model", "policy"]
    sim = ["--simulator", "llm", "--sim-base-url", endpoint, "--sim-model", "judge-sim"]
    common = [*agent, *sim, "--profiles", "en-test", "--out", "run"]

    # a first, interrupted-looking run of 2 profiles, then the same run extended to 3 with --resume
    first = rlver("eval", *common, "--limit", "2", "--no-report", cwd=tmp_path)
    ok(first)
    assert not (tmp_path / "run" / "report.html").exists()
    resumed = rlver("eval", *common, "--limit", "3", "--resume", cwd=tmp_path)
    ok(resumed)
    assert "resuming: 2 of 3 dialogues already finished" in resumed.stderr
    assert "report:" in resumed.stderr and (tmp_path / "run" / "report.html").exists()
    transcript = read_transcript(tmp_path / "run" / "transcript.jsonl")
    assert len(transcript.episodes) == 3
    assert transcript.manifest["simulator"]["model"]["model"] == "judge-sim"
    # the scripted user gains +1 per appraisal; the 10th reply is never appraised: 40 + 9
    assert {ep.final_emotion for ep in transcript.episodes} == {49}
    assert all(ep.end_reason == "turn_limit" for ep in transcript.episodes)

    # the same dialogues in the published result format score the same
    write_published(tmp_path / "copy_result.jsonl", transcript.episodes)
    scored = json.loads(ok(rlver("score", "run", "copy_result.jsonl", "--json", cwd=tmp_path)))
    runs = {r["run"]: r for r in scored["runs"]}
    assert runs["run"]["format"] == "rlver" and runs["copy"]["format"] == "published"
    assert runs["run"]["score"] == runs["copy"]["score"] == 49.0
    assert runs["run"]["n"] == 3

    report = ok(rlver("report", "run", "copy_result.jsonl", "--out", "cmp/report.html", cwd=tmp_path))
    page = (tmp_path / "cmp" / "report.html").read_text(encoding="utf-8")
    assert "report: cmp/report.html" in report
    assert "Paired comparison" in page and POLICY_TEXT in page and "<script" not in page

    # audit accepts the run folder (as score/report do) and the published file
    audit = ok(rlver("audit", "run", "copy_result.jsonl", cwd=tmp_path))
    assert "3 dialogues, 27 appraisals checked: OK" in audit
    assert audit.count(": OK") == 2

    table = ok(rlver("inspect", "run", "--turns", cwd=tmp_path))
    assert "judge-sim" in table and "en-teacher-parent-complaint" in table
    assert "40→41→42→43→44→45→46→47→48→49" in table
    dialogue = ok(rlver("inspect", "copy_result.jsonl", "--dialogue", "1", cwd=tmp_path))
    assert "48 → 49 (tier B)  (+1)" in dialogue and "inner reaction: A little relieved." in dialogue


def test_chat_with_an_llm_user_from_a_pipe(tmp_path: Path, endpoint: str) -> None:
    sim = ["--simulator", "llm", "--sim-base-url", endpoint, "--sim-model", "sim"]
    proc = rlver(
        "chat",
        *sim,
        "--profile",
        "en-ivf-failure",
        "--save",
        "chat.jsonl",
        cwd=tmp_path,
        stdin="I'm here.\n/quit\n",
    )
    out = ok(proc)
    assert "emotion 41 (+1)" in out and "Saved to chat.jsonl" in out
    assert "41 (tier B)" in ok(rlver("inspect", "chat.jsonl", "-d", "en-ivf-failure", cwd=tmp_path))


def test_offline_download_and_bad_inputs_are_clear_errors(tmp_path: Path) -> None:
    env_url = "http://127.0.0.1:1"  # nothing listens there: "offline"
    proc = rlver("data", "download", "sage-test", "--dest", "data", "--base-url", env_url, cwd=tmp_path)
    assert proc.returncode == 1
    assert "could not reach" in proc.stderr and "--from FOLDER" in proc.stderr
    proc = rlver("score", "missing-run", cwd=tmp_path)
    assert proc.returncode == 2 and "missing-run" in proc.stderr
    proc = rlver("audit", tmp_path, cwd=tmp_path)  # a folder that is not a run
    assert proc.returncode == 2 and "transcript.jsonl" in proc.stderr
    proc = rlver("eval", "--agent-base-url", env_url, cwd=tmp_path)
    assert proc.returncode == 2 and "--agent-model" in proc.stderr


@pytest.mark.slow
def test_train_export_and_benchmark_the_export(tmp_path: Path) -> None:
    trained = rlver(*train_argv("train", steps=2), cwd=tmp_path, timeout=300)
    assert "held-out score at step 2" in ok(trained)
    exported = ok(rlver("export", "train", "model", cwd=tmp_path, timeout=300))
    assert "exported to model" in exported
    assert (tmp_path / "model" / "config.json").exists() and (tmp_path / "model" / "tokenizer.json").exists()
    proc = rlver(
        "eval",
        "--agent-local",
        "model",
        "--profiles",
        "en-test",
        "--limit",
        "2",
        "--agent-max-tokens",
        "16",
        "--out",
        "eval",
        "--no-report",
        cwd=tmp_path,
        timeout=300,
    )
    ok(proc)
    transcript = read_transcript(tmp_path / "eval" / "transcript.jsonl")
    assert len(transcript.episodes) == 2
    assert Path(transcript.manifest["agent"]["name"]).resolve() == (tmp_path / "model").resolve()
    assert all(ep.status == "finished" for ep in transcript.episodes)
    assert "2 dialogues" in ok(rlver("inspect", "eval", cwd=tmp_path))
