"""A local transformers model behind the :class:`ChatModel` interface: the chat layer
(:class:`~rlver.llm.engine_chat.EngineChatModel`) over the transformers engine
(:class:`~rlver.llm.hf_engine.HFEngine`), built from a model object or a folder.

Why batched: in a rollout every live dialogue needs the policy's next reply at the same time. One
left-padded generation over all of them is many times faster than one call per dialogue, on a GPU and
on a CPU alike. The trainer hands in the model it is training: generation runs in eval mode under
``torch.inference_mode()`` and the model's training mode is restored afterwards
(:mod:`rlver.llm.decoding`); it runs in a worker thread so the event loop keeps serving simulator calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlver.llm.engine_chat import EngineChatModel, generation_eos
from rlver.llm.hf_engine import HFEngine, sampling_settings
from rlver.models.devices import default_device

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["LocalChatModel", "sampling_settings"]


class LocalChatModel(EngineChatModel):
    """Wraps an in-memory Hugging Face causal LM and its tokenizer (which must have a chat template)."""

    engine: HFEngine

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        device: str | None = None,
        max_batch_size: int | None = None,
        name: str | None = None,
        compile_decode: bool = False,
    ) -> None:
        """``compile_decode``: on CUDA, decode with a static KV cache and a ``torch.compile``d step
        (CUDA graphs); elsewhere one ``warning:`` line on stderr and the eager path. ``max_batch_size``:
        the engine's slots; ``None`` sizes them from the device's free memory (:mod:`rlver.llm.slots`)."""
        engine = HFEngine(
            model,
            tokenizer,
            device=device,
            max_batch_size=max_batch_size,
            name=name,
            compile_decode=compile_decode,
        )
        super().__init__(engine, tokenizer, eos_ids=generation_eos(model))

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        device: str | None = None,
        dtype: str = "auto",
        max_batch_size: int | None = None,
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

    # the engine's model and settings, where callers of the one-class wrapper looked for them
    @property
    def model(self) -> Any:
        return self.engine.model

    @property
    def device(self) -> Any:
        return self.engine.device

    @property
    def max_batch_size(self) -> int:
        return self.engine.max_batch_size

    @property
    def compile_decode(self) -> bool:
        return self.engine.compile_decode
