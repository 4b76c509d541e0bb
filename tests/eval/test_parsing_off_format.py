"""A published-format simulator whose answers are clearly not in that format (JSON where SAGE's
``Response:`` field is expected) gets one warning line with the count; the run goes on as the published
code would (each such answer said whole)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import run_rlver
from rlver.simulator.llm import published_text
from rlver.testing.openai_server import FakeChatServer
from test_sage_published import _fresh_texts  # noqa: F401 (an autouse fixture)

APPRAISAL = "Content:\n懂了\nTargetCompletion:\n一半\nActivity:\n想\nAnalyse:\n还行\nChange:\n+5"


def _run(tmp_path: Path, reply: str) -> Any:
    head = published_text.sage_texts().appraisal_template[:40]

    def answer(request: dict[str, Any]) -> str:
        if request.get("model") == "policy":
            return "我在听。"
        return APPRAISAL if request["messages"][0]["content"].startswith(head) else reply

    with FakeChatServer(answer) as server:
        return run_rlver(
            "eval", "--agent-base-url", server.url, "--agent-model", "policy", "--simulator", "llm",
            "--sim-base-url", server.url, "--sim-model", "sim", "--sim-key-env", "",
            "--profiles", "sage", "--limit", "2", "--set", "env.rules.max_assistant_turns=3",
            "--out", tmp_path.name, "--no-report", cwd=tmp_path.parent,
        )  # fmt: skip


def test_json_answers_are_counted_in_one_warning(shared_data: Path, tmp_path: Path) -> None:
    done = _run(tmp_path / "json", '{"response": "嗯，好吧。"}')
    assert done.returncode == 0, done.stderr[-3000:]
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    # 2 dialogues x 3 replies, the last unappraised and unanswered: 2 reply answers each
    assert warned == [
        "warning: 4 of 4 simulator answers had no 'Response:' field, not the published format (a JSON "
        "object or free text?): each was said whole, as the published code does; check that the "
        "simulator model follows the published prompts"
    ], done.stderr[-3000:]
    fine = _run(tmp_path / "fine", "Thinking:\n想\nResponse:\n嗯，好吧。")
    assert fine.returncode == 0 and "warning:" not in fine.stderr, fine.stderr[-3000:]
