"""API keys never reach disk, logs, error messages or reports.

Each command runs as a real subprocess with recognisable fake keys in the environment variables its
config names, against a real local server that records the ``Authorization`` header (so we know each
key WAS sent: a test that never used the key could not catch a leak) and that rejects some requests
with HTTP 401 echoing the key back, as some servers do. Then every byte written under the run's
folders — transcripts, manifests, metrics, reports, judge files and caches, checkpoints, TensorBoard
events, logs — and the captured stdout/stderr are searched for the keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlver.testing.faults import POLICY_MODEL, SIMULATOR_MODEL
from rlver.testing.openai_server import FakeChatServer, Fault
from rlver.testing.responders import POLICY_TEXT, SIMULATOR_TEXT

#: The canary. Every key below contains it, so one search finds any of them, whole.
CANARY = "SECRET-canary"
KEYS = {
    "RLVER_CANARY_AGENT": "sk-rlver-SECRET-canary-agent-0987654321",
    "RLVER_CANARY_SIM": "sk-rlver-SECRET-canary-1234567890",
    "RLVER_CANARY_JUDGE": "sk-rlver-SECRET-canary-judge-1122334455",
    "RLVER_CANARY_GEN": "sk-rlver-SECRET-canary-gen-5566778899",
}
#: Markers in a profile that make the server reject that dialogue's calls with a key-echoing 401.
REJECT_AGENT = "reject-agent-call"
REJECT_SIM = "reject-simulator-call"
REJECT_JUDGE = "reject-judge-call"

CAPABILITIES = (
    "empathic_depth",
    "core_insight",
    "solution_crafting",
    "dialogue_guidance",
    "style_adaptability",
)
JUDGE_TEXT = json.dumps(
    {
        "ratings": {c: {"score": 3, "justification": "Listens, asks one question."} for c in CAPABILITIES},
        "coordinate": {"orientation": -0.2, "style": 0.1},
        "summary": "Supportive and brief.",
    }
)
PROFILE_TEXT = json.dumps(
    {
        "name": "Ada Quinn",
        "age": 29,
        "occupation": "night-shift nurse",
        "persona": "Ada restores old bicycles in a cramped garage and hums while she works.",
        "background": {
            "cause": "A patient she had grown fond of died on her ward.",
            "timeline": [
                "Last month: the patient died",
                "Since then: she cannot sleep",
                "This week: she reached out",
            ],
            "conflict": "She blames herself for missing a change in his breathing.",
            "tried": "Ada tried to keep busy and not think about it.",
        },
        "reactions": {
            "high": "talks freely and jokes",
            "medium": "answers but stays guarded",
            "low": "gives short answers",
            "on_target": "opens up with details",
            "off_target": "withdraws and deflects",
        },
        "goal": "Make sense of the guilt.",
        "hidden_need": "Permission to grieve without being the strong one.",
        "traits": ["proud", "anxious", "loyal"],
        "opening": "Hi. I am Ada, and honestly I do not know where to start.",
    }
)


def _respond(request: dict[str, Any]) -> str:
    model = request.get("model")
    if model == POLICY_MODEL:
        return POLICY_TEXT
    if model == SIMULATOR_MODEL:
        return SIMULATOR_TEXT
    if model == "judge":
        return JUDGE_TEXT
    return PROFILE_TEXT


def _key_for(model: object) -> str:
    return {
        POLICY_MODEL: KEYS["RLVER_CANARY_AGENT"],
        SIMULATOR_MODEL: KEYS["RLVER_CANARY_SIM"],
        "judge": KEYS["RLVER_CANARY_JUDGE"],
    }.get(str(model), KEYS["RLVER_CANARY_GEN"])


def _reject(request: dict[str, Any]) -> Fault | None:
    """401 echoing the caller's key for marked dialogues, and for every call to model ``gen-reject``."""
    model = request.get("model")
    text = json.dumps(request.get("messages"))
    marker = {POLICY_MODEL: REJECT_AGENT, SIMULATOR_MODEL: REJECT_SIM, "judge": REJECT_JUDGE}.get(str(model))
    if model == "gen-reject" or (marker and marker in text):
        key = _key_for(model)
        return Fault.rejected(401, f"Incorrect API key provided: {key}. Check it at https://example.invalid.")
    return None


