"""How much memory an update will need, and a refusal before any weights load when it will not fit.

Why here: a run that cannot hold its update used to load a 7B model for minutes, run a whole rollout,
and only then die with a CUDA out-of-memory traceback. The update's peak follows from the config and
the model's ``config.json`` alone (docs/training.md, "Memory of an update"), so ``rlver train`` checks
it first (:func:`check_update_fits`) and exits 2 with the figures and the fixes.

The formula was checked on SmolLM2 on a CPU (``bench/update_memory.py``, within 6 %), and against one
GPU measurement: LoRA GRPO on the Qwen2.5-7B shape with SmolLM2's vocabulary, ``micro_batch_tokens``
16384 and gradient checkpointing peaked at 28.6 GB by ``nvidia-smi`` where the formula says 24.4 GiB;
the CUDA context and the caching allocator make up the rest (:data:`CUDA_CONTEXT_BYTES`,
:data:`ALLOCATOR_SHARE`).

Nothing here imports torch unless the device has to be asked (CUDA), so the check stays cheap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlver.errors import ConfigError
from rlver.limits import machine_memory_bytes

if TYPE_CHECKING:
    from rlver.train.config import TrainConfig

GIB = 1024**3

#: Full-vocabulary fp32 ``[N, V]`` tensors alive at the head's peak (logits, log-softmax, the entropy's
#: softmax, gradients being formed), measured on the head alone by ``bench/update_memory.py --calibrate``
#: (5.52, rounded).
K_FULL_VOCAB = 5.5
#: What a CUDA process holds beyond its tensors (context, cuBLAS/cuDNN workspaces and kernels).
CUDA_CONTEXT_BYTES = 1.0 * GIB
#: The caching allocator's reserve and fragmentation above the live tensors, as a share of them.
ALLOCATOR_SHARE = 0.10

#: Qwen2.5-7B-Instruct's architecture (its config.json): what the paper trains.
QWEN25_7B: dict[str, Any] = {
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "tie_word_embeddings": False,
    "attention_bias": True,
}

#: The keys of a config.json the formula reads; a model without them (not a Llama/Qwen-style
#: decoder) is not predicted, and the guard steps aside.
ARCH_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


# ------------------------------------------------------------------------------------------ formula
def count_params(cfg: dict[str, Any]) -> int:
    """Parameters of a Llama/Qwen-style model from its config (tied or untied head)."""
    h, i, v, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    d = cfg.get("head_dim") or h // heads
    kv = (cfg.get("num_key_value_heads") or heads) * d
    bias = (heads * d + 2 * kv) if cfg.get("attention_bias") else 0
    per_layer = h * heads * d + 2 * h * kv + heads * d * h + bias + 3 * h * i + 2 * h
    head = 0 if cfg.get("tie_word_embeddings") else v * h
    return int(n * per_layer + v * h + head + h)


def layer_bytes_per_token(cfg: dict[str, Any], precision: str) -> float:
    """Bytes autograd keeps per token and layer of a Llama/Qwen-style decoder (no checkpointing).

    fp32: each RMSNorm keeps its input, the normalised values and its output (3 h, twice); attention
    keeps RoPE'd queries, keys and values (3 h: with padding transformers repeats the grouped keys and
    values to all heads before SDPA), SDPA's output and its contiguous copy for o_proj (2 h); the MLP
    keeps gate, silu(gate), up and their product (4 i): ``4 x (11 h + 4 i)``.

    bf16 autocast over fp32 weights: the residual stream and the norms stay fp32 (input and
    normalised values, 4 + 4 bytes) and each matmul keeps its bf16 cast input (2 bytes), so a norm is
    10 h bytes; attention's q, k, v casts, output and copy are bf16 (10 h); the MLP's four are bf16
    (8 i): ``30 h + 8 i``.

    SDPA (the CPU flash kernel; flash / memory-efficient on GPUs) keeps only a per-head log-sum-exp,
    no ``T x T`` scores: there is no quadratic term.
    """
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    if precision == "fp32":
        return 4.0 * (11 * h + 4 * i)
    return 30.0 * h + 8.0 * i


def activation_bytes(cfg: dict[str, Any], tokens: int, precision: str, checkpointing: bool) -> float:
    """The body's activations at the update's peak: every layer's, or (checkpointed per layer) each
    layer's fp32 input plus one layer's recomputed activations."""
    layers, h = cfg["num_hidden_layers"], cfg["hidden_size"]
    final_norm = 8.0 * h  # the final norm's normalised values and output, fp32
    if checkpointing:
        return tokens * (layers * 4.0 * h + layer_bytes_per_token(cfg, precision) + final_norm)
    return tokens * (layers * layer_bytes_per_token(cfg, precision) + final_norm)


def vocab_bytes(cfg: dict[str, Any], tokens: int, chunk: int | None, k: float = K_FULL_VOCAB) -> float:
    """``k`` fp32 full-vocabulary tensors over ``min(tokens, chunk)`` positions (all of them unchunked)."""
    rows = tokens if chunk is None else min(tokens, chunk)
    return k * rows * cfg["vocab_size"] * 4.0


def predict(cfg: dict[str, Any], params: int, tokens: int, chunk: int | None, k: float) -> dict[str, float]:
    """Bytes of ``bench/update_memory.py``'s CPU fp32 measurement peak above the loaded weights, by term.

    ``grads``: 4 B per parameter (accumulated over the step's micro-batches, so alive throughout);
    ``activations``: :func:`activation_bytes`; ``vocab``: :func:`vocab_bytes`; ``head_grad``: the output
    head's weight gradient is computed into a fresh ``vocab x hidden`` fp32 tensor before it is added
    to the accumulated one (once unchunked, once per chunk in the backward, so one at a time).
    """
    terms = {
        "grads": params * 4.0,
        "activations": activation_bytes(cfg, tokens, "fp32", checkpointing=False),
        "vocab": vocab_bytes(cfg, tokens, chunk, k),
        "head_grad": cfg["vocab_size"] * cfg["hidden_size"] * 4.0,
    }
    terms["total"] = sum(terms.values())
    return terms


def update_peak(
    cfg: dict[str, Any],
    tokens: int,
    chunk: int | None,
    *,
    lora: bool,
    precision: str = "bf16",
    checkpointing: bool = True,
    critic: bool = False,
    reference: bool = False,
    k: float = K_FULL_VOCAB,
) -> dict[str, float]:
    """Predicted bytes of the tensors alive at an update's peak on one device, by term, and ``total``.

    Per policy parameter (``weights_grads_adam``), as ``rlver.train.loading`` holds them: full
    fine-tuning keeps fp32 weights (4 B), gradients (4 B) and AdamW's two fp32 states (8 B), plus under
    bf16 autocast the bf16 weight copies autograd keeps for the backward (2 B); LoRA keeps the frozen
    base in the run's dtype (2 B bf16, 4 B fp32) and the adapter's share is neglected. ``critic`` (PPO)
    adds the same backbone without the output head at the same per-parameter cost (its forward and
    backward come after the policy's, so only its persistent memory adds). ``reference`` (full
    fine-tuning with ``kl_coef > 0``) adds a frozen fp32 copy (4 B/P). Not included: the CUDA context and
    the allocator's cache (:func:`needed_bytes`), and the rollout's KV cache (freed before the update).
    """
    params = count_params(cfg)
    bf16 = precision == "bf16"
    per_param = (2.0 if bf16 else 4.0) if lora else (18.0 if bf16 else 16.0)
    head = cfg["vocab_size"] * cfg["hidden_size"]
    terms = {
        "weights_grads_adam": params * per_param,
        "activations": activation_bytes(cfg, tokens, precision, checkpointing),
        "vocab": vocab_bytes(cfg, tokens, chunk, k),
        "head_grad": 0.0 if lora else head * 4.0,
        "critic": (params - head) * per_param if critic else 0.0,
        "reference": params * 4.0 if reference and not lora else 0.0,
    }
    terms["total"] = sum(terms.values())
    return terms


def needed_bytes(tensor_bytes: float, device_type: str) -> float:
    """What the device must hold for ``tensor_bytes`` of live tensors: on CUDA the context and the
    caching allocator's reserve come on top (the 7B-shape check: 24.4 GiB of tensors, 28.6 GB seen)."""
    if device_type == "cuda":
        return tensor_bytes * (1.0 + ALLOCATOR_SHARE) + CUDA_CONTEXT_BYTES
    return tensor_bytes


# ------------------------------------------------------------------------------- config and device
def read_architecture(model_path: str) -> dict[str, Any] | None:
    """The model's ``config.json`` as a dict (no weights read), or ``None`` when there is none at hand
    (``tiny``, a hub id not in the local cache) or it is not a Llama/Qwen-style decoder."""
    from rlver.models.reference import resolve_reference

    file = resolve_reference(model_path).config_file()
    if file is None:
        return None
    try:
        cfg = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"model.path: {file} is not readable JSON ({exc})") from None
    if not isinstance(cfg, dict):
        return None
    if "hidden_size" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]  # a multimodal wrapper: its language model
    if not all(isinstance(cfg.get(key), int) for key in ARCH_KEYS):
        return None
    if "attention_bias" not in cfg:
        cfg = {**cfg, "attention_bias": cfg.get("model_type") == "qwen2"}  # Qwen2 has q/k/v biases
    return cfg


