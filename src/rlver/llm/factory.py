"""Build a :class:`ChatModel` from a :class:`ModelSpec` (a config block or CLI flags)."""

from __future__ import annotations

from pathlib import Path

from rlver.errors import ConfigError
from rlver.llm.base import ChatModel
from rlver.llm.spec import ModelSpec

#: Where ``kind="openai"`` goes when a spec names no ``base_url``.
OPENAI_BASE_URL = "https://api.openai.com/v1"


def build_chat_model(spec: ModelSpec) -> ChatModel:
    """The model a spec names, wrapped in the response cache when ``spec.cache`` is set.

    Local models import torch/transformers here, not at module import, so the CLI stays fast.
    """
    model: ChatModel
    if spec.kind == "openai":
        from rlver.llm.openai_client import OpenAIChatModel

        model = OpenAIChatModel(
            spec.base_url or OPENAI_BASE_URL,
            spec.model,
            api_key_env=spec.api_key_env,
            timeout_s=spec.timeout_s,
            max_attempts=spec.max_attempts,
            concurrency=spec.concurrency,
        )
    elif spec.kind == "local":
        from rlver.llm.local import LocalChatModel
        from rlver.models.fetch import resolve_model_path

        path = resolve_model_path(spec.model)
        if _looks_like_path(path) and not Path(path).expanduser().exists():
            raise ConfigError(
                f"model: no model folder at {spec.model!r} (expected a folder with config.json, "
                "e.g. one written by `rlver export`, or a Hugging Face model id)"
            )
        try:
            model = LocalChatModel.from_pretrained(
                path,
                device=spec.device,
                dtype=spec.dtype,
                max_batch_size=spec.max_batch_size,
                name=spec.model,
            )
        except (OSError, ValueError) as exc:  # missing files; a folder transformers cannot read
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"model: cannot load local model {spec.model!r}: {first}") from None
    else:  # pragma: no cover - ModelSpec's Literal already rejects other kinds
        raise ConfigError(f"kind: unknown model kind {spec.kind!r}; expected 'openai' or 'local'")
    if spec.cache:
        from rlver.llm.cache import CachedChatModel

        model = CachedChatModel(model, spec.cache)
    return model


def _looks_like_path(model: str) -> bool:
    """A hub id is ``name`` or ``org/name``; anything absolute, relative-dotted or home-based is a path."""
    return model.startswith(("/", "./", "../", "~")) or model.count("/") > 1 or "\\" in model
