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

        check_model_source(spec.model, "model")
        try:
            model = LocalChatModel.from_pretrained(
                spec.model, device=spec.device, dtype=spec.dtype, max_batch_size=spec.max_batch_size
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


def check_model_source(model: str, setting: str = "model.path") -> None:
    """Refuse, before anything is loaded, a model that cannot be loaded: a folder that does not exist,
    a file or an empty folder where a model folder is expected, or a hub id that is neither cached nor
    reachable (``HF_HUB_OFFLINE=1``).

    ``rlver train`` and ``rlver eval`` both call this first, so a wrong path fails in a second with the
    setting's name instead of after minutes of loading (or of hub retries) with a transformers traceback.
    ``tiny`` (the bundled test model) is always fine. Model *names* (a short name rlver resolves to a
    folder) are resolved before this check, which then sees the folder.
    """
    if model == "tiny":
        return
    path = Path(model).expanduser()
    if path.exists() or _looks_like_path(model):
        _check_model_folder(path, model, setting)
        return
    _check_hub_id(model, setting)


def _check_model_folder(path: Path, model: str, setting: str) -> None:
    """A local model folder must exist, be a folder and hold a ``config.json``."""
    hint = "a folder with config.json, e.g. one written by `rlver export`, or a Hugging Face model id"
    if not path.exists():
        raise ConfigError(f"{setting}: no model folder at {model!r} (expected {hint})")
    if not path.is_dir():
        raise ConfigError(f"{setting}: {model!r} is a file, not a model folder (expected {hint})")
    if not (path / "config.json").is_file():
        what = "is empty" if not any(path.iterdir()) else "has no config.json"
        raise ConfigError(f"{setting}: the folder {model!r} {what} (expected {hint})")


def _check_hub_id(model: str, setting: str) -> None:
    """A hub id is fine when cached, or when the hub may be asked; offline and uncached, it is refused."""
    import os

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("1", "true", "yes", "on"):
        return  # transformers downloads it (and reports a failure, which build_chat_model words)
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return
    try:
        cached = try_to_load_from_cache(model, "config.json")
    except ValueError:  # not a valid repo id (huggingface_hub's HFValidationError)
        raise ConfigError(
            f"{setting}: {model!r} is neither a model folder nor a Hugging Face model id"
        ) from None
    if not isinstance(cached, str):
        raise ConfigError(
            f"{setting}: {model!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
            "download it with network access, or give a local model folder"
        )


def _looks_like_path(model: str) -> bool:
    """A hub id is ``name`` or ``org/name``; anything absolute, relative-dotted or home-based is a path."""
    return model.startswith(("/", "./", "../", "~")) or model.count("/") > 1 or "\\" in model
