"""The single-machine RL trainer: PPO (GAE + critic) or GRPO on whole multi-turn dialogues.

Read :meth:`Trainer.train_step` top to bottom — it *is* the algorithm (CleanRL's rule: no hidden
control flow):

1. sample profiles → run the dialogues with the model being trained against the simulated users
   (``rlver.rollout.runner.run_rollouts``; one batched ``generate`` per round);
2. drop failed dialogues, tokenise the rest (one sequence per dialogue, assistant-only mask);
3. score them without gradients: old log-probs, reference log-probs (if a KL term is on), values (PPO);
4. advantages: the algorithm's (``rlver.train.algorithms``: GAE over the assistant tokens for PPO,
   group-normalised rewards for GRPO);
5. ``epochs`` × ``minibatches`` updates, micro-batched by token budget, with the algorithm's loss terms;
6. log; evaluate on held-out profiles every k steps; checkpoint every k steps.

Models are built by ``rlver.train.loading``, optimisers by ``rlver.train.optim``.

Determinism: every step re-seeds python/numpy/torch from ``(run.seed, step)`` and profiles are drawn
from a per-epoch permutation that is a pure function of the data position, so a resumed run repeats
exactly what an uninterrupted one does (on CPU; GPU kernels may add their own non-determinism).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from torch import nn

from rlver.config import mask_secret_values, redacted
from rlver.env.rewards import episode_reward, sample_rewards
from rlver.errors import RlverError
from rlver.io import atomic_write_text
from rlver.llm.base import SamplingParams
from rlver.llm.local import LocalChatModel, sampling_settings
from rlver.profiles.schema import Profile
from rlver.profiles.sets import load_profile_set
from rlver.records import Episode
from rlver.rollout.hackwatch import HackWatch
from rlver.rollout.outcomes import outcomes
from rlver.rollout.runner import run_rollouts
from rlver.simulator.factory import build_simulator
from rlver.train.algorithms import core as alg
from rlver.train.algorithms import get_algorithm
from rlver.train.algorithms.base import ActorLossInputs, AdvantageInputs, CriticLossInputs
from rlver.train.batch import collate, micro_batches, pad_rows, policy_forward, unpad_rows, value_forward
from rlver.train.checkpoint import (
    latest_checkpoint,
    load_trainer_state,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from rlver.train.config import TrainConfig
from rlver.train.context_budget import cut_to_turns
from rlver.train.grid import GridCheck
from rlver.train.loading import build_models
from rlver.train.logger import MetricsLogger
from rlver.train.optim import Optimisers
from rlver.train.tokenize import (
    TokenizationError,
    TokenizedEpisode,
    episode_to_tensors,
    episode_turn_samples,
)

log = logging.getLogger(__name__)


class TrainError(RlverError):
    """A training run cannot start or continue (no checkpoint to resume, no usable dialogues...)."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def profiles_at(profiles: list[Profile], position: int, count: int, seed: int) -> list[Profile]:
    """Profiles ``position .. position+count-1`` of the endless stream of per-epoch shuffles.

    A pure function of the data position (no RNG state), so resuming needs only the position.
    """
    n = len(profiles)
    out = []
    for pos in range(position, position + count):
        epoch, index = divmod(pos, n)
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        out.append(profiles[int(perm[index])])
    return out


@dataclass
class ScoredBatch:
    """A step's dialogues after scoring: per-sequence 1-D tensors on the shifted grid (length L-1)."""

    episodes: list[Episode]
    seqs: list[TokenizedEpisode]
    #: None when the update is on-policy (see ``Trainer._on_policy``): the update's own log-probs,
    #: detached, are then the old ones, and the scoring forward pass is skipped.
    old_logp: list[torch.Tensor] | None
    ref_logp: list[torch.Tensor] | None
    values: list[torch.Tensor] | None
    advantages: list[torch.Tensor] = field(default_factory=list)
    returns: list[torch.Tensor] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)


