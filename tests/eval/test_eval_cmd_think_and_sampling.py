"""`rlver eval` as published, round 3 (issue 36): a think eval keeps only what the user saw, and
``--agent-sampling model-default`` sends no temperature or top_p, each checked through the real CLI
against a real HTTP server on 127.0.0.1 (the tiny model for the offline run)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from helpers import endpoint_eval_argv, run_rlver
from rlver.testing.openai_server import FakeChatServer
from rlver.testing.responders import SIMULATOR_TEXT
from rlver.transcripts.native import read_transcript


class _ThinkingPolicy:
    """The agent thinks before it speaks; each thought carries a marker the test looks for later."""

    def __init__(self) -> None:
        self.n = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        if request.get("model") != "policy":
            return SIMULATOR_TEXT
        with self._lock:
            self.n += 1
            return f"<think>private plan {self.n}</think>I hear you. Tell me more ({self.n})."


def test_think_eval_shows_the_agent_only_the_visible_text_of_its_earlier_replies(tmp_path: Path) -> None:
    with FakeChatServer(_ThinkingPolicy()) as server:
        done = run_rlver(*endpoint_eval_argv(server.url, "--limit", "1", "--think"), cwd=tmp_path)
        policy = [r for r in server.requests if r["model"] == "policy"]
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = read_transcript(tmp_path / "run" / "transcript.jsonl").manifest
    assert manifest["env"]["think"] is True and manifest["env"]["think_context"] == "visible"
    assert len(policy) == 3
    for request in policy[1:]:
        earlier = [m["content"] for m in request["messages"] if m["role"] == "assistant"]
        assert earlier and all("<think>" not in text and "private plan" not in text for text in earlier)
        assert all(text.startswith("I hear you.") for text in earlier)
    # the transcript keeps the raw replies, thoughts included (what the agent wrote)
    episode = read_transcript(tmp_path / "run" / "transcript.jsonl").episodes[0]
    assert any("private plan" in m.content for m in episode.messages if m.role == "assistant")


def test_tiny_think_eval_records_the_visible_context(tmp_path: Path) -> None:
    done = run_rlver(
        "eval", "--agent-tiny", "--think", "--simulator", "offline", "--profiles", "en-test",
        "--limit", "1", "--agent-max-tokens", "8", "--set", "env.rules.max_assistant_turns=2",
        "--no-report", "--out", "R", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = read_transcript(tmp_path / "R" / "transcript.jsonl").manifest
    assert manifest["env"]["think_context"] == "visible"
    # --set can still ask for the raw history (a variant, recorded as such)
    full = run_rlver(
        "eval", "--agent-tiny", "--think", "--simulator", "offline", "--profiles", "en-test",
        "--limit", "1", "--agent-max-tokens", "8", "--set", "env.rules.max_assistant_turns=2",
        "--set", "env.think_context=full", "--no-report", "--out", "F", cwd=tmp_path,
    )  # fmt: skip
    assert full.returncode == 0, full.stderr[-3000:]
    assert read_transcript(tmp_path / "F" / "transcript.jsonl").manifest["env"]["think_context"] == "full"


def test_model_default_sampling_sends_no_temperature_or_top_p(tmp_path: Path) -> None:
    with FakeChatServer(_ThinkingPolicy()) as server:
        done = run_rlver(
            *endpoint_eval_argv(server.url, "--limit", "1", "--agent-sampling", "model-default"), cwd=tmp_path
        )
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    policy = [r for r in requests if r["model"] == "policy"]
    sim = [r for r in requests if r["model"] == "sim"]
    assert policy and all("temperature" not in r and "top_p" not in r for r in policy)
    assert all("max_tokens" not in r for r in policy)  # nor a reply cap: the model's own limit applies
    assert sim and all("temperature" in r for r in sim)  # the simulator's own sampling is untouched
    sampling = read_transcript(tmp_path / "run" / "transcript.jsonl").manifest["agent_sampling"]
    assert sampling["model_default"] is True


def test_explicit_sampling_is_the_default_and_is_sent(tmp_path: Path) -> None:
    with FakeChatServer(_ThinkingPolicy()) as server:
        done = run_rlver(*endpoint_eval_argv(server.url, "--limit", "1"), cwd=tmp_path)
        policy = [r for r in server.requests if r["model"] == "policy"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert policy and {(r["temperature"], r["top_p"]) for r in policy} == {(1.0, 1.0)}
    sampling = read_transcript(tmp_path / "run" / "transcript.jsonl").manifest["agent_sampling"]
    assert sampling["model_default"] is False and sampling["temperature"] == 1.0


def test_model_default_is_refused_for_a_local_agent_before_any_work(tmp_path: Path) -> None:
    bad = run_rlver("eval", "--agent-tiny", "--agent-sampling", "model-default", "--out", "x", cwd=tmp_path)
    assert bad.returncode == 2
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "OpenAI-compatible" in lines[0]
    assert not (tmp_path / "x").exists()
    both = run_rlver(
        "eval", "--agent-base-url", "http://127.0.0.1:9/v1", "--agent-model", "m",
        "--agent-sampling", "model-default", "--agent-temperature", "0.5", "--out", "y", cwd=tmp_path,
    )  # fmt: skip
    assert both.returncode == 2 and "--agent-temperature" in both.stderr


def test_a_run_written_before_these_defaults_still_resumes() -> None:
    """A manifest without ``model_default``, with ``think_context: full`` on a run without think,
    matches today's settings; a think run's changed context does not (its dialogues would differ)."""
    from rlver.env.dialogue import EnvConfig
    from rlver.eval.runner import _check_resume
    from rlver.llm.base import SamplingParams

    now = {
        "env": EnvConfig.evaluation().model_dump(mode="json"),
        "agent_sampling": SamplingParams().model_dump(),
    }
    old_sampling = {k: v for k, v in now["agent_sampling"].items() if k != "model_default"}
    old = {"env": {**now["env"], "think_context": "full"}, "agent_sampling": old_sampling}
    assert _check_resume(old, now) == []
    think_now = {**now, "env": EnvConfig.evaluation(think=True).model_dump(mode="json")}
    think_old = {**old, "env": {**think_now["env"], "think_context": "full"}}
    assert _check_resume(think_old, think_now) == ["env"]