@dataclass(frozen=True)
class Device:
    """The memory the update may use: where (``cuda``/``cpu``), a name for messages, and bytes."""

    type: str
    name: str
    bytes: float


def device_memory(device: str | None) -> Device | None:
    """The device's memory: a CUDA card's total, or on CPU the machine's RAM (``MemTotal``).

    Why the total and not what is free now: the guard refuses runs that cannot fit at all. Free memory
    moves with whatever else runs, so a guard reading it would refuse the same run on a busy afternoon
    and accept it at night; a run that fits the machine but not what is free now is the OS's to swap.

    ``device`` is ``model.device`` (``None``: :func:`rlver.models.devices.default_device`, the rule
    the loader uses too). ``None`` for a device whose memory we cannot read (MPS, ...): the guard then
    steps aside.
    """
    from rlver.models.devices import default_device

    device = device or default_device()
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return None  # asked for CUDA without one: loading reports that
        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        return Device("cuda", f"cuda:{index} ({props.name})", float(props.total_memory))
    if device != "cpu":
        return None
    total = machine_memory_bytes()
    return Device("cpu", "cpu (RAM)", total) if total is not None else None


# --------------------------------------------------------------------------------------- the guard
def update_tokens(config: TrainConfig) -> int:
    """The largest micro-batch the update can form, in padded tokens: ``micro_batch_tokens``, or less
    when a whole mini-batch of the longest dialogues is smaller; a single dialogue longer than the
    budget gets a micro-batch of its own (``rlver.train.batch.micro_batches``)."""
    longest = config.model.max_length
    budget = min(config.update.micro_batch_tokens, config.minibatch_samples() * longest)
    return max(budget, longest)


