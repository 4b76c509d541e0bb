"""Rollout backends: what the trainer samples its dialogues' replies with.

The trainer asks :func:`build_rollout_backend` for the backend ``rollout.backend`` names and uses its
:attr:`RolloutBackend.chat` as the policy of every rollout and evaluation. After each update it calls
:meth:`RolloutBackend.sync` with the trained model.

``hf`` (the only one built in) samples with :class:`~rlver.llm.local.LocalChatModel` on the very
model being trained, so ``sync`` has nothing to do. An engine that keeps its own copy of the weights
(vLLM, SGLang) is one subclass: build the engine in ``__init__``, wrap it as a ``ChatModel``, and copy
the new weights in ``sync``; then :func:`register_backend` it (at import time, or at run time as the
tests do) and name it in ``rollout.backend``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rlver.llm.base import ChatModel

if TYPE_CHECKING:
    import torch

    from rlver.train.config import TrainConfig


class RolloutBackend:
    """The policy's sampler for one training run. Subclasses set :attr:`name` and :attr:`description`."""

    name: ClassVar[str]
    description: ClassVar[str]

    def __init__(
        self, config: TrainConfig, policy: torch.nn.Module, tokenizer: Any, device: torch.device
    ) -> None:
        self.config = config
        self.chat: ChatModel = self.build_chat(config, policy, tokenizer, device)

    def build_chat(
        self, config: TrainConfig, policy: torch.nn.Module, tokenizer: Any, device: torch.device
    ) -> ChatModel:
        """The :class:`ChatModel` the rollouts call."""
        raise NotImplementedError

    def sync(self, policy: torch.nn.Module) -> None:
        """Called after every update with the trained model: an engine with its own copy of the
        weights loads the new ones here, before the next rollout samples from them."""

    def describe(self) -> dict[str, Any]:
        """The sampler's description for the manifest, with the backend's name."""
        return {**self.chat.describe(), "rollout_backend": self.name}


class HFBackend(RolloutBackend):
    """transformers in this process, on the model being trained (the sampler shares its weights)."""

    name = "hf"
    description = "the local sampler on the trained model itself (transformers, this process)"

    def build_chat(
        self, config: TrainConfig, policy: torch.nn.Module, tokenizer: Any, device: torch.device
    ) -> ChatModel:
        from rlver.llm.local import LocalChatModel

        return LocalChatModel(
            policy,  # type: ignore[arg-type]
            tokenizer,
            device=str(device),
            max_batch_size=config.model.generation_batch_size,
            name="policy",
            compile_decode=config.rollout.compile_decode,
        )


#: The backends ``rollout.backend`` may name, by name.
BACKENDS: dict[str, type[RolloutBackend]] = {HFBackend.name: HFBackend}


def register_backend(backend: type[RolloutBackend]) -> type[RolloutBackend]:
    """Add (or replace) a backend under its ``name``; returns it, so it can decorate the class."""
    BACKENDS[backend.name] = backend
    return backend


def backend_names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def check_backend_name(name: str) -> str:
    """``name`` if a backend is registered under it; else a ValueError listing the known ones (the
    config's validator: a typo is refused when the config is read, before any model loads)."""
    if name not in BACKENDS:
        known = ", ".join(repr(n) for n in backend_names())
        raise ValueError(f"unknown rollout backend {name!r}; known backends: {known}")
    return name


def build_rollout_backend(
    config: TrainConfig, policy: torch.nn.Module, tokenizer: Any, device: torch.device
) -> RolloutBackend:
    """The backend ``config.rollout.backend`` names, built around ``policy``."""
    return BACKENDS[check_backend_name(config.rollout.backend)](config, policy, tokenizer, device)
