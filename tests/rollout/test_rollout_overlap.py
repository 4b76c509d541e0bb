"""Continuous batching by turn: a dialogue whose user has answered is generated for again while
slower users are still answering, and what is sampled does not change.

The policy is the real local sampler on the tiny model; the simulated user is the real
LLMSimulator whose LLM answers after a real ``asyncio.sleep`` that differs per dialogue (only
*when* it answers is scripted, and what it says is the same for every dialogue).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from rlver.env.dialogue import EnvConfig
from rlver.errors import PolicyOutOfMemoryError
from rlver.llm.base import ChatModel, Completion, MessagesLike, SamplingParams
from rlver.llm.local import LocalChatModel
from rlver.llm.scripted import ScriptedChatModel
from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.profiles.schema import Profile
from rlver.records import Episode
from rlver.rollout.batching import RolloutTimes
from rlver.rollout.runner import RolloutConfig, run_rollouts
from rlver.simulator.llm.user import LLMSimulator

torch.set_num_threads(1)

TURNS = 3
SAMPLING = SamplingParams(temperature=1.0, top_p=0.95, max_tokens=6)


def users(n: int) -> list[Profile]:
    """``n`` users; dialogue ``i``'s opening names it, so a policy row tells whose turn it is."""
    return [
        Profile(
            id=f"u{i}",
            persona=f"Person {i}.",
            background="Work has been piling up.",
            goal="Talk it through.",
            hidden_need="Reassurance.",
            opening=f"Long week, says user {i}.",
        )
        for i in range(n)
    ]


def _who(messages: MessagesLike) -> int:
    text = "\n".join(m.content for m in messages)
    return next(i for i in range(100) if f"user {i}." in text or f"Person {i}." in text)


class LaggedUserLLM(ChatModel):
    """The simulated user's LLM: the same answer for everyone, after ``delays[i]`` seconds for user i."""

    def __init__(self, delays: dict[int, float], events: list[tuple[str, Any]]) -> None:
        self.name = "lagged-user"
        self.delays = delays
        self.events = events

    async def complete(self, messages: MessagesLike, sampling: SamplingParams) -> Completion:
        who = _who(messages)
        await asyncio.sleep(self.delays.get(who, 0.0))
        self.events.append(("user replied", who))
        answer = {
            "understanding": "listens",
            "goal_fit": "on topic",
            "inner_reaction": "a bit better",
            "feeling": "heard",
            "change": 1,
            "reply": "the deadlines, mostly",
            "end_dialogue": False,
        }
        return Completion(
            text=json.dumps(answer), prompt_tokens=10, completion_tokens=10, finish_reason="stop"
        )


class RecordingPolicy(LocalChatModel):
    """The local sampler, noting which dialogues each batch held (in the shared event list)."""

    events: list[tuple[str, Any]]

    async def complete_each(
        self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
    ) -> list[Completion | BaseException]:
        self.events.append(("generate", tuple(sorted(_who(m) for m in batch))))
        return await super().complete_each(batch, samplings)


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    return tiny_model_and_tokenizer(0)


def run(
    tiny: tuple[Any, Any], delays: dict[int, float], n: int = 3
) -> tuple[list[Episode], list[tuple[str, Any]], RolloutTimes, float]:
    """``n`` dialogues of ``TURNS`` replies; returns the episodes, the event order, the times, the wall."""
    events: list[tuple[str, Any]] = []
    policy = RecordingPolicy(*tiny, device="cpu", max_batch_size=16)
    policy.events = events
    times = RolloutTimes()
    t0 = time.perf_counter()
    episodes = asyncio.run(
        run_rollouts(
            policy,
            LLMSimulator(LaggedUserLLM(delays, events)),
            users(n),
            RolloutConfig(env=EnvConfig.training(max_assistant_turns=TURNS)),
            SAMPLING,
            seed=11,
            times=times,
        )
    )
    return episodes, events, times, time.perf_counter() - t0


def test_a_fast_dialogue_is_generated_for_while_a_slow_user_is_still_answering(tiny: tuple[Any, Any]) -> None:
    slow = 0.6
    episodes, events, times, wall = run(tiny, {0: slow})
    assert [e.status for e in episodes] == ["finished"] * 3, [e.error for e in episodes]
    batches = [rows for kind, rows in events if kind == "generate"]
    assert batches[0] == (0, 1, 2)  # the openings arrive together: one batch
    slow_first_reply = events.index(("user replied", 0))
    before = [rows for kind, rows in events[:slow_first_reply] if kind == "generate"]
    # users 1 and 2 had their 2nd and 3rd replies generated before user 0 answered its 1st
    assert before == [(0, 1, 2), (1, 2), (1, 2)]
    assert batches[-2:] == [(0,), (0,)]
    # the policy waited on user 0 alone: roughly its three answers, not the fast users' too
    assert times.policy_idle_s >= 2 * slow
    assert times.policy_idle_s + times.policy_s <= wall + 0.05
    assert times.simulator_s >= 3 * slow and times.batches == len(batches) == 5
    assert times.requests == 3 * TURNS


def test_the_tokens_are_those_of_lockstep_turns(tiny: tuple[Any, Any]) -> None:
    """Same seeds, same tokens: with the latencies that split the batches, and with none (every turn
    one batch of all dialogues, as the round-based runner ran them)."""
    lockstep, lock_events, _, _ = run(tiny, {})
    assert [rows for kind, rows in lock_events if kind == "generate"] == [(0, 1, 2)] * TURNS
    lagged, lag_events, _, _ = run(tiny, {0: 0.15, 1: 0.05})
    assert len([e for e in lag_events if e[0] == "generate"]) > TURNS  # the batches really differed
    for a, b in zip(lockstep, lagged, strict=True):
        assert a.profile_id == b.profile_id and a.status == b.status == "finished"
        assert [m.content for m in a.messages] == [m.content for m in b.messages]
        assert [t.token_ids for t in a.sampled if t] == [t.token_ids for t in b.sampled if t]
        assert len([t for t in a.sampled if t]) == TURNS


def test_idle_time_is_the_time_every_live_dialogue_waited_on_its_user(tiny: tuple[Any, Any]) -> None:
    """Every user answers after 0.2 s: the policy is idle for about the three waits, never more than
    the wall clock less its generating time. The three users' answers usually meet in one batch a turn;
    on a loaded machine one may arrive after its batch has started and take a batch of its own, so the
    count of batches is bounded, not exact."""
    _, _, times, wall = run(tiny, {0: 0.2, 1: 0.2, 2: 0.2})
    assert 0.55 <= times.policy_idle_s <= wall - times.policy_s + 0.05
    assert times.policy_s > 0 and TURNS <= times.batches <= times.requests


def test_running_out_of_memory_fails_the_run_and_leaves_nothing_running() -> None:
    class OutOfMemory(ScriptedChatModel):
        batch_serially = True

        async def complete_each(
            self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
        ) -> list[Completion | BaseException]:
            raise PolicyOutOfMemoryError("out of memory at one row: lower rollout.max_new_tokens")

    events: list[tuple[str, Any]] = []

    async def main() -> set[asyncio.Task[Any]]:
        with pytest.raises(PolicyOutOfMemoryError, match="max_new_tokens"):
            await run_rollouts(
                OutOfMemory(["hi"]),
                LLMSimulator(LaggedUserLLM({1: 0.2}, events)),
                users(2),
                RolloutConfig(env=EnvConfig.training(max_assistant_turns=2)),
            )
        return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

    assert asyncio.run(main()) == set()
