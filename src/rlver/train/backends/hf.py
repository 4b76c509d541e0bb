"""``hf``: the transformers engine (:class:`~rlver.llm.hf_engine.HFEngine`, this process) on the very
model being trained. It shares the policy's weights, so ``sync`` finds them in place and copies
nothing, and its KV caches live only inside a ``generate`` call (the static one of ``compile_decode``
is dropped on release), so the memory guard adds nothing for it.

Its one knob, ``rollout.backend_settings.compile_decode`` (in older configs ``rollout.compile_decode``,
still read through ``rlver.migrate``): on CUDA, decode with a static KV cache and a ``torch.compile``d
step (CUDA graphs); opt-in, since the first steps pay for compiling; on a CPU it warns once and decodes
eagerly.

``rlver.llm.hf_engine`` is imported only when the backend is built, so reading a config (which reads
:class:`HFSettings`) loads no model library.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import Field

from rlver.train.backends.base import BackendSettings, RolloutBackend

if TYPE_CHECKING:
    import torch

    from rlver.llm.engine import TokenEngine
    from rlver.train.backends.settings import BackendConfig


class HFSettings(BackendSettings):
    """``hf``'s own knobs."""

    compile_decode: bool = Field(
        default=False,
        description="static KV cache + compiled decode step on CUDA (warns once and stays eager elsewhere)",
    )


class HFBackend(RolloutBackend[HFSettings]):
    """transformers in this process, on the model being trained (the sampler shares its weights)."""

    settings_class = HFSettings

    def build(self, policy: torch.nn.Module, tokenizer: Any, device: torch.device) -> TokenEngine:
        from rlver.llm.hf_engine import HFEngine

        return HFEngine(
            policy,
            tokenizer,
            device=str(device),
            max_batch_size=self.config.model.generation_batch_size,  # None: sized from memory
            longest_tokens=self.config.model.max_length,  # what a slot may hold: one whole dialogue
            name="policy",
            compile_decode=self.settings.compile_decode,
            shares_weights=True,
        )

    @classmethod
    def verl_refusals(cls, settings: HFSettings, config: BackendConfig) -> list[str]:
        """verl samples with its own engine: ``hf`` stands for "the engine's own sampler" there, and a
        knob of the local sampler would be dropped silently, so one set away from its default is refused."""
        return [
            f"rollout.backend_settings.{key}={json.dumps(value)}: the hf sampler's setting has no effect "
            "under --trainer verl (verl samples with verl.rollout_engine); leave it at its default "
            f"({json.dumps(HFSettings.model_fields[key].default)}) or train with --trainer local"
            for key, value in settings.model_dump().items()
            if value != HFSettings.model_fields[key].default
        ]
