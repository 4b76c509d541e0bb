"""Runs where everything failed do not report success; partial failure is counted; JSON is strict
(issue 16, defects 2 and 4, and the eval items of 11). Real CLI subprocesses and a real local server."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlver.errors import InputError
from rlver.eval.config import EvalConfig
from rlver.eval.metrics import compute_metrics, paired_comparison
from rlver.eval.runner import run_eval
from rlver.io import append_jsonl, atomic_write_json
from rlver.testing.openai_server import FakeChatServer
from test_eval_judge import verdict
from test_report import make_episode, write_run

DEAD = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, every call is refused


def rlver(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "rlver", *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


def strict_json(path: Path) -> Any:
    """Parse as JSON the way jq or a browser would: NaN/Infinity are errors."""

    def refuse(token: str) -> None:
        raise AssertionError(f"{path}: {token} is not JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# -- strict JSON ------------------------------------------------------------------------------------


def test_json_writers_refuse_nan(tmp_path: Path) -> None:
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            atomic_write_json(tmp_path / "m.json", {"score": bad})
        with pytest.raises(ValueError):
            append_jsonl(tmp_path / "m.jsonl", {"x": [bad]})
    assert not (tmp_path / "m.json").exists()


def test_metrics_of_nothing_finished_are_null_not_nan_or_zero(tmp_path: Path) -> None:
    failed = [make_episode("a", [], status="failed"), make_episode("b", [], status="failed")]
    m = compute_metrics(failed)
    assert (m.n, m.n_failed_runs) == (0, 2)
    assert m.score is None and m.score_rounded is None and m.score_ci_low is None
    assert "no score" in m.headline() and m.counts() == "0 finished / 2 failed (partial)"
    cmp = paired_comparison(failed, failed)
    assert cmp.n_pairs == 0 and cmp.mean_diff is None and cmp.diff_ci_low is None
    atomic_write_json(tmp_path / "metrics.json", m.model_dump(mode="json"))
    atomic_write_json(tmp_path / "cmp.json", cmp.model_dump(mode="json"))
    assert strict_json(tmp_path / "metrics.json")["score"] is None


# -- eval -------------------------------------------------------------------------------------------


def test_eval_against_a_dead_endpoint_fails_with_one_line(tmp_path: Path) -> None:
    done = rlver(
        "eval", "--agent-base-url", DEAD, "--agent-model", "m", "--agent-key-env", "",
        "--profiles", "bundled-test", "--limit", "2", "--out", "run", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    [line] = error_lines(done.stderr)
    assert "no dialogue finished (2 failed: connection: 2)" in line
    assert "run/transcript.jsonl" in line
    assert "score 0.0" not in done.stderr + done.stdout and "Traceback" not in done.stderr
    assert "UserWarning" not in done.stderr  # the report draws no empty charts
    metrics = strict_json(tmp_path / "run" / "metrics.json")
    assert metrics["n"] == 0 and metrics["n_failed_runs"] == 2
    assert metrics["score"] is None and metrics["score_ci_low"] is None
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "0 finished / 2 failed" in report and "nothing to plot" in report


def test_config_error_draws_no_bar_and_leaves_no_folder(tmp_path: Path) -> None:
    empty_model = tmp_path / "not-a-model"
    empty_model.mkdir()
    done = rlver(
        "eval", "--agent-local", str(empty_model), "--profiles", "bundled-test", "--limit", "1",
        "--out", "run", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "0/?" not in done.stderr and "eval ━" not in done.stderr
    assert not (tmp_path / "run").exists()


def _endpoint_config(url: str, out: Path, limit: int, **extra: Any) -> EvalConfig:
    return EvalConfig.model_validate(
        {
            "agent": {"kind": "openai", "model": "echo", "base_url": url, "api_key_env": None},
            "profiles": "bundled-test",
            "limit": limit,
            "env": {"max_assistant_turns": 2},
            "out": str(out),
            **extra,
        }
    )


def test_resume_with_a_smaller_limit_is_refused_and_every_output_agrees(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeChatServer() as server:
        first = run_eval(_endpoint_config(server.url, out, 3))
        assert first.metrics.n == 3
        before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
        with pytest.raises(InputError) as err:
            run_eval(_endpoint_config(server.url, out, 2), resume=True)
        assert "limit" in str(err.value) and "never shrink" in str(err.value)
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
        # a larger --limit extends the run
        run_eval(_endpoint_config(server.url, out, 4), resume=True)
    metrics = strict_json(out / "metrics.json")
    scored = json.loads(rlver("score", "--json", str(out)).stdout)["runs"][0]
    transcript = [json.loads(x) for x in (out / "transcript.jsonl").read_text().splitlines()[1:]]
    assert metrics["n"] == scored["n"] == len(transcript) == 4
    assert metrics["score"] == scored["score"]
    assert "4 finished / 0 failed" in (out / "report.md").read_text(encoding="utf-8")


def test_resume_cli_with_smaller_limit_exits_2(tmp_path: Path) -> None:
    with FakeChatServer() as server:
        common = ["eval", "--agent-base-url", server.url, "--agent-model", "echo", "--agent-key-env", ""]
        common += ["--profiles", "bundled-test", "--set", "env.rules.max_assistant_turns=1", "--out", "run"]
        assert rlver(*common, "--limit", "3", "--no-report", cwd=tmp_path).returncode == 0
        done = rlver(*common, "--limit", "2", "--resume", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = error_lines(done.stderr)
    assert "transcript.jsonl: limit:" in line and "never shrink" in line


def test_run_eval_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    """What Jupyter does: every cell runs inside an event loop, where asyncio.run() is refused."""
    with FakeChatServer() as server:
        config = _endpoint_config(server.url, tmp_path / "run", 1, report=False)

        async def cell() -> Any:
            return run_eval(config)

        result = asyncio.run(cell())
    assert result.metrics.n == 1 and result.ran == 1


def test_report_header_names_the_models_and_skips_empty_outcome_chart(tmp_path: Path) -> None:
    from rlver.eval.report import render_html
    from rlver.eval.report_view import ReportView
    from rlver.eval.runs import load_run

    with FakeChatServer() as server:
        cfg = _endpoint_config(
            server.url, tmp_path / "run", 1, report=False, sampling={"temperature": 0.3, "max_tokens": 33}
        )
        run_eval(cfg)
    run = load_run(tmp_path / "run")
    assert run.metrics.success == run.metrics.failure == 0  # echo replies, two turns: neither
    view = ReportView.build([run])
    html = render_html(view)
    header = html.split('id="metrics"')[0]
    assert "agent: echo (openai at " in header and "temperature 0.3" in header and "max_tokens 33" in header
    assert "simulator: offline" in header and "1 finished / 0 failed" in header
    assert "outcomes" not in [f.name for f in view.figures]


# -- judge ------------------------------------------------------------------------------------------


def test_judge_dead_endpoint_fails_and_reruns_replace_error_rows(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", "r", [make_episode("p1", [5]), make_episode("p2", [3])])
    judge = ["judge", str(run), "--judge-model", "j", "--judge-key-env", "", "--no-cache"]
    for _ in range(2):
        done = rlver(*judge, "--judge-base-url", DEAD)
        assert done.returncode == 1, done.stderr
        [line] = error_lines(done.stderr)
        assert "no dialogue was judged" in line and str(run / "judge.jsonl") in line
        rows = (run / "judge.jsonl").read_text().splitlines()
        assert len(rows) == 2  # one row per dialogue, however often it is rerun
    summary = strict_json(run / "judge.json")
    assert summary["n_judged"] == 0 and summary["orientation"] is None
    assert set(summary["capabilities"].values()) == {None}

    with FakeChatServer(lambda request: json.dumps(verdict())) as server:
        done = rlver(*judge, "--judge-base-url", server.url)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(x) for x in (run / "judge.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["judgement"] is not None and r["error"] is None for r in rows)
    assert strict_json(run / "judge.json")["n_judged"] == 2


# -- probe ------------------------------------------------------------------------------------------


def test_probe_strict_against_a_dead_simulator_fails(tmp_path: Path) -> None:
    done = rlver(
        "probe", "--simulator", "llm", "--sim-model", "m", "--sim-base-url", DEAD, "--sim-key-env", "",
        "--profiles", "en-test", "--limit", "1", "--strict",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    [line] = error_lines(done.stderr)
    assert "no probe result" in line and "connection" in line
    assert "no adversarial probe earned a positive change" not in done.stdout
