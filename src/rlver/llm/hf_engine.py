"""The transformers engine: a :class:`~rlver.llm.engine.TokenEngine` on a causal LM in this process.

It samples with rlver's own decode loop (:class:`rlver.llm.decoding.Decoder`: left-padded prefill,
per-row seeded draws, finished rows leave the batch), in chunks of ``max_batch_size`` rows, halving a
chunk that runs out of memory. Nothing of chat lives here: prompts arrive as ids and the stop ids are
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

import copy
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from rlver.errors import PolicyOutOfMemoryError
from rlver.llm.decoding import Decoder, is_out_of_memory, release_cached_memory
from rlver.llm.engine import FinishReason, PromptIds, RowSeeds, StopIds, TokenEngine, TokenOutput
from rlver.llm.sampling import LOGPROB_CONVENTION, explicit_settings
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


@dataclass(frozen=True)
class _Call:
    """What every chunk of one ``generate`` call shares: the explicit settings, the parameters they
    came from, and the stop ids."""

    settings: dict[str, Any]
    sampling: SamplingParams
    stops: set[int]


class HFEngine(TokenEngine):
    """A transformers causal LM sampled by rlver's decode loop (see the module docstring)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        device: str | None = None,
        max_batch_size: int = 16,
        name: str | None = None,
        compile_decode: bool = False,
        shares_weights: bool = True,
    ) -> None:
        """``compile_decode``: on CUDA, decode with a static KV cache and a ``torch.compile``d step
        (CUDA graphs); elsewhere one ``warning:`` line on stderr and the eager path."""
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        # Typed loosely on purpose: transformers' stubs do not model every model/tokenizer class.
        self.model: Any = cast(Any, model)
        self.tokenizer: Any = tokenizer
        self.max_batch_size = max_batch_size
        self.name = name or str(getattr(model.config, "_name_or_path", "") or type(model).__name__)
        if device is not None:
            self.model.to(device)
        self.device = next(self.model.parameters()).device
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
            "finished_rows": "leave the batch" if not self.decoder.static_cache else "keep their slot",
            "compile_decode": self.compile_decode,  # what decodes: asked for and on CUDA
            "compile_decode_asked": self.compile_asked,
            "weights": "shared with the trained model" if self.shares_weights else "its own copy",
        }

    def describe(self) -> dict[str, Any]:
        return {
            "device": str(self.device),
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
            "max_batch_size": self.max_batch_size,
        }

    def __repr__(self) -> str:
        return f"HFEngine(name={self.name!r}, device={str(self.device)!r})"

    # -- generate ---------------------------------------------------------------------------------------
    def generate(
        self, prompts: PromptIds, sampling: SamplingParams, *, seeds: RowSeeds, stop_token_ids: StopIds
    ) -> list[TokenOutput]:
        """Chunks of ``max_batch_size`` rows, each by :meth:`_generate_fitting`."""
        if len(seeds) != len(prompts):
            raise ValueError(f"generate: {len(prompts)} prompts but {len(seeds)} seeds")
        if not stop_token_ids:
            raise ValueError("generate: no stop token ids; a reply could only end at its token cap")
        self.weights.check_loaded()
        call = _Call(sampling_settings(sampling), sampling, set(stop_token_ids))
        out: list[TokenOutput] = []
        for start in range(0, len(prompts), self.max_batch_size):
            end = start + self.max_batch_size
            out += self._generate_fitting([list(p) for p in prompts[start:end]], list(seeds[start:end]), call)
        return out

    def _generate_fitting(
        self, prompts: list[list[int]], seeds: list[int | None], call: _Call
    ) -> list[TokenOutput]:
        """:meth:`_generate`, halving the chunk on out-of-memory until it fits.

        Why retry instead of failing the rows: the rows that do not fit are the longest dialogues, and
        dropping them would bias training towards short ones. A row's sample depends only on its
        prompt and its own seed, so splitting a chunk changes no sampled token. A single row that still
        does not fit fails the step with the settings to lower.
        """
        try:
            return self._generate(prompts, seeds, call)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
        # released here, not in the handler: the exception's traceback holds the failed attempt's tensors
        release_cached_memory()
        if len(prompts) == 1:
            raise PolicyOutOfMemoryError(
                f"the policy ran out of memory generating one reply of {len(prompts[0])} prompt tokens "
                f"+ up to {call.sampling.max_tokens} new ones on {self.device}; lower rollout.max_new_tokens "
                "or the dialogue's length (rollout.rules.max_assistant_turns), or use a larger device"
            )
        half = len(prompts) // 2
        first = self._generate_fitting(prompts[:half], seeds[:half], call)
        return first + self._generate_fitting(prompts[half:], seeds[half:], call)

    def _generate(self, prompts: list[list[int]], seeds: list[int | None], call: _Call) -> list[TokenOutput]:
        """One run of the decode loop over ``prompts``, each row's ids with why it ended."""
        tokens, logps = self.decoder.generate(prompts, call.settings, call.sampling, seeds, call.stops)
        return [
            TokenOutput(toks, lps, self._finish_reason(toks, call.sampling, call.stops))
            for toks, lps in zip(tokens, logps, strict=True)
        ]

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

    def resume(self) -> None:
        """Take the weights' memory back (its own copy only; :meth:`update_weights` fills it). A
        compiled decode step recorded for the freed tensors is compiled again for the new ones."""
        if self.shares_weights or not self.weights.released:
            return
        self.weights.allocate()
        if self.decoder.compiled_forward is not None:
            self.decoder.compile_forward()
