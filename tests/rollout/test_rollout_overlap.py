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
    """Each request goes to the engine alone, the moment its user has answered (the runner forms no
    batches): users 1 and 2 have their 2nd and 3rd replies generated before user 0 answers its 1st."""
    slow = 0.6
    episodes, events, times, wall = run(tiny, {0: slow})
    assert [e.status for e in episodes] == ["finished"] * 3, [e.error for e in episodes]
    asked = [rows for kind, rows in events if kind == "generate"]
    assert all(len(rows) == 1 for rows in asked)  # one request a call: the engine's queue batches
    slow_first_reply = events.index(("user replied", 0))
    before = [rows for kind, rows in events[:slow_first_reply] if kind == "generate"]
    assert sorted(before) == [(0,), (1,), (1,), (1,), (2,), (2,), (2,)]
    assert asked[-2:] == [(0,), (0,)]
    # the policy waited on user 0 alone: roughly its three answers, not the fast users' too
    assert times.policy_idle_s >= 2 * slow
    assert times.policy_idle_s + times.policy_s <= wall + 0.05
    assert times.simulator_s >= 3 * slow
    assert times.batches == 0 and times.requests == len(asked) == 3 * TURNS


def test_the_tokens_are_those_of_lockstep_turns(tiny: tuple[Any, Any]) -> None:
    """Same seeds, same tokens: with the latencies that spread the requests over the engine's steps,
    and with none (every turn's requests admitted together, as the round-based runner ran them)."""
    lockstep, lock_events, _, _ = run(tiny, {})
    lagged, lag_events, _, _ = run(tiny, {0: 0.15, 1: 0.05})
    order = [e for e in lag_events if e[0] != "generate"]
    assert order != [e for e in lock_events if e[0] != "generate"]  # the users really answered apart
    for a, b in zip(lockstep, lagged, strict=True):
        assert a.profile_id == b.profile_id and a.status == b.status == "finished"
        assert [m.content for m in a.messages] == [m.content for m in b.messages]
        assert [t.token_ids for t in a.sampled if t] == [t.token_ids for t in b.sampled if t]
        assert len([t for t in a.sampled if t]) == TURNS


class LoopTurnsUserLLM(LaggedUserLLM):
    """The user's LLM answers after ``turns[i]`` event-loop turns and no I/O (what the offline user's
    reply costs, stretched): when its answer lands relative to the engine's thread is up to the box."""

    def __init__(self, turns: dict[int, int], events: list[tuple[str, Any]]) -> None:
        super().__init__({}, events)
        self.turns = turns

    async def complete(self, messages: MessagesLike, sampling: SamplingParams) -> Completion:
        for _ in range(self.turns.get(_who(messages), 0)):
            await asyncio.sleep(0)
        return await super().complete(messages, sampling)


def test_users_without_io_join_the_same_decode_steps_however_many_loop_turns_they_take(
    tiny: tuple[Any, Any],
) -> None:
    """The admission barrier: the engine admits only once the rollout's loop has settled, so users
    that answer without I/O join the same decode steps, with bit-identical log-probs, whether they
    answer at once or after hundreds of loop turns (up to the settle's limit, SETTLE_TURNS; a resumed run's rows share the steps they shared
    the first time)."""

    def sampled(turns: dict[int, int]) -> tuple[list[Any], dict[str, int]]:
        policy = RecordingPolicy(*tiny, device="cpu", max_batch_size=16)
        policy.events = []
        episodes = asyncio.run(
            run_rollouts(
                policy,
                LLMSimulator(LoopTurnsUserLLM(turns, [])),
                users(4),
                RolloutConfig(env=EnvConfig.training(max_assistant_turns=TURNS)),
                SAMPLING,
                seed=11,
            )
        )
        counts = policy.engine.scheduler.counts
        rows = [(t.token_ids, t.logprobs) for ep in episodes for t in ep.sampled if t]
        return rows, {"prefills": counts.prefills, "steps": counts.decode_steps, "rows": counts.decode_rows}

    at_once, at_once_counts = sampled({})
    spread, spread_counts = sampled({1: 50, 2: 150, 3: 300})  # each user turn 2 calls: < SETTLE_TURNS
    assert spread_counts == at_once_counts
    assert spread == at_once  # token ids and log-probs, bit for bit


def test_idle_time_is_the_time_every_live_dialogue_waited_on_its_user(tiny: tuple[Any, Any]) -> None:
    """Every user answers after 0.2 s: the policy is idle for about the three waits, never more than
    the wall clock less its generating time. The three users' answers usually meet in one batch a turn;
    on a loaded machine one may arrive after its batch has started and take a batch of its own, so the
    count of batches is bounded, not exact."""
    _, _, times, wall = run(tiny, {0: 0.2, 1: 0.2, 2: 0.2})
    assert 0.55 <= times.policy_idle_s <= wall - times.policy_s + 0.05
    assert times.policy_s > 0 and times.requests == 3 * TURNS


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
