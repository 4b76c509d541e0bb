"""Run many dialogues at once: the concurrent rollout runner.

Every dialogue runs as its own coroutine: the simulated user's opening, then turn after turn of
policy reply (asked of one shared :class:`~rlver.rollout.batching.PolicyQueue`) and simulator step
(the appraisal + reply, bounded by a semaphore), until it ends. A policy that batches requests itself
(the local engine) or an endpoint gets each request alone, the moment its user has answered, and the
engine's queue refills its slots; the runner hands the engine an admission barrier so which rows share
a decode step does not depend on wall time (:mod:`rlver.rollout.batching`). A model in this process
without a queue of its own gets one ``complete_each`` over every request waiting when it is free. Either
way the policy does not wait for the slowest user of a turn.

So a batch of N dialogues × T turns takes about T × (policy + simulator) wall time, not N × that.
A dialogue whose policy or simulator call fails for good is marked ``status="failed"`` with its error
and error kind and stops; the others go on. Every finished or failed dialogue is handed to
``on_episode`` the moment it ends, so a transcript is written as the run progresses.

Group sampling (GRPO): ``n_per_profile`` dialogues per profile, each with its own ``sample_index`` and
simulator seed. The agent's sampling is seeded per dialogue and turn too (:func:`agent_seed`, from the
run seed — ``sampling.seed`` when set — the dialogue's seed and the turn), so a dialogue's replies do
not depend on batch size, batch company, concurrency or resumption, and no two dialogues of a group
share a seed.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rlver.config import MAX_COUNT
from rlver.env.dialogue import DialogueEnv, EnvConfig
from rlver.env.rewards import RewardSpec, episode_reward
from rlver.llm.base import ChatModel, Completion, SamplingParams
from rlver.profiles.schema import Profile
from rlver.records import Episode
from rlver.rollout.batching import Busy, PolicyQueue, RolloutTimes, loop_barrier
from rlver.seeding import Seed, hashed_seed
from rlver.simulator.base import UserSimulator

EpisodeCallback = Callable[[Episode], "Awaitable[None] | None"]


class RolloutConfig(BaseModel):
    """How many dialogues to run and how."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    n_per_profile: int = Field(default=1, ge=1, le=MAX_COUNT)
    simulator_concurrency: int = Field(default=64, ge=1, le=MAX_COUNT)
    env: EnvConfig = Field(default_factory=EnvConfig)
    seed: Seed = 0
    #: What each episode is worth (``Episode.reward``); the spec both training engines share.
    reward: RewardSpec = Field(default_factory=RewardSpec)


@dataclass
class RolloutProgress:
    """Counts handed to the progress hook after every change."""

    total: int
    finished: int = 0
    failed: int = 0
    #: the furthest turn any dialogue has reached (dialogues no longer move in lockstep rounds)
    round: int = 0

    @property
    def live(self) -> int:
        return self.total - self.finished - self.failed


ProgressHook = Callable[[RolloutProgress], None]


@dataclass
class _Dialogue:
    profile: Profile
    sample_index: int
    seed: int
    env: DialogueEnv
    episode: Episode | None = None  # set when it ends


def dialogue_seed(base_seed: int, profile_index: int, sample_index: int, n_per_profile: int) -> int:
    """A distinct, reproducible simulator seed for every dialogue of a run: its index in the run's
    (profile × sample) grid, offset by the run seed. verl has no such grid (a worker sees one row at a
    time), so its agent loop seeds with :func:`rlver.seeding.hashed_seed` of the row, sample and step instead."""
    return base_seed * 1_000_003 + profile_index * n_per_profile + sample_index


def seeds_each_turn(policy: ChatModel, sampling: SamplingParams) -> bool:
    """Whether each turn's request carries its own seed: always for a local sampler (reproducible
    draws), for an endpoint only when the user set ``sampling.seed`` (SAGE's ``call_npc`` sends none)."""
    return sampling.seed is not None or policy.seeded_per_turn


def agent_seed(run_seed: int, dialogue: int, turn: int) -> int:
    """The agent's sampling seed for one turn of one dialogue.

    A function of the dialogue alone (never of its batch), so the same dialogue samples the same
    replies whatever the batch size or resumption.
    """
    return hashed_seed("agent", run_seed, dialogue, turn)


