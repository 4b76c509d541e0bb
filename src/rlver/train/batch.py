"""Tokenised dialogues → padded tensors, micro-batches by token budget, and the model forward passes.

Per-token quantities of a dialogue of ``L`` tokens live on the ``L - 1`` *predictions*: position ``t``
holds what the model said about token ``t + 1`` (its log-prob, the value of the prefix ending at
``t``, whether token ``t + 1`` is an action). Everything here uses that "shifted" grid, so a turn's last
token at index ``e`` of ``input_ids`` is position ``e - 1`` of the grid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from rlver.train.algorithms.core import entropy_from_logits, logprobs_from_logits
from rlver.train.tokenize import TokenizedEpisode


@dataclass
class MicroBatch:
    """``B`` right-padded sequences: ``input_ids``/``attention_mask`` ``[B, T]``, ``action_mask`` ``[B, T-1]``."""

    indices: list[int]  # positions in the step's list of sequences
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    action_mask: torch.Tensor

    @property
    def n_tokens(self) -> int:
        return int(self.attention_mask.sum().item())


def collate(
    seqs: Sequence[TokenizedEpisode], indices: Sequence[int], pad_id: int, device: torch.device
) -> MicroBatch:
    chosen = [seqs[i] for i in indices]
    width = max(len(s) for s in chosen)
    ids = torch.full((len(chosen), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(chosen), width), dtype=torch.long)
    amask = torch.zeros((len(chosen), width), dtype=torch.float32)
    for row, s in enumerate(chosen):
        n = len(s)
        ids[row, :n] = torch.tensor(s.input_ids)
        attn[row, :n] = 1
        amask[row, :n] = torch.tensor(s.assistant_mask, dtype=torch.float32)
    return MicroBatch(list(indices), ids.to(device), attn.to(device), amask[:, 1:].to(device))


def micro_batches(lengths: Sequence[int], indices: Sequence[int], token_budget: int) -> list[list[int]]:
    """Split ``indices`` (in order) into groups whose padded size ``n * max_len`` fits the budget.

    A sequence longer than the budget gets a micro-batch of its own (it cannot be split further).
    """
    groups: list[list[int]] = []
    current: list[int] = []
    width = 0
    for i in indices:
        new_width = max(width, lengths[i])
        if current and new_width * (len(current) + 1) > token_budget:
            groups.append(current)
            current, width = [], 0
            new_width = lengths[i]
        current.append(i)
        width = new_width
    if current:
        groups.append(current)
    return groups


def pad_rows(rows: Sequence[torch.Tensor], width: int | None = None) -> torch.Tensor:
    """Stack 1-D tensors of different lengths into ``[B, width]``, zero-padded on the right."""
    width = width if width is not None else max(r.numel() for r in rows)
    out = torch.zeros((len(rows), width), dtype=rows[0].dtype if rows else torch.float32)
    for i, r in enumerate(rows):
        out[i, : r.numel()] = r
    return out


def unpad_rows(x: torch.Tensor, lengths: Sequence[int]) -> list[torch.Tensor]:
    return [x[i, :n].clone() for i, n in enumerate(lengths)]


def policy_forward(
    model: nn.Module,
    mb: MicroBatch,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of every next token (``[B, T-1]``) and optionally the entropy at each position.

    Logits are divided by the sampling temperature: the ratio must compare the distribution the
    tokens were sampled from. ``entropy_grad=False`` computes the entropy outside autograd, for a
    statistic that is not part of the loss: its graph would otherwise keep a ``[B, T, vocab]``
    softmax alive until the backward pass.
    """
    out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)
    logits = out.logits[:, :-1].float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logp = logprobs_from_logits(logits, mb.input_ids[:, 1:])
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = entropy_from_logits(logits)
    return logp, entropy


def value_forward(critic: nn.Module, mb: MicroBatch) -> torch.Tensor:
    """``[B, T-1]``: the value of the prefix that ends at each position."""
    return critic(mb.input_ids, mb.attention_mask)[:, :-1]
