"""What one RL step does with its dialogues: score → advantages → update, on ONE padded batch.

Read :meth:`Learner.score` then :meth:`Learner.update` top to bottom; together they are the algorithm
(the trainer around them only runs the dialogues, logs and checkpoints):

1. :func:`make_samples`: the dialogues that finished, tokenised (one sequence per dialogue, or one per
   assistant turn in the thought-free layout), each with its rewards, computed here once from the
   episode by ``rlver.env.rewards.sample_rewards`` (the function verl's agent loop uses too);
2. :meth:`Learner.score`: the samples padded once into ``[B, T]`` tensors on the shifted grid
   (:class:`Batch`); without gradients, the old log-probs, the reference log-probs (a KL term) and the
   critic's values (PPO); then the algorithm's advantages (``rlver.train.algorithms``);
3. :meth:`Learner.update`: ``epochs`` × (samples / mini-batch size) optimiser steps, micro-batched by token budget
   in length order (little padding computed; ``perf/padding_share``, ``perf/mfu``), each micro-batch a row
   slice of the same padded tensors; stops early once the approximate KL of a
   minibatch passes ``algorithm.target_kl`` (CleanRL's ``ppo.py``).

The critic is decided once: :class:`ValueCritic` when the algorithm trains one, else :class:`NoCritic`,
which scores nothing and adds no loss, so nothing below asks whether there is a critic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from rlver.env.dialogue import per_turn_samples
from rlver.env.rewards import sample_rewards
from rlver.errors import RlverError
from rlver.records import Episode
from rlver.train.algorithms import core as alg
from rlver.train.algorithms.base import (
    ActorLossInputs,
    AdvantageInputs,
    Algorithm,
    AlgorithmSettings,
    CriticLossInputs,
)
from rlver.train.batch import MicroBatch, collate, micro_batches, policy_forward, value_forward
from rlver.train.config import OptimSettings, RolloutSettings, UpdateSettings
from rlver.train.context_budget import cut_to_turns
from rlver.train.grid import GridCheck, sampled_logprobs
from rlver.train.optim import Optimisers
from rlver.train.perf import UpdatePerf
from rlver.train.tokenize import TokenizationError, TokenizedEpisode, episode_to_tensors, episode_turn_samples

log = logging.getLogger(__name__)

Tensor = torch.Tensor


class TrainError(RlverError):
    """A training run cannot start or continue (no checkpoint to resume, no usable dialogues...)."""


# ------------------------------------------------------------------------------------------ samples
@dataclass
class Sample:
    """One training sequence: the dialogue it came from, its tokens, and what it earns.

    ``rewards`` holds one value per assistant-turn end the sequence holds, in order (placed on those
    turns' last tokens); their sum is the sample's score (GRPO's per-dialogue reward).
    """

    episode: Episode
    seq: TokenizedEpisode
    rewards: list[float]


def make_samples(
    episodes: Sequence[Episode], tokenizer: Any, rollout: RolloutSettings, max_length: int
) -> tuple[list[Sample], int]:
    """The training samples of ``episodes`` and how many dialogues could not be tokenised.

    ``think_context: visible`` gives one sample per assistant turn, earning the reward from its turn on;
    otherwise one per dialogue, cut to the turns that fit ``max_length`` (it then ends "context_full",
    as under verl).
    """
    samples: list[Sample] = []
    dropped = 0
    per_turn = per_turn_samples(rollout.think, rollout.think_context)
    for ep in episodes:
        try:
            if per_turn:
                for q in episode_turn_samples(ep, tokenizer, max_length=max_length):
                    turn = q.meta.get("turn") if q.meta.get("per_turn") else None
                    samples.append(Sample(ep, q, sample_rewards(ep, rollout.reward, turn=turn)))
                continue
            q = episode_to_tensors(ep, tokenizer, max_length=max_length)
            cut = cut_to_turns(ep, q.kept_turns)  # scored as cut, as verl scores a dialogue it stopped
            samples.append(Sample(cut, q, sample_rewards(cut, rollout.reward, kept_turns=q.kept_turns)))
        except TokenizationError:
            dropped += 1
    return samples, dropped


# -------------------------------------------------------------------------------------------- batch
@dataclass
class Batch:
    """A step's samples as padded ``[B, T]`` tensors on the shifted grid (``T`` = longest − 1), CPU.

    Padded once, here; every micro-batch of the update is a row slice (:meth:`rows`). Positions past a
    row's end are 0 in every tensor. ``old_logp`` is ``None`` when the update is on-policy (its own
    detached log-probs are then the old ones), ``ref_logp`` without a KL term, ``values`` and
    ``returns`` without a critic.
    """

    samples: list[Sample]
    mask: Tensor
    token_rewards: Tensor
    scores: Tensor
    groups: Tensor
    #: which dialogue each sample comes from ``[B]``, and each action token's assistant turn ``[B, T]``
    #: (-1 elsewhere): where an algorithm that credits turns finds them (``AdvantageInputs``)
    dialogues: Tensor = field(default_factory=lambda: torch.empty(0))
    turn_index: Tensor = field(default_factory=lambda: torch.empty(0))
    scored: dict[str, Tensor] = field(default_factory=dict)
    advantages: Tensor = field(default_factory=lambda: torch.empty(0))
    returns: Tensor | None = None
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def seqs(self) -> list[TokenizedEpisode]:
        return [s.seq for s in self.samples]

    @property
    def old_logp(self) -> Tensor | None:
        return self.scored.get("old_logp")

    @property
    def ref_logp(self) -> Tensor | None:
        return self.scored.get("ref_logp")

    @property
    def values(self) -> Tensor | None:
        return self.scored.get("values")

    @staticmethod
    def rows(x: Tensor, mb: MicroBatch) -> Tensor:
        """``x``'s rows of micro-batch ``mb``, cut to its width, on its device."""
        return x[mb.indices, : mb.action_mask.shape[1]].to(mb.action_mask.device)


def pad_batch(samples: list[Sample]) -> Batch:
    """The samples' action masks, per-token rewards, scores and group ids as one padded batch."""
    seqs = [s.seq for s in samples]
    width = max(len(q) for q in seqs) - 1
    mask = torch.zeros((len(seqs), width), dtype=torch.float32)
    for i, q in enumerate(seqs):
        mask[i, : len(q) - 1] = torch.tensor(q.assistant_mask[1:], dtype=torch.float32)
    rewards = alg.token_rewards(
        [s.rewards for s in samples],
        [[e - 1 for e in q.turn_end_positions] for q in seqs],
        (len(seqs), width),
    )
    # a sample's score is what it earns: the episode's reward, or a turn sample's reward from its turn on
    scores = torch.tensor([float(sum(s.rewards)) for s in samples])
    groups = [s.episode.profile_id for s in samples]
    ids = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    dialogues = {key: i for i, key in enumerate(dict.fromkeys(id(s.episode) for s in samples))}
    return Batch(
        samples, mask, rewards, scores, torch.tensor([ids[g] for g in groups]),
        dialogues=torch.tensor([dialogues[id(s.episode)] for s in samples]),
        turn_index=turn_indices(seqs, mask),
    )  # fmt: skip


def turn_indices(seqs: list[TokenizedEpisode], mask: Tensor) -> Tensor:
    """``[B, T]``: the assistant turn (0, 1, ...) each action token of the padded batch belongs to, -1
    off the action tokens. A per-turn sample (``meta["turn"]``) is that one turn; a whole dialogue's
    turn ``k`` is its action tokens up to the ``k``-th turn end (position ``end - 1`` on the shifted
    grid), after the one before; action tokens after its last turn end (none in what ``make_samples``
    builds) count to its last turn."""
    out = torch.full(mask.shape, -1, dtype=torch.long)
    for i, q in enumerate(seqs):
        positions = (mask[i] > 0).nonzero(as_tuple=True)[0]
        if q.meta.get("per_turn"):
            out[i, positions] = int(q.meta["turn"])
            continue
        ends = torch.tensor(q.turn_end_positions) - 1  # every trained sample has a turn end
        out[i, positions] = torch.searchsorted(ends, positions).clamp(max=len(ends) - 1)
    return out


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


class Learner:
    """Score → advantages → update of one step's samples (see the module docstring)."""

    def __init__(self, parts: LearnerParts) -> None:
        self.parts = parts
        self.settings = parts.settings
        self.critic: NoCritic = (
            ValueCritic(parts.critic, parts.algo, parts.settings) if parts.critic is not None else NoCritic()
        )
        #: optimiser steps skipped in a row for a non-finite gradient norm (``_skip_nonfinite``)
        self.nonfinite_in_a_row = 0
        #: sequence-level TIS over long samples is warned about once a run (``_warn_long_sequence_is``)
        self.warned_sequence_is = False
        #: the update's model FLOPs, padding and time: ``perf/mfu`` (on a known card), ``perf/padding_share``
        trained = [parts.policy] + ([parts.critic] if parts.critic is not None else [])
        self.perf = UpdatePerf(trained, parts.device)

    def minibatch_size(self) -> int:
        """Samples per optimiser step, counted as verl counts them (``TrainConfig.minibatch_prompts``):
        about one step per assistant turn when each turn is a sample, as the published think rollout's
        layout implies (inferred: the released think path cannot run as released, docs/protocol.md)."""
        return max(1, self.parts.minibatch_samples)

    def minibatch_count(self, n_samples: int) -> int:
        """Optimiser steps in one epoch over ``n_samples`` samples (see :meth:`minibatch_size`)."""
        return max(1, -(-n_samples // self.minibatch_size()))

    def on_policy(self, n_samples: int) -> bool:
        """One optimiser step per batch and no KL term: the policy that scores a batch is the one that
        generated it, so old log-probs equal the update's own (detached) and need no forward pass of
        their own (as TRL's GRPOTrainer and verl do). Saves a third of the update's compute."""
        a = self.settings
        return a.epochs == 1 and self.minibatch_count(n_samples) == 1 and a.kl_coef == 0

    def _scorers(self, n_samples: int) -> dict[str, Callable[[MicroBatch], Tensor]]:
        """The per-token quantities the batch needs before the update, each a forward pass."""
        out: dict[str, Callable[[MicroBatch], Tensor]] = {}
        if not self.on_policy(n_samples):
            out["old_logp"] = lambda mb: self._logp(self.parts.policy, mb)
        if self.settings.kl_coef > 0:
            out["ref_logp"] = self._reference_logp
        out.update(self.critic.scorers())
        return out

    def _logp(self, model: nn.Module, mb: MicroBatch) -> Tensor:
        return policy_forward(
            model, mb, self.parts.temperature, chunk_tokens=self.parts.update.logit_chunk_tokens
        )[0]

    def _reference_logp(self, mb: MicroBatch) -> Tensor:
        if self.parts.reference is not None:
            return self._logp(self.parts.reference, mb)
        with self.parts.policy.disable_adapter():  # type: ignore[operator]
            return self._logp(self.parts.policy, mb)

    # ---------------------------------------------------------------------------------- scoring
    @torch.no_grad()
    def score(self, samples: list[Sample]) -> Batch:
        """The padded batch with its old/reference log-probs and values, and its advantages."""
        self.parts.policy.eval()
        batch = pad_batch(samples)
        scorers = self._scorers(len(samples))
        seqs = batch.seqs
        lengths = [len(q) for q in seqs]
        batch.scored = {name: torch.zeros_like(batch.mask) for name in scorers}
        if scorers:
            for group in micro_batches(lengths, range(len(seqs)), self.parts.update.micro_batch_tokens):
                mb = collate(seqs, group, self.parts.pad_id, self.parts.device)
                for name, scorer in scorers.items():
                    out = scorer(mb)
                    for row, i in enumerate(group):
                        batch.scored[name][i, : lengths[i] - 1] = out[row, : lengths[i] - 1].float().cpu()
        self._advantages(batch)
        return batch

    def _advantages(self, b: Batch) -> None:
        """Fill ``b.advantages`` (and ``b.returns`` with a critic), on the batch's own grid."""
        inputs = AdvantageInputs(
            b.mask, b.token_rewards, b.scores, b.groups, b.values, b.old_logp, b.ref_logp,
            dialogues=b.dialogues, turn_index=b.turn_index,
            per_turn=any(s.seq.meta.get("per_turn") for s in b.samples),
        )  # fmt: skip
        # the KL goes where the algorithm's kl_in says: here into the rewards, or in actor_loss
        result = self.parts.algo.advantages(
            self.parts.algo.with_reward_kl(inputs, self.settings), self.settings
        )
        b.stats.update(result.stats)
        within = torch.zeros_like(b.mask, dtype=torch.bool)  # positions inside each row's sequence
        for i, q in enumerate(b.seqs):
            within[i, : len(q) - 1] = True
        b.advantages = torch.where(within, result.advantages, 0.0)
        if result.returns is not None:
            b.returns = torch.where(within, result.returns, 0.0)
        # None only when on-policy, i.e. without a KL term: then there is no reference either.
        if b.ref_logp is not None and b.old_logp is not None:
            b.stats["train/kl_ref"] = alg.masked_mean(alg.kl_k1(b.old_logp, b.ref_logp), b.mask).item()
        b.stats["train/advantage_abs_mean"] = alg.masked_mean(b.advantages.abs(), b.mask).item()

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
