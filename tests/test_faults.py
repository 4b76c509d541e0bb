"""Fault injection: evaluations and training steps finish under every kind of server misbehaviour.

A real OpenAI-compatible server on 127.0.0.1 (FakeChatServer) misbehaves according to a
:class:`rlver.testing.faults.FaultPlan` (the configs come from ``bench/fault_drill.py``, the drill that
writes the table in docs/reliability.md): the dialogues of two "victim" profiles are faulted on every
request (they must end ``failed`` with the right error kind), and about half of the other requests
are faulted once (the client's retry or the simulator's re-ask must recover, so those dialogues
finish). Every model call runs under a 0.5 s per-attempt timeout and 2 attempts, and every test under
pytest-timeout, so a hang fails the test instead of stalling CI.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlver.eval.runner import run_eval_async
from rlver.testing.faults import (
    EXPECTED_ERROR_KIND,
    FAULT_KINDS,
    HUGE_SIZE,
    FaultPlan,
    fixed_responder,
    victim_ids,
    write_fault_profiles,
)
from rlver.testing.openai_server import FakeChatServer
from rlver.transcripts.native import read_transcript

# The drill's configs live with the drill in bench/ (not a package; its scripts import by folder).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from fault_drill import Row, eval_config, table_markdown, train_config

N_PROFILES = 6  # eval: 2 victims, 4 that must finish
TURNS = 3


@pytest.fixture(scope="module")
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer(fixed_responder) as srv:
        yield srv


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fault_profiles(tmp_path_factory.mktemp("profiles") / "profiles.jsonl")


def _eval(server: FakeChatServer, profiles: Path, out: Path) -> Any:
    return asyncio.run(run_eval_async(eval_config(server.url, profiles, out, turns=TURNS)))


# -- evaluation -----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_eval_finishes_and_records_each_fault(
    kind: str, server: FakeChatServer, profiles: Path, tmp_path: Path
) -> None:
    plan = FaultPlan(kind).install(server)
    result = _eval(server, profiles, tmp_path / "run")
    expected = EXPECTED_ERROR_KIND[kind]
    victims = victim_ids()

    # the run's summary counts failures by kind, in memory and on disk
    m = result.metrics
    assert (m.n, m.n_failed_runs) == (N_PROFILES - len(victims), len(victims))
    assert m.failed_run_kinds == {expected: len(victims)}
    on_disk = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert on_disk["failed_run_kinds"] == {expected: len(victims)}

    episodes = {ep.profile_id: ep for ep in read_transcript(result.transcript).episodes}
    assert set(episodes) == {f"fault-{i}" for i in range(N_PROFILES)}
    for pid, ep in episodes.items():
        if pid in victims:
            assert ep.status == "failed" and ep.error_kind == expected, (pid, ep.error)
            assert ep.error and ep.error.strip()
            if kind not in ("nonsense", "huge_text"):  # LLM errors: bounded retries, then give up
                assert "gave up after 2 attempt(s)" in ep.error, ep.error
            else:  # re-asked once with the error, then given up
                assert "malformed twice" in ep.error, ep.error
        else:
            assert ep.status == "finished", (pid, ep.error)
            assert ep.assistant_turns == TURNS
    # faults were really injected: on every victim attempt, and transiently (and survived) elsewhere
    assert plan.injected_victim >= 2 * len(victims)
    assert plan.injected_transient >= 1
    # untrusted output stays bounded: no transcript line carries the 1 MB answer
    for line in result.transcript.read_text(encoding="utf-8").splitlines():
        assert len(line) < HUGE_SIZE // 4


@pytest.mark.timeout(60)
def test_eval_total_outage_finishes_with_every_dialogue_failed(
    server: FakeChatServer, tmp_path: Path
) -> None:
    """Every dialogue a victim: the run still ends (no hang, no crash) and says why each failed."""
    profiles = write_fault_profiles(tmp_path / "all.jsonl", n=3, victims=(0, 1, 2))
    FaultPlan("server_error").install(server)
    result = _eval(server, profiles, tmp_path / "run")
    assert (result.metrics.n, result.metrics.n_failed_runs) == (0, 3)
    assert result.metrics.failed_run_kinds == {"server_error": 3}


@pytest.mark.timeout(90)
def test_eval_cli_policy_faults_are_counted_in_the_summary(server: FakeChatServer, tmp_path: Path) -> None:
    """The real ``rlver eval`` in a subprocess; the *agent's* endpoint is rate limited for two users."""
    profiles = write_fault_profiles(tmp_path / "profiles.jsonl")
    plan = FaultPlan("rate_limit", target="policy").install(server)
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "rlver", "eval",
        "--agent-base-url", server.url, "--agent-model", "policy", "--agent-key-env", "",
        "--simulator", "llm", "--sim-base-url", server.url, "--sim-model", "sim", "--sim-key-env", "",
        "--profiles", str(profiles), "--out", str(out), "--no-report",
        "--set", f"env.rules.max_assistant_turns={TURNS}",
        "--set", "agent.timeout_s=0.5", "--set", "agent.max_attempts=2",
        "--set", "simulator.model.timeout_s=0.5", "--set", "simulator.model.max_attempts=2",
        "--set", "simulator.cache=null",
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=80, env=env)
    assert proc.returncode == 3, proc.stderr[-3000:]  # two victims failed: a partial run
    assert "2 dialogue(s) failed" in proc.stderr and "rate_limit" in proc.stderr, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["failed_run_kinds"] == {"rate_limit": 2}
    assert metrics["n"] == N_PROFILES - 2
    failed = [ep for ep in read_transcript(out / "transcript.jsonl").episodes if ep.status == "failed"]
    assert {ep.profile_id for ep in failed} == victim_ids()
    assert all("HTTP 429" in (ep.error or "") for ep in failed)
    assert plan.injected_victim == 2 * 2  # two victims x two attempts, then given up


