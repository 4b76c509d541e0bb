"""`rlver eval` against an endpoint as SAGE ran it: replies not capped short, truncation counted,
failed dialogues re-run by --resume, partial scores labelled, empty replies appraised (issue 24)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers import endpoint_eval_argv, run_rlver
from rlver.eval.config import EVAL_AGENT_MAX_TOKENS
from rlver.simulator.llm.user import SIMULATOR_MAX_TOKENS
from rlver.testing.openai_server import FakeChatServer, Fault, Reply
from rlver.testing.responders import POLICY_TEXT, SIMULATOR_TEXT
from rlver.transcripts.native import read_transcript


class _CutEveryOtherPolicyReply:
    """Policy replies alternate between cut (finish_reason length) and whole; the simulator always
    answers whole. Counts what it cut so the test compares with the server's own tally."""

    def __init__(self) -> None:
        self.policy_calls = 0
        self.cut = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str | Reply:
        if request.get("model") != "policy":
            return SIMULATOR_TEXT
        with self._lock:
            self.policy_calls += 1
            if self.policy_calls % 2:
                self.cut += 1
                return Reply(text=POLICY_TEXT[:20], finish_reason="length")
        return POLICY_TEXT


def test_default_eval_records_a_high_agent_cap_and_counts_truncated_replies(tmp_path: Path) -> None:
    responder = _CutEveryOtherPolicyReply()
    with FakeChatServer(responder) as server:
        done = run_rlver(*endpoint_eval_argv(server.url, "--limit", "2", "--batch-size", "1"), cwd=tmp_path)
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = read_transcript(tmp_path / "run" / "transcript.jsonl").manifest
    # the cap the run used is recorded, and it is what the server was asked for
    assert manifest["agent_sampling"]["max_tokens"] == EVAL_AGENT_MAX_TOKENS >= 4096
    assert manifest["agent_spec"]["sampling"]["max_tokens"] == EVAL_AGENT_MAX_TOKENS
    assert manifest["simulator"]["sampling"]["max_tokens"] == SIMULATOR_MAX_TOKENS >= 4096
    policy = [r for r in requests if r["model"] == "policy"]
    sim = [r for r in requests if r["model"] == "sim"]
    assert policy and {r["max_tokens"] for r in policy} == {EVAL_AGENT_MAX_TOKENS}
    assert sim and {r["max_tokens"] for r in sim} == {SIMULATOR_MAX_TOKENS}
    # every cut reply is counted: per dialogue, in metrics.json and on the terminal
    episodes = read_transcript(tmp_path / "run" / "transcript.jsonl").episodes
    assert responder.cut >= 2
    assert sum(ep.truncated_replies for ep in episodes) == responder.cut
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["truncated_replies"] == responder.cut
    assert metrics["simulator_truncated_calls"] == 0
    assert metrics["complete"] is True and metrics["failed"] == 0
    assert f"{responder.cut} agent replies and 0 simulator call(s) cut at the token cap" in done.stderr
    assert f"agent max_tokens {EVAL_AGENT_MAX_TOKENS}" in done.stderr
    assert "benchmark protocol: 3 replies from 40" in manifest["dialogue"]


def test_an_explicit_agent_cap_is_kept(tmp_path: Path) -> None:
    with FakeChatServer(lambda r: POLICY_TEXT if r.get("model") == "policy" else SIMULATOR_TEXT) as server:
        done = run_rlver(
            *endpoint_eval_argv(server.url, "--limit", "1", "--agent-max-tokens", "300"), cwd=tmp_path
        )
        caps = {r["max_tokens"] for r in server.requests if r["model"] == "policy"}
    assert done.returncode == 0, done.stderr[-3000:]
    assert caps == {300}


