"""The PPO/GRPO update of one scored batch, read top to bottom in CleanRL's ``ppo.py`` order.

:meth:`PPOUpdate.update` is the loop: for each epoch, shuffle the samples (``torch.randperm`` with the
step's generator) → for each minibatch, :meth:`PPOUpdate._minibatch_step`: its token and sample counts,
``zero_grad`` → for each micro-batch, :meth:`PPOUpdate._micro_batch`: collate, ``policy_forward``
(log-probs, entropy), importance weights, the algorithm's ``actor_loss`` (the one call for what differs:
surrogate, clip, entropy, KL, aggregation), ``backward``; the critic's forward, ``critic_loss``,
``backward`` → after the micro-batches: gradient clip (actor, critic), the non-finite check,
``optimisers.step()`` → the ``target_kl`` early stop → after the epochs, ``optimisers.schedule_step()``.

The maths lives in ``rlver.train.algorithms`` (``core``: surrogate, clip, KL, ``aggregate``; ``base``:
the hooks), the tensors in ``rlver.train.batch``; ``rlver.train.learner`` scores the batch, computes its
advantages and runs this update (its :class:`~rlver.train.learner.Learner` is a :class:`PPOUpdate`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from rlver.errors import RlverError
from rlver.train.algorithms import core as alg
from rlver.train.algorithms.base import ActorLossInputs, Algorithm, AlgorithmSettings, CriticLossInputs
from rlver.train.batch import MicroBatch, collate, micro_batches, policy_forward, value_forward
from rlver.train.config import OptimSettings, UpdateSettings
from rlver.train.grid import GridCheck, sampled_logprobs
from rlver.train.optim import Optimisers
from rlver.train.perf import UpdatePerf
from rlver.train.tokenize import TokenizedEpisode

log = logging.getLogger(__name__)

Tensor = torch.Tensor


class TrainError(RlverError):
    """A training run cannot start or continue (no checkpoint to resume, no usable dialogues...)."""


class Batch(Protocol):
    """What the update reads of a scored batch (``rlver.train.learner.Batch``, padded ``[B, T]``)."""

    samples: Any
    mask: Tensor
    advantages: Tensor
    returns: Tensor | None

    @property
    def seqs(self) -> list[TokenizedEpisode]: ...

    @property
    def old_logp(self) -> Tensor | None: ...

    @property
    def ref_logp(self) -> Tensor | None: ...

    @property
    def values(self) -> Tensor | None: ...

    def rows(self, x: Tensor, mb: MicroBatch) -> Tensor: ...


# ------------------------------------------------------------------------------------------- critic
class NoCritic:
    """The critic of an algorithm that trains none (GRPO): scores nothing, adds no loss, no norm."""

    def scorers(self) -> dict[str, Callable[[MicroBatch], Tensor]]:
        return {}

    def train(self) -> None:
        """Nothing to put in training mode."""

    def backward(self, mb: MicroBatch, counts: tuple[float, float], batch: Batch) -> dict[str, float]:
        return {}

    def clip_grad(self, max_norm: float | None) -> dict[str, float]:
        return {}


class ValueCritic(NoCritic):
    """A value model trained with the algorithm's ``critic_loss`` (PPO)."""

    def __init__(self, model: nn.Module, algo: Algorithm[Any], settings: AlgorithmSettings) -> None:
        self.model, self.algo, self.settings = model, algo, settings

    def scorers(self) -> dict[str, Callable[[MicroBatch], Tensor]]:
        return {"values": lambda mb: value_forward(self.model, mb)}

    def train(self) -> None:
        self.model.train()

    def backward(self, mb: MicroBatch, counts: tuple[float, float], batch: Batch) -> dict[str, float]:
        values = value_forward(self.model, mb)
        assert batch.values is not None and batch.returns is not None, "scored and advantaged with a critic"
        inputs = CriticLossInputs(
            mb.action_mask, counts[0], values, batch.rows(batch.values, mb), batch.rows(batch.returns, mb),
            counts[1],
        )  # fmt: skip
        terms = self.algo.critic_loss(inputs, self.settings)
        terms.loss.backward()
        return {key: value.item() for key, value in terms.stats.items()}

    def clip_grad(self, max_norm: float | None) -> dict[str, float]:
        return {"train/grad_norm_critic": clip_and_norm(self.model, max_norm)}


def clip_and_norm(model: nn.Module, max_norm: float | None) -> float:
    params = [p for p in model.parameters() if p.grad is not None]
    if not params:
        return 0.0
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else float("inf"))
    return float(norm)


