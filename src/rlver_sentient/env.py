"""The env: one task becomes one dialogue between the assistant (the trainable agent) and rlver's
simulated user, under rlver's dialogue rules, scored with the published reward.

The user is not a verifiers agent: it is rlver's own (the offline user, or the LLM user), stepped by
rlver's :class:`~rlver.env.dialogue.DialogueEnv`, so its lines reach the assistant as user turns and
are never sampled tokens of any trace (nothing of the user is trainable). The dialogue ends where
rlver's rules end it (the emotion at 100 or below 10, the user leaving, the turn limit); leaving the
interaction then closes the assistant's rollout.

What lands on the assistant's trace:

* reward ``emotion``: the final emotion / 100 (:func:`rlver.env.rewards.episode_reward`, the published
  reward), the same number ``rlver eval`` records for the same profile, seed and agent;
* metrics ``final_emotion``, ``success`` (final ≥ 100), ``failure`` (final < 10), ``turns`` (assistant
  replies), ``end_<reason>`` (1 for the reason the dialogue ended: ``emotion_high``, ``emotion_low``,
  ``left``, ``turn_limit``, ...) and ``emotion_turn_<k>``: the emotion after the k-th appraised reply;
* ``info["rlver"]``: the end reason, the emotion path and the dialogue's seed, for reading a trace,
  and ``requests``: what the agent's and the simulated user's bodies carried of the sampling fields
  (``"server default"`` for each left out), the record ``rlver eval`` writes in its manifest.

A dialogue whose simulated user fails for good (an endpoint down, an answer unreadable twice) fails the
episode, as ``rlver eval`` marks such a dialogue failed and leaves it out of the score.
"""

from __future__ import annotations

import asyncio

import aiohttp
import verifiers.v1 as vf

from rlver.env.dialogue import DialogueEnv
from rlver.env.rewards import episode_reward
from rlver.profiles.schema import Profile
from rlver.records import Episode
from rlver.rollout.runner import dialogue_seed
from rlver.simulator.base import UserSimulator
from rlver.simulator.factory import build_simulator
from rlver_sentient.exchange import Exchange
from rlver_sentient.taskset import SentientTask, SentientTasksetConfig


class SentientEnvConfig(vf.EnvConfig):
    """The env's one role: the assistant, the agent under training or evaluation (``--env.assistant.*``).

    Its harness (this package's) asks the model in this process and runs no program, so the runtime
    each rollout provisions is the local ``subprocess`` one (a scratch folder), not a remote sandbox.
    """

    assistant: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class SentientEnv(vf.Env[SentientEnvConfig]):
    """Plays each task's dialogue with rlver's simulated user and records the published reward."""

    def __init__(self, config: SentientEnvConfig) -> None:
        super().__init__(config)
        self._simulator: UserSimulator | None = None
        self._http: aiohttp.ClientSession | None = None

    @property
    def settings(self) -> SentientTasksetConfig:
        config = self.taskset.config
        if not isinstance(config, SentientTasksetConfig):  # paired with another taskset (--env.id)
            raise vf.EnvError(f"the rlver-sentient env plays the rlver-sentient taskset, not {config.id!r}")
        return config

    def simulator(self) -> UserSimulator:
        """The simulated user every dialogue of this env shares (built once, on first use)."""
        if self._simulator is None:
            self._simulator = build_simulator(self.settings.simulator_spec)
        return self._simulator

    def http(self) -> aiohttp.ClientSession:
        """The session the harness asks the model through, one for all dialogues (opened on first use)."""
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        return self._http

    async def start(self) -> None:
        """Build the simulated user before any rollout, in a worker thread: the offline user reads its
        fitted appraisals from disk there, not on the loop the rollouts share."""
        if self._simulator is None:
            self._simulator = await asyncio.to_thread(build_simulator, self.settings.simulator_spec)

    async def stop(self) -> None:
        closer = getattr(self._simulator, "aclose", None)
        if closer is not None:
            await closer()
        self._simulator = None
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        if not isinstance(task, SentientTask):
            raise vf.EnvError(f"the rlver-sentient env plays its own tasks, not {type(task).__name__}")
        dialogue = DialogueEnv(
            self.simulator(),
            self.settings.env_config.model_copy(update={"system_prompt": task.data.system_prompt}),
        )
        seed = dialogue_seed(self.settings.seed, task.data.profile_index, 0, 1)
        opening = await dialogue.reset(Profile.model_validate(task.data.profile), seed=seed)
        exchange = Exchange(dialogue, self.http(), self.settings.agent_fields)
        async with agents.assistant.interaction(task) as chat:
            chat.trace.state.exchange = exchange
            await _converse(chat, exchange, opening)
        if dialogue.done:  # not done: the assistant's call failed, and its trace says why
            record(chat.trace, dialogue.episode)
            chat.trace.info["rlver"]["requests"] = self.settings.requests(exchange.stated or {})


async def _converse(chat: vf.Interaction, exchange: Exchange, opening: str) -> None:
    """The user's line, the assistant's reply, the user's appraisal and answer, until the rules end it."""
    dialogue = exchange.dialogue
    segment = await chat.turn(opening)
    while not segment.terminated and exchange.reply is not None:
        reply, exchange.reply = exchange.reply, None
        step = await dialogue.step(reply.text, completion=reply)
        if step.done or step.user_message is None:
            return
        segment = await chat.turn(step.user_message)


def record(trace: vf.Trace, episode: Episode) -> None:
    """The episode's reward and metrics on the assistant's trace (see the module docstring)."""
    trace.record_reward("emotion", episode_reward(episode))
    metrics = {
        "final_emotion": float(episode.final_emotion),
        "success": float(episode.succeeded),
        "failure": float(episode.failed_low),
        "turns": float(episode.assistant_turns),
        f"end_{episode.end_reason}": 1.0,
    }
    metrics.update({f"emotion_turn_{k}": float(e) for k, e in enumerate(episode.emotions, start=1)})
    trace.record_metrics(metrics)
    trace.info["rlver"] = {
        "profile_id": episode.profile_id,
        "end_reason": episode.end_reason,
        "start_emotion": episode.start_emotion,
        "emotions": list(episode.emotions),
        "seed": episode.meta.get("seed"),
        "format_errors": episode.format_errors,
    }