def predict_for_config(config: TrainConfig, arch: dict[str, Any], device_type: str) -> dict[str, float]:
    """:func:`update_peak` for a training config and its model's architecture."""
    from rlver.train.algorithms import ALGORITHMS

    a = config.algorithm
    lora = config.model.lora.enabled
    return update_peak(
        arch,
        update_tokens(config),
        config.update.logit_chunk_tokens,
        lora=lora,
        precision="bf16" if config.model.dtype == "bfloat16" else "fp32",
        checkpointing=config.model.gradient_checkpointing,
        critic=ALGORITHMS.get(a.name).needs_critic,
        reference=a.kl_coef > 0 and not lora,
    )


def check_update_fits(config: TrainConfig, *, device: Device | None = None) -> dict[str, float] | None:
    """Raise a :class:`ConfigError` (exit 2) when the update's predicted peak, plus what the rollout
    backend holds meanwhile (``terms["rollout_backend"]``, outside ``total``), exceeds the device's memory.

    ``device``: the memory to compare with (tests give one); by default ``run.device_memory_gib`` when
    set, else what :func:`device_memory` reads. Returns the prediction (``None`` when the guard is off
    or cannot predict: ``tiny``, a model whose config.json is not at hand or not a Llama/Qwen-style
    decoder, a device whose memory is unknown).
    """
    if not config.run.memory_guard:
        return None
    arch = read_architecture(config.model.path)
    if arch is None:
        return None
    if device is None:
        device = _configured_device(config)
    if device is None:
        return None
    terms = predict_for_config(config, arch, device.type)
    # what the rollout backend keeps on the device through the update (a co-located engine's reserve)
    terms["rollout_backend"] = backend_memory_bytes(config, arch, device.bytes)
    need = needed_bytes(terms["total"], device.type) + terms["rollout_backend"]
    if need > device.bytes:
        raise ConfigError(_refusal(config, terms, need, device))
    return terms


