"""The local backend's decode engine: left-padded prefill, the per-row seeded sampling loop and its
dynamic KV cache (the static one, for a compiled decode step, is :mod:`rlver.llm.static_slots`).

Why apart from :mod:`rlver.llm.hf_engine`: the engine decides *what* is generated in one call (chunks,
out-of-memory halving, finish reasons, the recorded sampling settings, its weights' lifecycle); this
module decides *how* the tokens are drawn from the model, step by step, and what the caches hold
meanwhile. The per-step draw itself lives in :mod:`rlver.llm.sampling`. The engine hands in token-id
prompts and the explicit settings of :func:`rlver.llm.hf_engine.sampling_settings` and gets back each
row's sampled ids and log-probs.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from rlver.llm.sampling import is_greedy, row_uniforms

if TYPE_CHECKING:
    import torch

    from rlver.llm.engine_request import Request


class Decoder:
    """Prefill and decode one batch of token-id prompts on a causal LM (one generation at a time).

    Why our own loop and not ``model.generate``: it merges the call's settings with the model's
    ``generation_config``, so a checkpoint's shipped extras (Qwen2.5-Instruct: ``repetition_penalty``
    1.05, ``top_k`` 20) would shape the sampled distribution while the trainer scores the plain
    softmax. Here the distribution is exactly ``softmax(logits / temperature)`` filtered by the
    explicit ``top_p``/``top_k`` and nothing else, each row draws from its own ``torch.Generator``
    seeded with its own seed (so a completion depends only on its messages and sampling params, not on
    its batch), and the log-prob of every sampled token under ``softmax(logits / temperature)`` (the
    trainer's convention) is kept for the rollout-vs-trainer check. The contract for a seed: the row's
    generator draws ``budget`` uniforms up front, and step ``t`` takes the token where the ``t``-th
    falls in the row's cumulative filtered distribution (:mod:`rlver.llm.sampling`, computed on the
    model's device). The static-cache path (:mod:`rlver.llm.static_slots`) prefills with :meth:`join`
    too and keeps the same contract.
    """

    def __init__(self, model: Any, tokenizer: Any, *, pad_token_id: int, compile_decode: bool) -> None:
        """``compile_decode``: decode with a static KV cache and a ``torch.compile``d step (the caller
        turns it on only on CUDA)."""
        self.model = model
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.pad_token_id = pad_token_id
        self._lock = threading.Lock()  # one generate at a time: train/eval toggling is not thread-safe
        self.keeps_last_logits = accepts_logits_to_keep(model)
        self.cache_keyword = cache_keyword(model)
        #: decode on static slots (:mod:`rlver.llm.static_slots`); on CPU only tests and benches turn
        #: it on (to check it samples what the dynamic cache does)
        self.static_cache = compile_decode
        #: the compiled decode step (:func:`rlver.llm.graph_step.decode_step`); ``compiled_forward`` is
        #: its older name, kept for the engine's record
        self.compiled_step: Any = None
        self.compiled_forward: Any = None
        #: the static slots and their cache, held between calls (a compiled step is recorded for them)
        self.held_static: Any = None
        if compile_decode:
            self.compile_forward()

    def compile_forward(self) -> None:
        """Compile the decode step, forward and sampling in one graph (again, after the weights'
        storage changed: CUDA graphs are recorded for the tensors they read)."""
        import torch

        from rlver.llm.graph_step import decode_step

        # transformers' own choice for its static cache (GenerationConfig's CompileConfig), whole graph
        self.compiled_step = torch.compile(decode_step, mode="reduce-overhead", dynamic=False, fullgraph=True)
        self.compiled_forward = self.compiled_step

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """One generation's (or one busy period's) setting: this decoder alone, the model in eval mode
        (its training mode restored after), inference mode, and one autocast region."""
        import torch

        with self._lock:
            was_training = self.model.training
            self.model.eval()
            try:
                with torch.inference_mode(), self._one_cast_region():
                    yield
            finally:
                if was_training:
                    self.model.train()

    # -- continuous batching (driven by rlver.llm.scheduler) -------------------------------------------------
    def join(self, batch: Running | None, requests: list[Request]) -> Running:
        """Prefill ``requests`` (left-padded among themselves) and add their rows to ``batch``: the two
        KV caches are left-padded to one width and stacked, so the next step decodes them all."""
        import torch

        width = max(len(r.prompt) for r in requests)
        rows = len(requests)
        input_ids = torch.full((rows, width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((rows, width), dtype=torch.long)
        for row, r in enumerate(requests):
            input_ids[row, width - len(r.prompt) :] = torch.tensor(r.prompt, dtype=torch.long)
            attention[row, width - len(r.prompt) :] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        budgets = [self._new_token_budget(len(r.prompt), int(r.settings["max_tokens"])) for r in requests]
        uniforms = None
        if not is_greedy(float(requests[0].settings["temperature"])):
            # each row its own stream of its own length: what it draws depends on its seed alone
            drawn = [
                row_uniforms([self._generator(r.seed)], n, self.device)[0]
                for r, n in zip(requests, budgets, strict=True)
            ]
            uniforms = pad_right(drawn, max(budgets))
        position = (attention.cumsum(-1) - 1).clamp(min=0)
        keep = {"logits_to_keep": 1} if self.keeps_last_logits else {}
        out = self.model(
            input_ids=input_ids, attention_mask=attention, position_ids=position, use_cache=True, **keep
        )
        fresh = Running(
            requests=list(requests),
            tokens=[[] for _ in requests],
            logps=[[] for _ in requests],
            budgets=budgets,
            lengths=[len(r.prompt) for r in requests],
            width=width,
            logits=out.logits[:, -1, :],
            cache=returned_cache(out),
            attention=attention,
            position=position[:, -1:],
            uniforms=uniforms,
            steps=torch.zeros(rows, dtype=torch.long, device=self.device),
        )
        return fresh if batch is None else batch.stacked(fresh)

    def step(self, batch: Running, ids: torch.Tensor, keep: list[int]) -> Running:
        """Drop the rows not in ``keep``, feed the kept rows' sampled ``ids``, one decode forward."""
        import torch

        if len(keep) < len(batch.requests):
            batch.select(keep)
            ids = ids[torch.tensor(keep, dtype=torch.long, device=ids.device)]
        batch.steps = batch.steps + 1
        ones = torch.ones((len(keep), 1), dtype=batch.attention.dtype, device=batch.attention.device)
        batch.attention = torch.cat([batch.attention, ones], 1)
        batch.position = batch.position + 1
        batch.lengths = [n + 1 for n in batch.lengths]
        batch.width += 1
        batch.trim()
        batch.logits = self.decode_forward(ids, batch)
        return batch

    def _one_cast_region(self) -> contextlib.AbstractContextManager[Any]:
        """One autocast region around a whole generation, for a model that computes in bf16.

        Why: the model's forward enters autocast itself (:func:`rlver.llm.precision.compute_in_bf16`),
        and autocast's cache of bf16 weight copies is cleared whenever the *outermost* region exits,
        so without an enclosing region every decode step cast all fp32 weights to bf16 again. Inside
        this region each weight is cast once per generation.
        """
        import torch

        from rlver.llm.precision import autocast_dtype

        dtype = autocast_dtype(self.model)
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def _generator(self, seed: int | None) -> torch.Generator:
        """A row's private RNG: its own seed, or (unseeded) one drawn from torch's global stream."""
        import torch

        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        g = torch.Generator(device="cpu")
        g.manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)
        return g

    def decode_forward(self, ids: torch.Tensor, state: Running) -> torch.Tensor:
        """One decode step's forward on the continuous batch's dynamic cache; the last logits."""
        out = self.model(
            input_ids=ids.view(-1, 1),
            attention_mask=state.attention,
            position_ids=state.position,
            use_cache=True,
            **{self.cache_keyword: state.cache},
        )
        state.cache = returned_cache(out)
        return cast("torch.Tensor", out.logits[:, -1, :])

    def _new_token_budget(self, prompt_width: int, max_tokens: int | None) -> int:
        """``max_tokens``, but never past the model's context (``max_position_embeddings``): the
        benchmark's uncapped default (8,192) must end where the model's positions end, not run on.
        ``None`` (no cap stated, a server's own limit elsewhere): the model's context is the limit."""
        context = getattr(self.model.config, "max_position_embeddings", None)
        if not isinstance(context, int):
            if max_tokens is None:
                raise ValueError("sampling.max_tokens is null and the model states no context length")
            return max_tokens
        room = context - prompt_width
        if room <= 0:
            raise ValueError(
                f"the prompt ({prompt_width} tokens) fills the model's context of {context} tokens"
            )
        return room if max_tokens is None else min(max_tokens, room)

    def hits_stop_string(self, tokens: list[int], stop: list[str]) -> bool:
        """Whether the row's last tokens spell one of ``stop`` (special tokens left out)."""
        text = self.tokenizer.decode(tokens[-32:], skip_special_tokens=True)
        return any(s in text for s in stop)

    def row_ends(self, request: Request, tokens: list[int], budget: int) -> bool:
        """Whether a row whose read tokens are ``tokens`` has ended: its last token is a stop id, it
        has its ``budget``, or its text spells a stop string. One rule for both cache paths (the
        dynamic batch's step and :class:`rlver.llm.static_slots.StaticSlots`)."""
        stop = request.sampling.stop
        return (
            tokens[-1] in request.stops
            or len(tokens) >= budget
            or bool(stop and self.hits_stop_string(tokens, stop))
        )