# -- training -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trainer(server: FakeChatServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One tiny GRPO trainer for all fault kinds (building the model once keeps the suite fast).

    Its 4 profiles (2 victims) x 2 samples = every profile in every step.
    """
    import torch

    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("train")
    profiles = write_fault_profiles(root / "profiles.jsonl", n=4, victims=(0, 2))
    server.fault_for, server.responder = None, fixed_responder
    t = Trainer(train_config(server.url, profiles), root / "run")
    yield t
    t.logger.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_train_step_finishes_and_counts_each_fault(
    kind: str, server: FakeChatServer, trainer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from rlver.train.logger import read_metrics

    plan = FaultPlan(kind).install(server)
    step_before = trainer.step
    with caplog.at_level(logging.WARNING, logger="rlver.train.trainer"):
        metrics = trainer.train_step()
    expected = EXPECTED_ERROR_KIND[kind]
    assert trainer.step == step_before + 1  # the update ran on the dialogues that finished
    assert metrics["rollout/dialogues"] == 8
    assert metrics["rollout/failed"] == 4  # 2 victim profiles x 2 samples
    assert metrics["rollout/failed_by_kind"] == {expected: 4}
    logged = read_metrics(trainer.out)[-1]
    assert logged["step"] == trainer.step and logged["rollout/failed_by_kind"] == {expected: 4}
    # a human reading the log learns why, not only how many
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert f"{expected} x4" in warning and "4 of 8 dialogues failed" in warning
    assert plan.injected_victim >= 4 and plan.injected_transient >= 1


def test_fault_plan_rejects_unknown_kinds_and_the_table_flags_a_wrong_kind() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultPlan("meteor")
    with pytest.raises(ValueError, match="target"):
        FaultPlan("drop", target="judge")
    good = Row("delay", "eval", 39, 4, 5, 6, 4, 2, {"timeout": 2}, 1.0)
    wrong = Row("delay", "eval", 39, 4, 5, 6, 4, 2, {"connection": 2}, 1.0)
    table = table_markdown([good, wrong])
    assert "| 9 | 5 of 5 | 2 (timeout 2) | 4 of 4 | yes |" in table
    assert "| 2 (connection 2) | 4 of 4 | NO |" in table


def test_a_step_with_too_many_failed_dialogues_stops_the_run_naming_the_errors() -> None:
    """Above ``rollout.max_failed_share`` the step is not trained on its survivors: it stops, saying
    how many failed, of which kind, the first error, and which setting allows more."""
    from rlver.train.step_metrics import stop_if_too_many_failed
    from rlver.train.trainer import TrainError
    from test_env_rewards import make_episode

    ok = make_episode(30, [40])
    bad = make_episode(30, [40]).model_copy(
        update={"status": "failed", "error": "HTTP 503 from the simulator", "error_kind": "server"}
    )
    stop_if_too_many_failed(3, [ok, ok, bad, bad], 0.5)  # half failed: at the bound, goes on
    with pytest.raises(TrainError) as info:
        stop_if_too_many_failed(3, [ok, bad, bad, bad], 0.5)
    message = str(info.value)
    assert "step 3: 3 of 4 dialogues failed" in message and "server x3" in message
    assert "HTTP 503" in message and "rollout.max_failed_share" in message