def backend_memory_bytes(config: TrainConfig, arch: dict[str, Any], device_bytes: float) -> float:
    """What ``rollout.backend`` says it holds on the device during the update (``hf``: nothing; it
    shares the policy's weights and frees its KV cache before the update)."""
    from rlver.train.backends import memory_bytes

    return memory_bytes(config, arch, device_bytes)


def _configured_device(config: TrainConfig) -> Device | None:
    given = config.run.device_memory_gib
    measured = device_memory(config.model.device)
    if given is None:
        return measured
    kind = measured.type if measured is not None else ("cpu" if config.model.device == "cpu" else "cuda")
    return Device(kind, f"{kind} (run.device_memory_gib)", given * GIB)


#: The terms of :func:`update_peak`, as a refusal names them.
TERM_LABELS = {
    "weights_grads_adam": "weights, gradients and optimiser states",
    "activations": "activations",
    "vocab": "full-vocabulary log-prob tensors",
    "head_grad": "the output head's gradient",
    "critic": "the critic",
    "reference": "the KL reference",
    "rollout_backend": "the rollout backend's reserve",
}


def _refusal(config: TrainConfig, terms: dict[str, float], need: float, device: Device) -> str:
    """One line: predicted vs available, the largest term, and the settings that would lower it."""
    largest = max((k for k in TERM_LABELS if terms.get(k)), key=lambda k: terms[k])
    parts = (
        f"{terms['total'] / GIB:.1f} GiB of tensors + CUDA context and allocator cache; "
        if device.type == "cuda"
        else ""
    )
    if terms.get("rollout_backend"):
        parts += f"rollout.backend={config.rollout.backend} holds {terms['rollout_backend'] / GIB:.1f} GiB; "
    fixes = []
    if not config.model.lora.enabled:
        fixes.append("LoRA (--set model.lora.enabled=true)")
    fixes.append(f"a lower update.micro_batch_tokens (now {config.update.micro_batch_tokens})")
    if not config.model.gradient_checkpointing:
        fixes.append("gradient checkpointing (--set model.gradient_checkpointing=true)")
    return (
        f"the update is predicted to need {need / GIB:.1f} GiB ({parts}largest: {TERM_LABELS[largest]} "
        f"{terms[largest] / GIB:.1f} GiB) but "
        f"{device.name} has {device.bytes / GIB:.1f} GiB: use {', or '.join(fixes)}; or the verl engine "
        "for several GPUs (--trainer verl). run.memory_guard=false starts anyway "
        '(docs/training.md, "Memory of an update")'
    )
