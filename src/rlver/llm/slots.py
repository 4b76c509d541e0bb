"""How many rows the local engine decodes at once, from the memory at hand and the KV cost of a token.

Why from memory: a fixed default (16 slots) leaves most of an 80 GB card idle at a 7B shape and can
overrun a small one; an inference server sizes its batch from what the weights leave free instead
(vLLM's ``gpu_memory_utilization``). A slot's cost is its KV cache at the longest sequence it may
hold: ``2 (keys, values) x layers x key/value heads x head size x bytes per element`` per token
(:func:`kv_bytes_per_token`), so ``slots = share x free bytes / (KV bytes per token x longest)``,
between 1 and :data:`MAX_SLOTS`.

What "free" is: on CUDA what the driver reports free on the model's card once its weights are loaded
(``torch.cuda.mem_get_info``); on a CPU the machine's available memory (``MemAvailable``). Free memory
moves with whatever else runs, which is right here (unlike the memory guard's refusal, which reads
totals): the engine is sized once, when it is built, for the memory it will run in; if it overruns
later, the scheduler halves its slots and samples the rows again (:mod:`rlver.llm.scheduler`).

An explicit ``max_batch_size`` always wins; :class:`SlotPlan` records which one decided, for the run's
manifest (``HFEngine.describe``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rlver.limits import meminfo_bytes

#: The most slots sized from memory: vLLM's default ``max_num_seqs`` (256). Past it a decode step's
#: matrices are compute-bound on one card, so more rows add time per step, not throughput.
MAX_SLOTS = 256
#: The share of free memory the KV caches may take. Half, not vLLM's 0.9: the dynamic cache is padded
#: and stacked when rows join a running batch (two copies live for a moment), and a step's logits
#: (rows x vocabulary, fp32) and the prefill's activations need room beside it.
KV_SHARE = 0.5
#: The longest sequence a slot is sized for when the caller does not say: the model's context, at most
#: this (a dialogue of the benchmark stays well under it; a longer one still runs, the slots are an
#: estimate, and an overrun halves them).
DEFAULT_LONGEST = 4096


@dataclass(frozen=True)
class SlotPlan:
    """The slot count and what decided it: ``source`` is ``"set"`` (the caller's ``max_batch_size``)
    or ``"memory"`` (the figures beside it)."""

    slots: int
    source: str
    free_bytes: float | None = None
    kv_bytes_per_token: int | None = None
    longest_tokens: int | None = None

    def record(self) -> dict[str, Any]:
        """The plan as the run's manifest holds it (no empty fields)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def kv_bytes_per_token(config: Any, element_bytes: int) -> int:
    """Bytes of keys and values one token holds in a KV cache, from a transformers model config (or its
    ``config.json`` as a dict): ``2 x layers x key/value heads x head size x element_bytes``."""

    def get(key: str) -> Any:  # attribute names resolve through the config's aliases (attribute_map)
        return config.get(key) if isinstance(config, dict) else getattr(config, key, None)

    heads = int(get("num_attention_heads"))
    head_dim = get("head_dim") or int(get("hidden_size")) // heads
    kv_heads = get("num_key_value_heads") or heads
    return 2 * int(get("num_hidden_layers")) * int(kv_heads) * int(head_dim) * element_bytes


def slots_from_memory(free_bytes: float, kv_per_token: int, longest_tokens: int) -> int:
    """``KV_SHARE x free_bytes / (kv_per_token x longest_tokens)`` slots, at least 1, at most
    :data:`MAX_SLOTS`."""
    per_slot = max(1, kv_per_token * max(1, longest_tokens))
    return max(1, min(MAX_SLOTS, int(KV_SHARE * free_bytes // per_slot)))


def free_bytes(device: Any) -> float | None:
    """What is free now on ``device`` (a ``torch.device``): the card's free memory on CUDA, the
    machine's available memory on a CPU; ``None`` where it cannot be read (MPS, no /proc)."""
    if device.type == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info(device)
        return float(free)
    if device.type != "cpu":
        return None
    return meminfo_bytes("MemAvailable")


def plan_slots(
    model: Any,
    *,
    max_batch_size: int | None,
    longest_tokens: int | None = None,
    memory_bytes: float | None = None,
) -> SlotPlan:
    """The engine's slot count for ``model`` (a loaded transformers model): ``max_batch_size`` when
    given; else sized from ``memory_bytes`` (default: what :func:`free_bytes` reads on the model's
    device) for sequences of ``longest_tokens`` (default: the model's context, at most
    :data:`DEFAULT_LONGEST`). Where the memory cannot be read, :data:`FALLBACK_SLOTS`."""
    if max_batch_size is not None:
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        return SlotPlan(max_batch_size, "set")
    param = next(model.parameters())
    if memory_bytes is None:
        memory_bytes = free_bytes(param.device)
    config = model.config
    if longest_tokens is None:
        context = getattr(config, "max_position_embeddings", None) or DEFAULT_LONGEST
        longest_tokens = min(int(context), DEFAULT_LONGEST)
    if memory_bytes is None:
        return SlotPlan(FALLBACK_SLOTS, "fallback: the device's free memory cannot be read")
    per_token = kv_bytes_per_token(config, param.element_size())
    return SlotPlan(
        slots_from_memory(memory_bytes, per_token, longest_tokens),
        "memory",
        free_bytes=memory_bytes,
        kv_bytes_per_token=per_token,
        longest_tokens=longest_tokens,
    )


#: Slots where the device's free memory cannot be read (MPS, a machine without /proc).
FALLBACK_SLOTS = 16
