"""A verl agent loop that runs one dialogue between the policy and our simulated user.

verl calls :meth:`RlverDialogueAgentLoop.run` once per trajectory in an ``AgentLoopWorker`` (a Ray
actor holding many trajectories on one asyncio loop). The loop is token in, token out:

1. the row's :class:`~.settings.DialogueTask` names the profile, the simulator, the dialogue rules and
   the reward; a :class:`~rlver.env.dialogue.DialogueEnv` (the environment the local trainer and the
   benchmark use) runs the dialogue, so termination rules and think stripping are the same code;
2. the policy's context is rendered once with verl's Continuous Token builder; each reply is generated
   by verl's server manager from *token ids* and appended as generated (mask 1, logprobs kept), so
   the trained tokens are exactly the sampled tokens (no decode/re-encode drift); a reply cut at
   ``max_tokens`` is closed with a mask-0 end token before the next user turn;
3. the raw reply is decoded and handed to the env, which shows the simulated user what the local
   engine shows it (:func:`rlver.env.thinking.shown_to_user`, the published cut-off rule: the text
   after the last ``</think>``, else the whole reply); the user's answer is appended with the chat
   template's tokens (mask 0);
4. the trajectory always ends on an assistant turn (a user answer that no reply follows is not
   appended), and ``reward_score`` is :func:`rlver.env.rewards.episode_reward` of the episode, which
   verl puts on the last assistant token;
5. the emotion trajectory, appraisals and per-turn rewards go into ``extra_fields`` (verl logs
   ``extra_fields["reward_extra_info"]`` per data source), and optionally a transcript line per dialogue.

A dialogue that fails takes its whole GRPO group with it (:class:`GroupSettlement`), and verl refills
the group (see :class:`DialogueFailed`).

Simulator work of all dialogues in one worker process shares one limit (:data:`SIMULATOR_GATE`), and
simulators are built once per process and settings, so an LLM simulator's HTTP client and its own
concurrency limit are shared too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import torch
from pydantic import Field
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from rlver.env.dialogue import DialogueEnv
from rlver.env.rewards import episode_reward, place_on_tokens, sample_rewards, turn_rewards
from rlver.errors import SimulatorError
from rlver.integrations.verl import AGENT_NAME
from rlver.integrations.verl.settings import DialogueTask
from rlver.io import append_jsonl
from rlver.llm.sequence import SequenceError, end_of_turn_id
from rlver.records import Episode
from rlver.rollout.hackwatch import HackWatch
from rlver.seeding import hashed_seed
from rlver.simulator.base import UserSimulator
from rlver.simulator.factory import SimulatorSpec, build_simulator
from rlver.transcripts.native import EPISODE

logger = logging.getLogger(__name__)

#: A reply needs room: when fewer response tokens than this are left, the dialogue stops.
MIN_REPLY_TOKENS = 8
#: The hack-watch rates each dialogue reports in ``reward_extra_info`` (as ``hack_veto_rate``, ...).
HACK_EXTRA = (
    "hack/veto_rate",
    "hack/reply_chars_mean",
    "hack/repeated_phrase_rate",
    "hack/language_mismatch_rate",
)
#: Token names that end a turn in common chat templates (cut there before decoding the reply).
_STOP_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "</s>")


class DialogueFailed(SimulatorError):
    """A dialogue could not be completed (simulator failure, no tokens, prompt too long), or a sibling
    of its GRPO group could not.

    What verl 0.9.1 does with it (``trainer/ppo/v1/agent_loop_tq.py``, ``replay_buffer.py``): the
    prompt's status becomes ``failure``, but the siblings that finished stay stored and *sampleable*, and
    the missing trajectories are padded downstream, so GRPO would normalise over the survivors (a lone
    survivor gets its raw score as advantage). A failure is not independent of the replies (a reply that
    derails the simulator is one of the group), so survivors are a biased group. We therefore fail the
    whole group (:class:`GroupSettlement`: every sibling raises once one failed), which leaves the prompt
    with no trajectories, and turn on ``trainer.v1.sampler.sync_refill_failed_groups``, with which verl
    replaces exactly such groups by fresh prompts. The batch keeps its size and every group its ``n``.
    """

    kind = "dialogue_failed"


class SimulatorGate:
    """One bound on simulator operations for every dialogue of a worker process.

    Each ``env.reset``/``env.step`` is one operation (one or two simulator LLM calls). The semaphore is
    per event loop because asyncio primitives belong to one loop; a verl worker runs all its
    trajectories on a single loop, so in practice the bound is per process. ``peak`` and ``waited_s``
    are there to size the simulator endpoint (see docs/multinode.md).
    """

    def __init__(self) -> None:
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self.limit: int | None = None
        self.in_use = 0
        self.peak = 0
        self.operations = 0
        self.waited_s = 0.0

    def _semaphore(self, limit: int) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            if self.limit is not None and self.limit != limit:
                logger.warning(
                    "simulator_concurrency %d ignored: this process already uses %d", limit, self.limit
                )
            self.limit = self.limit or limit
            sem = asyncio.Semaphore(self.limit)
            self._semaphores[loop] = sem
        return sem

    @asynccontextmanager
    async def slot(self, limit: int) -> AsyncIterator[None]:
        sem = self._semaphore(limit)
        t0 = time.perf_counter()
        async with sem:
            self.waited_s += time.perf_counter() - t0
            self.in_use += 1
            self.operations += 1
            self.peak = max(self.peak, self.in_use)
            try:
                yield
            finally:
                self.in_use -= 1

    def reset(self) -> None:
        """Forget the limit and counters (tests; a fresh process starts like this)."""
        self.__init__()  # type: ignore[misc]


#: The process-wide gate.
SIMULATOR_GATE = SimulatorGate()


class GroupSettlement:
    """All-or-nothing groups: the ``n`` dialogues verl runs for one prompt (same ``uid``) succeed together.

    verl's v1 worker starts a prompt's ``n`` sessions as tasks of one worker's event loop, so a group is
    visible within one process. Each dialogue reports here when it ends: a failure marks the group; a
    success waits until every sibling has ended and raises :class:`DialogueFailed` if one failed.
    """

    def __init__(self) -> None:
        self._groups: dict[tuple[int, str], dict[str, Any]] = {}

    def _group(self, uid: str, size: int) -> dict[str, Any]:
        key = (id(asyncio.get_running_loop()), uid)
        if key not in self._groups:
            self._groups[key] = {"size": size, "ended": 0, "failed": None, "event": asyncio.Event()}
        return self._groups[key]

    def _end(self, uid: str, group: dict[str, Any]) -> None:
        group["ended"] += 1
        if group["ended"] >= group["size"]:
            group["event"].set()
            self._groups.pop((id(asyncio.get_running_loop()), uid), None)

    def failed(self, uid: str, size: int, reason: str) -> None:
        group = self._group(uid, size)
        group["failed"] = group["failed"] or reason
        group["event"].set()  # siblings waiting can give up now
        self._end(uid, group)

    async def succeeded(self, uid: str, size: int) -> None:
        group = self._group(uid, size)
        self._end(uid, group)
        if group["failed"] is None:
            await group["event"].wait()
        if group["failed"] is not None:
            raise DialogueFailed(f"a dialogue of its group (uid {uid}) failed: {group['failed']}")


#: The process-wide group bookkeeping.
GROUPS = GroupSettlement()

_SIMULATORS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, UserSimulator]] = (
    weakref.WeakKeyDictionary()
)


def shared_simulator(spec: SimulatorSpec) -> UserSimulator:
    """The simulator for ``spec`` in this process (built on first use, then shared by all dialogues)."""
    loop = asyncio.get_running_loop()
    per_loop = _SIMULATORS.setdefault(loop, {})
    key = spec.model_dump_json()
    if key not in per_loop:
        per_loop[key] = build_simulator(spec)
    return per_loop[key]


def stop_token_ids(tokenizer: Any) -> set[int]:
    """Ids that end a generated turn: eos/pad plus the usual end-of-turn tokens that exist in the vocab."""
    ids = {i for i in (tokenizer.eos_token_id, tokenizer.pad_token_id) if isinstance(i, int)}
    vocab = tokenizer.get_vocab()
    ids.update(vocab[t] for t in _STOP_TOKENS if t in vocab)
    ids.add(turn_end_token_id(tokenizer))
    return ids


def turn_end_token_id(tokenizer: Any) -> int:
    """The token the chat template closes an assistant turn with (``<|im_end|>`` for Qwen/ChatML),
    read from the template as the local trainer does (:func:`rlver.llm.sequence.end_of_turn_id`).

    A reply cut at ``max_tokens`` has none; the loop appends this one with mask 0 (never trained, as the
    local trainer does), so the template's newline and the next user turn follow a closed turn.
    """
    try:
        return end_of_turn_id(tokenizer)
    except SequenceError as exc:
        raise ValueError(str(exc)) from None


def _scalar(value: Any, default: int = 0) -> int:
    """Row values arrive as numpy scalars/0-d arrays; make a plain int."""
    try:
        return int(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError):
        return default


class RewardedOutput(AgentLoopOutput):
    """verl's ``AgentLoopOutput`` with a reward per response token (``rm_scores``), not one at the end.

    verl 0.9.1 turns ``reward_score`` into ``rm_scores`` with the score on the last response token
    (``AgentLoopOutput.as_dict``), and the v1 trainer takes ``rm_scores`` as the token-level scores
    GAE and GRPO read (``trainer/ppo/v1/trainer_base.py``). We put :func:`rlver.env.rewards.sample_rewards`
    on each assistant turn's last token instead, the placement the local trainer uses, so per-turn
    modes and the format penalty give the same returns on both engines. ``reward_score`` stays the
    sample's total (what verl logs and what GRPO's score sums to); verl copies the last output's
    ``reward_score`` onto the others of a dialogue, which ``token_rewards`` makes harmless.
    """

    token_rewards: list[float] = Field(default_factory=list, exclude=True)

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        if self.token_rewards:
            out["rm_scores"] = torch.tensor(self.token_rewards[: len(self.response_ids)], dtype=torch.float32)
        return out


def turn_ends(response_mask: list[int]) -> list[int]:
    """Index of the last trained token of every assistant turn (each maximal run of 1s) in a response."""
    return [
        i
        for i, m in enumerate(response_mask)
        if m and (i + 1 == len(response_mask) or not response_mask[i + 1])
    ]


@dataclass
class _Trajectory:
    """One dialogue's token sequence as it grows, and what is logged about it."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    #: The last reply's sampled ids (decoded for the simulated user).
    last_reply: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(
        default_factory=lambda: {"generate_sequences": 0.0, "tool_calls": 0.0, "num_preempted": -1}
    )
    truncated: int = 0