@dataclass
class Running:
    """The continuous batch's state: per row (``requests[b]``) its sampled ids and log-probs so far, its
    token budget and its length in columns (the rest of the ``width`` columns, on its left, are pad);
    on the device the logits to sample from, the KV cache, mask, positions, each row's uniforms and
    its step index (which uniform the next draw takes)."""

    requests: list[Request]
    tokens: list[list[int]]
    logps: list[list[float]]
    budgets: list[int]
    lengths: list[int]
    width: int
    logits: Any
    cache: Any
    attention: Any
    position: Any
    uniforms: Any
    steps: Any

    def step_uniforms(self) -> Any:
        """Each row's uniform for this step, gathered on the device at the row's own step index."""
        if self.uniforms is None:
            return None
        return self.uniforms.gather(1, self.steps[:, None]).squeeze(1)

    def select(self, keep: list[int]) -> None:
        """Keep only the rows ``keep`` (host lists and device tensors alike)."""
        import torch

        index = torch.tensor(keep, dtype=torch.long, device=self.attention.device)
        for name in ("requests", "tokens", "logps", "budgets", "lengths"):
            values = getattr(self, name)
            setattr(self, name, [values[b] for b in keep])
        self.attention, self.position, self.steps = (
            self.attention[index],
            self.position[index],
            self.steps[index],
        )
        if self.uniforms is not None:
            self.uniforms = self.uniforms[index]
        self.cache = select_cache_rows(self.cache, index)

    def trim(self) -> None:
        """Cut the columns that are pad in every row (the longest row left): the cache stays as wide
        as the longest live row, not as the longest row the busy period ever held."""
        cut = self.width - max(self.lengths)
        if cut <= 0:
            return
        self.attention = self.attention[:, cut:]
        for layer in cache_layers(self.cache):
            layer.keys, layer.values = layer.keys[:, :, cut:], layer.values[:, :, cut:]
        self.width -= cut

    def stacked(self, other: Running) -> Running:
        """This batch's rows, then ``other``'s, left-padded to one width (caches, masks, uniforms)."""
        import torch

        width = max(self.width, other.width)
        mine, theirs = cache_layers(self.cache), cache_layers(other.cache)
        for a, b in zip(mine, theirs, strict=True):
            a.keys = torch.cat([pad_left(a.keys, width, 2), pad_left(b.keys, width, 2)])
            a.values = torch.cat([pad_left(a.values, width, 2), pad_left(b.values, width, 2)])
        self.attention = torch.cat([pad_left(self.attention, width, 1), pad_left(other.attention, width, 1)])
        self.width = width
        for name in ("requests", "tokens", "logps", "budgets", "lengths"):
            getattr(self, name).extend(getattr(other, name))
        self.logits = torch.cat([self.logits, other.logits])
        self.position = torch.cat([self.position, other.position])
        self.steps = torch.cat([self.steps, other.steps])
        if self.uniforms is not None and other.uniforms is not None:
            span = max(self.uniforms.shape[1], other.uniforms.shape[1])
            self.uniforms = torch.cat([pad_right([*self.uniforms], span), pad_right([*other.uniforms], span)])
        return self


