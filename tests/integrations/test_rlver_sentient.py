"""``rlver-sentient``, the verifiers (v1) environment, against the real verifiers 0.4.0.

Run by ``make verifiers-test`` in ``.venv-verifiers`` (verifiers needs Python >= 3.11 and its own
stack); skipped where verifiers is not installed. The central check runs the issue's exact ``vf-eval``
command and ``rlver eval`` against one deterministic OpenAI-compatible server on 127.0.0.1, whose
policy answers depend on everything it is sent: the two must send the policy the same requests and
record the same outcome for every profile (reward = final emotion / 100).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

vf = pytest.importorskip("verifiers.v1", reason="needs the verifiers extra: make verifiers-test")

from rlver.manifest import RunManifest  # noqa: E402
from rlver.testing.openai_server import FakeChatServer, ServerProcess  # noqa: E402
from rlver.testing.responders import varied_policy_and_simulator  # noqa: E402
from rlver.transcripts.native import read_transcript  # noqa: E402
from rlver_sentient import SentientEnv, SentientHarness, SentientTaskset, SentientTasksetConfig  # noqa: E402

BIN = Path(sys.executable).parent
KEY_VAR = "RLVER_TEST_AGENT_KEY"


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, KEY_VAR: "not-a-secret", "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=cwd)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def vf_eval(url: str, out: str, *taskset: str, cwd: Path) -> list[dict[str, Any]]:
    """``vf-eval rlver-sentient`` as the docs give it; the run's episodes from its traces.jsonl."""
    run(
        str(BIN / "vf-eval"), "rlver-sentient", "-m", "policy", "--client.base-url", url,
        "--client.api-key-var", KEY_VAR, "--no-push", "-o", out, *taskset, cwd=cwd,
    )  # fmt: skip
    [traces] = (cwd / out).glob("*/traces.jsonl")
    return [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]


def rlver_eval(url: str, out: str, *flags: str, cwd: Path) -> dict[str, Any]:
    run(
        str(BIN / "rlver"), "eval", "--agent-base-url", url, "--agent-model", "policy",
        "--agent-key-env", KEY_VAR, "--out", out, "--no-report", *flags, cwd=cwd,
    )  # fmt: skip
    return {ep.profile_id: ep for ep in read_transcript(cwd / out / "transcript.jsonl").episodes}


def outcome(episode: dict[str, Any]) -> tuple[str, float, list[float], str, float]:
    """(profile id, reward, per-turn emotions, end reason, turns) of one vf-eval episode."""
    [trace] = episode["traces"]
    metrics = trace["metrics"]
    turns = sorted((int(k.rsplit("_", 1)[1]), v) for k, v in metrics.items() if k.startswith("emotion_turn_"))
    return (
        episode["task"]["data"]["id"],
        trace["rewards"]["emotion"]["score"],
        [v for _, v in turns],
        trace["info"]["rlver"]["end_reason"],
        metrics["turns"],
    )


def policy_requests(server: FakeChatServer) -> list[str]:
    """Every request the policy was sent, as its messages, sorted (the two runs interleave differently)."""
    return sorted(
        json.dumps([[m["role"], m["content"]] for m in r["messages"]], ensure_ascii=False)
        for r in server.requests
        if r.get("model") == "policy"
    )


def test_vf_eval_finds_the_environment_in_the_installed_wheel(tmp_path: Path) -> None:
    """``make verifiers-setup`` installs the wheel (``make dist``), not the checkout: the environment
    ``vf-eval rlver-sentient`` loads is the release's copy in site-packages, as on Prime's Hub."""
    import importlib.metadata as md

    import rlver_sentient

    checkout = Path(__file__).resolve().parents[2]
    assert not Path(rlver_sentient.__file__).resolve().is_relative_to(checkout / "src")
    installed = json.loads(md.distribution("rlver").read_text("direct_url.json") or "{}")
    assert installed.get("url", "").endswith(".whl") and "dir_info" not in installed
    probe = "import rlver_sentient, verifiers.v1.utils.loaders as l; print(rlver_sentient.__file__, l.taskset_class('rlver-sentient').__name__)"
    where, name = run(str(BIN / "python"), "-c", probe, cwd=tmp_path).stdout.split()
    assert Path(where).resolve() == Path(rlver_sentient.__file__).resolve() and name == "SentientTaskset"