@register(AGENT_NAME)
class RlverDialogueAgentLoop(AgentLoopBase):
    """One dialogue with a simulated user per ``run`` (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # verl's worker also passes the tool list and the registry entry's name; we use neither.
        kwargs.pop("tools", None)
        kwargs.pop("name", None)
        super().__init__(*args, **kwargs)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self._stop_ids = stop_token_ids(self.tokenizer)
        self._close_id = turn_end_token_id(self.tokenizer)

    # -- helpers --------------------------------------------------------------------------------
    def _reply_text(self, token_ids: list[int]) -> str:
        """The raw reply as text: cut at the first end-of-turn token, special tokens kept.

        Not ``skip_special_tokens=True``: some tokenizers register ``<think>`` as a special token, and
        dropping the tags would hand the reasoning to the simulated user as if it were the reply.
        """
        cut = next((i for i, t in enumerate(token_ids) if t in self._stop_ids), len(token_ids))
        tokenizer: Any = self.tokenizer
        return str(tokenizer.decode(token_ids[:cut], skip_special_tokens=False))

    async def _initial_tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        ids = await self.loop.run_in_executor(
            None, lambda: self.continuous_token_builder.build_initial_tokens(messages)
        )
        if len(ids) > self.prompt_length:
            # verl would left-truncate, dropping the system prompt: refuse instead.
            raise DialogueFailed(
                f"the opening context is {len(ids)} tokens, more than rollout.prompt_length="
                f"{self.prompt_length}; raise verl.max_prompt_tokens in the config"
            )
        return list(ids)

    # -- the loop -------------------------------------------------------------------------------
    # verl 0.9.1's base class declares one output, its v1 worker takes a list too (agent_loop_tq.py:151)
    async def run(  # type: ignore[override]
        self, sampling_params: dict[str, Any], **kwargs: Any
    ) -> AgentLoopOutput | list[AgentLoopOutput]:
        """One dialogue: one output (``think_context: full``, or no think), or one per assistant turn
        (``think: true, think_context: visible``, the published layout; verl 0.9.1's v1 worker stores
        each output of a list as its own sample, ``trainer/ppo/v1/agent_loop_tq.py``)."""
        task = DialogueTask.from_row(kwargs.get("extra_info"))
        uid = kwargs.get("uid")
        grouped = task.group_size > 1 and isinstance(uid, str)
        per_turn = task.env.per_turn_samples
        output: AgentLoopOutput | list[AgentLoopOutput]
        try:
            if per_turn:
                output, episode, reward = await self._turn_samples(task, sampling_params, kwargs)
            else:
                output, episode, reward = await self._dialogue(task, sampling_params, kwargs)
        except Exception as exc:
            if grouped:
                GROUPS.failed(str(uid), task.group_size, f"{type(exc).__name__}: {exc}")
            raise
        if grouped:
            await GROUPS.succeeded(str(uid), task.group_size)
        if task.transcript_dir:
            self._log_transcript(task, episode, reward, kwargs)
        return output

    async def _dialogue(
        self, task: DialogueTask, sampling_params: dict[str, Any], kwargs: dict[str, Any]
    ) -> tuple[AgentLoopOutput, Episode, float]:
        """One dialogue, start to end; raises :class:`DialogueFailed` when it cannot be completed."""
        t = _Trajectory()
        env = await self._open(task, kwargs, t)
        t.messages = [m.model_dump() for m in env.messages_for_policy()]
        t.token_ids = await self._initial_tokens(t.messages)
        request_id = uuid4().hex  # one id per dialogue: sticky routing keeps its prefix cache warm
        end_reason: str | None = None
        while True:
            cut = await self._generate_reply(task, t, sampling_params, request_id)
            raw_reply = self._reply_text(t.last_reply)
            t.messages.append({"role": "assistant", "content": raw_reply})
            user_message, done = await self._simulate(task, env, raw_reply, t)
            if done or user_message is None:
                end_reason = env.episode.end_reason
                break
            if len(t.response_mask) >= self.response_length - MIN_REPLY_TOKENS:
                end_reason = "context_full"
                break
            if not await self._append_user_turn(t, user_message, cut):
                end_reason = "context_full"
                break

        episode = env.episode.model_copy(update={"truncated_replies": t.truncated})
        t.extra["truncated_replies"] = t.truncated
        if end_reason == "context_full":
            episode = episode.model_copy(update={"end_reason": "context_full"})
        reward = episode_reward(episode, task.reward)
        return self._output(task, episode, reward, t), episode, reward

    async def _open(self, task: DialogueTask, kwargs: dict[str, Any], t: _Trajectory) -> DialogueEnv:
        """A fresh environment with the simulated user's opening line.

        Seeded by a hash of the row seed, the sample (verl's ``session_id``) and the step: a worker
        sees one row at a time, so there is no (profile × sample) grid to index as the local runner's
        :func:`rlver.rollout.runner.dialogue_seed` does.
        """
        session = _scalar(kwargs.get("session_id"))
        seed = hashed_seed(task.seed, session, _scalar(kwargs.get("global_steps")))
        env = DialogueEnv(shared_simulator(task.simulator), task.env)
        t0 = time.perf_counter()
        try:
            async with SIMULATOR_GATE.slot(task.simulator_concurrency):
                await env.reset(task.profile, seed=seed, sample_index=session)
        except Exception as exc:
            raise DialogueFailed(
                f"profile {task.profile.id}: the simulated user could not open: {exc}"
            ) from exc
        t.metrics["tool_calls"] += time.perf_counter() - t0
        return env

    async def _generate_reply(
        self, task: DialogueTask, t: _Trajectory, sampling_params: dict[str, Any], request_id: str
    ) -> bool:
        """Generate one reply from token ids and append it as sampled (mask 1); True when it was cut."""
        budget = self.response_length - len(t.response_mask)
        cap = int(sampling_params.get("max_tokens", budget))  # a turn sample's room within the context
        params = {**sampling_params, "max_tokens": min(task.max_reply_tokens, budget, cap)}
        t0 = time.perf_counter()
        out = await self.server_manager.generate(
            request_id=request_id, prompt_ids=t.token_ids, sampling_params=params
        )
        t.metrics["generate_sequences"] += time.perf_counter() - t0
        if out.num_preempted is not None:
            t.metrics["num_preempted"] = max(t.metrics["num_preempted"], 0) + out.num_preempted
        if not out.token_ids:
            raise DialogueFailed(f"profile {task.profile.id}: the rollout server returned no tokens")
        if not t.extra:
            t.extra.update(out.extra_fields)
        elif out.extra_fields.get("max_global_steps") is not None:
            t.extra["max_global_steps"] = out.extra_fields["max_global_steps"]

        merged, t.response_mask, aligned = await self.ct_merge_assistant_token(
            t.token_ids,
            list(out.token_ids),
            t.response_mask,
            t.logprobs if (t.logprobs or out.log_probs) else None,
            assistant_logprobs=list(out.log_probs) if out.log_probs else None,
        )
        t.token_ids = merged.token_ids
        t.logprobs = list(aligned) if aligned is not None else t.logprobs
        t.last_reply = list(out.token_ids)
        cut = out.token_ids[-1] not in self._stop_ids  # at max_tokens vLLM/SGLang add no end token
        t.truncated += cut
        return bool(cut)

    @staticmethod
    async def _simulate(
        task: DialogueTask, env: DialogueEnv, raw_reply: str, t: _Trajectory
    ) -> tuple[str | None, bool]:
        """The simulated user's answer to one reply: ``(user message or None, dialogue done)``."""
        t0 = time.perf_counter()
        try:
            async with SIMULATOR_GATE.slot(task.simulator_concurrency):
                step = await env.step(raw_reply)
        except Exception as exc:
            env.mark_failed(exc)
            raise DialogueFailed(
                f"profile {task.profile.id}: simulator failed at reply {env.assistant_turns}: {exc}"
            ) from exc
        finally:
            t.metrics["tool_calls"] += time.perf_counter() - t0
        return step.user_message, step.done

    async def _append_user_turn(self, t: _Trajectory, user_message: str, cut: bool) -> bool:
        """Append the user's answer (mask 0); False, leaving ``t`` as it was, when no reply would fit."""
        # A cut reply is closed before the user's turn, untrained (mask 0), as the local engine
        # does: verl's token builder writes the template's newline only after an end token, so the
        # next "<|im_start|>user" would otherwise be glued to the cut reply.
        close = [self._close_id] if cut else []
        candidate = [*t.messages, {"role": "user", "content": user_message}]
        merged, new_mask, aligned = await self.ct_merge_context_msg(
            list(t.messages),
            candidate,
            [*t.token_ids, *close],
            [*t.response_mask, *[0] * len(close)],
            [*t.logprobs, *[0.0] * len(close)] if t.logprobs else None,
        )
        if len(new_mask) > self.response_length - MIN_REPLY_TOKENS:
            return False  # no room for another reply: stop on the assistant turn, without this message
        t.messages, t.token_ids, t.response_mask = candidate, merged.token_ids, new_mask
        if aligned is not None and t.logprobs:
            t.logprobs = list(aligned)
        return True

    async def _turn_samples(
        self, task: DialogueTask, sampling_params: dict[str, Any], kwargs: dict[str, Any]
    ) -> tuple[list[AgentLoopOutput], Episode, float]:
        """The published think layout: each reply is generated from the thought-free history (what the
        user saw, ``DialogueEnv.messages_for_policy``) rendered afresh, and becomes its own sample
        (prompt = that context, response = the sampled reply, all trained), earning the reward from its
        turn on. A context that leaves no room for a reply within ``model.max_length`` ends it
        (``context_full``), as in the local trainer, whose samples are the same tokens
        (``rlver.train.tokenize.episode_turn_samples``)."""
        t = _Trajectory()
        env = await self._open(task, kwargs, t)
        request_id = uuid4().hex
        total = self.prompt_length + self.response_length
        replies: list[tuple[list[int], list[int], list[float] | None]] = []
        context_full = False
        while True:
            t.messages = [m.model_dump() for m in env.messages_for_policy()]
            prompt = list(
                await self.loop.run_in_executor(
                    None, lambda: self.continuous_token_builder.build_initial_tokens(t.messages)
                )
            )
            room = min(task.max_reply_tokens, total - len(prompt))
            if room < MIN_REPLY_TOKENS:
                if not replies:
                    raise DialogueFailed(
                        f"the opening context is {len(prompt)} tokens, no room for a reply within {total}"
                    )
                context_full = True
                break
            t.token_ids, t.response_mask, t.logprobs = prompt, [], []
            await self._generate_reply(task, t, {**sampling_params, "max_tokens": room}, request_id)
            replies.append((prompt, list(t.last_reply), t.logprobs or None))
            user_message, done = await self._simulate(task, env, self._reply_text(t.last_reply), t)
            if done or user_message is None:
                break
        episode = env.episode
        if context_full:
            episode = episode.model_copy(update={"end_reason": "context_full"})
        t.extra["truncated_replies"] = t.truncated
        reward = episode_reward(episode, task.reward)
        outputs: list[AgentLoopOutput] = []
        for k, (prompt, reply, logprobs) in enumerate(replies):
            t.token_ids, t.response_mask = prompt + reply, [1] * len(reply)
            t.logprobs = list(logprobs) if logprobs else []
            outputs.append(self._output(task, episode, reward, t, turn=k))
        return outputs, episode, reward

    def _output(
        self, task: DialogueTask, episode: Episode, reward: float, t: _Trajectory, turn: int | None = None
    ) -> AgentLoopOutput:
        """Package the trajectory (or turn ``turn``'s sample), scored with our reward code, for verl."""
        token_ids, response_mask, logprobs, extra = t.token_ids, t.response_mask, t.logprobs, dict(t.extra)
        per_turn = turn_rewards(episode, task.reward)
        appraisals = [u.appraisal for u in episode.user_turns if u.appraisal is not None]
        extra.update(
            {
                "turn_scores": per_turn,
                "tool_rewards": [],
                "profile_id": episode.profile_id,
                "end_reason": episode.end_reason,
                "emotions": [episode.start_emotion, *episode.emotions],
                "appraisals": [a.model_dump(mode="json") for a in appraisals],
                # verl logs these scalars per data source (validation metrics, rollout dumps).
                "reward_extra_info": {
                    "final_emotion": float(episode.final_emotion),
                    "emotion_gain": float(episode.final_emotion - episode.start_emotion),
                    "assistant_turns": float(episode.assistant_turns),
                    "success": float(episode.succeeded),
                    "failure": float(episode.failed_low),
                    "format_errors": float(episode.format_errors),
                    # the reward-hacking watch (rlver.rollout.hackwatch), as the local trainer logs it
                    **{
                        key.replace("/", "_"): value
                        for key, value in HackWatch([task.profile])([episode]).items()
                        if key in HACK_EXTRA
                    },
                },
            }
        )
        # The builder may insert or trim boundary tokens; the mask always covers the response part.
        n = len(response_mask)
        mask = response_mask[: self.response_length]
        ends = turn_ends(mask)
        rewards = sample_rewards(episode, task.reward, kept_turns=len(ends), turn=turn)
        if turn is not None:
            extra["turn_index"] = turn
        return RewardedOutput(
            prompt_ids=token_ids[: len(token_ids) - n],
            response_ids=token_ids[len(token_ids) - n :][: self.response_length],
            response_mask=mask,
            response_logprobs=logprobs[: self.response_length] if logprobs and len(logprobs) == n else None,
            reward_score=float(sum(rewards)),
            token_rewards=place_on_tokens(rewards, ends, len(mask)),
            num_turns=sum(1 for m in t.messages if m["role"] != "system"),
            metrics=AgentLoopMetrics(**t.metrics),
            extra_fields=extra,
        )

    @staticmethod
    def _log_transcript(task: DialogueTask, episode: Episode, reward: float, row: dict[str, Any]) -> None:
        """Append the finished dialogue (only once its whole group succeeded: what is logged was trained)."""
        assert task.transcript_dir is not None
        steps = _scalar(row.get("global_steps"), -1)
        line = episode.model_copy(
            update={"reward": reward, "meta": {**episode.meta, "global_steps": steps, "engine": "verl"}}
        )
        extra = row.get("extra_info")
        split = str(extra.get("split", "train")) if isinstance(extra, dict) else "train"
        split = split if split.isalnum() else "other"
        path = Path(task.transcript_dir) / f"episodes-{split}-{os.uname().nodename}-{os.getpid()}.jsonl"
        if not path.exists() or path.stat().st_size == 0:  # one file per process and split: no race
            append_jsonl(path, task.run_manifest(split).to_json())
        append_jsonl(path, {"type": EPISODE, **line.model_dump(mode="json")})
