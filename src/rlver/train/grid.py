"""What the loss actually trains, read off the collated micro-batches (the training grid).

The trained-token counters and the sampling-vs-trainer log-prob gap used to be computed from the
tokenised episodes, upstream of collation: a bug that shifts ``action_mask`` while building the padded
batch (``rlver.train.batch.collate``) was invisible to them (GRPO seed 0 still "learned"
12.9 -> 20.3 with the shift). :class:`GridCheck` reads the micro-batch the loss consumes instead: its
``action_mask`` (the tokens that get a gradient) and the old log-probs the importance ratio uses, and
compares them with the sampling-time record of each sequence (``TokenizedEpisode.sample_logprobs``,
which says which tokens the policy sampled and with what log-prob).

* ``rollout/unsampled_trained_tokens``: trained tokens the policy never sampled;
* ``rollout/sampled_untrained_tokens``: sampled tokens that get no gradient;
* ``rollout/logprob_diff_{max,mean}``: |old log-prob in the loss − sampling-time log-prob| over the
  trained, sampled tokens (scored before any update of the step).

Both counters are 0 when the mask is right; a shifted, widened or narrowed mask shows at the first step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlver.train.batch import MicroBatch
from rlver.train.tokenize import TokenizedEpisode


def sampled_row(q: TokenizedEpisode, width: int) -> torch.Tensor:
    """``q``'s sampling-time log-probs on the shifted grid (position t scores token t + 1), ``[width]``,
    NaN where none is known."""
    sampled = torch.full((width,), float("nan"))
    if q.sample_logprobs is None:
        return sampled
    known = [(j - 1, lp) for j, lp in enumerate(q.sample_logprobs) if lp is not None and 0 < j <= width]
    if known:
        pos, lps = zip(*known, strict=True)
        sampled[list(pos)] = torch.tensor(lps, dtype=torch.float32)
    return sampled


def sampled_logprobs(mb: MicroBatch, seqs: Sequence[TokenizedEpisode]) -> torch.Tensor:
    """The micro-batch's sampling-time log-probs ``[b, t]`` on its device (NaN where unknown): what
    truncated importance sampling compares the trainer's old log-probs with."""
    width = mb.action_mask.shape[1]
    rows = [sampled_row(seqs[i], width) for i in mb.indices]
    return torch.stack(rows).to(mb.action_mask.device)


class GridCheck:
    """Accumulates the counters over one step's micro-batches, each sequence counted once (at its first
    appearance). The old log-probs a loss consumes are pre-update either way: the scoring pass's
    (off-policy), or the update's own detached ones on its single pass (on-policy)."""

    def __init__(self) -> None:
        self.unsampled_trained = 0
        self.sampled_untrained = 0
        self.diffs: list[torch.Tensor] = []
        self._seen: set[int] = set()

    def add(self, mb: MicroBatch, seqs: Sequence[TokenizedEpisode], old_logp: torch.Tensor) -> None:
        """Count micro-batch ``mb``: its rows are ``seqs[mb.indices[row]]``; ``old_logp`` ``[B, T-1]``."""
        width = mb.action_mask.shape[1]
        for row, i in enumerate(mb.indices):
            q = seqs[i]
            if i in self._seen or q.sample_logprobs is None:
                continue
            self._seen.add(i)
            sampled = sampled_row(q, width)  # what was sampled, on the shifted grid
            trained = mb.action_mask[row].detach().cpu() > 0
            was_sampled = ~torch.isnan(sampled)
            self.unsampled_trained += int((trained & ~was_sampled).sum())
            self.sampled_untrained += int((was_sampled & ~trained).sum())
            both = trained & was_sampled
            if bool(both.any()):
                consumed = old_logp[row].detach().float().cpu()
                self.diffs.append((consumed[both] - sampled[both]).abs())

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            "rollout/unsampled_trained_tokens": float(self.unsampled_trained),
            "rollout/sampled_untrained_tokens": float(self.sampled_untrained),
        }
        if self.diffs:
            diffs = torch.cat(self.diffs)
            out["rollout/logprob_diff_max"] = float(diffs.max())
            out["rollout/logprob_diff_mean"] = float(diffs.mean())
        return out
