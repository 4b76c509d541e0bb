"""Done-when: `rlver eval` runs offline end to end, and a killed run resumes without redoing dialogues."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import popen_with_ctrl_c
from rlver.eval.config import EvalConfig
from rlver.eval.runner import run_eval

N_PROFILES = 6


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a torn last line (SIGKILL mid-write) is allowed
            out.append(json.loads(raw))
    return out


def _episodes(path: Path) -> list[dict]:
    return [r for r in _lines(path) if r.get("type") == "episode"]


def _eval_cmd(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "rlver", "eval",
        "--agent-tiny", "--simulator", "offline",
        "--profiles", "en-test", "--limit", str(N_PROFILES),
        "--batch-size", "1", "--agent-max-tokens", "48",
        "--set", "env.rules.max_assistant_turns=3",
        "--out", str(out), *extra,
    ]  # fmt: skip


def _run_until_written(cmd: list[str], transcript: Path, at_least: int, sig: int) -> tuple[int, str]:
    """Start ``cmd``; once ``at_least`` dialogues are in the transcript, send ``sig``; return (rc, stderr)."""
    env = {**os.environ, "COLUMNS": "120"}
    proc = popen_with_ctrl_c(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if len(_episodes(transcript)) >= at_least:
                proc.send_signal(sig)
                break
            time.sleep(0.02)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


@pytest.mark.slow
def test_killed_run_resumes_without_redoing_finished_profiles(tmp_path: Path) -> None:
    out = tmp_path / "run"
    transcript = out / "transcript.jsonl"

    rc, err = _run_until_written(_eval_cmd(out), transcript, 1, signal.SIGINT)
    first = _episodes(transcript)
    assert rc == 130, err
    assert "--resume" in err  # tells the user how to continue
    assert 1 <= len(first) < N_PROFILES, "the run finished before it could be interrupted"

    # Without --resume the existing run is protected.
    again = subprocess.run(_eval_cmd(out), capture_output=True, text=True, timeout=180, check=False)
    assert again.returncode == 2 and "--resume" in again.stderr and "Traceback" not in again.stderr

    rc, err = _run_until_written(_eval_cmd(out, "--resume"), transcript, len(first) + 1, signal.SIGKILL)
    assert rc == -signal.SIGKILL, err
    second = _episodes(transcript)
    assert second[: len(first)] == first  # nothing finished was lost or rewritten

    done = subprocess.run(
        _eval_cmd(out, "--resume"), capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    final = _episodes(transcript)
    ids = [e["profile_id"] for e in final]
    assert len(ids) == len(set(ids)) == N_PROFILES  # each profile exactly once
    assert final[: len(second)] == second
    manifests = [r for r in _lines(transcript) if r.get("type") == "manifest"]
    assert len(manifests) == 1
    assert not any("key" in k.lower() and not k.endswith("_env") for k in json.dumps(manifests[0]).split('"'))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == N_PROFILES
    assert metrics["score"] == pytest.approx(sum(e["final_emotion"] for e in final) / N_PROFILES)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert all(pid in html for pid in ids)


def test_eval_in_process_resume_runs_only_missing_profiles(tmp_path: Path) -> None:
    import torch

    torch.set_num_threads(1)
    base = {
        "agent_tiny": True,
        "profiles": "en-test",
        "env": {"max_assistant_turns": 2},
        "out": str(tmp_path / "run"),
        "report": False,
    }
    first = run_eval(EvalConfig.model_validate({**base, "limit": 2}))
    assert (first.ran, first.skipped, first.metrics.n) == (2, 0, 2)
    ids_first = [e["profile_id"] for e in _episodes(first.transcript)]

    second = run_eval(EvalConfig.model_validate({**base, "limit": 4}), resume=True)
    assert (second.ran, second.skipped, second.metrics.n) == (2, 2, 4)
    eps = _episodes(second.transcript)
    ids = [e["profile_id"] for e in eps]
    assert ids[:2] == ids_first and len(set(ids)) == 4
    # each dialogue is tagged for the report and the breakdowns; every reply is at most 2 turns
    assert all(e["meta"].get("topic") for e in eps)
    assert all(sum(m["role"] == "assistant" for m in e["messages"]) <= 2 for e in eps)
    # protocol: the final (2nd) reply is never appraised under the evaluation defaults
    assert all(len(e["emotions"]) <= 1 for e in eps)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n"] == 4


def test_eval_refuses_changed_settings_on_resume(tmp_path: Path) -> None:
    base = {
        "agent_tiny": True,
        "profiles": "en-test",
        "limit": 1,
        "env": {"max_assistant_turns": 1},
        "out": str(tmp_path),
        "report": False,
    }
    run_eval(EvalConfig.model_validate(base))
    from rlver.errors import InputError

    with pytest.raises(InputError, match="env"):
        run_eval(EvalConfig.model_validate({**base, "env": {"max_assistant_turns": 2}}), resume=True)


#: ``simulator_spec`` as manifests recorded it before the simulator specs were split by kind (one flat
#: block holding every kind's options), for the offline user and for the LLM user on ``rlver-v1``.
FLAT_OFFLINE = {
    "kind": "offline", "model": None, "difficulty": None, "behaviour": None, "max_change": 10, "seed": 0,
    "sampling": None, "prompt_language": None, "embed": False, "learned": True, "cache": "auto",
    "protocol": "sage", "magnitude_rubric": False, "difficulty_paragraph": False, "show_traits": False,
    "tier_bands": False, "number_and_tier": False, "first_person_appraiser": False,
    "injection_guard": False, "full_appraisal_in_reply": False,
}  # fmt: skip
FLAT_V1 = {
    **FLAT_OFFLINE,
    "kind": "llm",
    "model": {"model": "m", "api_key_env": None},
    "protocol": "rlver-v1",
}


@pytest.mark.parametrize("flat", [FLAT_OFFLINE, FLAT_V1], ids=["offline", "llm-v1"])
def test_a_run_recorded_with_the_flat_spec_still_resumes(flat: dict) -> None:
    """The settings check reads a recorded spec as this version writes it: same settings, no mismatch.
    A model recorded without ``base_url`` (from before a model needed one) went to OpenAI's endpoint,
    which a resume must now name."""
    from rlver.eval.runner import _check_resume
    from rlver.migrate import OPENAI_BASE_URL
    from rlver.redaction import redacted
    from rlver.simulator.factory import SimulatorSpec

    named = {**flat, "model": {**flat["model"], "base_url": OPENAI_BASE_URL}} if flat["model"] else flat
    now = redacted(SimulatorSpec.model_validate(named).model_dump(mode="json"))
    assert "embed" not in now or flat["kind"] == "offline"
    assert _check_resume({"simulator_spec": flat}, {"simulator_spec": now}) == []
    changed = {**flat, "max_change": 6}
    assert _check_resume({"simulator_spec": changed}, {"simulator_spec": now}) == ["simulator_spec"]
    if flat["model"]:  # another endpoint is another run
        elsewhere = {**flat, "model": {**flat["model"], "base_url": "http://127.0.0.1:9/v1"}}
        assert _check_resume({"simulator_spec": elsewhere}, {"simulator_spec": now}) == ["simulator_spec"]
        agent = {"kind": "openai", "model": "m", "base_url": None, "api_key_env": None}
        agent_now = {**agent, "base_url": OPENAI_BASE_URL}
        assert _check_resume({"agent_spec": agent}, {"agent_spec": agent_now}) == []
