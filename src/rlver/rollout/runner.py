"""Run many dialogues at once: the concurrent rollout runner.

Each *round* advances every live dialogue by one assistant turn:

1. one ``policy.complete_many`` call for all live dialogues (one batched generate on a local model,
   concurrent requests on an endpoint);
2. every ``env.step`` (the simulator's appraisal + reply) at the same time, bounded by a semaphore.

So a batch of N dialogues × T turns takes about T × (policy + simulator) wall time, not N × that.
A dialogue whose policy or simulator call fails for good is marked ``status="failed"`` with its error
and error kind and dropped from later rounds; the others go on. Every finished or failed dialogue is
handed to ``on_episode`` the moment it ends, so a transcript is written as the run progresses.

Group sampling (GRPO): ``n_per_profile`` dialogues per profile, each with its own ``sample_index`` and
simulator seed. The agent's sampling is seeded per dialogue and turn too (:func:`agent_seed`, from the
run seed — ``sampling.seed`` when set — the dialogue's seed and the turn), so a dialogue's replies do
not depend on batch size, concurrency or resumption, and no two dialogues of a group share a seed.
A round is one ``complete_each`` call: a local model still runs it as one batched forward.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rlver.env.dialogue import DialogueEnv, EnvConfig
from rlver.env.rewards import RewardSpec, episode_reward
from rlver.errors import PolicyOutOfMemoryError
from rlver.llm.base import ChatModel, Completion, SamplingParams
from rlver.profiles.schema import Profile
from rlver.records import Episode
from rlver.seeding import hashed_seed
from rlver.simulator.base import UserSimulator

EpisodeCallback = Callable[[Episode], "Awaitable[None] | None"]


class RolloutConfig(BaseModel):
    """How many dialogues to run and how."""

    model_config = ConfigDict(extra="forbid")

    n_per_profile: int = Field(default=1, ge=1)
    simulator_concurrency: int = Field(default=64, ge=1)
    env: EnvConfig = Field(default_factory=EnvConfig)
    seed: int = 0
    #: What each episode is worth (``Episode.reward``); the spec both training engines share.
    reward: RewardSpec = Field(default_factory=RewardSpec)


@dataclass
class RolloutProgress:
    """Counts handed to the progress hook after every change."""

    total: int
    finished: int = 0
    failed: int = 0
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
) -> list[Episode]:
    """Run ``n_per_profile`` dialogues for every profile; return their episodes in profile order.

    ``seed`` overrides ``config.seed``. ``skip`` holds ``(profile_id, sample_index)`` pairs already
    done (resume): they are not run and not returned. ``on_episode`` may be sync or async; an
    exception it raises stops the run after the current round (a transcript that cannot be written
    must not be silently lost).
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
    return await run.run(policy, sampling or SamplingParams(), base_seed)


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
        #: ``env.rules.shared_opening``: the first dialogue of a profile writes the opening, the others of its
        #: group wait for it and start from it (the published training clones one user per prompt).
        self.openings: dict[str, asyncio.Future[str]] = {}

    async def run(self, policy: ChatModel, sampling: SamplingParams, base_seed: int) -> list[Episode]:
        """Open every dialogue, then one round (policy call + simulator steps) at a time until none is live."""
        self.report()
        await asyncio.gather(*(self.start(d) for d in self.dialogues))
        _raise_first(self.callback_errors)
        while True:
            live = [d for d in self.dialogues if d.episode is None and not d.env.done]
            if not live:
                break
            self.state.round += 1
            t0 = time.perf_counter()
            results = await _generate(policy, live, sampling, self.state.round, base_seed)
            policy_s = time.perf_counter() - t0
            await asyncio.gather(*(self.advance(d, r, policy_s) for d, r in zip(live, results, strict=True)))
            _raise_first(self.callback_errors)
            self.report()
        return [d.episode for d in self.dialogues if d.episode is not None]

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
            except Exception as exc:  # surfaced after the round, see run_rollouts
                self.callback_errors.append(exc)

    async def start(self, d: _Dialogue) -> None:
        """The simulated user's opening line (shared within a group under ``env.rules.shared_opening``)."""
        owned: asyncio.Future[str] | None = None
        try:
            profile = d.profile
            if self.config.env.rules.shared_opening and not profile.opening:
                shared = self.openings.get(profile.id)
                if shared is None:
                    owned = self.openings[profile.id] = asyncio.get_running_loop().create_future()
                else:
                    profile = profile.model_copy(update={"opening": await shared})
            async with self.sem:
                opening = await d.env.reset(profile, seed=d.seed, sample_index=d.sample_index)
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
        try:
            async with self.sem:
                await d.env.step(result.text, completion=result, policy_s=result.latency_s or policy_s)
        except Exception as exc:
            d.env.mark_failed(exc)
        if d.env.done:
            await self.finish(d)


async def _generate(
    policy: ChatModel, live: list[_Dialogue], sampling: SamplingParams, round_no: int, base_seed: int
) -> list[Completion | BaseException]:
    """One policy call per round, each dialogue with its own seed (see :func:`agent_seed`)."""
    batch = [d.env.messages_for_policy() for d in live]
    run_seed = base_seed if sampling.seed is None else sampling.seed
    samplings = [sampling.model_copy(update={"seed": agent_seed(run_seed, d.seed, round_no)}) for d in live]
    try:
        out = await policy.complete_each(batch, samplings)
    except PolicyOutOfMemoryError:
        raise  # fails the run: dropping the dialogues that did not fit would bias what is trained
    except Exception as exc:
        return [exc] * len(batch)
    if len(out) != len(batch):
        err = RuntimeError(f"policy returned {len(out)} completions for {len(batch)} prompts")
        return [err] * len(batch)
    return list(out)


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


def rich_progress_hook(description: str = "dialogues") -> tuple[ProgressHook, Any]:
    """A progress hook drawing a rich progress bar; returns ``(hook, progress)``.

    Use ``with progress: await run_rollouts(..., progress=hook)``.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("failed {task.fields[failed]} · round {task.fields[round]}"),
        TimeElapsedColumn(),
    )
    task_id = bar.add_task(description, total=None, failed=0, round=0)

    def hook(state: RolloutProgress) -> None:
        bar.update(
            task_id,
            total=state.total,
            completed=state.finished + state.failed,
            failed=state.failed,
            round=state.round,
        )

    return hook, bar