def test_resume_reruns_a_failed_dialogue_and_a_partial_score_says_so(tmp_path: Path) -> None:
    with FakeChatServer(lambda r: POLICY_TEXT if r.get("model") == "policy" else SIMULATOR_TEXT) as server:
        # the first request (the first dialogue's first reply) fails once; no retry is allowed
        server.faults.append(Fault.server_error(500))
        args = endpoint_eval_argv(
            server.url, "--limit", "2", "--batch-size", "1", "--set", "agent.max_attempts=1"
        )
        first = run_rlver(*args, cwd=tmp_path)
        assert first.returncode == 3, first.stderr[-3000:]  # some dialogues failed: a partial run
        metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
        assert (metrics["n"], metrics["failed"], metrics["complete"]) == (1, 1, False)
        assert "PARTIAL score" in first.stderr and "(partial)" in first.stderr
        assert run_rlver("report", "run", cwd=tmp_path).returncode == 0
        header = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
        assert "1 finished / 1 failed (partial)" in header and " (partial) |" in header  # score column

        resumed = run_rlver(*args, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming: 1 of 2 dialogues already finished" in resumed.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert (metrics["n"], metrics["failed"], metrics["complete"]) == (2, 0, True)
    assert "PARTIAL" not in resumed.stderr
    scored = json.loads(run_rlver("score", "run", "--json", cwd=tmp_path).stdout)
    assert scored["runs"][0]["complete"] is True and scored["runs"][0]["n"] == 2


def test_an_empty_agent_reply_is_appraised_not_failed(tmp_path: Path) -> None:
    def responder(request: dict[str, Any]) -> str:
        return "" if request.get("model") == "policy" else SIMULATOR_TEXT

    with FakeChatServer(responder) as server:
        done = run_rlver(
            *endpoint_eval_argv(server.url, "--limit", "1", "--set", "agent.max_attempts=2"), cwd=tmp_path
        )
    assert done.returncode == 0, done.stderr[-3000:]
    [episode] = read_transcript(tmp_path / "run" / "transcript.jsonl").episodes
    assert episode.status == "finished"
    appraised = [t for t in episode.user_turns if t.appraisal is not None]
    assert len(appraised) == 2  # 3 replies, the last never appraised
    assert [m.content for m in episode.messages if m.role == "assistant"] == ["", "", ""]


def test_an_empty_agent_reply_takes_one_call_unless_retries_are_asked_for(tmp_path: Path) -> None:
    """SAGE calls its agent once (npc_response.py:22) and the empty answer is the reply; the client's
    retries of an empty answer (5 attempts) are ``agent.retry_empty``'s, named by ``rlver explain``."""

    def responder(request: dict[str, Any]) -> str:
        return "" if request.get("model") == "policy" else SIMULATOR_TEXT

    for folder, sets, calls in (("once", (), 3), ("retried", ("--set", "agent.retry_empty=true"), 15)):
        (tmp_path / folder).mkdir()
        with FakeChatServer(responder) as server:
            done = run_rlver(*endpoint_eval_argv(server.url, "--limit", "1", *sets), cwd=tmp_path / folder)
            policy = [r for r in server.requests if r["model"] == "policy"]
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(policy) == calls, folder  # 3 replies: one call each, or 5 (max_attempts) each
        explained = run_rlver("explain", "run", cwd=tmp_path / folder).stdout
        assert ("agent's empty reply: asked again" in explained) == bool(sets), explained


@pytest.mark.slow  # 8 s CPU, 24 s on the shared 2-core box (issue 26)
def test_eval_protocol_training_runs_the_training_dialogue_and_says_so(tmp_path: Path) -> None:
    done = run_rlver(
        "eval", "--agent-tiny", "--simulator", "offline", "--profiles", "en-test", "--limit", "1",
        "--agent-max-tokens", "8", "--dialogue", "training", "--no-report", "--out", "run", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    transcript = read_transcript(tmp_path / "run" / "transcript.jsonl")
    assert transcript.manifest["dialogue"] == "training protocol: 8 replies from 30"
    [episode] = transcript.episodes
    assert episode.start_emotion == 30
    report = run_rlver("report", "run", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "training protocol: 8 replies from 30" in (tmp_path / "run" / "report.md").read_text(
        encoding="utf-8"
    )
    bad = run_rlver("eval", "--agent-tiny", "--dialogue", "leaderboard", "--out", "x", cwd=tmp_path)
    assert bad.returncode == 2 and "choose benchmark or training" in bad.stderr


def test_protocol_training_with_a_run_folder_takes_that_runs_evaluation(tmp_path: Path) -> None:
    from rlver.cli.run_agent import run_training_env
    from rlver.env.dialogue import EnvConfig
    from rlver.rules import protocol_label
    from rlver.train.config import load_train_config

    run = tmp_path / "run"
    (run / "checkpoints" / "step_2").mkdir(parents=True)
    cfg = load_train_config("tiny-offline", ["rollout.agent_prompt=published"])
    (run / "config.yaml").write_text(cfg.model_dump_json(), encoding="utf-8")  # JSON is YAML
    env = EnvConfig(**run_training_env(run / "checkpoints" / "step_2"))
    assert protocol_label(env.rules) == "training protocol: 2 replies from 30"  # the demo's held-out check
    assert env.agent_prompt == "published"
    assert run_training_env(tmp_path / "elsewhere") == {}
