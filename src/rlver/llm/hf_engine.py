"""The transformers engine: a :class:`~rlver.llm.engine.TokenEngine` on a causal LM in this process.

It samples with rlver's own decode loop (:class:`rlver.llm.decoding.Decoder`: left-padded prefill,
per-row seeded draws, finished rows leave the batch) under continuous batching
(:class:`rlver.llm.scheduler.Scheduler`): every caller's rows wait in one queue, ``max_batch_size``
slots decode at once and a freed slot takes the next waiting row at the next step; out of memory
halves the slots and samples the rows again from their seeds. Nothing of chat lives here: prompts arrive as ids and the stop ids are
the chat layer's (:mod:`rlver.llm.engine_chat`).

Two ways to hold the weights:

* ``shares_weights=True`` (the ``hf`` rollout backend, ``rlver eval --agent-local``): the engine
  samples on the very module it was given (the model being trained). :meth:`HFEngine.update_weights`
  then finds the trainer's tensors already in place and copies nothing, and :meth:`HFEngine.release`
  frees only what the engine itself holds between calls (the static KV cache of ``compile_decode``).
* ``shares_weights=False``: the module is the engine's own copy (:func:`own_copy`), as an inference
  server keeps one. Release frees its weights too, resume takes them back, and ``update_weights``
  loads the trained ones, keeping tied weights tied and non-persistent buffers (rotary ``inv_freq``)
  as they were (:class:`rlver.llm.weights.WeightSlots`).

No device is assumed: the module's own device is where prefill, draws and caches run (CUDA, a CPU),
and only the per-row generators live on the host (:mod:`rlver.llm.sampling`).
"""

from __future__ import annotations

import asyncio
import copy
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from rlver.errors import PolicyOutOfMemoryError
from rlver.llm.decoding import Decoder, is_out_of_memory, release_cached_memory
from rlver.llm.engine import (
    RESUME_TAGS,
    FinishReason,
    PromptIds,
    PromptRow,
    RowSeeds,
    StopIds,
    TokenEngine,
    TokenOutput,
)
from rlver.llm.engine_request import Request
from rlver.llm.sampling import LOGPROB_CONVENTION, explicit_settings
from rlver.llm.scheduler import Scheduler
from rlver.llm.slots import plan_slots
from rlver.llm.weights import WeightSlots

if TYPE_CHECKING:
    import torch

    from rlver.llm.base import SamplingParams

#: ``SamplingParams.extra`` keys the transformers engine understands; anything else is refused, because
#: a silently ignored setting would make the run's recorded sampling differ from what was sampled.
LOCAL_EXTRA_KEYS = frozenset({"top_k"})


def sampling_settings(sampling: SamplingParams) -> dict[str, Any]:
    """Every setting the transformers engine samples with, explicitly (recorded in run manifests):
    the shared statement (:func:`rlver.llm.sampling.explicit_settings`) and what this engine fixes.

    Nothing comes from the model's ``generation_config``: no repetition penalty (1.0), no ``top_k``
    unless ``extra`` sets it, no min_p/typical sampling.
    """
    return explicit_settings(
        sampling, extra_keys=LOCAL_EXTRA_KEYS, engine="the local backend",
        repetition_penalty=1.0, logprob_convention=LOGPROB_CONVENTION,
    )  # fmt: skip


def own_copy(module: Any) -> Any:
    """A deep copy of ``module`` for an engine that keeps its own weights.

    A module set to compute in bf16 (:func:`rlver.llm.precision.compute_in_bf16`) carries its autocast
    wrapper as an instance attribute around its *own* bound ``forward``; ``copy.deepcopy`` keeps that
    function as it is, so the copy would run the original's forward on the original's weights. The
    wrapper is dropped from the copy and made again around the copy's own forward.
    """
    from rlver.llm.precision import WRAPPED_ATTR, autocast_dtype, compute_in_bf16

    twin = copy.deepcopy(module)
    if autocast_dtype(module) is not None:
        vars(twin).pop("forward", None)
        vars(twin).pop(WRAPPED_ATTR, None)
        compute_in_bf16(twin, next(twin.parameters()).device)
    return twin