def cache_layers(cache: Any) -> list[Any]:
    """The layers of a transformers dynamic KV cache, each with ``keys`` and ``values`` of shape
    ``[rows, heads, columns, dim]``; any other cache (sliding windows, a legacy tuple) cannot be
    refilled or trimmed column-wise, and is refused by name."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if layers is None or any(type(layer) is not DynamicLayer for layer in layers):
        kinds = sorted({type(layer).__name__ for layer in layers or []}) or [type(cache).__name__]
        raise TypeError(f"continuous batching needs a dynamic KV cache of full layers, got {kinds}")
    return list(layers)


def pad_left(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """``t`` with zeros added before its ``dim`` axis up to ``width`` (pad columns, masked out)."""
    import torch

    short = width - t.shape[dim]
    if short <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = short
    return torch.cat([t.new_zeros(shape), t], dim)


def pad_right(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    """1-D rows stacked into ``[rows, width]``, zeros after each (uniforms a row never reaches)."""

    out = rows[0].new_zeros((len(rows), width))
    for b, row in enumerate(rows):
        out[b, : row.shape[0]] = row
    return out


def select_cache_rows(cache: Any, index: torch.Tensor) -> Any:
    """Keep only the batch rows ``index`` of a KV cache (transformers' ``Cache`` in place, or a legacy
    tuple of per-layer ``(key, value)`` tensors rebuilt)."""
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(index)
        return cache
    if isinstance(cache, tuple):
        return tuple(tuple(t[index] for t in layer) for layer in cache)
    raise TypeError(f"cannot drop finished rows from a KV cache of type {type(cache).__name__}")


def _forward_parameters(model: Any) -> set[str]:
    """The keyword names of the model class's forward (a peft-wrapped model's through its base model;
    a wrapper set on the instance, such as bf16 autocast, passes keywords through)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        return set(inspect.signature(type(inner).forward).parameters)
    except (TypeError, ValueError):
        return set()


def accepts_logits_to_keep(model: Any) -> bool:
    """Whether the model's forward takes ``logits_to_keep`` (transformers' causal LMs do); a custom
    model without it gets full logits, which is only slower."""
    return "logits_to_keep" in _forward_parameters(model)


def cache_keyword(model: Any) -> str:
    """The forward's name for the KV cache: ``cache`` from transformers 5.24 on (``past_key_values``
    still works there but warns on every call, once a reply in every log), ``past_key_values`` before."""
    return "cache" if "cache" in _forward_parameters(model) else "past_key_values"


def returned_cache(out: Any) -> Any:
    """The KV cache a forward returned, under either name (see :func:`cache_keyword`)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def is_out_of_memory(exc: BaseException) -> bool:
    """A device (or host) allocation failure, whatever the backend calls it."""
    import torch

    oom_type = getattr(torch, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


def release_cached_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
