"""A local transformers model behind the :class:`ChatModel` interface, with batched generation.

Why batched: in a rollout every live dialogue needs the policy's next reply at the same time. One
left-padded ``generate`` over all of them is many times faster than one call per dialogue, on a GPU and
on a CPU alike. Left padding keeps every prompt's last token at the right edge, where generation starts.

The trainer hands in the model it is training: generation runs in eval mode under
``torch.inference_mode()`` and the model's training mode is restored afterwards. Generation runs in a
worker thread (``asyncio.to_thread``) so the event loop keeps serving simulator calls meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rlver.errors import PolicyOutOfMemoryError
from rlver.heartbeat import activity
from rlver.interrupt import raise_if_stopping
from rlver.llm.base import ChatModel, Completion, MessagesLike, SamplingParams
from rlver.llm.control_tokens import render_ids
from rlver.llm.sampling import row_uniforms, sample_tokens, to_host
from rlver.llm.sequence import SequenceError, chat_ids, end_of_turn_id
from rlver.models.devices import default_device

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

#: End-of-turn markers a chat model may emit; generation stops at whichever the tokenizer knows.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>")


class LocalChatModel(ChatModel):
    """Wraps an in-memory Hugging Face causal LM and its tokenizer (which must have a chat template)."""

    #: one device, one generation at a time (see ChatModel.batch_serially)
    batch_serially = True

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        device: str | None = None,
        max_batch_size: int = 16,
        name: str | None = None,
        compile_decode: bool = False,
    ) -> None:
        """``compile_decode``: on CUDA, decode with a static KV cache and a ``torch.compile``d step
        (CUDA graphs); elsewhere one ``warning:`` line on stderr and the eager path."""
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("the tokenizer has no chat template; a chat model needs one")
        # Typed loosely on purpose: transformers' stubs do not model every model/tokenizer class.
        self.model: Any = cast(Any, model)
        self.tokenizer: Any = cast(Any, tokenizer)
        self.max_batch_size = max_batch_size
        self.name = name or str(getattr(model.config, "_name_or_path", "") or type(model).__name__)
        if device is not None:
            self.model.to(device)
        self.device = next(model.parameters()).device
        self._lock = threading.Lock()  # one generate at a time: train/eval toggling is not thread-safe
        self.stop_token_ids = self._stop_ids()
        self._keeps_last_logits = accepts_logits_to_keep(self.model)
        self._cache_keyword = cache_keyword(self.model)
        pad = tokenizer.pad_token_id
        self.pad_token_id: int = int(pad if pad is not None else self.stop_token_ids[0])
        self._compile_asked = compile_decode
        self.compile_decode = compile_decode and self.device.type == "cuda"
        if compile_decode and not self.compile_decode:
            print(
                f"warning: compile_decode needs a CUDA device; the model is on {self.device}, "
                "so decoding stays eager (dynamic KV cache)",
                file=sys.stderr,
            )
        #: a static KV cache; on CPU only tests turn it on (to check it samples what the dynamic one does)
        self._static_cache = self.compile_decode
        self._compiled_forward: Any = None
        self._held_static: tuple[tuple[int, int], Any] | None = None
        if self.compile_decode:
            import torch

            # transformers' own choice for its static cache (GenerationConfig's CompileConfig)
            self._compiled_forward = torch.compile(self.model, mode="reduce-overhead", dynamic=False)

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        device: str | None = None,
        dtype: str = "auto",
        max_batch_size: int = 16,
        name: str | None = None,
        compile_decode: bool = False,
    ) -> LocalChatModel:
        """Load a model folder (or a hub id, on a machine that may download) with the Auto classes."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch_dtype: Any = dtype if dtype == "auto" else getattr(torch, dtype)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
        return cls(
            model,
            tokenizer,
            device=device or default_device(),
            max_batch_size=max_batch_size,
            name=name or str(path),
            compile_decode=compile_decode,
        )

    def _stop_ids(self) -> list[int]:
        """The template's turn end first, then eos and the usual end-of-turn tokens the vocab has."""
        ids: list[int] = []
        with contextlib.suppress(SequenceError):
            ids.append(end_of_turn_id(self.tokenizer))
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        for value in [*(eos if isinstance(eos, list) else [eos]), self.tokenizer.eos_token_id]:
            if isinstance(value, int) and value not in ids:
                ids.append(value)
        vocab = self.tokenizer.get_vocab()
        for token in END_OF_TURN_TOKENS:
            if token in vocab and vocab[token] not in ids:
                ids.append(vocab[token])
        if not ids:
            raise ValueError("the tokenizer knows no end-of-turn token; cannot tell when a reply ends")
        return ids

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": type(self).__name__,
            "device": str(self.device),
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
            "max_batch_size": self.max_batch_size,
            # what the sampler does beyond SamplingParams: nothing from the model's generation_config
            "sampler": {
                "generation_config": "ignored",
                "repetition_penalty": 1.0,
                "top_k": "SamplingParams.extra.top_k, else off",
                "seeding": "one torch.Generator per row (per-dialogue seed): one uniform per step, "
                "inverse CDF on the device",
                "finished_rows": "leave the batch" if not self._static_cache else "keep their slot",
                "compile_decode": self.compile_decode,  # what decodes: asked for and on CUDA
                "compile_decode_asked": self._compile_asked,
                "stop_token_ids": list(self.stop_token_ids),
            },
        }

    def __repr__(self) -> str:
        return f"LocalChatModel(name={self.name!r}, device={str(self.device)!r})"

    # -- ChatModel ----------------------------------------------------------------------------------
    async def complete(self, messages: MessagesLike, sampling: SamplingParams) -> Completion:
        (result,) = await self.complete_many([messages], sampling)
        if isinstance(result, BaseException):
            raise result
        return result

    async def complete_many(
        self, batch: Sequence[MessagesLike], sampling: SamplingParams
    ) -> list[Completion | BaseException]:
        """One left-padded ``generate`` per chunk of ``max_batch_size``; failures are returned in place."""
        results: list[Completion | BaseException] = []
        for start in range(0, len(batch), self.max_batch_size):
            chunk = batch[start : start + self.max_batch_size]
            results.extend(await asyncio.to_thread(self._generate_chunk, chunk, sampling))
        return results

    async def complete_each(
        self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
    ) -> list[Completion | BaseException]:
        """Rows whose settings differ only in ``seed`` share one batched forward; each keeps its seed."""
        if len(batch) != len(samplings):
            raise ValueError("complete_each: one SamplingParams per conversation")
        results: list[Completion | BaseException | None] = [None] * len(batch)
        groups: dict[str, list[int]] = {}
        for i, s in enumerate(samplings):
            groups.setdefault(s.model_copy(update={"seed": None}).model_dump_json(), []).append(i)
        for positions in groups.values():
            shared = samplings[positions[0]]
            for start in range(0, len(positions), self.max_batch_size):
                part = positions[start : start + self.max_batch_size]
                seeds = [samplings[i].seed for i in part]
                out = await asyncio.to_thread(self._generate_chunk, [batch[i] for i in part], shared, seeds)
                for i, r in zip(part, out, strict=True):
                    results[i] = r
        return [r if r is not None else RuntimeError("no result") for r in results]

    # -- generation (worker thread) ------------------------------------------------------------------
    def _encode(self, messages: MessagesLike) -> list[int]:
        """The prompt's ids; earlier assistant turns as *sampled* when the caller knows their ids
        (``assistant_token_ids``, set by the dialogue environment), so the policy conditions on its own
        tokens, as the trainer will score them (see :mod:`rlver.llm.sequence`)."""
        conversation = [{"role": m.role, "content": m.content} for m in messages]
        sampled = getattr(messages, "assistant_token_ids", None)
        if sampled and any(t is not None for t in sampled):
            return chat_ids(self.tokenizer, conversation, sampled, add_generation_prompt=True).ids
        # control tokens that the messages spell stay text (rlver.llm.control_tokens)
        return render_ids(self.tokenizer, conversation, add_generation_prompt=True)

    def _generate_chunk(
        self,
        chunk: Sequence[MessagesLike],
        sampling: SamplingParams,
        seeds: Sequence[int | None] | None = None,
    ) -> list[Completion | BaseException]:
        results: list[Completion | BaseException | None] = [None] * len(chunk)
        prompts: list[tuple[int, list[int]]] = []
        row_seeds = list(seeds) if seeds is not None else [sampling.seed] * len(chunk)
        try:
            sampling_settings(sampling)
        except ValueError as exc:  # a setting we cannot honour fails every row, loudly
            return [exc] * len(chunk)
        for i, messages in enumerate(chunk):
            try:
                prompts.append((i, self._encode(messages)))
            except Exception as exc:  # a bad conversation fails alone
                results[i] = exc
        if prompts:
            try:
                completions = self._generate_fitting(
                    [ids for _, ids in prompts], sampling, [row_seeds[i] for i, _ in prompts]
                )
            except PolicyOutOfMemoryError:
                raise  # never a dropped dialogue: the caller's step fails, naming what to lower
            except Exception as exc:  # any other failure of the whole chunk
                completions = [exc] * len(prompts)
            for (i, _), completion in zip(prompts, completions, strict=True):
                results[i] = completion
        return [r if r is not None else RuntimeError("no result") for r in results]

    def _generate_fitting(
        self, prompts: list[list[int]], sampling: SamplingParams, seeds: list[int | None]
    ) -> list[Completion | BaseException]:
        """:meth:`_generate`, halving the chunk on out-of-memory until it fits.

        Why retry instead of failing the rows: the rows that do not fit are the longest dialogues, and
        dropping them would bias training towards short ones. A row's completion depends only on its
        prompt and its own seed, so splitting a chunk changes no sampled token. A single row that still
        does not fit fails the step with the settings to lower.
        """
        try:
            return self._generate(prompts, sampling, seeds)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
        # released here, not in the handler: the exception's traceback holds the failed attempt's tensors
        release_cached_memory()
        if len(prompts) == 1:
            raise PolicyOutOfMemoryError(
                f"the policy ran out of memory generating one reply of {len(prompts[0])} prompt tokens "
                f"+ up to {sampling.max_tokens} new ones on {self.device}; lower rollout.max_new_tokens "
                "or the dialogue's length (rollout.rules.max_assistant_turns), or use a larger device"
            )
        half = len(prompts) // 2
        first = self._generate_fitting(prompts[:half], sampling, seeds[:half])
        return first + self._generate_fitting(prompts[half:], sampling, seeds[half:])

    def _generate(
        self, prompts: list[list[int]], sampling: SamplingParams, seeds: Sequence[int | None] | None = None
    ) -> list[Completion | BaseException]:
        """Our own sampling loop (KV cache, left padding) instead of ``model.generate``.

        Why not ``generate``: it merges the call's settings with the model's ``generation_config``, so a
        checkpoint's shipped extras (Qwen2.5-Instruct: ``repetition_penalty`` 1.05, ``top_k`` 20) would
        shape the sampled distribution while the trainer scores the plain softmax. Here the distribution
        is exactly ``softmax(logits / temperature)`` filtered by the explicit ``top_p``/``top_k`` and
        nothing else, each row draws from its own ``torch.Generator`` seeded with its own seed (so a
        completion depends only on its messages and sampling params, not on its batch), and the
        log-prob of every sampled token under ``softmax(logits / temperature)`` (the trainer's
        convention) is kept for the rollout-vs-trainer check.

        The contract for a seed: the row's generator draws ``budget`` uniforms up front, and step ``t``
        takes the token where the ``t``-th falls in the row's cumulative filtered distribution
        (:mod:`rlver.llm.sampling`, computed on the model's device). The same seed samples other tokens
        than the per-row ``torch.multinomial`` of earlier versions did; the distribution is the same.
        """
        import torch

        settings = sampling_settings(sampling)
        rows = len(prompts)
        row_seeds = list(seeds) if seeds is not None else [sampling.seed] * rows
        width = max(len(p) for p in prompts)
        input_ids = torch.full((rows, width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((rows, width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids) :] = 1
        stops = set(self.stop_token_ids)
        start = time.perf_counter()
        with self._lock:
            was_training = self.model.training
            self.model.eval()
            try:
                with torch.inference_mode(), self._one_cast_region():
                    generators = [self._generator(seed) for seed in row_seeds]
                    tokens, logps = self._sample_loop(
                        input_ids.to(self.device),
                        attention.to(self.device),
                        settings,
                        generators,
                        stops,
                        sampling,
                    )
            finally:
                if was_training:
                    self.model.train()
        latency = time.perf_counter() - start
        return [
            self._to_completion(toks, lps, len(prompt), sampling, latency)
            for toks, lps, prompt in zip(tokens, logps, prompts, strict=True)
        ]

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

    def _sample_loop(
        self,
        input_ids: torch.Tensor,
        attention: torch.Tensor,
        settings: dict[str, Any],
        generators: list[torch.Generator],
        stops: set[int],
        sampling: SamplingParams,
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Prefill, then one token per live row per step, sampled on the device (:mod:`.sampling`).

        A row that ends (stop token or stop string) leaves the batch at once: its KV cache, mask and
        position are index-selected away, so the batch shrinks instead of decoding to its longest row
        (the static-cache path keeps its shape; see :meth:`_decode_state`).
        """
        rows = input_ids.shape[0]
        tokens: list[list[int]] = [[] for _ in range(rows)]
        logps: list[list[float]] = [[] for _ in range(rows)]
        budget = self._new_token_budget(input_ids.shape[1], sampling.max_tokens)
        state = self._decode_state(input_ids, attention, budget, settings, generators)
        for step in range(budget):
            raise_if_stopping()  # Ctrl-C ends a generation between decode steps, not at its token limit
            ids, lps = sample_tokens(
                state.logits,
                state.uniforms[:, step] if state.uniforms is not None else None,
                float(settings["temperature"]),
                float(settings["top_p"]),
                int(settings["top_k"]),
            )
            host_ids, host_logps = to_host(ids, lps)  # the step's one copy: [2, live rows]
            keep: list[int] = []
            for b, (row, tok, lp) in enumerate(zip(state.rows, host_ids, host_logps, strict=True)):
                if row < 0:
                    continue  # finished, holding its static-cache slot
                tokens[row].append(tok)
                logps[row].append(lp)
                if not (
                    tok in stops or (sampling.stop and self._hits_stop_string(tokens[row], sampling.stop))
                ):
                    keep.append(b)
            activity.add_tokens(sum(r >= 0 for r in state.rows))  # progress lines (rlver.heartbeat)
            if not keep or step == budget - 1:
                break
            state.advance(self, ids, keep)
        return tokens, logps

    def _decode_state(
        self,
        input_ids: torch.Tensor,
        attention: torch.Tensor,
        budget: int,
        settings: dict[str, Any],
        generators: list[torch.Generator],
    ) -> _Decode:
        """Run the prefill and return the decode loop's state (cache, mask, positions, uniforms).

        The static cache (``compile_decode`` on CUDA, or the private ``_static_cache`` switch on CPU
        for tests) is sized ``prompt + budget`` up front and takes a full-width attention mask, so
        every decode step has the same shapes and a compiled step is not recompiled.
        """
        import torch

        rows, width = input_ids.shape
        uniforms = None
        if float(settings["temperature"]) > 0:
            uniforms = row_uniforms(generators, budget, self.device)
        position = (attention.cumsum(-1) - 1).clamp(min=0)
        cache_kw: dict[str, Any] = {}
        static = self._static_cache
        if static:
            cache_kw[self._cache_keyword], length = self._static_kv(rows, width + budget)
            full = torch.zeros((rows, length), dtype=attention.dtype)
            full[:, :width] = attention
            attention = full.to(attention.device)
        # Prefill: only the last position's logits are sampled from; a model that can skip the rest
        # does (full logits are [rows, prompt, vocab]: 54 GiB in bf16 for 32 rows x 6 k tokens x 152 k).
        keep = {"logits_to_keep": 1} if self._keeps_last_logits else {}
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=position,
            use_cache=True,
            **cache_kw,
            **keep,
        )
        return _Decode(
            rows=list(range(rows)),
            logits=out.logits[:, -1, :],
            cache=returned_cache(out),
            attention=attention,
            position=position[:, -1:],
            uniforms=uniforms,
            length=width,
            static=static,
        )

    def _static_kv(self, rows: int, length: int) -> tuple[Any, int]:
        """A zeroed static KV cache for ``rows`` x ``length`` rounded up to a multiple of 256, and
        that rounded length (the width of the full attention mask).

        Why reuse and round: a compiled decode step (CUDA graphs) is recorded for its cache's tensors,
        so a fresh cache per generation would record again every time; transformers' ``generate``
        keeps its static cache between calls the same way. Only the last shape is kept.
        """
        from transformers import StaticCache

        length = -(-length // 256) * 256
        held = self._held_static
        if held is not None and held[0] == (rows, length):
            held[1].reset()
            return held[1], length
        self._held_static = None  # let the old one go before allocating the new one
        cache = StaticCache(config=self.model.config, max_cache_len=length)
        self._held_static = ((rows, length), cache)
        return cache, length

    def _decode_forward(self, ids: torch.Tensor, state: _Decode) -> torch.Tensor:
        """One decode step's forward (compiled when ``compile_decode`` is on); the last logits."""
        forward = self._compiled_forward if self._compiled_forward is not None else self.model
        out = forward(
            input_ids=ids.view(-1, 1),
            attention_mask=state.attention,
            position_ids=state.position,
            use_cache=True,
            **{self._cache_keyword: state.cache},
        )
        if not state.static:
            state.cache = returned_cache(out)
        return cast("torch.Tensor", out.logits[:, -1, :])

    def _new_token_budget(self, prompt_width: int, max_tokens: int) -> int:
        """``max_tokens``, but never past the model's context (``max_position_embeddings``): the
        benchmark's uncapped default (8,192) must end where the model's positions end, not run on."""
        context = getattr(self.model.config, "max_position_embeddings", None)
        if not isinstance(context, int):
            return max_tokens
        room = context - prompt_width
        if room <= 0:
            raise ValueError(
                f"the prompt ({prompt_width} tokens) fills the model's context of {context} tokens"
            )
        return min(max_tokens, room)

    def _hits_stop_string(self, tokens: list[int], stop: list[str]) -> bool:
        text = self.tokenizer.decode(tokens[-32:], skip_special_tokens=True)
        return any(s in text for s in stop)

    def _to_completion(
        self, tokens: list[int], logps: list[float], prompt_len: int, sampling: SamplingParams, latency: float
    ) -> Completion:
        """Cut at the first end-of-turn token (kept in ``token_ids``: the policy produced it)."""
        stops = set(self.stop_token_ids)
        end = next((k for k, t in enumerate(tokens) if t in stops), None)
        if end is not None:
            ids, body, finish = tokens[: end + 1], tokens[:end], "stop"
        else:
            ids, body, finish = tokens, tokens, "length"
        # Special tokens are markup, not reply text (<think> tags are ordinary added tokens and stay).
        text = self.tokenizer.decode(body, skip_special_tokens=True)
        if sampling.stop:
            cut = min((text.find(s) for s in sampling.stop if s in text), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        return Completion(
            text=text,
            prompt_tokens=prompt_len,
            completion_tokens=len(ids),
            latency_s=latency,
            finish_reason=finish,
            token_ids=ids,
            token_logprobs=logps[: len(ids)],
        )


@dataclass
class _Decode:
    """The decode loop's state. ``rows[b]`` is the caller's row index of batch row ``b``; on the
    static-cache path a finished row keeps its slot (the shapes must not change) and is marked -1."""

    rows: list[int]
    logits: Any
    cache: Any
    attention: Any
    position: Any
    uniforms: Any
    length: int  # sequence columns so far: prompt width + tokens fed back
    static: bool

    def advance(self, chat: LocalChatModel, ids: torch.Tensor, keep: list[int]) -> None:
        """Drop the finished rows (dynamic cache) or mark them (static), then feed the live tokens."""
        import torch

        if len(keep) < sum(r >= 0 for r in self.rows):
            if self.static:
                kept = set(keep)
                self.rows = [r if b in kept else -1 for b, r in enumerate(self.rows)]
            else:
                index = torch.tensor(keep, dtype=torch.long, device=ids.device)
                self.rows = [self.rows[b] for b in keep]
                ids, self.attention, self.position = ids[index], self.attention[index], self.position[index]
                if self.uniforms is not None:
                    self.uniforms = self.uniforms[index]
                self.cache = select_cache_rows(self.cache, index)
        if self.static:
            self.attention[:, self.length] = 1
        else:
            ones = torch.ones((len(self.rows), 1), dtype=self.attention.dtype, device=self.attention.device)
            self.attention = torch.cat([self.attention, ones], 1)
        self.length += 1
        self.position = self.position + 1
        self.logits = chat._decode_forward(ids, self)


def select_cache_rows(cache: Any, index: torch.Tensor) -> Any:
    """Keep only the batch rows ``index`` of a KV cache (transformers' ``Cache`` in place, or a legacy
    tuple of per-layer ``(key, value)`` tensors rebuilt)."""
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(index)
        return cache
    if isinstance(cache, tuple):
        return tuple(tuple(t[index] for t in layer) for layer in cache)
    raise TypeError(f"cannot drop finished rows from a KV cache of type {type(cache).__name__}")


#: ``SamplingParams.extra`` keys the local backend understands; anything else is refused, because a
#: silently ignored setting would make the run's recorded sampling differ from what was sampled.
LOCAL_EXTRA_KEYS = frozenset({"top_k"})


def sampling_settings(sampling: SamplingParams) -> dict[str, Any]:
    """Every setting the local sampler uses, explicitly (recorded in run manifests).

    Nothing comes from the model's ``generation_config``: no repetition penalty (1.0), no ``top_k``
    unless ``extra`` sets it, no min_p/typical sampling.
    """
    unknown = sorted(set(sampling.extra) - LOCAL_EXTRA_KEYS)
    if unknown:
        raise ValueError(
            f"sampling.extra: the local backend supports only {sorted(LOCAL_EXTRA_KEYS)}, got {unknown}"
        )
    top_k = int(sampling.extra.get("top_k", 0) or 0)
    if top_k < 0:
        raise ValueError(f"sampling.extra.top_k must be >= 0 (0 = off), got {top_k}")
    return {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p if sampling.temperature > 0 else 1.0,
        "top_k": top_k if sampling.temperature > 0 else 0,
        "repetition_penalty": 1.0,
        "max_tokens": sampling.max_tokens,
        "seed": sampling.seed,
        "stop": list(sampling.stop or []),
        "logprob_convention": "log_softmax(logits / temperature), before top-p/top-k filtering",
    }


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