def test_the_environments_readme_ships_and_lists_every_taskset_argument_with_its_default() -> None:
    """``rlver_sentient/README.md`` (verifiers' ``vf-init`` layout, for Prime's Environment Hub) is in the
    installed package, and its "Environment Arguments" table is the taskset config's own fields, each
    with the config's default."""
    from importlib import resources

    text = (resources.files("rlver_sentient") / "README.md").read_text(encoding="utf-8")
    for heading in (
        "### Overview",
        "### Datasets",
        "### Task",
        "### Quickstart",
        "### Environment Arguments",
        "### Metrics",
    ):
        assert f"\n{heading}\n" in text, heading
    table = text.split("### Environment Arguments", 1)[1].split("###", 1)[0]
    rows = {
        cells[0].strip("` "): cells[2].strip("` ")
        for line in table.splitlines()
        if line.startswith("| `") and len(cells := [c.strip() for c in line.strip("|").split(" | ")]) == 4
    }
    own = set(SentientTasksetConfig.model_fields) - set(vf.TasksetConfig.model_fields)
    assert set(rows) == own
    defaults = {name: SentientTasksetConfig.model_fields[name].default for name in own}
    assert {name: json.loads(rows[name]) for name in own} == defaults


def test_the_verifiers_loader_finds_the_taskset_env_and_harness() -> None:
    from verifiers.v1.utils.loaders import default_harness_id, environment_class, harness_class, taskset_class

    assert taskset_class("rlver-sentient") is SentientTaskset
    assert environment_class("rlver-sentient") is SentientEnv
    assert default_harness_id("rlver-sentient") == "rlver-sentient"
    assert harness_class("rlver-sentient") is SentientHarness


def test_the_issue_command_records_the_rewards_rlver_eval_records(tmp_path: Path) -> None:
    with FakeChatServer(varied_policy_and_simulator) as server:
        episodes = vf_eval(
            server.url, "OUT", "--env.taskset.profiles", "bundled", "--env.taskset.simulator", "offline",
            "--env.taskset.limit", "4", "--env.taskset.seed", "0", cwd=tmp_path,
        )  # fmt: skip
        sent_by_verifiers = policy_requests(server)
        server.requests.clear()
        ours = rlver_eval(
            server.url, "run", "--profiles", "bundled", "--simulator", "offline", "--limit", "4",
            "--seed", "0", cwd=tmp_path,
        )  # fmt: skip
        sent_by_rlver = policy_requests(server)
    assert sent_by_verifiers == sent_by_rlver  # the same context, turn by turn, in both routes
    got = {o[0]: o[1:] for o in map(outcome, episodes)}
    assert set(got) == set(ours) and len(got) == 4
    for profile_id, ep in ours.items():
        assert got[profile_id] == (
            ep.final_emotion / 100,
            [float(e) for e in ep.emotions],
            ep.end_reason,
            float(ep.assistant_turns),
        )
    assert len({reward for reward, *_ in got.values()}) > 1  # the replies differ, so do the users


def test_the_llm_user_route_matches_rlver_eval(tmp_path: Path) -> None:
    with FakeChatServer(varied_policy_and_simulator) as server:
        episodes = vf_eval(
            server.url, "OUT", "--env.taskset.profiles", "en-test", "--env.taskset.simulator", "llm",
            "--env.taskset.sim-base-url", server.url, "--env.taskset.sim-model", "sim",
            "--env.taskset.limit", "2", "--env.taskset.seed", "3", "--env.taskset.max-turns", "3",
            cwd=tmp_path,
        )  # fmt: skip
        sent_by_verifiers = sorted(json.dumps(r, sort_keys=True) for r in server.requests)
        server.requests.clear()
        ours = rlver_eval(
            server.url, "run", "--profiles", "en-test", "--simulator", "llm", "--sim-base-url", server.url,
            "--sim-model", "sim", "--sim-key-env", "", "--limit", "2", "--seed", "3",
            "--set", "env.rules.max_assistant_turns=3", cwd=tmp_path,
        )  # fmt: skip
        sent_by_rlver = sorted(json.dumps(r, sort_keys=True) for r in server.requests)
    # whole bodies, the simulated user's as well as the policy's: rlver's own prompts send sampling
    # values (the agent's temperature 1.0, top_p 1.0, reply cap 8,192), by both routes
    assert sent_by_verifiers == sent_by_rlver
    assert all(r["max_tokens"] == 8192 for r in server.requests if r["model"] == "policy")
    for profile_id, reward, emotions, end, turns in map(outcome, episodes):
        ep = ours[profile_id]
        assert (reward, emotions, end, turns) == (
            ep.final_emotion / 100,
            [float(e) for e in ep.emotions],
            ep.end_reason,
            3.0,
        )


