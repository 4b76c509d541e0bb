"""Model FLOPs utilisation (MFU) of the update: how much of the card's bf16 peak the training pass uses.

MFU (PaLM, Chowdhery et al. 2022, appendix B) counts the FLOPs the *model* needs for the tokens the
update trained, not what the hardware ran: recomputation under gradient checkpointing and the
chunked head's recomputed logits are not counted, nor is padding. Per sequence of ``T`` tokens:

    FLOPs(T) = c x N x T  +  6 x L x d_attn x T^2

* ``N``: the parameters a token's matmuls read, i.e. every parameter except the input embedding
  lookup (the output head is a matmul, counted; a head tied to the embedding is counted as the head).
* ``c``: 2 for the forward, 2 for the gradients of the activations, and 2 for the weights' gradients
  when every weight is trained: 6 for full fine-tuning. With LoRA the frozen weights get no gradient,
  so ``c`` is 4 (the adapters' own share is within ``N``, at the full 6 it is noise).
* attention: ``q k^T`` and ``softmax(.) v`` are ``2 x d_attn`` multiply-adds per (query, key) pair and
  layer, over the ``T^2 / 2`` causal pairs, three times (forward, backward): ``6 L d_attn T^2``.

A PPO critic trains in the same update: its FLOPs are counted the same way (its own ``N``; a critic
is always fully trained or LoRA as the policy). The peak is the card's dense bf16 tensor figure from
its datasheet (:data:`BF16_PEAK_TFLOPS`, docs/performance.md); on a CPU, or a card not in the table, there
is no peak and no ``perf/mfu`` (absent, not 0: a 0 would read as a measured figure).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

#: Dense (no sparsity) bf16 tensor-core peaks in TFLOPS, from each card's NVIDIA datasheet (the
#: datasheets print the 2:4-sparsity figure, twice these). First match of ``torch.cuda.get_device_name``.
BF16_PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    (r"\bH100\b.*\bPCIe\b", 756.0),
    (r"\bH100\b.*\bNVL\b", 835.0),
    (r"\bH200\b.*\bNVL\b", 835.0),
    (r"\bG?H100\b", 989.0),  # H100 SXM ("NVIDIA H100 80GB HBM3")
    (r"\bG?H200\b", 989.0),  # H200 SXM, GH200
    (r"\bA100\b", 312.0),
    (r"\bL40S\b", 362.0),
    (r"\bL4\b", 121.0),
    (r"\bA10\b", 125.0),
    (r"\bRTX 4090\b", 165.0),
)


def peak_tflops(device_name: str) -> float | None:
    """The card's dense bf16 peak in TFLOPS, or ``None`` when it is not in :data:`BF16_PEAK_TFLOPS`."""
    for pattern, tflops in BF16_PEAK_TFLOPS:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return tflops
    return None


def device_peak_flops(device: torch.device) -> float | None:
    """FLOP/s of ``device``'s bf16 peak; ``None`` on a CPU or an unknown card (then no MFU is logged)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    tflops = peak_tflops(torch.cuda.get_device_name(device))
    return tflops * 1e12 if tflops is not None else None


@dataclass(frozen=True)
class ModelFlops:
    """The constants of one trained model's FLOPs formula (see the module docstring)."""

    matmul_params: int  # N
    per_param: float  # c: 6 full fine-tuning, 4 LoRA
    layers: int  # L
    attn_width: int  # d_attn = heads x head_dim

    def sequence(self, tokens: int) -> float:
        """Training FLOPs (forward + backward) of one sequence of ``tokens`` tokens."""
        return self.per_param * self.matmul_params * tokens + 6.0 * self.layers * self.attn_width * tokens**2

    def sequences(self, lengths: Iterable[int]) -> float:
        return sum(self.sequence(t) for t in lengths)

    @classmethod
    def of(cls, model: nn.Module) -> ModelFlops:
        """The formula's constants read off a (peft-wrapped or plain) transformers model."""
        unique = {id(p): p for p in model.parameters()}
        total = sum(p.numel() for p in unique.values())
        frozen = sum(p.numel() for p in unique.values() if not p.requires_grad)
        embed = _weight(model, "get_input_embeddings")
        head = _weight(model, "get_output_embeddings")
        n = total - (embed.numel() if embed is not None else 0)
        if head is not None and embed is not None and head is embed:
            n += head.numel()  # a tied head still multiplies every position by the vocabulary matrix
        config = getattr(model, "config", None)
        layers = int(getattr(config, "num_hidden_layers", 0) or 0)
        heads = int(getattr(config, "num_attention_heads", 0) or 0)
        hidden = int(getattr(config, "hidden_size", 0) or 0)
        head_dim = int(getattr(config, "head_dim", 0) or (hidden // heads if heads else 0))
        lora = frozen > total / 2  # most weights frozen: the adapters train, the base gets no gradient
        return cls(n, 4.0 if lora else 6.0, layers, heads * head_dim)


def _weight(model: nn.Module, getter: str) -> torch.Tensor | None:
    fn = getattr(model, getter, None)
    try:
        module = fn() if fn is not None else None
    except (AttributeError, NotImplementedError, TypeError):
        return None
    weight = getattr(module, "weight", None)
    return weight if isinstance(weight, torch.Tensor) else None


def mfu(flops: float, seconds: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: the share of the peak the ``flops`` in ``seconds`` used."""
    return flops / max(seconds, 1e-12) / peak_flops


class UpdatePerf:
    """One update's FLOPs, computed positions and wall time, as ``perf/*`` metrics.

    ``perf/padding_share``: the share of the positions the model computed that were padding (what
    length-sorted micro-batches keep small). ``perf/mfu``: model FLOPs of the trained tokens (policy,
    and the critic when there is one) over the update's wall time (taken after a CUDA synchronize, so
    queued kernels are inside it), over the card's peak; only on a card in :data:`BF16_PEAK_TFLOPS`.
    """

    def __init__(self, models: Iterable[nn.Module], device: torch.device) -> None:
        self.formulas = [ModelFlops.of(getattr(m, "backbone", m)) for m in models]
        self.device = device
        self.peak = device_peak_flops(device)
        self.start()

    def start(self) -> None:
        self._sync()
        self.began = time.perf_counter()
        self.flops = 0.0
        self.tokens = 0
        self.padded = 0

    def add(self, lengths: Sequence[int], padded: int) -> None:
        """A micro-batch that went through forward and backward: its sequences' lengths, and the
        positions computed (``rows x width``)."""
        self.flops += sum(f.sequences(lengths) for f in self.formulas)
        self.tokens += sum(lengths)
        self.padded += padded

    def metrics(self) -> dict[str, float]:
        self._sync()
        seconds = time.perf_counter() - self.began
        out: dict[str, float] = {}
        if self.padded:
            out["perf/padding_share"] = 1.0 - self.tokens / self.padded
        if self.peak is not None and self.flops:
            out["perf/mfu"] = mfu(self.flops, seconds, self.peak)
        return out

    def _sync(self) -> None:
        if self.device.type == "cuda" and torch.cuda.is_available():
            torch.cuda.synchronize(self.device)
