"""The concurrent rollout runner.

The end-to-end tests run the real stack: the policy and the simulator's LLM are both
:class:`OpenAIChatModel` clients talking HTTP to a real local server (FakeChatServer); only what the
server *says* is scripted. The in-process tests use ScriptedChatModel for the text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest

from rlver.env.dialogue import EnvConfig
from rlver.llm.base import Completion, MessagesLike, SamplingParams
from rlver.llm.openai_client import OpenAIChatModel
from rlver.llm.scripted import ScriptedChatModel
from rlver.profiles.schema import Profile
from rlver.records import Episode
from rlver.rollout.runner import RolloutConfig, RolloutProgress, rollout, run_rollouts
from rlver.simulator.llm.user import LLMSimulator
from rlver.testing.openai_server import FakeChatServer, Fault, ServerProcess

POLICY_TEXT = "That sounds really hard. What part of it weighs on you most?"


def sim_answer(change: int = 1) -> str:
    return json.dumps(
        {
            "understanding": "asks what weighs most",
            "goal_fit": "on topic",
            "inner_reaction": "a little relieved",
            "feeling": "listened to",
            "change": change,
            "reply": "the deadlines, mostly",
            "end_dialogue": False,
        }
    )


def profiles(n: int, *, marker: dict[int, str] | None = None) -> list[Profile]:
    marker = marker or {}
    return [
        Profile(
            id=f"p{i:03d}",
            persona=f"Person {i}. {marker.get(i, '')}",
            background="Work has been piling up.",
            goal="Talk it through.",
            hidden_need="Reassurance.",
            opening=f"Long week. {'POLICYFAIL' if marker.get(i) == 'POLICYFAIL' else ''}".strip(),
        )
        for i in range(n)
    ]


def _all_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def responder(body: dict[str, Any]) -> str:
    return POLICY_TEXT if body.get("model") == "policy" else sim_answer(1)


def test_64_dialogues_some_failing_the_rest_finish() -> None:
    """Simulator calls fail for 4 profiles, policy calls for 2; the other 58 dialogues finish."""
    marker = {3: "SIMFAIL", 17: "SIMFAIL", 40: "SIMFAIL", 63: "SIMFAIL", 8: "POLICYFAIL", 50: "POLICYFAIL"}

    def fault_for(body: dict[str, Any]) -> Fault | None:
        text = _all_text(body)
        if body.get("model") == "sim" and "SIMFAIL" in text:
            return Fault.server_error(503)
        if body.get("model") == "policy" and "POLICYFAIL" in text:
            return Fault.server_error(500)
        return None

    finished_order: list[str] = []

    async def run(server: FakeChatServer) -> list[Episode]:
        kw: dict[str, Any] = {
            "api_key_env": None,
            "max_attempts": 2,
            "backoff_base_s": 0.01,
            "concurrency": 64,
        }
        policy = OpenAIChatModel(server.url, "policy", **kw)
        sim_llm = OpenAIChatModel(server.url, "sim", **kw)
        try:
            return await run_rollouts(
                policy,
                LLMSimulator(sim_llm),
                profiles(64, marker=marker),
                RolloutConfig(env=EnvConfig.training(max_assistant_turns=3)),
                SamplingParams(max_tokens=64),
                on_episode=lambda ep: finished_order.append(ep.profile_id),
            )
        finally:
            await policy.aclose()
            await sim_llm.aclose()

    with FakeChatServer(responder, fault_for=fault_for) as server:
        episodes = asyncio.run(run(server))

    assert len(episodes) == 64 and len(finished_order) == 64
    failed = {e.profile_id: e for e in episodes if e.status == "failed"}
    assert set(failed) == {"p003", "p017", "p040", "p063", "p008", "p050"}
    for ep in failed.values():
        assert ep.error_kind == "server_error" and ep.error and ep.end_reason == "error"
    # A failed dialogue is reported the moment it fails, before the healthy ones finish.
    assert set(finished_order[:6]) == set(failed)
    ok = [e for e in episodes if e.status == "finished"]
    assert len(ok) == 58
    for ep in ok:
        assert ep.assistant_turns == 3 and ep.emotions == [31, 32, 33]
        assert ep.final_emotion == 33 and ep.reward == pytest.approx(0.33)
        assert ep.policy_tokens > 0 and ep.simulator_tokens > 0 and len(ep.timings) == 3
        assert ep.messages[2].content == POLICY_TEXT


@pytest.mark.timing
def test_64_dialogues_x_8_turns_run_concurrently_within_3x_the_critical_path() -> None:
    """Every call takes 100 ms; the critical path is 8 x (policy + 2 simulator calls) = 2.4 s.

    The server runs in its own process so that it does not share our GIL; the test is marked
    ``timing`` and runs alone after the parallel suite (see the Makefile).
    """
    latency = 0.1
    critical = 8 * (latency + 2 * latency)

    async def run(url: str) -> tuple[list[Episode], float]:
        kw: dict[str, Any] = {"api_key_env": None, "concurrency": 64}
        policy = OpenAIChatModel(url, "policy", **kw)
        sim_llm = OpenAIChatModel(url, "sim", **kw)
        try:
            t0 = time.perf_counter()
            eps = await run_rollouts(
                policy,
                LLMSimulator(sim_llm),
                profiles(64),
                RolloutConfig(env=EnvConfig.training(), simulator_concurrency=64),
                SamplingParams(max_tokens=64),
            )
            return eps, time.perf_counter() - t0
        finally:
            await policy.aclose()
            await sim_llm.aclose()

    with ServerProcess("rlver.testing.responders:policy_and_simulator", latency_s=latency) as server:
        episodes, elapsed = asyncio.run(run(server.url))
        served = server.served

    assert all(e.status == "finished" for e in episodes), [e.error for e in episodes if e.error]
    assert all(e.assistant_turns == 8 and len(e.emotions) == 8 for e in episodes)
    assert served == 64 * 8 * 3
    print(
        f"64 dialogues x 8 turns: {elapsed:.2f} s (critical path {critical:.1f} s, bound {3 * critical:.1f} s)"
    )
    assert elapsed < 3 * critical


class CountingPolicy(ScriptedChatModel):
    """Records how the runner sends its calls and their seeds (a test double for the policy's text)."""

    def __init__(self, replies: Sequence[str]) -> None:
        super().__init__(replies, name="counting")
        self.batches: list[tuple[int, int | None]] = []
        self.seeds: list[int | None] = []

    async def complete_each(
        self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
    ) -> list[Completion | BaseException]:
        self.batches.append((len(batch), len({s.seed for s in samplings})))
        self.seeds += [s.seed for s in samplings]
        return await super().complete_each(batch, samplings)


def scripted_simulator(fail_ids: set[str] = frozenset(), change: int = 1) -> LLMSimulator:  # type: ignore[assignment]
    def respond(messages: MessagesLike, sampling: SamplingParams) -> str:
        text = "\n".join(m.content for m in messages)
        if any(f"Person {pid}." in text for pid in fail_ids):
            raise ConnectionError("simulator backend unreachable")
        return sim_answer(change)

    return LLMSimulator(ScriptedChatModel(respond))


def test_each_request_goes_alone_with_its_own_seed_and_group_sampling() -> None:
    """A policy that takes concurrent requests (an endpoint, this double) is sent each dialogue's
    request alone: batching is the engine's (or the server's), never the runner's."""
    policy = CountingPolicy([POLICY_TEXT])
    eps = rollout(
        policy,
        scripted_simulator(),
        profiles(3),
        RolloutConfig(n_per_profile=4, env=EnvConfig.training(max_assistant_turns=2)),
        SamplingParams(),
        seed=7,
    )
    assert len(eps) == 12
    # one call per request, each dialogue and turn with its own agent seed
    assert policy.batches == [(1, 1)] * 24 and len(set(policy.seeds)) == 24
    assert [(e.profile_id, e.sample_index) for e in eps[:4]] == [("p000", k) for k in range(4)]
    seeds = {e.meta["seed"] for e in eps}
    assert len(seeds) == 12  # every dialogue has its own simulator seed
    assert len({e.episode_id for e in eps}) == 12


def test_fixed_sampling_seed_gives_each_group_member_its_own_seed() -> None:
    policy = CountingPolicy([POLICY_TEXT])
    rollout(
        policy,
        scripted_simulator(),
        profiles(2),
        RolloutConfig(n_per_profile=2, env=EnvConfig.training(max_assistant_turns=1)),
        SamplingParams(seed=5),
    )
    assert policy.batches == [(1, 1)] * 4 and len(set(policy.seeds)) == 4  # four distinct seeds


def test_agent_seed_depends_on_the_dialogue_only() -> None:
    from rlver.rollout.runner import agent_seed

    assert agent_seed(1, 10, 1) == agent_seed(1, 10, 1)
    assert len({agent_seed(1, d, t) for d in range(20) for t in range(1, 4)}) == 60
    assert agent_seed(1, 10, 1) != agent_seed(2, 10, 1)


def test_failed_simulator_marks_only_that_dialogue_and_callbacks_may_be_async() -> None:
    seen: list[str] = []

    async def on_episode(ep: Episode) -> None:
        await asyncio.sleep(0)
        seen.append(ep.profile_id)

    states: list[tuple[int, int, int]] = []

    def progress(s: RolloutProgress) -> None:
        states.append((s.finished, s.failed, s.live))

    eps = rollout(
        ScriptedChatModel([POLICY_TEXT]),
        scripted_simulator(fail_ids={"1"}),
        profiles(4),
        RolloutConfig(env=EnvConfig.training(max_assistant_turns=2)),
        on_episode=on_episode,
        progress=progress,
    )
    by_id = {e.profile_id: e for e in eps}
    assert by_id["p001"].status == "failed" and by_id["p001"].error_kind == "ConnectionError"
    assert "unreachable" in (by_id["p001"].error or "")
    assert all(by_id[p].status == "finished" for p in ("p000", "p002", "p003"))
    assert seen[0] == "p001" and sorted(seen) == ["p000", "p001", "p002", "p003"]
    assert states[-1] == (3, 1, 0)


def test_skip_resumes_and_callback_errors_stop_the_run() -> None:
    eps = rollout(
        ScriptedChatModel([POLICY_TEXT]),
        scripted_simulator(),
        profiles(3),
        RolloutConfig(env=EnvConfig.training(max_assistant_turns=1)),
        skip={("p001", 0)},
    )
    assert [e.profile_id for e in eps] == ["p000", "p002"]

    def broken(ep: Episode) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        rollout(
            ScriptedChatModel([POLICY_TEXT]),
            scripted_simulator(),
            profiles(2),
            RolloutConfig(env=EnvConfig.training(max_assistant_turns=1)),
            on_episode=broken,
        )


def test_policy_returning_the_wrong_number_of_completions_fails_the_round_cleanly() -> None:
    class Short(ScriptedChatModel):
        batch_serially = True  # a model without a queue of its own: the runner batches for it

        async def complete_each(
            self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
        ) -> list[Any]:
            return []

    eps = rollout(Short([POLICY_TEXT]), scripted_simulator(), profiles(2), RolloutConfig())
    assert all(e.status == "failed" and "0 completions for 2" in (e.error or "") for e in eps)