class Trainer:
    """One run: models, optimisers, simulator, profiles, logger; ``train()`` runs the steps."""

    def __init__(self, config: TrainConfig, out_dir: str | Path, *, resume: bool = False) -> None:
        self.cfg = config
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.ckpt_root = self.out / "checkpoints"
        checkpoint = self._checkpoint_to_resume(resume)
        seed_everything(config.run.seed)
        self.algo = get_algorithm(config.algorithm.name)
        models = build_models(config, self.out, needs_critic=self.algo.needs_critic, checkpoint=checkpoint)
        self.device, self.base, self.tokenizer = models.device, models.base, models.tokenizer
        self.policy, self.critic, self.reference = models.policy, models.critic, models.reference
        self.optimisers = Optimisers(self.policy, self.critic, config.optim, config.run.steps)
        self.chat = LocalChatModel(
            self.policy,  # type: ignore[arg-type]
            self.tokenizer,
            device=str(self.device),
            max_batch_size=config.model.generation_batch_size,
            name="policy",
        )
        self.simulator = build_simulator(config.simulator)
        self.train_profiles, self.eval_profiles = self._load_profiles()
        #: the offline user's veto detectors on the policy's replies, every step (``hack/*`` metrics)
        self.hack_watch = HackWatch(self.train_profiles)

        self.step = 0
        #: optimiser steps skipped in a row for a non-finite gradient norm (``_skip_nonfinite``)
        self.nonfinite_in_a_row = 0
        self.data_position = 0
        self.eval_history: list[dict[str, Any]] = []
        if checkpoint is not None:
            self._load_state(load_trainer_state(checkpoint))
        self.logger = MetricsLogger(
            self.out,
            tensorboard=config.run.tensorboard,
            resume_step=self.step if checkpoint else None,
            wandb=config.run.wandb,
            config=mask_secret_values(redacted(config.model_dump(mode="json"))),
        )
        self._write_run_settings()

    def _checkpoint_to_resume(self, resume: bool) -> Path | None:
        """The checkpoint ``--resume`` continues from; refuses to start a new run over an old one."""
        checkpoint = latest_checkpoint(self.ckpt_root)
        if resume and checkpoint is None:
            raise TrainError(f"--resume: no checkpoint in {self.ckpt_root}")
        if not resume and checkpoint is not None:
            raise TrainError(
                f"{self.out} already holds a run's checkpoints: add --resume, or use another --out"
            )
        return checkpoint

    def _load_profiles(self) -> tuple[list[Profile], list[Profile]]:
        cfg = self.cfg
        train_profiles = load_profile_set(cfg.rollout.profiles)
        if not train_profiles:
            raise TrainError(f"rollout.profiles={cfg.rollout.profiles!r}: no profiles")
        eval_profiles = load_profile_set(cfg.eval.profiles)
        return train_profiles, eval_profiles[: cfg.eval.limit] if cfg.eval.limit else eval_profiles

    def _write_run_settings(self) -> None:
        """The sampling actually used (every setting explicit; see rlver.llm.local) and the config."""
        cfg = self.cfg
        atomic_write_text(
            self.out / "sampling.json",
            json.dumps(
                {
                    "rollout": sampling_settings(self._sampling(cfg.rollout.temperature)),
                    "eval": sampling_settings(self._sampling(cfg.eval.temperature)),
                    "agent_seed": "rollout.runner.agent_seed(step seed, dialogue seed, turn)",
                    "sampler": self.chat.describe()["sampler"],
                },
                indent=2,
            ),
        )
        # Which simulated user the rewards came from (the learned appraisal's provenance included).
        atomic_write_text(
            self.out / "simulator.json", json.dumps(self.simulator.describe(), indent=2, ensure_ascii=False)
        )
        atomic_write_text(
            self.out / "config.yaml",
            yaml.safe_dump(mask_secret_values(redacted(cfg.model_dump(mode="json"))), sort_keys=False),
        )

    # ------------------------------------------------------------------------------------- state
    def _trainer_state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "data_position": self.data_position,
            "eval_history": self.eval_history,
            **self.optimisers.state_dict(),
            "rng": rng_state(),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.data_position = int(state["data_position"])
        self.eval_history = list(state.get("eval_history", []))
        self.optimisers.load_state_dict(state)
        set_rng_state(state["rng"])

    def save(self) -> Path:
        info = {
            "step": self.step,
            "data_position": self.data_position,
            "algorithm": self.cfg.algorithm.name,
            "base_model": str(self.base),
            "lora": self.cfg.model.lora.enabled,
            # weights are saved in fp32 (mixed precision); `rlver export` casts to this by default
            "model_dtype": self.cfg.model.dtype,
        }
        return save_checkpoint(
            self.ckpt_root,
            self.step,
            policy=self.policy,
            tokenizer=self.tokenizer,
            critic=self.critic,
            trainer_state=self._trainer_state(),
            info=info,
            keep=self.cfg.run.keep_checkpoints,
        )

    # ----------------------------------------------------------------------------------- rollout
    def _sampling(self, temperature: float) -> SamplingParams:
        r = self.cfg.rollout
        return SamplingParams(temperature=temperature, top_p=r.top_p, max_tokens=r.max_new_tokens)

    def _run_dialogues(self, profiles: list[Profile], *, evaluation: bool, seed: int) -> list[Episode]:
        self.policy.eval()
        temperature = self.cfg.eval.temperature if evaluation else self.cfg.rollout.temperature
        with torch.no_grad():
            return asyncio.run(
                self._closing(
                    run_rollouts(
                        self.chat,
                        self.simulator,
                        profiles,
                        self.cfg.rollout_config(evaluation=evaluation),
                        self._sampling(temperature),
                        seed=seed,
                    )
                )
            )

    async def _closing(self, rollouts: Awaitable[list[Episode]]) -> list[Episode]:
        """Run ``rollouts``, then close the simulator's HTTP client on the same event loop.

        Each batch runs in its own ``asyncio.run``; a client left open when its loop ends is never
        closed and aiohttp prints "Unclosed client session" at exit (after a failed run, too).
        The client is opened again on the next batch's loop.
        """
        try:
            return await rollouts
        finally:
            closer = getattr(self.simulator, "aclose", None)
            if closer is not None:
                await closer()

    def evaluate_episodes(self) -> list[Episode]:
        """The held-out dialogues (fixed seed; the training random stream is left untouched)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.eval.seed)
            return self._run_dialogues(self.eval_profiles, evaluation=True, seed=self.cfg.eval.seed)

    def evaluate(self) -> dict[str, float]:
        """Mean final emotion (and friends) on the held-out profiles."""
        return summarise_eval(self.evaluate_episodes())

    # ----------------------------------------------------------------------------------- scoring
    def _tokenise(self, episodes: list[Episode]) -> tuple[list[Episode], list[TokenizedEpisode], int]:
        kept_eps, seqs, dropped = [], [], 0
        per_turn = self.cfg.rollout.think and self.cfg.rollout.think_context == "visible"
        for ep in episodes:
            try:
                if per_turn:  # one sample per assistant turn, each with the reward from its turn on
                    samples = episode_turn_samples(ep, self.tokenizer, max_length=self.cfg.model.max_length)
                    seqs.extend(samples)
                    kept_eps.extend([ep] * len(samples))
                    continue
                seqs.append(episode_to_tensors(ep, self.tokenizer, max_length=self.cfg.model.max_length))
                kept_eps.append(cut_to_turns(ep, seqs[-1].kept_turns))  # as verl: ends "context_full"
            except TokenizationError:
                dropped += 1
        return kept_eps, seqs, dropped

    def _on_policy(self) -> bool:
        """One optimiser step per batch and no KL term: the policy that scores a batch is the one that
        generated it, so old log-probs equal the update's own (detached) and need no forward pass of
        their own (as TRL's GRPOTrainer and verl do). Saves a third of the update's compute."""
        a = self.cfg.algorithm
        return a.epochs == 1 and a.minibatches == 1 and a.kl_coef == 0

    @torch.no_grad()
    def _score(self, episodes: list[Episode], seqs: list[TokenizedEpisode]) -> ScoredBatch:
        """Old log-probs, reference log-probs and values of every sequence, in micro-batches."""
        self.policy.eval()
        a = self.cfg.algorithm
        temp = self.cfg.rollout.temperature or 1.0
        lengths = [len(s) for s in seqs]
        pad = int(self.tokenizer.pad_token_id)
        old: list[torch.Tensor] | None = None if self._on_policy() else [torch.empty(0)] * len(seqs)
        ref: list[torch.Tensor] | None = [torch.empty(0)] * len(seqs) if a.kl_coef > 0 else None
        values: list[torch.Tensor] | None = [torch.empty(0)] * len(seqs) if self.critic is not None else None
        if old is None and ref is None and values is None:
            return ScoredBatch(episodes, seqs, old, ref, values)
        for group in micro_batches(lengths, range(len(seqs)), a.micro_batch_tokens):
            mb = collate(seqs, group, pad, self.device)
            chunk = a.logit_chunk_tokens
            logp = policy_forward(self.policy, mb, temp, chunk_tokens=chunk)[0] if old is not None else None
            ref_logp = self._reference_logp(mb, temp) if ref is not None else None
            v = value_forward(self.critic, mb) if self.critic is not None else None
            for row, i in enumerate(group):
                n = lengths[i] - 1
                if old is not None and logp is not None:
                    old[i] = logp[row, :n].float().cpu()
                if ref is not None and ref_logp is not None:
                    ref[i] = ref_logp[row, :n].float().cpu()
                if values is not None and v is not None:
                    values[i] = v[row, :n].float().cpu()
        return ScoredBatch(episodes, seqs, old, ref, values)

    def _reference_logp(self, mb: Any, temp: float) -> torch.Tensor:
        chunk = self.cfg.algorithm.logit_chunk_tokens
        if self.reference is not None:
            return policy_forward(self.reference, mb, temp, chunk_tokens=chunk)[0]
        with self.policy.disable_adapter():  # type: ignore[operator]
            return policy_forward(self.policy, mb, temp, chunk_tokens=chunk)[0]

    def _turn_rewards(self, ep: Episode, seq: TokenizedEpisode) -> list[float]:
        """The sample's rewards from :func:`rlver.env.rewards.sample_rewards`, the function verl's agent
        loop uses too: a turn sample (think_context visible) earns the reward from its turn on."""
        turn = seq.meta.get("turn") if seq.meta.get("per_turn") else None
        return sample_rewards(ep, self.cfg.rollout.reward, kept_turns=seq.kept_turns, turn=turn)

    def _advantages(self, s: ScoredBatch) -> None:
        """Fill ``s.advantages`` (and ``s.returns`` for PPO) on the shifted grid."""
        a = self.cfg.algorithm
        lengths = [len(q) - 1 for q in s.seqs]
        mask = pad_rows([torch.tensor(q.assistant_mask[1:], dtype=torch.float32) for q in s.seqs])
        # None only when on-policy, i.e. without a KL term: the two uses below need the reference.
        old = pad_rows(s.old_logp) if s.old_logp is not None else None
        sample_rows = [self._turn_rewards(ep, q) for ep, q in zip(s.episodes, s.seqs, strict=True)]
        rewards = alg.token_rewards(
            sample_rows,
            [[e - 1 for e in q.turn_end_positions] for q in s.seqs],
            tuple(mask.shape),  # type: ignore[arg-type]
        )
        # a sample's score is what it earns: the episode's reward, or a turn sample's reward from its turn on
        scores = torch.tensor([float(sum(row)) for row in sample_rows])
        groups = [ep.profile_id for ep in s.episodes]
        ids = {g: i for i, g in enumerate(dict.fromkeys(groups))}
        inputs = AdvantageInputs(
            mask=mask,
            token_rewards=rewards,
            scores=scores,
            groups=torch.tensor([ids[g] for g in groups]),
            values=pad_rows(s.values) if s.values is not None else None,
            old_logp=old,
            ref_logp=pad_rows(s.ref_logp) if s.ref_logp is not None else None,
        )
        result = self.algo.advantages(inputs, a)
        adv = result.advantages
        s.stats.update(result.stats)
        if result.returns is not None:
            s.returns = unpad_rows(result.returns, lengths)
        if s.ref_logp is not None and old is not None:
            s.stats["train/kl_ref"] = alg.masked_mean(alg.kl_k1(old, pad_rows(s.ref_logp)), mask).item()
        s.stats["train/advantage_abs_mean"] = alg.masked_mean(adv.abs(), mask).item()
        s.advantages = unpad_rows(adv, lengths)

    # ------------------------------------------------------------------------------------ update
    def _update(self, s: ScoredBatch, generator: torch.Generator) -> dict[str, float]:
        """``epochs`` passes over the batch in ``minibatches`` shuffled minibatches, one optimiser step
        each; returns the mean of every logged quantity over those steps."""
        a = self.cfg.algorithm
        n = len(s.seqs)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        #: the trained-token counters and log-prob gap, read off the micro-batches the loss consumes
        grid = GridCheck()
        self.policy.train()
        if self.critic is not None:
            self.critic.train()
        for _epoch in range(a.epochs):
            order = torch.randperm(n, generator=generator).tolist()
            for minibatch in np.array_split(np.array(order), min(a.minibatches, n)):
                for key, value in self._minibatch_step(s, [int(i) for i in minibatch], grid).items():
                    sums[key] = sums.get(key, 0.0) + value
                    counts[key] = counts.get(key, 0) + 1
        out_stats = {k: sums[k] / counts[k] for k in sums}
        out_stats["train/nonfinite_skips"] = sums.get("train/nonfinite_skips", 0.0)  # a count, not a mean
        out_stats.update(grid.metrics())
        out_stats.update(self.optimisers.schedule_step())
        return out_stats

    def _minibatch_step(self, s: ScoredBatch, idx: list[int], grid: GridCheck) -> dict[str, float]:
        """One optimiser step: gradients accumulated over the minibatch's micro-batches (each loss is a
        token mean over the whole minibatch's action tokens), clipped, applied."""
        a, o = self.cfg.algorithm, self.cfg.optim
        n_tok = float(sum(sum(s.seqs[i].assistant_mask[1:]) for i in idx))
        self.optimisers.zero_grad()
        summed: dict[str, float] = {}
        for group in micro_batches([len(q) for q in s.seqs], idx, a.micro_batch_tokens):
            for key, value in self._micro_batch(s, group, n_tok, grid).items():
                summed[key] = summed.get(key, 0.0) + value
        out = {"train/grad_norm_actor": _clip_and_norm(self.policy, o.max_grad_norm)}
        if self.critic is not None and self.optimisers.critic is not None:
            out["train/grad_norm_critic"] = _clip_and_norm(self.critic, o.max_grad_norm)
        if self._skip_nonfinite(out):
            out["train/nonfinite_skips"] = 1.0
        else:
            out["train/nonfinite_skips"] = 0.0
            self.optimisers.actor.step()
            if self.optimisers.critic is not None:
                self.optimisers.critic.step()
        out.update({f"train/{key}": value for key, value in summed.items()})
        return out

    def _skip_nonfinite(self, norms: dict[str, float]) -> bool:
        """True when a gradient norm is inf/NaN: the step is skipped (its gradients dropped), as verl's
        FSDP workers do, since one NaN step would poison the weights and every later step. Counted in
        ``train/nonfinite_skips`` (summed over the step's optimiser steps); ``optim.max_nonfinite_in_a_row``
        skipped steps in a row stop the run with a :class:`TrainError`."""
        bad = [k for k, v in norms.items() if not np.isfinite(v)]
        if not bad:
            self.nonfinite_in_a_row = 0
            return False
        self.optimisers.zero_grad()
        self.nonfinite_in_a_row += 1
        limit = self.cfg.optim.max_nonfinite_in_a_row
        log.warning(
            "step %d: non-finite gradient norm (%s); optimiser step skipped (%d in a row, stop at %d)",
            self.step + 1, ", ".join(bad), self.nonfinite_in_a_row, limit,
        )  # fmt: skip
        if self.nonfinite_in_a_row >= limit:
            raise TrainError(
                f"step {self.step + 1}: {self.nonfinite_in_a_row} optimiser steps in a row had a non-finite "
                f"gradient norm ({', '.join(bad)}); the run stops (optim.max_nonfinite_in_a_row={limit}). "
                "Lower optim.actor_lr / optim.critic_lr, or check the rewards for inf/NaN"
            )
        return True

    def _micro_batch(
        self, s: ScoredBatch, group: list[int], n_tok: float, grid: GridCheck
    ) -> dict[str, float]:
        """Forward, loss (the algorithm's terms) and backward of one micro-batch: policy, then critic."""
        a = self.cfg.algorithm
        mb = collate(s.seqs, group, int(self.tokenizer.pad_token_id), self.device)
        width = mb.action_mask.shape[1]

        def rows(xs: list[torch.Tensor]) -> torch.Tensor:
            return pad_rows([xs[i] for i in group], width).to(self.device)

        logp, entropy = policy_forward(
            self.policy, mb, self.cfg.rollout.temperature or 1.0, with_entropy=True,
            entropy_grad=a.entropy_coef > 0, chunk_tokens=a.logit_chunk_tokens,
        )  # fmt: skip
        assert entropy is not None
        old_logp = rows(s.old_logp) if s.old_logp is not None else logp.detach()
        grid.add(mb, s.seqs, old_logp)  # what this micro-batch trains, against what was sampled
        ref_logp = rows(s.ref_logp) if s.ref_logp is not None else None
        actor = self.algo.actor_loss(
            ActorLossInputs(mb.action_mask, n_tok, logp, old_logp, rows(s.advantages), entropy, ref_logp), a
        )
        actor.loss.backward()
        stats = {key: value.item() for key, value in actor.stats.items()}
        if self.critic is not None:
            values = value_forward(self.critic, mb)
            critic = self.algo.critic_loss(
                CriticLossInputs(mb.action_mask, n_tok, values, rows(s.values or []), rows(s.returns)), a
            )
            critic.loss.backward()
            stats.update({key: value.item() for key, value in critic.stats.items()})
        return stats

    # -------------------------------------------------------------------------------------- step
    def train_step(self) -> dict[str, Any]:
        """One RL step — rollout → score → advantages → update — then log; returns the metrics."""
        cfg, r = self.cfg, self.cfg.rollout
        step = self.step + 1
        step_seed = cfg.run.seed * 1_000_003 + step
        seed_everything(step_seed)
        t_start = time.perf_counter()

        # 1. rollout: dialogues with the policy, then drop the failed ones and tokenise the rest
        profiles = profiles_at(self.train_profiles, self.data_position, r.profiles_per_step, cfg.run.seed)
        episodes = self._run_dialogues(profiles, evaluation=False, seed=step_seed)
        t_rollout = time.perf_counter() - t_start
        kept, seqs, metrics = self._trainable(step, episodes)

        # 2-3. score (old/reference log-probs, values) and compute advantages
        t0 = time.perf_counter()
        scored = self._score(kept, seqs)
        self._advantages(scored)
        t_score = time.perf_counter() - t0

        # 4. update
        t0 = time.perf_counter()
        metrics.update(self._update(scored, torch.Generator().manual_seed(step_seed)))
        t_update = time.perf_counter() - t0
        metrics.update(scored.stats)

        self.step = step
        self.data_position += r.profiles_per_step
        trained_tokens = sum(len(q) for q in seqs) * cfg.algorithm.epochs
        generated = sum(ep.policy_tokens for ep in episodes)
        metrics.update(
            {
                "time/rollout_s": t_rollout,
                "time/score_s": t_score,
                "time/update_s": t_update,
                "perf/generated_tokens_per_s": generated / max(t_rollout, 1e-9),
                "perf/trained_tokens_per_s": trained_tokens / max(t_update, 1e-9),
                "data/position": self.data_position,
            }
        )
        self._evaluate_if_due(step, metrics)
        metrics["time/step_s"] = time.perf_counter() - t_start
        self.logger.log(step, metrics)
        return metrics

    def _trainable(
        self, step: int, episodes: list[Episode]
    ) -> tuple[list[Episode], list[TokenizedEpisode], dict[str, Any]]:
        """The dialogues the update trains on, tokenised, and the rollout's metrics.

        Failed dialogues are dropped; an algorithm that needs groups drops a group with a failed
        dialogue whole (verl refills it), so the survivors carry no bias.
        """
        r = self.cfg.rollout
        finished = [ep for ep in episodes if ep.status == "finished"]
        broken = {ep.profile_id for ep in episodes if ep.status != "finished"}
        grouped = self.algo.min_group_size > 1 and broken
        trainable = [ep for ep in finished if ep.profile_id not in broken] if grouped else finished
        kept, seqs, untokenisable = self._tokenise(trainable)
        metrics: dict[str, Any] = rollout_metrics(episodes, finished, r)
        metrics["rollout/dropped_with_group"] = len(finished) - len(trainable)
        metrics["rollout/untokenisable"] = untokenisable
        metrics.update(self.hack_watch(finished))
        _warn_failures(step, episodes)
        if not seqs:
            raise TrainError(
                f"step {step}: every dialogue failed ({len(episodes)} run); first error: "
                + next((ep.error or "" for ep in episodes if ep.error), "none recorded")
            )
        _stop_if_too_many_failed(step, episodes, r.max_failed_share)
        return kept, seqs, metrics

    def _evaluate_if_due(self, step: int, metrics: dict[str, Any]) -> None:
        """Every ``eval.every`` steps and after the last: the held-out score, into ``metrics``."""
        e = self.cfg.eval
        if (e.every and step % e.every == 0) or step == self.cfg.run.steps:
            t0 = time.perf_counter()
            result = self.evaluate()
            self.eval_history.append({"step": step, **result})
            metrics.update({f"eval/{k}": v for k, v in result.items()})
            metrics["time/eval_s"] = time.perf_counter() - t0

    def train(
        self,
        *,
        stop_after: int | None = None,
        time_budget_s: float | None = None,
        on_step: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Run steps until ``run.steps``; stop early (and checkpoint) after ``stop_after`` steps or once
        ``time_budget_s`` has passed — the same as an interruption, so ``--resume`` continues."""
        cfg = self.cfg
        started = time.monotonic()
        if cfg.eval.at_start and self.step == 0 and not self.eval_history:
            result = self.evaluate()
            self.eval_history.append({"step": 0, **result})
            self.logger.log(0, {f"eval/{k}": v for k, v in result.items()})
        history: list[dict[str, Any]] = []
        progress = _progress(cfg.run.progress)
        total = None if time_budget_s is not None else cfg.run.steps  # a time budget: the step count is open
        task = progress.add_task("training", total=total, completed=self.step, info="")
        # Ctrl-C: no checkpoint is written here, because an interrupted update leaves weights that
        # belong to no step; --resume continues from the last complete checkpoint instead.
        try:
            with progress:
                while self.step < cfg.run.steps:
                    metrics = self.train_step()
                    history.append(metrics)
                    if on_step is not None:
                        on_step(self.step, metrics)
                    info = f"reward {metrics['rollout/reward_mean']:.3f}"
                    if "eval/score" in metrics:
                        info += f" · eval {metrics['eval/score']:.1f}"
                    progress.update(task, completed=self.step, info=info)
                    every = cfg.run.checkpoint_every
                    stopping = (stop_after is not None and len(history) >= stop_after) or (
                        time_budget_s is not None and time.monotonic() - started >= time_budget_s
                    )
                    if (every and self.step % every == 0) or self.step == cfg.run.steps or stopping:
                        self.save()
                    if stopping:
                        break
        finally:
            self.logger.close()
        return history


def _progress(enabled: bool) -> Any:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        disable=not enabled,
    )


def _clip_and_norm(model: nn.Module, max_norm: float | None) -> float:
    params = [p for p in model.parameters() if p.grad is not None]
    if not params:
        return 0.0
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else float("inf"))
    return float(norm)


def failures_by_kind(episodes: list[Episode]) -> dict[str, int]:
    """How many dialogues failed, by ``Episode.error_kind`` (sorted, for a stable log line)."""
    counts: dict[str, int] = {}
    for ep in episodes:
        if ep.status != "finished":
            kind = ep.error_kind or "unknown"
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def _warn_failures(step: int, episodes: list[Episode]) -> None:
    """Say why dialogues failed (first error of each kind): a count alone does not tell what to fix."""
    first: dict[str, str] = {}
    for ep in episodes:
        if ep.status != "finished":
            first.setdefault(ep.error_kind or "unknown", (ep.error or "no error recorded")[:300])
    if first:
        failed = failures_by_kind(episodes)
        log.warning(
            "step %d: %d of %d dialogues failed and were left out of the update: %s",
            step,
            sum(failed.values()),
            len(episodes),
            "; ".join(f"{kind} x{failed[kind]} (first: {msg})" for kind, msg in first.items()),
        )


def _stop_if_too_many_failed(step: int, episodes: list[Episode], max_share: float) -> None:
    """Stop the run when more than ``max_share`` of a step's dialogues failed (the SAGE benchmark
    retries until it has a judgement; an update over the survivors would quietly change what is
    trained). The checkpoint before this step is intact, so ``--resume`` repeats the step."""
    failed = failures_by_kind(episodes)
    n_failed = sum(failed.values())
    if episodes and n_failed / len(episodes) > max_share:
        first = next((ep.error or "" for ep in episodes if ep.status != "finished" and ep.error), "")
        kinds = ", ".join(f"{kind} x{n}" for kind, n in failed.items())
        raise TrainError(
            f"step {step}: {n_failed} of {len(episodes)} dialogues failed ({kinds}; first: {first}), "
            f"more than rollout.max_failed_share={max_share}; fix the cause and rerun with --resume, "
            "or raise rollout.max_failed_share"
        )


def rollout_metrics(episodes: list[Episode], finished: list[Episode], r: Any) -> dict[str, Any]:
    """Reward, emotion, outcomes, turns and reply length of one step's dialogues."""
    done = outcomes(finished)
    rewards = [ep.reward if ep.reward is not None else episode_reward(ep, r.reward) for ep in finished]
    turns = [ep.assistant_turns for ep in finished]
    return {
        "rollout/dialogues": len(episodes),
        "rollout/failed": len(episodes) - len(finished),
        # by rlver.errors kind (timeout, rate_limit, appraisal_parse, ...): an outage vs a bad prompt
        "rollout/failed_by_kind": failures_by_kind(episodes),
        "rollout/reward_mean": float(np.mean(rewards)) if rewards else 0.0,
        "rollout/reward_std": float(np.std(rewards)) if rewards else 0.0,
        "rollout/emotion_final_mean": float(np.mean([ep.final_emotion for ep in finished]))
        if finished
        else 0.0,
        "rollout/success_rate": done.success_rate,
        "rollout/failure_rate": done.failure_rate,
        "rollout/turns_mean": float(np.mean(turns)) if turns else 0.0,
        "rollout/response_tokens_mean": sum(ep.policy_tokens for ep in finished) / max(sum(turns), 1),
        "rollout/format_error_rate": sum(ep.format_errors for ep in finished) / max(sum(turns), 1),
    }


def summarise_eval(episodes: list[Episode]) -> dict[str, float]:
    """The benchmark's numbers on the held-out profiles (score = mean final emotion), counted by
    ``rlver.rollout.outcomes`` as ``rlver eval``'s metrics are (0 where no dialogue finished)."""
    out = outcomes(episodes)
    return {
        "score": float(out.score) if out.score is not None else 0.0,
        "success_rate": out.success_rate,
        "failure_rate": out.failure_rate,
        "reward_mean": float(np.mean([ep.reward or 0.0 for ep in out.done])) if out.done else 0.0,
        "turns_mean": out.mean_turns,
        "failed": float(len(out.failed)),
    }
