"""Request bodies under the published prompt sets carry what the published code sends: SAGE's
``call_npc`` and ``call_llm`` pass the messages alone, so with ``--profiles sage`` and no sampling
flag every body is ``model`` and ``messages``, and the manifest records "server default" for each
sampling field. A sampling value the user sets is sent, recorded and named by ``rlver explain``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import run_rlver
from rlver.eval.explain import explain
from rlver.manifest import RunManifest
from rlver.simulator.llm import published_text
from rlver.testing.openai_server import FakeChatServer
from test_sage_published import _fresh_texts  # noqa: F401 (an autouse fixture)

APPRAISAL = "Content:\n懂了\nTargetCompletion:\n一半\nActivity:\n想\nAnalyse:\n还行\nChange:\n+5"
UNSENT = {"temperature": "server default", "top_p": "server default", "max_tokens": "server default"}


def _eval(tmp_path: Path, name: str, *flags: str) -> list[dict[str, Any]]:
    head = published_text.sage_texts().appraisal_template[:40]

    def answer(request: dict[str, Any]) -> str:
        if request.get("model") == "policy":
            return "我在听。"
        return APPRAISAL if request["messages"][0]["content"].startswith(head) else "Response:\n嗯。"

    with FakeChatServer(answer) as server:
        done = run_rlver(
            "eval", "--agent-base-url", server.url, "--agent-model", "policy", "--simulator", "llm",
            "--sim-base-url", server.url, "--sim-model", "sim", "--sim-key-env", "",
            "--profiles", "sage", "--limit", "1", "--set", "env.rules.max_assistant_turns=2",
            "--out", name, "--no-report", *flags, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return list(server.requests)


def test_the_published_benchmark_sends_the_messages_alone(shared_data: Path, tmp_path: Path) -> None:
    bodies = _eval(tmp_path, "plain")
    assert {r["model"] for r in bodies} == {"policy", "sim"}
    assert all(set(r) == {"model", "messages"} for r in bodies), [sorted(r) for r in bodies]
    manifest = RunManifest.read(tmp_path / "plain")
    assert manifest.model_extra is not None
    assert manifest.model_extra["requests"] == {"agent": UNSENT, "simulator": UNSENT}
    rows = {d.row for d in explain(tmp_path / "plain").differences}
    assert not rows & {"agent-sampling", "agent-max-tokens", "simulator-sampling"}, rows


def test_a_sampling_value_set_is_sent_recorded_and_named(shared_data: Path, tmp_path: Path) -> None:
    bodies = _eval(
        tmp_path, "set", "--agent-temperature", "0.7", "--set", "simulator.sampling.max_tokens=300"
    )
    agent = [r for r in bodies if r["model"] == "policy"]
    sim = [r for r in bodies if r["model"] == "sim"]
    assert all(r["temperature"] == 0.7 and r["max_tokens"] == 8192 for r in agent)
    assert all(set(r) == {"model", "messages", "max_tokens"} and r["max_tokens"] == 300 for r in sim)
    extra = RunManifest.read(tmp_path / "set").model_extra or {}
    assert extra["requests"]["simulator"] == {**UNSENT, "max_tokens": 300}
    rows = {d.row for d in explain(tmp_path / "set").differences}
    assert {"agent-sampling", "agent-max-tokens"} <= rows, rows