def _published_answers(request: dict[str, Any]) -> str:
    """A deterministic SAGE-format responder: the policy's reply depends on the turn, the simulated
    user appraises (SAGE's ``Change:`` field) and answers (``Response:``) in the published format."""
    from rlver.simulator.llm import published_text

    if request.get("model") == "policy":
        return f"我在听，第{len(request['messages'])}句。"
    if request["messages"][0]["content"].startswith(published_text.sage_texts().appraisal_template[:40]):
        return "Content:\n懂了\nTargetCompletion:\n一半\nActivity:\n想\nAnalyse:\n还行\nChange:\n+5"
    return "Response:\n嗯，还有呢？"


def _both_routes_on_sage(
    tmp_path: Path, *, turns: int, verifiers: tuple[str, ...], rlver: tuple[str, ...]
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """One SAGE profile with an LLM user through ``vf-eval`` (its trace in ``OUT``) and then through
    ``rlver eval`` (its run in ``run``), against one server: the episode and each route's request
    bodies, in the order sent. ``verifiers`` and ``rlver`` are each route's own extra flags."""
    with FakeChatServer(_published_answers) as server:
        [episode] = vf_eval(
            server.url, "OUT", "--env.taskset.profiles", "sage", "--env.taskset.simulator", "llm",
            "--env.taskset.sim-base-url", server.url, "--env.taskset.sim-model", "sim",
            "--env.taskset.limit", "1", "--env.taskset.max-turns", str(turns), *verifiers, cwd=tmp_path,
        )  # fmt: skip
        by_verifiers = list(server.requests)
        server.requests.clear()
        rlver_eval(
            server.url, "run", "--profiles", "sage", "--simulator", "llm", "--sim-base-url", server.url,
            "--sim-model", "sim", "--sim-key-env", "", "--limit", "1", *rlver,
            "--set", f"env.rules.max_assistant_turns={turns}", cwd=tmp_path,
        )  # fmt: skip
        return episode, by_verifiers, list(server.requests)


def test_the_published_benchmark_sends_the_same_bodies_in_both_routes(
    shared_data: Path, tmp_path: Path
) -> None:
    """On the SAGE profiles with an LLM user (``sage-published``, SAGE's agent prompt) and no sampling
    value set, every request body, agent's and simulated user's, is the same JSON in both routes, key
    for key and message for message, in the same order: ``model`` and ``messages`` alone, as SAGE's
    ``call_npc`` and ``call_llm`` send."""
    episode, by_verifiers, by_rlver = _both_routes_on_sage(
        tmp_path, turns=3, verifiers=("--env.taskset.seed", "5"), rlver=("--seed", "5")
    )
    # one dialogue, so one order: the opening, then each reply and (but the last) its appraisal and answer
    assert [r["model"] for r in by_rlver] == ["policy", "sim", "sim", "policy", "sim", "sim", "policy"]
    assert len(by_verifiers) == len(by_rlver)
    for ours, theirs in zip(by_rlver, by_verifiers, strict=True):
        assert sorted(theirs) == sorted(ours) == ["messages", "model"]
        assert theirs["model"] == ours["model"]
        assert len(theirs["messages"]) == len(ours["messages"])
        for mine, other in zip(ours["messages"], theirs["messages"], strict=True):
            assert other == mine  # role and content, and no other key
    assert by_verifiers == by_rlver
    # the trace records what was sent as rlver eval's manifest does: "server default" for each field
    unsent = dict.fromkeys(("temperature", "top_p", "max_tokens"), "server default")
    [trace] = episode["traces"]
    manifest = RunManifest.read(tmp_path / "run").model_extra or {}
    assert (
        trace["info"]["rlver"]["requests"] == manifest["requests"] == {"agent": unsent, "simulator": unsent}
    )


def test_a_sampling_value_set_is_sent_alike_by_both_routes(shared_data: Path, tmp_path: Path) -> None:
    """A temperature set for the agent (verifiers' ``--sampling.temperature``, ``rlver eval
    --agent-temperature``) is sent by both routes, and with it the same other fields: the bodies are
    the same JSON; the simulated user's stay as published."""
    episode, by_verifiers, by_rlver = _both_routes_on_sage(
        tmp_path, turns=2, verifiers=("--sampling.temperature", "0.7"), rlver=("--agent-temperature", "0.7")
    )
    agent = [r for r in by_rlver if r["model"] == "policy"]
    assert len(agent) == 2 and all(r["temperature"] == 0.7 for r in agent)
    assert all(sorted(r) == ["messages", "model"] for r in by_rlver if r["model"] == "sim")
    assert by_verifiers == by_rlver
    [trace] = episode["traces"]
    manifest = RunManifest.read(tmp_path / "run").model_extra or {}
    assert trace["info"]["rlver"]["requests"] == manifest["requests"]
    assert manifest["requests"]["agent"] == {"temperature": 0.7, "top_p": 1.0, "max_tokens": 8192}


def test_think_text_is_handled_as_rlver_eval_handles_it(tmp_path: Path) -> None:
    """Think then say: the user never sees the thought, and later turns see only earlier replies'
    visible text (the published rule), in both routes."""
    with FakeChatServer(varied_policy_and_simulator) as server:
        episodes = vf_eval(
            server.url, "OUT", "--env.taskset.profiles", "en-test", "--env.taskset.limit", "2",
            "--env.taskset.think", "true", "--env.taskset.max-turns", "3", cwd=tmp_path,
        )  # fmt: skip
        sent_by_verifiers = policy_requests(server)
        server.requests.clear()
        ours = rlver_eval(
            server.url, "run", "--profiles", "en-test", "--simulator", "offline", "--limit", "2", "--think",
            "--set", "env.rules.max_assistant_turns=3", cwd=tmp_path,
        )  # fmt: skip
        sent_by_rlver = policy_requests(server)
    assert sent_by_verifiers == sent_by_rlver
    later_turns = [r for r in sent_by_verifiers if r.count('"assistant"') >= 1]
    assert later_turns and not any("They seem to need" in r for r in later_turns)  # visible text only
    for profile_id, reward, emotions, end, _ in map(outcome, episodes):
        ep = ours[profile_id]
        assert (reward, emotions, end) == (
            ep.final_emotion / 100,
            [float(e) for e in ep.emotions],
            ep.end_reason,
        )
    [trace] = episodes[0]["traces"]
    sampled = [n["message"]["content"] for n in trace["nodes"] if n["sampled"]]
    assert len(sampled) == trace["metrics"]["turns"] and all(r.startswith("<think>") for r in sampled)


def test_only_the_assistant_samples_and_the_user_is_never_trainable(tmp_path: Path) -> None:
    with FakeChatServer(varied_policy_and_simulator) as server:
        episodes = vf_eval(
            server.url, "OUT", "--env.taskset.profiles", "en-test", "--env.taskset.limit", "1",
            "--env.taskset.max-turns", "2", cwd=tmp_path,
        )  # fmt: skip
    [trace] = episodes[0]["traces"]
    assert trace["agent"]["name"] == "assistant" and trace["agent"]["trainable"] is True
    roles = {(node["message"]["role"], node["sampled"]) for node in trace["nodes"]}
    assert roles == {("system", False), ("user", False), ("assistant", True)}


def test_bad_settings_are_refused_before_any_rollout() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="sim_model"):
        SentientTasksetConfig(id="rlver-sentient", simulator="llm")
    with pytest.raises(ValidationError, match="for simulator llm"):
        SentientTasksetConfig(id="rlver-sentient", sim_model="x")
    with pytest.raises(ValidationError, match="RLVER_NOT_SET_FOR_TEST"):
        SentientTasksetConfig(
            id="rlver-sentient", simulator="llm", sim_model="x", sim_key_var="RLVER_NOT_SET_FOR_TEST"
        )
    with pytest.raises(ValidationError, match="max_assistant_turns"):
        SentientTasksetConfig(id="rlver-sentient", max_turns=100_000)
    with pytest.raises(ValidationError, match="no-such-set"):
        SentientTasksetConfig(id="rlver-sentient", profiles="no-such-set")