class HFEngine(TokenEngine):
    """A transformers causal LM sampled by rlver's decode loop (see the module docstring)."""

    queues_requests = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        device: str | None = None,
        max_batch_size: int | None = None,
        name: str | None = None,
        compile_decode: bool = False,
        shares_weights: bool = True,
        longest_tokens: int | None = None,
        memory_bytes: float | None = None,
    ) -> None:
        """``compile_decode``: on CUDA, decode with a static KV cache and a ``torch.compile``d step
        (CUDA graphs); elsewhere one ``warning:`` line on stderr and the eager path.

        ``max_batch_size``: the slots that decode at once; ``None`` sizes them from the memory free on
        the model's device once it is there (or ``memory_bytes``, when given) and the KV cost of
        sequences of ``longest_tokens`` (:func:`rlver.llm.slots.plan_slots`)."""
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        # Typed loosely on purpose: transformers' stubs do not model every model/tokenizer class.
        self.model: Any = cast(Any, model)
        self.tokenizer: Any = tokenizer
        self.name = name or str(getattr(model.config, "_name_or_path", "") or type(model).__name__)
        if device is not None:
            self.model.to(device)
        self.device = next(self.model.parameters()).device
        #: how many slots and what decided it (recorded by :meth:`describe`)
        self.slot_plan = plan_slots(
            self.model,
            max_batch_size=max_batch_size,
            longest_tokens=longest_tokens,
            memory_bytes=memory_bytes,
        )
        self.max_batch_size = self.slot_plan.slots
        self.shares_weights = shares_weights
        self.compile_asked = compile_decode
        self.compile_decode = compile_decode and self.device.type == "cuda"
        if compile_decode and not self.compile_decode:
            print(
                f"warning: compile_decode needs a CUDA device; the model is on {self.device}, "
                "so decoding stays eager (dynamic KV cache)",
                file=sys.stderr,
            )
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_token_id = int(pad if pad is not None else 0)  # masked out: any id pads
        self.decoder = Decoder(
            self.model, tokenizer, pad_token_id=self.pad_token_id, compile_decode=self.compile_decode
        )
        #: the module's tensors by name: what update_weights loads into, release frees
        self.weights = WeightSlots(self.model)
        #: the one queue every caller's rows wait in; ``max_batch_size`` slots decode at once
        self.scheduler = Scheduler(
            self.decoder,
            self.max_batch_size,
            out_of_memory=self._out_of_memory,
            is_out_of_memory=is_out_of_memory,
        )

    # -- what it states ---------------------------------------------------------------------------------
    def sampling_settings(self, sampling: SamplingParams) -> dict[str, Any]:
        return sampling_settings(sampling)

    def sampler(self) -> dict[str, Any]:
        """rlver's own loop: nothing from the model's generation_config, one generator per row."""
        return {
            "generation_config": "ignored",
            "repetition_penalty": 1.0,
            "top_k": "SamplingParams.extra.top_k, else off",
            "seeding": "one torch.Generator per row (per-dialogue seed): one uniform per step, "
            "inverse CDF on the device",
            "finished_rows": "leave the batch"
            if not self.decoder.static_cache
            else "free their static slot (reset by its position)",
            "batching": "one queue for every caller, the largest budget first among those seen waiting together; "
            f"{self.max_batch_size} slots, a freed slot takes the next request at the next step",
            "compile_decode": self.compile_decode,  # what decodes: asked for and on CUDA
            "compile_decode_asked": self.compile_asked,
            "weights": "shared with the trained model" if self.shares_weights else "its own copy",
        }

    def describe(self) -> dict[str, Any]:
        return {
            "device": str(self.device),
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
            "max_batch_size": self.max_batch_size,
            "slots": self.slot_plan.record(),
        }

    def __repr__(self) -> str:
        return f"HFEngine(name={self.name!r}, device={str(self.device)!r})"

    # -- generate ---------------------------------------------------------------------------------------
    def _requests(
        self, prompts: PromptIds, sampling: SamplingParams, seeds: RowSeeds, stop_token_ids: StopIds, ids: str
    ) -> list[Request]:
        """The queue's requests for one call (its settings checked first: a bad one fails the call)."""
        if len(seeds) != len(prompts):
            raise ValueError(f"generate: {len(prompts)} prompts but {len(seeds)} seeds")
        if not stop_token_ids:
            raise ValueError("generate: no stop token ids; a reply could only end at its token cap")
        self.weights.check_loaded()
        settings = sampling_settings(sampling)
        stops = frozenset(stop_token_ids)
        return [
            Request(
                list(p), settings, sampling, seed, stops, request_id=f"{ids}{i}" if len(prompts) > 1 else ids
            )
            for i, (p, seed) in enumerate(zip(prompts, seeds, strict=True))
        ]

    def generate(
        self, prompts: PromptIds, sampling: SamplingParams, *, seeds: RowSeeds, stop_token_ids: StopIds
    ) -> list[TokenOutput]:
        """Every row into the engine's queue (:mod:`rlver.llm.scheduler`), in order; blocks until all
        are sampled. The first failed row's error is raised (an out-of-memory one as
        :class:`PolicyOutOfMemoryError`)."""
        requests = self._requests(prompts, sampling, seeds, stop_token_ids, "generate-")
        self.scheduler.submit(requests)
        return [self._output(r, *r.future.result()) for r in requests]

    def generate_here(
        self, prompts: PromptIds, sampling: SamplingParams, *, seeds: RowSeeds, stop_token_ids: StopIds
    ) -> list[TokenOutput]:
        """:meth:`generate` with the decode loop in the calling thread (benchmarks, profiles); refused
        while the engine's worker runs."""
        requests = self._requests(prompts, sampling, seeds, stop_token_ids, "here-")
        self.scheduler.run_here(requests)
        return [self._output(r, *r.future.result()) for r in requests]

    async def generate_request(
        self,
        prompt_ids: PromptRow,
        sampling_params: SamplingParams,
        request_id: str,
        *,
        stop_token_ids: StopIds,
    ) -> TokenOutput:
        """One request into the queue; awaits its row without holding a thread."""
        (request,) = self._requests(
            [prompt_ids], sampling_params, [sampling_params.seed], stop_token_ids, request_id
        )
        self.scheduler.submit([request])
        tokens, logps = await asyncio.wrap_future(request.future)
        return self._output(request, tokens, logps)

    async def generate_requests(
        self,
        prompts: Sequence[PromptRow],
        samplings: Sequence[SamplingParams],
        request_ids: Sequence[str],
        *,
        stop_token_ids: StopIds,
    ) -> list[TokenOutput | BaseException]:
        """The rows into the queue together, in order; each awaited in its place."""
        requests: list[Request | BaseException] = []
        for p, s, rid in zip(prompts, samplings, request_ids, strict=True):
            try:
                requests += self._requests([p], s, [s.seed], stop_token_ids, rid)
            except ValueError as exc:  # a setting this engine cannot honour fails its row
                requests.append(exc)
        self.scheduler.submit([r for r in requests if isinstance(r, Request)])
        out: list[TokenOutput | BaseException] = []
        for r in requests:
            if isinstance(r, BaseException):
                out.append(r)
                continue
            try:
                out.append(self._output(r, *await asyncio.wrap_future(r.future)))
            except Exception as exc:
                out.append(exc)
        return out

    def set_admission_barrier(self, barrier: Callable[[], None] | None) -> bool:
        """The queue's worker calls ``barrier`` before each admission that follows an answer
        (:meth:`rlver.llm.scheduler.Scheduler.set_barrier`)."""
        self.scheduler.set_barrier(barrier)
        return True

    def _output(self, request: Request, tokens: list[int], logps: list[float]) -> TokenOutput:
        return TokenOutput(tokens, logps, self._finish_reason(tokens, request.sampling, set(request.stops)))

    def _out_of_memory(self, request: Request) -> PolicyOutOfMemoryError:
        """The error of one row that does not fit alone, naming the settings to lower."""
        return PolicyOutOfMemoryError(
            f"the policy ran out of memory generating one reply of {len(request.prompt)} prompt tokens "
            f"+ up to {request.sampling.max_tokens} new ones on {self.device}; lower rollout.max_new_tokens "
            "or the dialogue's length (rollout.rules.max_assistant_turns), or use a larger device"
        )

    def _finish_reason(self, tokens: list[int], sampling: SamplingParams, stops: set[int]) -> FinishReason:
        """``stop`` when the loop ended the row on a stop id or string, else ``length``."""
        if tokens and tokens[-1] in stops:
            return "stop"
        if sampling.stop and self.decoder.hits_stop_string(tokens, sampling.stop):
            return "stop"
        return "length"

    # -- lifecycle --------------------------------------------------------------------------------------
    def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy the trained weights in by name (none to copy when they are this engine's own)."""
        self.weights.load(weights)

    def release(self) -> None:
        """Free the held static KV cache and, for an engine with its own copy, the weights."""
        self.decoder.held_static = None
        if not self.shares_weights:
            self.weights.free()
        release_cached_memory()

    def resume(self, tags: Sequence[str] = RESUME_TAGS) -> None:
        """``"weights"``: take the weights' memory back (its own copy only; :meth:`update_weights`
        fills it), and compile the decode step again for the new tensors (CUDA graphs are recorded for
        the tensors they read). ``"kv_cache"``: nothing to take back ahead of time; the static cache is
        allocated by the next generation and the dynamic one grows with it."""
        unknown = sorted(set(tags) - set(RESUME_TAGS))
        if unknown:
            raise ValueError(f"resume: unknown tags {unknown}; known: {list(RESUME_TAGS)}")
        if "weights" not in tags or self.shares_weights or not self.weights.released:
            return
        self.weights.allocate()
        if self.decoder.compiled_forward is not None:
            self.decoder.compile_forward()