@pytest.fixture(scope="module")
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer(_respond) as srv:
        srv.fault_for = _reject
        yield srv


def _profiles(path: Path, markers: list[str]) -> Path:
    rows = []
    for i, marker in enumerate(markers):
        tag = f" ({marker})" if marker else ""
        rows.append(
            {
                "id": f"secret-{i}",
                "language": "en",
                "persona": f"- Name: Kim {i}\n- Job: bus driver{tag}",
                "background": "Cause: a passenger complaint led to a formal warning.",
                "goal": "Vent about the warning.",
                "hidden_need": "To hear that one complaint does not define them.",
                "opening": f"I got a written warning at work today{tag}.",
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **KEYS, "COLUMNS": "200", "RLVER_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "rlver", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def assert_no_key(proc: subprocess.CompletedProcess[str], *roots: Path) -> int:
    """No key in the process's output or in any file under ``roots``; returns how many files were read."""
    assert CANARY not in proc.stdout, proc.stdout[-2000:]
    assert CANARY not in proc.stderr, proc.stderr[-2000:]
    files = [p for root in roots for p in root.rglob("*") if p.is_file()]
    leaked = [str(p) for p in files if CANARY.encode() in p.read_bytes()]
    assert not leaked, f"key written to: {leaked}"
    return len(files)


def _sent(server: FakeChatServer, env_name: str) -> bool:
    return f"Bearer {KEYS[env_name]}" in server.authorizations


# -- rlver eval / score / report / judge ------------------------------------------------------------


@pytest.fixture(scope="module")
def eval_run(server: FakeChatServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    work = tmp_path_factory.mktemp("eval")
    profiles = _profiles(work / "profiles.jsonl", [REJECT_AGENT, REJECT_SIM, REJECT_JUDGE, ""])
    proc = _run(
        [
            "eval",
            "--agent-base-url", server.url, "--agent-model", POLICY_MODEL, "--agent-key-env", "RLVER_CANARY_AGENT",
            "--simulator", "llm", "--sim-base-url", server.url, "--sim-model", SIMULATOR_MODEL,
            "--sim-key-env", "RLVER_CANARY_SIM",
            "--profiles", str(profiles), "--out", str(work / "run"),
            "--set", "env.rules.max_assistant_turns=2", "--set", "agent.max_attempts=2",
            "--set", "simulator.model.max_attempts=2", "--set", "simulator.cache=null",
        ],
        work,
    )  # fmt: skip
    return work, proc


@pytest.mark.timeout(180)
def test_eval_sends_the_key_but_never_writes_it(server: FakeChatServer, eval_run: tuple[Path, Any]) -> None:
    from rlver.transcripts.native import read_transcript

    work, proc = eval_run
    assert proc.returncode == 3, proc.stderr[-3000:]  # two dialogues are rejected on purpose: partial
    assert _sent(server, "RLVER_CANARY_AGENT") and _sent(server, "RLVER_CANARY_SIM")
    episodes = {ep.profile_id: ep for ep in read_transcript(work / "run" / "transcript.jsonl").episodes}
    rejected = [episodes["secret-0"], episodes["secret-1"]]
    assert all(ep.status == "failed" and ep.error_kind == "request_rejected" for ep in rejected)
    # the server's message is kept (it helps), with the key cut out of it
    assert all("Incorrect API key provided: ***" in (ep.error or "") for ep in rejected), rejected[0].error
    assert (work / "run" / "report.html").exists() and (work / "run" / "metrics.json").exists()
    assert assert_no_key(proc, work / "run") >= 5


@pytest.mark.timeout(180)
def test_score_report_and_judge_never_write_the_key(
    server: FakeChatServer, eval_run: tuple[Path, Any]
) -> None:
    work, _ = eval_run
    run = work / "run"
    judge = _run(
        [
            "judge", str(run), "--judge-model", "judge", "--judge-base-url", server.url,
            "--judge-key-env", "RLVER_CANARY_JUDGE",
        ],
        work,
    )  # fmt: skip
    assert judge.returncode == 3, judge.stderr[-3000:]  # one dialogue is rejected on purpose: partial
    assert "/ failed 1 dialogue(s)" in judge.stdout + judge.stderr
    assert _sent(server, "RLVER_CANARY_JUDGE")
    judged = [json.loads(line) for line in (run / "judge.jsonl").read_text().splitlines() if line.strip()]
    assert any(row.get("judgement") for row in judged)
    assert any("***" in (row.get("error") or "") for row in judged), judged
    assert_no_key(judge, run)
    for args in (["score", str(run), "--json"], ["report", str(run), "--out", str(work / "again.html")]):
        proc = _run(args, work)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert_no_key(proc, run, work / "again.html")


# -- rlver train --------------------------------------------------------------------------------


@pytest.mark.slow  # ~51 s on the 2-core box (issue 25)
@pytest.mark.timeout(240)
def test_train_sends_the_key_but_never_writes_it(server: FakeChatServer, tmp_path: Path) -> None:
    profiles = _profiles(tmp_path / "profiles.jsonl", ["", REJECT_SIM, "", ""])
    config = {
        "model": {"path": "tiny", "device": "cpu", "max_length": 1024},
        "algorithm": {"name": "grpo"},
        "rollout": {
            "profiles": str(profiles), "batch_size": 4, "n_per_profile": 2,
            "rules": {"max_assistant_turns": 2}, "max_new_tokens": 8,
        },
        "simulator": {
            "kind": "llm", "cache": None,
            "model": {
                "base_url": server.url, "model": SIMULATOR_MODEL, "api_key_env": "RLVER_CANARY_SIM",
                "timeout_s": 5, "max_attempts": 2,
            },
        },
        "eval": {"profiles": str(profiles), "limit": 2},
        "run": {"steps": 1, "checkpoint_every": 1, "tensorboard": True, "progress": False},
    }  # fmt: skip
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump(config), encoding="utf-8")
    out = tmp_path / "run"
    before = len(server.authorizations)
    proc = _run(["train", "--config", str(cfg), "--out", str(out)], tmp_path, timeout=220)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Bearer {KEYS['RLVER_CANARY_SIM']}" in server.authorizations[before:]
    # the rejected dialogues are counted by kind and explained (key cut out) on stderr
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["rollout/failed_by_kind"] == {"request_rejected": 2}
    assert "request_rejected" in proc.stderr and "***" in proc.stderr
    assert any((out / "tensorboard").iterdir()) and (out / "checkpoints").exists()
    assert assert_no_key(proc, out) >= 5


# -- rlver profiles generate ------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_profiles_generate_never_writes_the_key(server: FakeChatServer, tmp_path: Path) -> None:
    out = tmp_path / "gen" / "profiles.jsonl"
    base = ["profiles", "generate", "--n", "1", "--out", str(out), "--base-url", server.url]
    rejected = _run(
        [*base, "--model", "gen-reject", "--key-env", "RLVER_CANARY_GEN", "--max-attempts", "2"], tmp_path
    )
    assert rejected.returncode != 0
    assert "401" in rejected.stdout + rejected.stderr
    assert_no_key(rejected, tmp_path / "gen")
    before = len(server.authorizations)
    ok = _run([*base, "--model", "gen", "--key-env", "RLVER_CANARY_GEN"], tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert f"Bearer {KEYS['RLVER_CANARY_GEN']}" in server.authorizations[before:]
    assert out.exists() and out.read_text().strip()
    assert_no_key(ok, tmp_path / "gen")


# -- a key pasted where the variable's *name* belongs -------------------------------------------------


@pytest.mark.timeout(120)
def test_a_key_pasted_as_the_variable_name_is_refused_without_echoing_it(
    server: FakeChatServer, tmp_path: Path
) -> None:
    """``--agent-key-env sk-...`` (the key instead of its variable): refused, and not printed back."""
    key = KEYS["RLVER_CANARY_AGENT"]
    profiles = _profiles(tmp_path / "profiles.jsonl", [""])
    proc = _run(
        [
            "eval", "--agent-base-url", server.url, "--agent-model", POLICY_MODEL, "--agent-key-env", key,
            "--profiles", str(profiles), "--out", str(tmp_path / "run"),
        ],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "api_key_env" in proc.stderr and "name of an environment variable" in proc.stderr
    assert_no_key(proc, tmp_path)
    gen = _run(
        ["profiles", "generate", "--n", "1", "--out", str(tmp_path / "g.jsonl"), "--model", "gen",
         "--base-url", server.url, "--key-env", key],
        tmp_path,
    )  # fmt: skip
    assert gen.returncode == 2, gen.stdout + gen.stderr
    assert_no_key(gen, tmp_path)


@pytest.mark.timeout(60)
def test_config_show_masks_keys(tmp_path: Path) -> None:
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "agent": {"model": "m", "base_url": "http://user:hunter2-password@127.0.0.1:9/v1",
                          "api_key_env": "RLVER_CANARY_AGENT"},
                "simulator": {"kind": "llm", "model": {"model": "s", "base_url": "http://127.0.0.1:9/v1",
                                                       "api_key_env": "RLVER_CANARY_SIM"}},
            }
        ),
        encoding="utf-8",
    )  # fmt: skip
    proc = _run(["config", "show", str(cfg)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "RLVER_CANARY_AGENT" in proc.stdout  # the variable's name is shown, its value never
    assert "hunter2" not in proc.stdout
    assert_no_key(proc, tmp_path)


@pytest.mark.timeout(120)
def test_probe_never_prints_the_key(server: FakeChatServer, tmp_path: Path) -> None:
    profiles = _profiles(tmp_path / "profiles.jsonl", [REJECT_SIM, ""])
    before = len(server.authorizations)
    proc = _run(
        [
            "probe", "--simulator", "llm", "--sim-model", SIMULATOR_MODEL, "--sim-base-url", server.url,
            "--sim-key-env", "RLVER_CANARY_SIM", "--profiles", str(profiles), "--limit", "2", "--json",
        ],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-2000:]  # the rejected profile's cells failed: partial
    assert f"Bearer {KEYS['RLVER_CANARY_SIM']}" in server.authorizations[before:]
    assert "request_rejected" in proc.stdout and "***" in proc.stdout  # the rejection, key cut out
    assert_no_key(proc, tmp_path)


def test_key_env_must_be_a_variable_name_and_errors_mask_tokens() -> None:
    from rlver.config import load_config
    from rlver.errors import ConfigError
    from rlver.eval.config import EvalConfig
    from rlver.llm.spec import ModelSpec
    from rlver.redaction import mask_secret_tokens

    key = KEYS["RLVER_CANARY_SIM"]
    url = "http://127.0.0.1:9/v1"
    assert (
        ModelSpec(model="m", base_url=url, api_key_env="DEEPSEEK_API_KEY").api_key_env == "DEEPSEEK_API_KEY"
    )
    assert ModelSpec(model="m", base_url=url, api_key_env=None).api_key_env is None
    with pytest.raises(ConfigError) as info:
        load_config(EvalConfig, None, ["agent.model=m", f"agent.base_url={url}", f"agent.api_key_env={key}"])
    assert "agent.api_key_env" in str(info.value) and CANARY not in str(info.value)
    assert mask_secret_tokens(f"bad value {key}!") == "bad value ***!"
    assert mask_secret_tokens("temperature 0.7, model sk-short") == "temperature 0.7, model sk-short"


def test_a_short_key_pasted_as_the_variable_name_is_not_echoed() -> None:
    """A key too short or odd for the token pattern is still hidden when ``api_key_env`` refuses it."""
    from rlver.config import load_config
    from rlver.errors import ConfigError
    from rlver.eval.config import EvalConfig

    for pasted in ("sk-abc123456789", "my key 42"):
        with pytest.raises(ConfigError) as info:
            load_config(EvalConfig, None, ["agent.model=m", f"agent.api_key_env={pasted}"])
        assert "name of an environment variable" in str(info.value)
        assert pasted not in str(info.value) and "(got '***')" in str(info.value)
