"""Mixed precision: fp32 master weights, bf16 compute.

Why not simply load the weights in bf16? AdamW then updates them in place, and bf16 keeps 8 bits of
mantissa: a weight of 0.02 can only move in steps of about 8e-5, so the typical step of an RL run
(lr 1e-6) rounds away and the run silently learns almost nothing (measured: 1.15 % of the tiny model's
weights changed over a step at lr 1e-6). The usual cure, used by verl's FSDP workers and DeepSpeed, is
to keep the weights and the optimiser state in fp32 and to *compute* the forward pass in bf16.

We get the bf16 compute from ``torch.autocast``, entered inside the model's own ``forward``
(:func:`compute_in_bf16`) rather than around each call site, because the policy is called from three
places: the trainer's scoring and update passes and the transformers engine's generation, which runs in a
worker thread — and autocast state is thread-local, so a context opened by the trainer would not reach
it. Gradients flow back through autocast's casts into the fp32 weights as usual.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

#: marker attribute on a module whose forward already runs under autocast (idempotence)
WRAPPED_ATTR = "_rlver_autocast_dtype"


def compute_in_bf16(model: nn.Module, device: torch.device) -> nn.Module:
    """Make ``model``'s forward compute in bf16 under ``torch.autocast``; its weights stay as they are.

    Idempotent. Returns ``model`` (the same object, its ``forward`` replaced on the instance, so
    ``save_pretrained``, ``generate`` and ``parameters()`` are untouched).
    """
    if getattr(model, WRAPPED_ATTR, None) is not None:
        return model
    inner = model.forward
    device_type = device.type

    @functools.wraps(inner)
    def forward(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
            return inner(*args, **kwargs)

    model.forward = forward  # type: ignore[method-assign]
    setattr(model, WRAPPED_ATTR, torch.bfloat16)
    return model


def autocast_dtype(model: nn.Module) -> torch.dtype | None:
    """The dtype ``model`` computes in under :func:`compute_in_bf16`, or None if it was not wrapped."""
    value = getattr(model, WRAPPED_ATTR, None)
    return value if isinstance(value, torch.dtype) else None