def test_the_settings_resolve_as_rlver_eval_resolves_them() -> None:
    """On the SAGE profiles an LLM user asks SAGE's own questions and the agent gets SAGE's prompt."""
    sage = SentientTasksetConfig(
        id="rlver-sentient",
        simulator="llm",
        sim_model="deepseek-chat",
        sim_base_url="https://api.deepseek.com/v1",
    )
    assert sage.simulator_spec.prompts.name == "sage-published"
    assert sage.env_config.agent_prompt == "sage-published"
    assert sage.env_config.rules.max_assistant_turns == 10 and sage.env_config.rules.start_emotion == 40
    own = SentientTasksetConfig(id="rlver-sentient", profiles="en-test", dialogue="training", think=True)
    assert own.simulator_spec.kind == "offline" and own.env_config.agent_prompt == "neutral"
    assert own.env_config.think and own.env_config.rules.max_assistant_turns == 8
    assert own.env_config.rules.start_emotion == 30


async def _concurrent(url: str, profiles: int, rollouts: int) -> tuple[list[Any], list[float]]:
    """``profiles`` x ``rollouts`` episodes at once on this loop, as vf-eval runs them in-process;
    the loop's lag, sampled every 5 ms while they run."""
    from verifiers.v1.env import RunSlot
    from verifiers.v1.utils.loaders import load_environment, resolve_env_config

    config = resolve_env_config(
        {"taskset": {"id": "rlver-sentient", "profiles": "bundled", "limit": profiles, "max_turns": 4}}
    )
    env = load_environment(config)
    ctx = vf.ModelContext(
        client=vf.EvalClientConfig(base_url=url, api_key_var=KEY_VAR), model="policy", sampling=vf.Sampling()
    )
    lags: list[float] = []
    done = asyncio.Event()

    async def watch() -> None:
        loop = asyncio.get_running_loop()
        while not done.is_set():
            before = loop.time()
            await asyncio.sleep(0.005)
            lags.append(loop.time() - before - 0.005)

    async with env.serving():
        watcher = asyncio.create_task(watch())
        slots = [RunSlot(task) for task in env.taskset for _ in range(rollouts)]
        episodes = await asyncio.gather(*(env.run_slot(slot, ctx) for slot in slots))
        done.set()
        await watcher
    return episodes, lags


def test_64_episodes_run_concurrently_on_one_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, "not-a-secret")
    with ServerProcess("rlver.testing.responders:varied_policy_and_simulator", latency_s=0.05) as server:
        started = time.perf_counter()
        episodes, lags = asyncio.run(_concurrent(server.url, profiles=32, rollouts=2))
        wall = time.perf_counter() - started
    assert len(episodes) == 64 and all(ep.ok for ep in episodes)
    spans = sorted((t.timing.agent.start, t.timing.agent.end) for ep in episodes for t in ep.traces)
    # every dialogue had begun before the first one ended: all 64 were in flight together
    assert max(start for start, _ in spans) < min(end for _, end in spans)
    lags.sort()
    print(
        f"64 episodes x 4 replies: {wall:.1f} s wall; loop lag p50 {1000 * lags[len(lags) // 2]:.1f} ms, "
        f"p99 {1000 * lags[int(len(lags) * 0.99)]:.1f} ms, max {1000 * lags[-1]:.1f} ms ({len(lags)} samples)"
    )