async def run_rollouts(
    policy: ChatModel,
    simulator: UserSimulator,
    profiles: Sequence[Profile],
    config: RolloutConfig | None = None,
    sampling: SamplingParams | None = None,
    *,
    seed: int | None = None,
    on_episode: EpisodeCallback | None = None,
    progress: ProgressHook | None = None,
    skip: set[tuple[str, int]] | None = None,
    times: RolloutTimes | None = None,
) -> list[Episode]:
    """Run ``n_per_profile`` dialogues for every profile; return their episodes in profile order.

    ``seed`` overrides ``config.seed``. ``skip`` holds ``(profile_id, sample_index)`` pairs already
    done (resume): they are not run and not returned. ``on_episode`` may be sync or async; an
    exception it raises stops the run before the policy's next request (a transcript that cannot be
    written must not be silently lost). ``times``, when given, is filled in with the rollout's
    wall-clock split (generating, simulating, the policy idle), also when the run fails.
    """
    config = config or RolloutConfig()
    base_seed = config.seed if seed is None else seed
    skip = skip or set()
    dialogues = [
        _Dialogue(
            profile=p,
            sample_index=k,
            seed=dialogue_seed(base_seed, i, k, config.n_per_profile),
            env=DialogueEnv(simulator, config.env),
        )
        for i, p in enumerate(profiles)
        for k in range(config.n_per_profile)
        if (p.id, k) not in skip
    ]
    run = _Run(config, dialogues, on_episode, progress)
    return await run.run(policy, sampling or SamplingParams(), base_seed, times or RolloutTimes())