# ------------------------------------------------------------------------------------------ learner
@dataclass
class LearnerParts:
    """What a :class:`Learner` works on: the models (``critic``/``reference`` may be absent), their
    optimisers, the settings (the algorithm's, and ``update``: how it is cut to fit memory), and where
    micro-batches go."""

    algo: Algorithm[Any]
    settings: AlgorithmSettings
    optim: OptimSettings
    policy: nn.Module
    reference: nn.Module | None
    critic: nn.Module | None
    optimisers: Optimisers
    pad_id: int
    device: torch.device
    temperature: float
    #: samples per optimiser step (``TrainConfig.minibatch_samples``, the definition verl shares)
    minibatch_samples: int = 1
    #: micro-batch tokens and logit chunks (``TrainConfig.update``): memory, not the maths
    update: UpdateSettings = field(default_factory=UpdateSettings)


class PPOUpdate:
    """The update of a :class:`~rlver.train.learner.Learner`: its parts, its critic and the state the
    update keeps from step to step (the non-finite count, the sequence-IS warning, the FLOP counter),
    set by the learner's ``__init__``."""

    parts: LearnerParts
    settings: AlgorithmSettings
    critic: NoCritic
    nonfinite_in_a_row: int
    warned_sequence_is: bool
    perf: UpdatePerf

    def minibatch_size(self) -> int:
        """Samples per optimiser step, counted as verl counts them (``TrainConfig.minibatch_prompts``):
        about one step per assistant turn when each turn is a sample, as the published think rollout's
        layout implies (inferred: the released think path cannot run as released, docs/protocol.md)."""
        return max(1, self.parts.minibatch_samples)

    # ----------------------------------------------------------------------------------- update
    def update(self, b: Batch, step: int, generator: torch.Generator) -> dict[str, float]:
        """``epochs`` passes over the batch in ``minibatches`` shuffled minibatches, one optimiser step
        each; returns the mean of every logged quantity over those steps.

        ``algorithm.target_kl`` (CleanRL's ``ppo.py``): once a minibatch's approximate KL between the
        policy that scored the batch and the one being updated passes it, the step's remaining
        minibatch updates (this epoch's and the later epochs') are skipped; ``train/early_stopped``
        says whether that happened and ``train/minibatch_updates`` how many optimiser steps ran.
        """
        a = self.settings
        n = len(b.samples)
        self._warn_long_sequence_is(b)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        #: the trained-token counters and log-prob gap, read off the micro-batches the loss consumes
        grid = GridCheck()
        self.perf.start()
        self.parts.policy.train()
        self.critic.train()
        stopped, updates = False, 0
        for _epoch in range(a.epochs):
            order = torch.randperm(n, generator=generator).tolist()
            size = self.minibatch_size()
            for start in range(0, n, size):
                stats = self._minibatch_step(b, order[start : start + size], grid, step)
                updates += 1
                for key, value in stats.items():
                    sums[key] = sums.get(key, 0.0) + value
                    counts[key] = counts.get(key, 0) + 1
                if a.target_kl is not None and stats["train/approx_kl"] > a.target_kl:
                    stopped = True
                    break
            if stopped:
                break
        out_stats = {k: sums[k] / counts[k] for k in sums}
        out_stats["train/nonfinite_skips"] = sums.get("train/nonfinite_skips", 0.0)  # a count, not a mean
        out_stats["train/optimizer_steps"] = float(updates)
        if a.target_kl is not None:
            out_stats["train/early_stopped"] = float(stopped)
            out_stats["train/minibatch_updates"] = float(updates)
        out_stats.update(grid.metrics())
        out_stats.update(self.perf.metrics())
        out_stats.update(self.parts.optimisers.schedule_step())
        return out_stats

    def _warn_long_sequence_is(self, b: Batch) -> None:
        """Once a run: sequence-level TIS with samples too long for one product of token ratios
        (``core.sequence_is_warning``; the think-full layout's samples are thousands of tokens)."""
        if self.warned_sequence_is:
            return
        message = alg.sequence_is_warning(
            b.mask, self.settings.rollout_is, self.settings.rollout_is_threshold
        )
        if message is not None:
            log.warning(message)
            self.warned_sequence_is = True

    def _minibatch_step(self, b: Batch, idx: list[int], grid: GridCheck, step: int) -> dict[str, float]:
        """One optimiser step: gradients accumulated over the minibatch's micro-batches (each loss is a
        token mean over the whole minibatch's action tokens, or what the algorithm's aggregation says
        over its samples), clipped, applied."""
        seqs = b.seqs
        n_tok = float(sum(sum(seqs[i].assistant_mask[1:]) for i in idx))
        n_seq = float(sum(1 for i in idx if any(seqs[i].assistant_mask[1:])))
        self.parts.optimisers.zero_grad()
        summed: dict[str, float] = {}
        for group in micro_batches([len(q) for q in seqs], idx, self.parts.update.micro_batch_tokens):
            for key, value in self._micro_batch(b, group, (n_tok, n_seq), grid).items():
                summed[key] = summed.get(key, 0.0) + value
        max_norm = self.parts.optim.max_grad_norm
        out = {
            "train/grad_norm_actor": clip_and_norm(self.parts.policy, max_norm),
            **self.critic.clip_grad(max_norm),
        }
        skipped = self._skip_nonfinite(out, step)
        out["train/nonfinite_skips"] = float(skipped)
        if not skipped:
            self.parts.optimisers.step()
        out.update({(key if "/" in key else f"train/{key}"): value for key, value in summed.items()})
        return out

    def _skip_nonfinite(self, norms: dict[str, float], step: int) -> bool:
        """True when a gradient norm is inf/NaN: the step is skipped (its gradients dropped), as verl's
        FSDP workers do, since one NaN step would poison the weights and every later step. Counted in
        ``train/nonfinite_skips`` (summed over the step's optimiser steps); ``optim.max_nonfinite_in_a_row``
        skipped steps in a row stop the run with a :class:`TrainError`."""
        bad = [k for k, v in norms.items() if not np.isfinite(v)]
        if not bad:
            self.nonfinite_in_a_row = 0
            return False
        self.parts.optimisers.zero_grad()
        self.nonfinite_in_a_row += 1
        limit = self.parts.optim.max_nonfinite_in_a_row
        log.warning(
            "step %d: non-finite gradient norm (%s); optimiser step skipped (%d in a row, stop at %d)",
            step, ", ".join(bad), self.nonfinite_in_a_row, limit,
        )  # fmt: skip
        if self.nonfinite_in_a_row >= limit:
            raise TrainError(
                f"step {step}: {self.nonfinite_in_a_row} optimiser steps in a row had a non-finite "
                f"gradient norm ({', '.join(bad)}); the run stops (optim.max_nonfinite_in_a_row={limit}). "
                "Lower optim.actor_lr / optim.critic_lr, or check the rewards for inf/NaN"
            )
        return True

    def _micro_batch(
        self, b: Batch, group: list[int], counts: tuple[float, float], grid: GridCheck
    ) -> dict[str, float]:
        """Forward, loss (the algorithm's terms) and backward of one micro-batch: policy, then critic.
        ``counts``: the minibatch's action tokens and samples, which every micro-batch's loss divides by."""
        a = self.settings
        n_tok, n_seq = counts
        mb = collate(b.seqs, group, self.parts.pad_id, self.parts.device)
        self.perf.add([len(b.seqs[i]) for i in group], mb.padded_tokens)
        logp, entropy = policy_forward(
            self.parts.policy, mb, self.parts.temperature, with_entropy=True,
            entropy_grad=a.entropy_coef > 0, chunk_tokens=self.parts.update.logit_chunk_tokens,
        )  # fmt: skip
        assert entropy is not None
        old_logp = b.rows(b.old_logp, mb) if b.old_logp is not None else logp.detach()
        grid.add(mb, b.seqs, old_logp)  # what this micro-batch trains, against what was sampled
        ref_logp = b.rows(b.ref_logp, mb) if b.ref_logp is not None else None
        is_weights, is_stats = self._is_weights(b, mb, old_logp, n_tok)
        actor = self.parts.algo.actor_loss(
            ActorLossInputs(
                mb.action_mask, n_tok, logp, old_logp, b.rows(b.advantages, mb), entropy, ref_logp,
                is_weights, n_seq,
            ),
            a,
        )  # fmt: skip
        actor.loss.backward()
        stats = {key: value.item() for key, value in actor.stats.items()}
        stats.update(is_stats)
        stats.update(self.critic.backward(mb, counts, b))
        return stats

    def _is_weights(
        self, b: Batch, mb: MicroBatch, old_logp: Tensor, n_tok: float
    ) -> tuple[Tensor | None, dict[str, float]]:
        """Truncated importance sampling (``algorithm.rollout_is``): the micro-batch's weights, from the
        pre-update log-probs against the sampler's, and their share of the minibatch's weight mean
        and clipped fraction (``rollout/is_*``; summed over micro-batches, so each is a minibatch mean
        over its action tokens, a token without a sampling log-prob counting as weight 1)."""
        if self.settings.rollout_is is None:
            return None, {}
        sampled = sampled_logprobs(mb, b.seqs)
        w = alg.rollout_is_weights(
            old_logp, sampled, mb.action_mask, self.settings.rollout_is, self.settings.rollout_is_threshold
        )
        norm = max(n_tok, 1.0)
        return w.weights, {
            "rollout/is_weight_mean": float(w.weights.sum()) / norm,
            "rollout/is_clipped_frac": float(w.clipped.sum()) / norm,
        }
