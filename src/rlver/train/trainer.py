"""The single-machine RL trainer: a run's lifecycle around PPO (GAE + critic) or GRPO on whole
multi-turn dialogues.

Read :meth:`Trainer.train_step` top to bottom — one step, with no hidden control flow (CleanRL's rule):

1. sample profiles → run the dialogues with the model being trained against the simulated users
   (``rlver.rollout.runner.run_rollouts``; a dialogue whose user has answered sends its next request
   to the ``rollout.backend``'s engine, whose queue batches them), and append them to the run folder's
   transcript.jsonl (``rlver.train.transcript_writer``);
2. drop failed dialogues; tokenise the rest, each sample with its rewards (``rlver.train.learner``);
3. score → advantages → update on one padded batch: :class:`rlver.train.learner.Learner` (the rollout
   backend released meanwhile, then resumed and synced with the new weights: ``rlver.train.backends``);
4. log; evaluate on held-out profiles every k steps; checkpoint every k steps (:meth:`Trainer.train`).

This module holds the rest of the run: setup, the steps loop, checkpoints and ``--resume``, logging.
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
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rlver.heartbeat import activity
from rlver.interrupt import finish_first, interruptible, signalled_during, winding_down
from rlver.io import atomic_write_text
from rlver.llm.base import SamplingParams
from rlver.llm.sampling import scoring_temperature
from rlver.profiles.overlap import training_profiles
from rlver.profiles.schema import Profile
from rlver.profiles.sets import load_profile_set
from rlver.records import Episode
from rlver.redaction import mask_secret_values, redacted
from rlver.rollout.batching import RolloutTimes
from rlver.rollout.failed_groups import trainable_episodes
from rlver.rollout.hackwatch import HackWatch
from rlver.rollout.runner import run_rollouts
from rlver.simulator.base import UserSimulator
from rlver.simulator.factory import build_simulator
from rlver.train.algorithms import get_algorithm
from rlver.train.backends import build_rollout_backend
from rlver.train.checkpoint import (
    latest_checkpoint,
    load_trainer_state,
    rng_state,
    save_checkpoint,
    set_rng_state,
    step_dir_name,
)
from rlver.train.config import TrainConfig
from rlver.train.learner import Learner, LearnerParts, Sample, TrainError, make_samples
from rlver.train.loading import build_models
from rlver.train.logger import MetricsLogger
from rlver.train.optim import Optimisers
from rlver.train.step_metrics import (
    rollout_metrics,
    stop_if_too_many_failed,
    summarise_eval,
    warn_failures,
    warn_logprob_gap,
)
from rlver.train.transcript_writer import (
    REPLY_COLUMNS,
    REPLY_TAG,
    TrainingTranscript,
    reply_rows,
    training_manifest,
)

log = logging.getLogger(__name__)

#: how the held-out evaluation's phase begins (``activity.phase``): a Ctrl-C during it cuts it short
EVALUATION_PHASE = "held-out evaluation"


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
        self.learner = Learner(
            LearnerParts(
                algo=self.algo, settings=config.algorithm, optim=config.optim, policy=self.policy,
                reference=self.reference, critic=self.critic, optimisers=self.optimisers,
                pad_id=int(self.tokenizer.pad_token_id), device=self.device,
                temperature=scoring_temperature(config.rollout.temperature),
                minibatch_samples=config.minibatch_samples(), update=config.update,
            )
        )  # fmt: skip
        #: what the rollouts sample with (``rollout.backend``): released before each update, resumed
        #: and synced after it (rlver.train.backends.base)
        self.backend = build_rollout_backend(config, self.policy, self.tokenizer, self.device)
        self.chat = self.backend.chat
        self.simulator = build_simulator(config.simulator)
        #: the held-out evaluation's user: the one ``rlver eval`` builds (``TrainConfig.eval_simulator``)
        eval_spec = config.eval_simulator()
        self.eval_simulator = self.simulator if eval_spec == config.simulator else build_simulator(eval_spec)
        self.train_profiles, self.eval_profiles = self._load_profiles()
        #: the offline user's veto detectors on the policy's replies, every step (``hack/*`` metrics)
        self.hack_watch = HackWatch(self.train_profiles)

        self.step = 0
        self.data_position = 0
        #: after a Ctrl-C: what became of the step in flight and what was saved (``rlver train`` says it)
        self.interrupt_note = ""
        #: a Ctrl-C cut the last finished step's held-out evaluation short (``train_step``)
        self.evaluation_cut = False
        #: the RNG states at the end of the last finished step: a checkpoint written after an
        #: abandoned step holds these, as one written right after the step would
        self.rng_at_step_end: dict[str, Any] | None = None
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
        #: each due step's dialogues, in the run folder's transcript.jsonl (cut back on resume)
        self.transcript = TrainingTranscript(
            self.out,
            training_manifest(
                config, self.out, agent=self.backend.describe(),
                sampling=self.backend.sampling_settings(self._sampling(config.rollout.temperature)),
                simulator=self.simulator.describe(), reply_cut=self.simulator.cuts_reply,
            ),
            every=config.run.transcript_every,
            resume_step=self.step if checkpoint else None,
        )  # fmt: skip

    @property
    def nonfinite_in_a_row(self) -> int:
        """Optimiser steps skipped in a row for a non-finite gradient norm (the learner counts them)."""
        return self.learner.nonfinite_in_a_row

    @nonfinite_in_a_row.setter
    def nonfinite_in_a_row(self, value: int) -> None:
        self.learner.nonfinite_in_a_row = value

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
        train_profiles = training_profiles(cfg.rollout.profiles, cfg.rollout.exclude_personas_of)
        if not train_profiles:
            raise TrainError(f"rollout.profiles={cfg.rollout.profiles!r}: no profiles")
        eval_profiles = load_profile_set(cfg.eval.profiles)
        return train_profiles, eval_profiles[: cfg.eval.limit] if cfg.eval.limit else eval_profiles

    def _write_run_settings(self) -> None:
        """The sampling actually used (every setting explicit, as the backend states it) and the config."""
        cfg = self.cfg
        atomic_write_text(
            self.out / "sampling.json",
            json.dumps(
                {
                    "rollout": self.backend.sampling_settings(self._sampling(cfg.rollout.temperature)),
                    "eval": self.backend.sampling_settings(self._sampling(cfg.eval.temperature)),
                    "agent_seed": "rollout.runner.agent_seed(step seed, dialogue seed, turn)",
                    "sampler": self.backend.sampler(),
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
    def _trainer_state(self, rng: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "step": self.step,
            "data_position": self.data_position,
            "eval_history": self.eval_history,
            **self.optimisers.state_dict(),
            "rng": rng if rng is not None else rng_state(),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.data_position = int(state["data_position"])
        self.eval_history = list(state.get("eval_history", []))
        self.optimisers.load_state_dict(state)
        set_rng_state(state["rng"])
        self.rng_at_step_end = state["rng"]

    def save(self, *, rng: dict[str, Any] | None = None) -> Path:
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
            trainer_state=self._trainer_state(rng),
            info=info,
            keep=self.cfg.run.keep_checkpoints,
        )

    # ----------------------------------------------------------------------------------- rollout
    def _sampling(self, temperature: float) -> SamplingParams:
        r = self.cfg.rollout
        return SamplingParams(temperature=temperature, top_p=r.top_p, max_tokens=r.max_new_tokens)

    def _run_dialogues(
        self, profiles: list[Profile], *, evaluation: bool, seed: int, times: RolloutTimes | None = None
    ) -> list[Episode]:
        self.policy.eval()
        temperature = self.cfg.eval.temperature if evaluation else self.cfg.rollout.temperature
        simulator = self.eval_simulator if evaluation else self.simulator
        with torch.no_grad():
            return asyncio.run(
                self._closing(
                    simulator,
                    run_rollouts(
                        self.chat,
                        simulator,
                        profiles,
                        self.cfg.rollout_config(evaluation=evaluation),
                        self._sampling(temperature),
                        seed=seed,
                        times=times,
                    ),
                )
            )

    async def _closing(self, simulator: UserSimulator, rollouts: Awaitable[list[Episode]]) -> list[Episode]:
        """Run ``rollouts``, then close ``simulator``'s HTTP client on the same event loop.

        Each batch runs in its own ``asyncio.run``; a client left open when its loop ends is never
        closed and aiohttp prints "Unclosed client session" at exit (after a failed run, too).
        The client is opened again on the next batch's loop.
        """
        try:
            return await rollouts
        finally:
            closer = getattr(simulator, "aclose", None)
            if closer is not None:
                await closer()

    def evaluate_episodes(self) -> list[Episode]:
        """The held-out dialogues (fixed seed; the training random stream is left untouched)."""
        dialogues = len(self.eval_profiles) * self.cfg.eval.samples_per_profile
        activity.set_phase(f"{EVALUATION_PHASE} of {dialogues} dialogues")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.eval.seed)
            return self._run_dialogues(self.eval_profiles, evaluation=True, seed=self.cfg.eval.seed)

    def evaluate(self) -> dict[str, float | None]:
        """Mean final emotion (and friends) on the held-out profiles."""
        return summarise_eval(self.evaluate_episodes())

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
        activity.set_phase(
            f"step {step}: rollout of {len(profiles) * r.n_per_profile} dialogues "
            f"({len(profiles)} profiles x {r.n_per_profile})"
        )
        times = RolloutTimes()
        episodes = self._run_dialogues(profiles, evaluation=False, seed=step_seed, times=times)
        t_rollout = time.perf_counter() - t_start
        activity.set_phase(f"step {step}: tokenising {len(episodes)} dialogues")
        self.backend.release()  # a co-located engine frees its memory for the update
        self.transcript.record(step, episodes)  # before the update: a step that fails keeps its dialogues
        samples, metrics = self._trainable(step, episodes)

        # 2-3. score (old/reference log-probs, values) and compute advantages, on one padded batch
        t0 = time.perf_counter()
        activity.set_phase(f"step {step}: scoring {len(samples)} samples")
        batch = self.learner.score(samples)
        t_score = time.perf_counter() - t0

        # 4. update, evaluation and log: a Ctrl-C from here on lets the step finish (the weights would
        # otherwise belong to no step), then stops; one before this point abandons the step instead.
        # The held-out evaluation is not part of the step: a Ctrl-C cuts it short (interruptible).
        with finish_first():
            t0 = time.perf_counter()
            activity.set_phase(f"step {step}: update")
            metrics.update(self.learner.update(batch, step, torch.Generator().manual_seed(step_seed)))
            warn_logprob_gap(step, metrics, cfg.model.dtype)  # the sampler and the trainer disagree
            self.backend.resume()  # before the evaluation and the next rollout sample again
            self.backend.sync(self.policy)  # a backend with its own copy of the weights takes the new ones
            t_update = time.perf_counter() - t0
            metrics.update(batch.stats)

            self.step = step
            self.data_position += r.profiles_per_step
            trained_tokens = sum(len(s.seq) for s in samples) * cfg.algorithm.epochs
            generated = sum(ep.policy_tokens for ep in episodes)
            metrics.update(
                {
                    "time/rollout_s": t_rollout,
                    # within the rollout: generating, waiting on users, and the policy idle meanwhile
                    "time/policy_s": times.policy_s,
                    "time/simulator_s": times.simulator_s,
                    "time/policy_idle_s": times.policy_idle_s,
                    "time/score_s": t_score,
                    "time/update_s": t_update,
                    "perf/generated_tokens_per_s": generated / max(t_rollout, 1e-9),
                    "perf/trained_tokens_per_s": trained_tokens / max(t_update, 1e-9),
                    "data/position": self.data_position,
                }
            )
            try:
                with interruptible():
                    self._evaluate_if_due(step, metrics)
            except KeyboardInterrupt:  # the step is whole: it is logged and saved without its evaluation
                self.evaluation_cut = signalled_during().startswith(EVALUATION_PHASE)
                raise
            finally:
                metrics["time/step_s"] = time.perf_counter() - t_start
                self._log_replies(step, episodes)
                self.logger.log(step, metrics)
                self.rng_at_step_end = rng_state()  # what a checkpoint of this step holds
        return metrics

    def _log_replies(self, step: int, episodes: list[Episode]) -> None:
        """Every ``run.reply_table_every`` steps: a few sample replies to TensorBoard / W&B."""
        every = self.cfg.run.reply_table_every
        if every and step % every == 0:
            self.logger.log_table(step, REPLY_TAG, REPLY_COLUMNS, reply_rows(episodes))

    def _trainable(self, step: int, episodes: list[Episode]) -> tuple[list[Sample], dict[str, Any]]:
        """The samples the update trains on (tokenised, with their rewards) and the rollout's metrics.

        Which dialogues: ``rlver.rollout.failed_groups`` (an algorithm that needs groups drops a group
        with a failed dialogue whole).
        """
        r = self.cfg.rollout
        finished = [ep for ep in episodes if ep.status == "finished"]
        trainable = trainable_episodes(episodes, self.algo.min_group_size)
        samples, untokenisable = make_samples(trainable, self.tokenizer, r, self.cfg.model.max_length)
        metrics: dict[str, Any] = rollout_metrics(episodes, finished)
        metrics["rollout/dropped_with_group"] = len(finished) - len(trainable)
        metrics["rollout/untokenisable"] = untokenisable
        metrics["rollout/samples"] = len(samples)  # one per dialogue, or per assistant turn (visible)
        metrics.update(self.hack_watch(finished))
        warn_failures(step, episodes)
        if not samples:
            raise TrainError(
                f"step {step}: every dialogue failed ({len(episodes)} run); first error: "
                + next((ep.error or "" for ep in episodes if ep.error), "none recorded")
            )
        stop_if_too_many_failed(step, episodes, r.max_failed_share)
        return samples, metrics

    def _evaluation_due(self, step: int) -> bool:
        """Whether step ``step`` ends with a held-out evaluation: every ``eval.every`` steps, and the last."""
        every = self.cfg.eval.every
        return bool(every and step % every == 0) or step == self.cfg.run.steps

    def _evaluate_missed(self) -> None:
        """On resume: the held-out evaluation the last finished step was due and never got (a Ctrl-C
        in its update skips it, one in it cuts it short), run now and logged at that step, so
        ``eval_history`` has no hole. It runs where the uninterrupted run ran it (after the step, before
        the next), seeded the same (``evaluate_episodes`` leaves the training random stream alone)."""
        step = self.step
        if step == 0 or not self._evaluation_due(step) or any(e["step"] == step for e in self.eval_history):
            return
        t0 = time.perf_counter()
        result = self.evaluate()
        self.eval_history.append({"step": step, **result})
        self.logger.log(
            step, {**{f"eval/{k}": v for k, v in result.items()}, "time/eval_s": time.perf_counter() - t0}
        )
        self.evaluation_cut = False

    def _evaluate_if_due(self, step: int, metrics: dict[str, Any]) -> None:
        """Every ``eval.every`` steps and after the last: the held-out score, into ``metrics``."""
        if self._evaluation_due(step):
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
        # Ctrl-C: the step in flight is abandoned before its update or finished once the update began
        # (train_step), then the last finished step is checkpointed (_save_interrupted).
        try:
            self._evaluate_missed()  # a resumed run's last step, if its evaluation was skipped or cut
            with progress:
                while self.step < cfg.run.steps:
                    metrics = self._step_or_save_on_interrupt()
                    history.append(metrics)
                    if on_step is not None:
                        on_step(self.step, metrics)
                    info = f"reward {metrics['rollout/reward_mean']:.3f}"
                    if metrics.get("eval/score") is not None:
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
        except KeyboardInterrupt:
            if not self.interrupt_note:  # between steps: a periodic checkpoint, the progress bar
                self.interrupt_note = f"interrupted after step {self.step}" + self._save_interrupted()
            raise
        finally:
            self.logger.close()
        return history

    def _step_or_save_on_interrupt(self) -> dict[str, Any]:
        """:meth:`train_step`; after a Ctrl-C in it, checkpoint the last finished step and re-raise."""
        before = self.step
        try:
            return self.train_step()
        except KeyboardInterrupt:
            # what was running when the signal came, not what ran last (the update's signal is raised
            # once it has finished, the evaluation's after the step's metrics were written)
            doing = (signalled_during() or activity.phase).removeprefix(f"step {before + 1}: ")
            if self.step == before:
                fate = f"step {before + 1} was abandoned (the signal came during its {doing})"
            elif self.evaluation_cut:
                fate = f"step {self.step} finished; the signal cut its {doing} short"
            else:
                fate = f"step {self.step} finished first (the signal came during its {doing})"
            self.interrupt_note = fate + self._save_interrupted()
            raise

    def _save_interrupted(self) -> str:
        """Checkpoint the last finished step unless it is on disk already; say what was written.

        The RNG states saved are those at the end of that step, as a checkpoint written right after it
        holds, so ``--resume`` from here repeats an uninterrupted run bit for bit.
        """
        if self.step == 0:
            return "; no step had finished, so there is nothing to save"
        done = latest_checkpoint(self.ckpt_root)
        if done is not None and done.name == step_dir_name(self.step):
            return f"; step {self.step} was saved already ({done})"
        with winding_down():
            path = self.save(rng=self.rng_at_step_end)
        return f"; saved step {self.step} to {path}"


def _progress(enabled: bool) -> Any:
    """The bar for a terminal; off when stdout is not one (a log gets ``rlver train``'s plain lines,
    and a bar there only printed its last state once the run was over)."""
    from rich.console import Console

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        disable=not enabled or not Console().is_terminal,
    )
