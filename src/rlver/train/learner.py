"""What one RL step does with its dialogues: score → advantages → update, on ONE padded batch.

Read :meth:`Learner.score` then :meth:`Learner.update` top to bottom; together they are the algorithm
(the trainer around them only runs the dialogues, logs and checkpoints):

1. :func:`make_samples`: the dialogues that finished, tokenised (one sequence per dialogue, or one per
   assistant turn in the thought-free layout), each with its rewards, computed here once from the
   episode by ``rlver.env.rewards.sample_rewards`` (the function verl's agent loop uses too);
2. :meth:`Learner.score`: the samples padded once into ``[B, T]`` tensors on the shifted grid
   (:class:`Batch`); without gradients, the old log-probs, the reference log-probs (a KL term) and the
   critic's values (PPO); then the algorithm's advantages (``rlver.train.algorithms``);
3. :meth:`Learner.update`, inherited from ``rlver.train.update.PPOUpdate`` (read the loop there, top
   to bottom): ``epochs`` × (samples / mini-batch size) optimiser steps, micro-batched by token budget
   in length order (little padding computed; ``perf/padding_share``, ``perf/mfu``), each micro-batch a
   row slice of the same padded tensors; stops early once the approximate KL of a minibatch passes
   ``algorithm.target_kl`` (CleanRL's ``ppo.py``).

The critic is decided once: ``ValueCritic`` when the algorithm trains one, else ``NoCritic`` (both in
``rlver.train.update``), which scores nothing and adds no loss, so nothing asks whether there is a critic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from rlver.env.dialogue import per_turn_samples
from rlver.env.rewards import sample_rewards
from rlver.records import Episode
from rlver.train.algorithms import core as alg
from rlver.train.algorithms.base import AdvantageInputs
from rlver.train.batch import MicroBatch, collate, micro_batches, policy_forward
from rlver.train.config import RolloutSettings
from rlver.train.context_budget import cut_to_turns
from rlver.train.perf import UpdatePerf
from rlver.train.tokenize import TokenizationError, TokenizedEpisode, episode_to_tensors, episode_turn_samples
from rlver.train.update import LearnerParts, NoCritic, PPOUpdate, TrainError, ValueCritic

__all__ = ["Batch", "Learner", "LearnerParts", "Sample", "TrainError", "make_samples", "pad_batch"]

Tensor = torch.Tensor


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


class Learner(PPOUpdate):
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