class _Run:
    """One call of :func:`run_rollouts`: its dialogues, counts and the callbacks' errors."""

    def __init__(
        self,
        config: RolloutConfig,
        dialogues: list[_Dialogue],
        on_episode: EpisodeCallback | None,
        progress: ProgressHook | None,
    ) -> None:
        self.config = config
        self.dialogues = dialogues
        self.on_episode = on_episode
        self.progress = progress
        self.state = RolloutProgress(total=len(dialogues))
        self.sem = asyncio.Semaphore(config.simulator_concurrency)
        self.callback_errors: list[BaseException] = []
        self.simulating = Busy()
        #: ``env.rules.shared_opening``: the first dialogue of a profile writes the opening, the others of its
        #: group wait for it and start from it (the published training clones one user per prompt).
        self.openings: dict[str, asyncio.Future[str]] = {}
        self.seed_turns = True

    async def run(
        self, policy: ChatModel, sampling: SamplingParams, base_seed: int, times: RolloutTimes
    ) -> list[Episode]:
        """Every dialogue as its own coroutine, all asking one :class:`PolicyQueue` for their replies."""
        self.report()
        direct = policy.queues_requests or not policy.batch_serially
        queue = PolicyQueue(
            policy, serial=policy.batch_serially, times=times, direct=direct, stop_errors=self.callback_errors
        )
        # the engine admits after the loop has settled: which rows share a step is the same on resume
        held = direct and policy.set_admission_barrier(loop_barrier(asyncio.get_running_loop()))
        run_seed = base_seed if sampling.seed is None else sampling.seed
        self.seed_turns = seeds_each_turn(policy, sampling)
        t0 = time.perf_counter()
        players = [asyncio.create_task(self.play(d, queue, sampling, run_seed)) for d in self.dialogues]
        left = [len(players)]

        def one_done(_: asyncio.Task[None]) -> None:
            left[0] -= 1
            if left[0] == 0:
                queue.close()

        for task in players:
            task.add_done_callback(one_done)
        if not players:
            queue.close()
        tasks = [*players, asyncio.create_task(queue.serve())]
        try:
            await _first_error(tasks)
        finally:
            if held:
                policy.set_admission_barrier(None)
            await _cancel(tasks + list(queue.in_flight))
            times.policy_s, times.simulator_s = queue.generating.total, self.simulating.total
            times.policy_idle_s = max(0.0, time.perf_counter() - t0 - queue.demand.total)
        _raise_first(self.callback_errors)
        return [d.episode for d in self.dialogues if d.episode is not None]

    async def play(self, d: _Dialogue, queue: PolicyQueue, sampling: SamplingParams, run_seed: int) -> None:
        """One dialogue from its opening to its end; turn ``t`` samples with ``agent_seed(.., t)``, the
        seed the round-based runner gave round ``t``, so the tokens are the same."""
        await self.start(d)
        turn = 0
        while d.episode is None and not d.env.done:
            turn += 1
            if turn > self.state.round:
                self.state.round = turn
                self.report()
            seeded = sampling
            if self.seed_turns:
                seeded = sampling.model_copy(update={"seed": agent_seed(run_seed, d.seed, turn)})
            result, policy_s = await queue.ask(d.env.messages_for_policy(), seeded)
            await self.advance(d, result, policy_s)

    def report(self) -> None:
        if self.progress is not None:
            self.progress(self.state)

    async def finish(self, d: _Dialogue) -> None:
        """Score the ended dialogue, count it and hand it to ``on_episode`` (errors kept for later)."""
        ep = d.env.episode
        ep.reward = episode_reward(ep, self.config.reward)
        d.episode = ep
        if ep.status == "failed":
            self.state.failed += 1
        else:
            self.state.finished += 1
        self.report()
        if self.on_episode is not None:
            try:
                result = self.on_episode(ep)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # stops the run before its next request, see run_rollouts
                self.callback_errors.append(exc)

    async def start(self, d: _Dialogue) -> None:
        """The simulated user's opening line (shared within a group under ``env.rules.shared_opening``)."""
        owned: asyncio.Future[str] | None = None
        try:
            profile = d.profile
            # ``is None``: a shared opening the user wrote empty is still the opening (no second one)
            if self.config.env.rules.shared_opening and profile.opening is None:
                shared = self.openings.get(profile.id)
                if shared is None:
                    owned = self.openings[profile.id] = asyncio.get_running_loop().create_future()
                else:
                    profile = profile.model_copy(update={"opening": await shared})
            self.simulating.enter()
            try:
                async with self.sem:
                    opening = await d.env.reset(profile, seed=d.seed, sample_index=d.sample_index)
            finally:
                self.simulating.exit()
            if owned is not None:
                owned.set_result(opening)
        except Exception as exc:
            if owned is not None and not owned.done():
                owned.set_exception(exc)
                owned.exception()  # retrieved here: waiting copies re-raise it, none is left unseen
            d.env.mark_failed(exc)
            await self.finish(d)

    async def advance(self, d: _Dialogue, result: Completion | BaseException, policy_s: float) -> None:
        """Hand one policy reply to the simulator (or fail the dialogue with the policy's error)."""
        if isinstance(result, BaseException):
            d.env.mark_failed(result)
            await self.finish(d)
            return
        self.simulating.enter()
        try:
            async with self.sem:
                await d.env.step(result.text, completion=result, policy_s=result.latency_s or policy_s)
        except Exception as exc:
            d.env.mark_failed(exc)
        finally:
            self.simulating.exit()
        if d.env.done:
            await self.finish(d)


async def _first_error(tasks: list[asyncio.Task[None]]) -> None:
    """Wait for every task; the first to raise (the policy out of memory, a callback's error) is
    raised at once, and the caller cancels the rest."""
    pending: set[asyncio.Task[None]] = set(tasks)
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            error = None if task.cancelled() else task.exception()
            if error is not None:
                raise error


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel what is still running and wait for it to unwind (its errors are not the run's)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _raise_first(errors: list[BaseException]) -> None:
    if errors:
        raise errors[0]


def rollout(
    policy: ChatModel,
    simulator: UserSimulator,
    profiles: Sequence[Profile],
    config: RolloutConfig | None = None,
    sampling: SamplingParams | None = None,
    **kwargs: Any,
) -> list[Episode]:
    """Synchronous wrapper around :func:`run_rollouts` for scripts and notebooks without a loop."""
    return asyncio.run(run_rollouts(policy, simulator, profiles, config, sampling, **kwargs))
