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
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rlver.llm.base import ChatModel, Completion, MessagesLike, SamplingParams

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

#: End-of-turn markers a chat model may emit; generation stops at whichever the tokenizer knows.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>")


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class LocalChatModel(ChatModel):
    """Wraps an in-memory Hugging Face causal LM and its tokenizer (which must have a chat template)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        device: str | None = None,
        max_batch_size: int = 16,
        name: str | None = None,
    ) -> None:
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
        pad = tokenizer.pad_token_id
        self.pad_token_id: int = int(pad if pad is not None else self.stop_token_ids[0])

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        device: str | None = None,
        dtype: str = "auto",
        max_batch_size: int = 16,
        name: str | None = None,
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
        )

    def _stop_ids(self) -> list[int]:
        ids: list[int] = []
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

    # -- generation (worker thread) ------------------------------------------------------------------
    def _encode(self, messages: MessagesLike) -> list[int]:
        conversation = [{"role": m.role, "content": m.content} for m in messages]
        out = self.tokenizer.apply_chat_template(conversation, add_generation_prompt=True, return_dict=True)
        return list(out["input_ids"])

    def _generate_chunk(
        self, chunk: Sequence[MessagesLike], sampling: SamplingParams
    ) -> list[Completion | BaseException]:
        results: list[Completion | BaseException | None] = [None] * len(chunk)
        prompts: list[tuple[int, list[int]]] = []
        for i, messages in enumerate(chunk):
            try:
                prompts.append((i, self._encode(messages)))
            except Exception as exc:  # a bad conversation fails alone
                results[i] = exc
        if prompts:
            try:
                completions = self._generate([ids for _, ids in prompts], sampling)
            except Exception as exc:  # e.g. out of memory: the whole chunk failed
                completions = [exc] * len(prompts)
            for (i, _), completion in zip(prompts, completions, strict=True):
                results[i] = completion
        return [r if r is not None else RuntimeError("no result") for r in results]

    def _generate(
        self, prompts: list[list[int]], sampling: SamplingParams
    ) -> list[Completion | BaseException]:
        import torch

        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids) :] = 1
        kwargs: dict[str, Any] = {
            "max_new_tokens": sampling.max_tokens,
            "eos_token_id": self.stop_token_ids,
            "pad_token_id": self.pad_token_id,
            "do_sample": sampling.temperature > 0,
        }
        if sampling.temperature > 0:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
        else:  # greedy: neutralise sampling defaults from the model's generation_config
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if sampling.stop:
            kwargs.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
        kwargs.update(sampling.extra)

        start = time.perf_counter()
        with self._lock:
            was_training = self.model.training
            self.model.eval()
            try:
                with torch.inference_mode(), _seeded(sampling.seed, self.device):
                    output = self.model.generate(
                        input_ids=input_ids.to(self.device),
                        attention_mask=attention.to(self.device),
                        **kwargs,
                    )
            finally:
                if was_training:
                    self.model.train()
        latency = time.perf_counter() - start
        new_tokens = output[:, width:].tolist()
        return [
            self._to_completion(tokens, len(prompt), sampling, latency)
            for tokens, prompt in zip(new_tokens, prompts, strict=True)
        ]

    def _to_completion(
        self, tokens: list[int], prompt_len: int, sampling: SamplingParams, latency: float
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
        )


class _seeded:
    """Seed torch's RNG for one generate without disturbing the caller's random stream."""

    def __init__(self, seed: int | None, device: torch.device) -> None:
        self.seed = seed
        self.device = device
        self._fork: Any = None

    def __enter__(self) -> None:
        if self.seed is None:
            return
        import torch

        devices = [self.device] if self.device.type == "cuda" else []
        self._fork = torch.random.fork_rng(devices=devices)
        self._fork.__enter__()
        torch.manual_seed(self.seed)

    def __exit__(self, *exc: object) -> None:
        if self._fork is not None:
            self._fork.__exit__(*exc)
            self._fork = None
