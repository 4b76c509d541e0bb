"""The LLM judge: strict parsing, one re-ask, cached calls, summary and report plots (real local server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlver.eval.judge import CAPABILITIES, parse_judgement
from rlver.testing.openai_server import FakeChatServer
from svg_check import inline_figures, read_figure
from test_report import make_episode, write_run


def verdict(score: int = 4, orientation: float = -0.5, style: float = 0.25, **drop: bool) -> dict[str, Any]:
    ratings = {c: {"score": score, "justification": f"{c} was fine"} for c in CAPABILITIES if not drop.get(c)}
    return {"ratings": ratings, "coordinate": {"orientation": orientation, "style": style}, "summary": "warm"}


def test_parse_accepts_fences_and_a_short_preamble() -> None:
    text = "Here is my rating:\n```json\n" + json.dumps(verdict()) + "\n```"
    j = parse_judgement("```json\n" + json.dumps(verdict()) + "\n```")
    assert j.ratings["core_insight"].score == 4 and j.coordinate.orientation == -0.5
    assert parse_judgement("My rating: " + json.dumps(verdict(score=2))).ratings["empathic_depth"].score == 2
    assert parse_judgement(text).summary == "warm"
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_judgement(json.dumps(verdict()) + " and that is my verdict")  # nothing may follow the object


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ("no json here", "no JSON object"),
        ("{not json", "not valid JSON"),
        (json.dumps(verdict(core_insight=True)), "missing core_insight"),
        (json.dumps(verdict(score=6)), "less than or equal to 5"),
        (
            json.dumps(
                {
                    **verdict(),
                    "ratings": {**verdict()["ratings"], "humour": {"score": 3, "justification": "x"}},
                }
            ),
            "unknown humour",
        ),
        (json.dumps(verdict(orientation=1.5)), "orientation"),
        (
            json.dumps(
                {**verdict(), "ratings": {c: {"score": 3.5, "justification": "x"} for c in CAPABILITIES}}
            ),
            "integer",
        ),
        (
            json.dumps(
                {**verdict(), "ratings": {c: {"score": 3, "justification": "  "} for c in CAPABILITIES}}
            ),
            "blank",
        ),
        ("{" + " " * 30_000 + "}", "characters long"),
    ],
)
def test_parse_rejects_bad_answers(payload: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_judgement(payload)


def responder(request: dict[str, Any]) -> str:
    """The judge's *text*: p1 fine, p2 wrong first then fixed on the re-ask, p3 wrong every time."""
    messages = request["messages"]
    convo = messages[1]["content"]
    reasked = "could not be used" in messages[-1]["content"]
    if "opening of p2" in convo and not reasked:
        return json.dumps(verdict(core_insight=True))
    if "opening of p3" in convo:
        return "I liked it, 4 out of 5."
    if "<think>" in convo or "private plan" in convo:
        return "the judge saw the hidden think block"  # must never happen: the judge sees visible text only
    return json.dumps(verdict(score=5 if "opening of p1" in convo else 3, orientation=0.5))


def test_rlver_judge_end_to_end(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        "trained",
        [
            make_episode("p1", [10, 10], think=True),
            make_episode("p2", [5, 5]),
            make_episode("p3", [-5]),
            make_episode("p4", [0], status="failed"),  # failed runs are not judged
        ],
    )
    env = {**os.environ, "COLUMNS": "200"}
    with FakeChatServer(responder) as server:
        cmd = [
            sys.executable, "-m", "rlver", "judge", str(run), "--judge-base-url", server.url,
            "--judge-model", "fake-judge", "--judge-key-env", "",
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, check=False)
        assert proc.returncode == 3, proc.stderr  # p3's judgement was given up: a partial result
        served = server.served
        assert served == 1 + 2 + 2  # p1 once, p2 re-asked once, p3 re-asked once then given up
        assert "<think>" not in json.dumps(server.requests)
        assert "private plan" not in json.dumps(server.requests)

        rows = [json.loads(line) for line in (run / "judge.jsonl").read_text().splitlines()]
        by_id = {r["profile_id"]: r for r in rows}
        assert set(by_id) == {"p1", "p2", "p3"}
        assert by_id["p1"]["judgement"]["ratings"]["empathic_depth"]["score"] == 5
        assert by_id["p2"]["attempts"] == 2 and by_id["p2"]["judgement"] is not None
        assert by_id["p3"]["judgement"] is None and "invalid twice" in by_id["p3"]["error"]

        summary = json.loads((run / "judge.json").read_text())
        assert summary["n_judged"] == 2 and summary["n_errors"] == 1
        assert summary["capabilities"]["empathic_depth"] == pytest.approx((5 + 3) / 2)
        assert summary["orientation"] == pytest.approx(0.5)
        assert summary["style"] == pytest.approx(0.25)

        # Re-running costs nothing: finished verdicts are skipped, the failed one replays from the cache.
        again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, check=False)
        assert again.returncode == 3, again.stderr  # still partial: the same answer from the cache
        assert server.served == served

    html = (run / "report.html").read_text(encoding="utf-8")
    assert "Capability analysis" in html
    # trajectory + histogram + radar + coordinate; no success/failure bars: no dialogue succeeded or failed
    titles = [read_figure(svg).title for svg in inline_figures(html)]
    assert titles[2:] == ["Capabilities (LLM judge, 1–5)", "Social cognition coordinate"] and len(titles) == 4
    assert "p1 was fine" not in html and "empathic_depth was fine" in html


def test_judge_needs_a_run_folder(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    f.write_text("{}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "judge", str(f), "--judge-model", "m", "--judge-base-url",
         "http://127.0.0.1:9/v1"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "expected a run folder" in proc.stderr
