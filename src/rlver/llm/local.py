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
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rlver.errors import PolicyOutOfMemoryError
from rlver.llm.base import ChatModel, Completion, MessagesLike, SamplingParams
from rlver.llm.control_tokens import render_ids
from rlver.llm.decoding import Decoder, is_out_of_memory, release_cached_memory
from rlver.llm.sampling import is_greedy
from rlver.llm.sequence import SequenceError, chat_ids, end_of_turn_id
from rlver.models.devices import default_device

if TYPE_CHECKING:
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
        self.stop_token_ids = self._stop_ids()
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
        self._decoder = Decoder(
            self.model, self.tokenizer, pad_token_id=self.pad_token_id, compile_decode=self.compile_decode
        )

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
                "finished_rows": "leave the batch" if not self._decoder.static_cache else "keep their slot",
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
        """One generation of token-id prompts by the decode engine (:class:`rlver.llm.decoding.Decoder`:
        why our own loop, the seed contract), each row's tokens cut into a :class:`Completion`."""
        settings = sampling_settings(sampling)
        row_seeds = list(seeds) if seeds is not None else [sampling.seed] * len(prompts)
        start = time.perf_counter()
        tokens, logps = self._decoder.generate(
            prompts, settings, sampling, row_seeds, set(self.stop_token_ids)
        )
        latency = time.perf_counter() - start
        return [
            self._to_completion(toks, lps, len(prompt), sampling, latency)
            for toks, lps, prompt in zip(tokens, logps, prompts, strict=True)
        ]

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
    greedy = is_greedy(sampling.temperature)  # no filter: the argmax is taken
    return {
        "temperature": sampling.temperature,
        "top_p": 1.0 if greedy else sampling.top_p,
        "top_k": 0 if greedy else top_k,
        "repetition_penalty": 1.0,
        "max_tokens": sampling.max_tokens,
        "seed": sampling.seed,
        "stop": list(sampling.stop or []),
        "logprob_convention": "log_softmax(logits / temperature), before top-p/top-k filtering",
    }
