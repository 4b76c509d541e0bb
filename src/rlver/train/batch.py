"""Tokenised dialogues → padded tensors, length-sorted micro-batches by token budget, and the forward passes.

Per-token quantities of a dialogue of ``L`` tokens live on the ``L - 1`` *predictions*: position ``t``
holds what the model said about token ``t + 1`` (its log-prob, the value of the prefix ending at
``t``, whether token ``t + 1`` is an action). Everything here uses that "shifted" grid, so a turn's last
token at index ``e`` of ``input_ids`` is position ``e - 1`` of the grid.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from rlver.llm.precision import autocast_dtype
from rlver.llm.sampling import scoring_temperature
from rlver.train.algorithms.core import entropy_from_logits, logprobs_from_logits
from rlver.train.config import LOGIT_CHUNK_TOKENS
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

    @property
    def padded_tokens(self) -> int:
        """Positions the model computes, padding included (``rows x width``)."""
        return int(self.input_ids.numel())


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


def micro_batches(
    lengths: Sequence[int], indices: Sequence[int], token_budget: int, *, by_length: bool = True
) -> list[list[int]]:
    """Split ``indices`` into groups whose padded size ``n * max_len`` fits the budget.

    ``by_length`` (the update's path): the indices are taken longest first, so each micro-batch holds
    sequences of about one length and its right padding, which the model computes like real tokens,
    is small (a short reply beside a long one no longer pads to the long one's width). The values and
    gradients do not change: every per-token quantity is placed back by index, and the loss of each
    micro-batch is divided by the whole minibatch's action-token count, whatever the grouping. Longest
    first also puts the widest micro-batch, the one at the memory peak, first: a run that cannot hold
    it fails at once. ``by_length=False`` keeps the given order (the path before, kept for the test
    that the two agree).

    A sequence longer than the budget gets a micro-batch of its own (it cannot be split further).
    """
    order = sorted(indices, key=lambda i: -lengths[i]) if by_length else list(indices)  # stable
    groups: list[list[int]] = []
    current: list[int] = []
    width = 0
    for i in order:
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


#: Config attributes of causal LMs whose forward does more to the logits than ``lm_head(hidden)``;
#: such a model is scored through its own forward, unchunked (exact, only heavier).
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale")


def policy_forward(
    model: nn.Module,
    mb: MicroBatch,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = True,
    chunk_tokens: int = LOGIT_CHUNK_TOKENS,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of every next token (``[B, T-1]``) and optionally the entropy at each position.

    Logits are divided by the sampling temperature: the ratio must compare the distribution the
    tokens were sampled from (temperature 0, greedy, is scored at 1: :func:`rlver.llm.sampling.scoring_temperature`). ``entropy_grad=False`` computes the entropy outside autograd, for a
    statistic that is not part of the loss.

    Memory: the full-vocabulary tensors (logits, their fp32 copy, the log-softmax, the entropy's
    softmax) are what an update's peak is made of: ``[B, T, V]`` fp32 is 9.3 GiB at 16 k tokens and
    Qwen's 152 k vocabulary, and autograd kept several of them per micro-batch. So the transformer
    body runs once, and the head, log-softmax and entropy run over ``chunk_tokens`` positions at a
    time; under autograd each chunk is checkpointed (recomputed in the backward pass), so only one
    chunk's full-vocabulary tensors are alive at any moment.
    """
    parts = _body_and_head(model)
    if parts is None:
        out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)
        return _token_stats(out.logits[:, :-1], mb.input_ids[:, 1:], temperature, with_entropy, entropy_grad)
    body, head = parts
    with _compute_region(model):
        hidden = body(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)
    hidden = hidden.last_hidden_state[:, :-1]
    rows, width = hidden.shape[:2]
    flat = hidden.reshape(rows * width, hidden.shape[-1])
    labels = mb.input_ids[:, 1:].reshape(-1)
    logps: list[torch.Tensor] = []
    entropies: list[torch.Tensor] = []
    for start in range(0, flat.shape[0], max(1, chunk_tokens)):
        h, y = flat[start : start + chunk_tokens], labels[start : start + chunk_tokens]
        args = (model, head, h, y, temperature, with_entropy, entropy_grad)
        if torch.is_grad_enabled() and h.requires_grad:
            from torch.utils.checkpoint import checkpoint

            logp, entropy = checkpoint(_chunk_stats, *args, use_reentrant=False)
        else:
            logp, entropy = _chunk_stats(*args)
        logps.append(logp)
        if entropy is not None:
            entropies.append(entropy)
    logp_all = torch.cat(logps).view(rows, width)
    entropy_all = torch.cat(entropies).view(rows, width) if with_entropy else None
    return logp_all, entropy_all


def _chunk_stats(
    model: nn.Module,
    head: nn.Module,
    hidden: torch.Tensor,
    labels: torch.Tensor,
    temperature: float,
    with_entropy: bool,
    entropy_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    with _compute_region(model):
        logits = head(hidden)
    return _token_stats(logits, labels, temperature, with_entropy, entropy_grad)


def _token_stats(
    logits: torch.Tensor, labels: torch.Tensor, temperature: float, with_entropy: bool, entropy_grad: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    logits = logits.float()
    temperature = scoring_temperature(temperature)
    if temperature != 1.0:
        logits = logits / temperature
    logp = logprobs_from_logits(logits, labels)
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = entropy_from_logits(logits)
    return logp, entropy


def _body_and_head(model: nn.Module) -> tuple[nn.Module, nn.Module] | None:
    """The transformer body (returning ``last_hidden_state``) and the output head of a causal LM, or
    ``None`` when the model's logits are not plainly ``head(body(x))`` (soft-capped, scaled, custom)."""
    get_decoder = getattr(model, "get_decoder", None)
    get_head = getattr(model, "get_output_embeddings", None)
    if get_decoder is None or get_head is None:
        return None
    try:
        body, head = get_decoder(), get_head()
    except (AttributeError, NotImplementedError, TypeError):
        return None
    if not isinstance(body, nn.Module) or not isinstance(head, nn.Module) or body is model:
        return None
    config = getattr(model, "config", None)
    if any(getattr(config, name, None) not in (None, 1, 1.0) for name in _LOGIT_TRANSFORMS):
        return None
    return body, head


def _compute_region(model: nn.Module) -> contextlib.AbstractContextManager[object]:
    """The bf16 autocast the model's own forward would enter (the body and head are called directly)."""
    dtype = autocast_dtype(model)
    if dtype is None:
        return contextlib.nullcontext()
    device = next(model.parameters()).device
    return torch.autocast(device_type=device.type, dtype=dtype)


def value_forward(critic: nn.Module, mb: MicroBatch) -> torch.Tensor:
    """``[B, T-1]``: the value of the prefix that ends at each position."""
    return critic(mb.input_ids, mb.attention_mask)[:, :-1]
