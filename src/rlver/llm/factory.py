"""Build a :class:`ChatModel` from a :class:`ModelSpec` (a config block or CLI flags).

The model kinds are declared once, in :data:`rlver.llm.spec.KINDS` (re-exported here), a
:class:`~rlver.registry.Registry` as the simulator kinds are: each entry (:class:`ModelKind`) has a name,
a one-line description and a builder from a spec (the built-in two are the ``build_*`` functions below,
named lazily so that :mod:`rlver.llm.spec` need not import this module). ``ModelSpec.kind`` is checked
against the same table, so a kind registered at run time (:func:`register_model_kind`; a test does
it) is accepted by configs and built like the others, and an unknown kind is refused in the
registry's one wording.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlver.errors import ConfigError
from rlver.llm.base import ChatModel
from rlver.llm.spec import KINDS, ModelSpec
from rlver.registry import Entry


def build_chat_model(spec: ModelSpec) -> ChatModel:
    """The model a spec names, wrapped in the response cache when ``spec.cache`` is set.

    Local models import torch/transformers in their builder, not at module import, so the CLI stays fast.
    """
    build: Builder = KINDS.get(spec.kind)
    model = build(spec)
    model.retry_empty = spec.retry_empty
    if spec.cache:
        from rlver.llm.cache import CachedChatModel

        model = CachedChatModel(model, spec.cache)
    return model


# -- the registry -----------------------------------------------------------------------------------

#: Builds a kind's model from its spec (errors the user can fix are :class:`ConfigError`).
Builder = Callable[[ModelSpec], ChatModel]


#: One kind of model a spec can name: ``ModelKind(name, description, builder)``, a registry entry.
ModelKind = Entry[Any]


def build_openai(spec: ModelSpec) -> ChatModel:
    """``kind: openai``: a client of the endpoint (``base_url``: a spec without one is refused)."""
    from rlver.llm.openai_client import OpenAIChatModel

    assert spec.base_url is not None  # ModelSpec refuses an openai spec without one
    return OpenAIChatModel(
        spec.base_url,
        spec.model,
        api_key_env=spec.api_key_env,
        timeout_s=spec.timeout_s,
        max_attempts=spec.max_attempts,
        concurrency=spec.concurrency,
    )


def build_local(spec: ModelSpec) -> ChatModel:
    """``kind: local``: the model loaded in this process (checked first: a clear error, not a trace)."""
    from rlver.extras import require_extra

    require_extra("train", f"a local model ({spec.model})")
    from rlver.llm.local import LocalChatModel
    from rlver.models.reference import resolve_reference

    check_model_source(spec.model, "model")
    path = resolve_reference(spec.model).location
    try:
        return LocalChatModel.from_pretrained(
            path,
            device=spec.device,
            dtype=spec.dtype,
            max_batch_size=spec.max_batch_size,
            name=spec.model,
            compile_decode=spec.compile_decode,
        )
    except (OSError, ValueError) as exc:  # missing files; a folder transformers cannot read
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"model: cannot load local model {spec.model!r}: {first}") from None


def register_model_kind(kind: ModelKind) -> ModelKind:
    """Add (or replace) a model kind; specs may name it from now on."""
    return KINDS.add_entry(kind)


def model_kind_names() -> tuple[str, ...]:
    return KINDS.names()


def check_model_source(model: str, setting: str = "model.path") -> None:
    """Refuse, before anything is loaded, a model that cannot be loaded: a folder that does not exist,
    a file or an empty folder where a model folder is expected, or a hub id that is neither cached nor
    reachable (``HF_HUB_OFFLINE=1``).

    ``rlver train`` and ``rlver eval`` both call this first, so a wrong path fails in a second with the
    setting's name instead of after minutes of loading (or of hub retries) with a transformers traceback.
    ``tiny`` (the bundled test model) is always fine. A fetchable model's name
    (``smollm2-135m-instruct``) is checked as its fetched folder; not fetched yet, the error names the
    fetch command. What the reference is comes from :func:`rlver.models.reference.resolve_reference`.
    """
    from rlver.models.reference import resolve_reference

    ref = resolve_reference(model)
    if ref.kind == "tiny":
        return
    model = ref.location
    if ref.folder is not None:
        _check_model_folder(ref.folder, model, setting)
        return
    _check_near_name(model, setting)
    _check_hub_id(model, setting)


def _check_near_name(model: str, setting: str) -> None:
    """A name one typo away from a model rlver knows (``smollm2-135m`` for ``smollm2-135m-instruct``, ``tiyn``)
    is refused with the name, not blamed on the hub or the network, unless the hub cache holds it (then
    it is a real model that happens to be spelled alike). An ``org/name`` id is left to the hub check."""
    from rlver.errors import did_you_mean
    from rlver.models.fetch import FETCHABLE

    known = ["tiny", *FETCHABLE]
    hint = did_you_mean(model.lower(), known)
    if "/" in model or not hint or _in_hub_cache(model):
        return
    raise ConfigError(
        f"{setting}: {model!r} is not a model rlver knows ({', '.join(known)}), a model folder or a cached "
        f"Hugging Face model{hint} (rlver models list)"
    )


def _in_hub_cache(model: str) -> bool:
    """Whether the Hugging Face cache holds ``model``'s config.json (no network call)."""
    from rlver.models.reference import InvalidHubId, hub_cached_file

    try:
        return hub_cached_file(model) is not None
    except InvalidHubId:  # not a valid repo id: not cached
        return False


#: The files that hold a model's weights, one of which a model folder must have (a sharded model has
#: its index ``.json``; a LoRA adapter has ``adapter_model.safetensors``).
WEIGHT_FILES = (
    "*.safetensors",
    "*.safetensors.index.json",
    "pytorch_model*.bin",
    "pytorch_model*.bin.index.json",
)


def _check_model_folder(path: Path, model: str, setting: str) -> None:
    """A local model folder must exist, be a folder, hold a ``config.json`` and weights (a folder with
    only the config and the tokenizer, a copy that left out the large files, used to fail deep in
    transformers with ``OSError: ... no file named model.safetensors`` and exit 1)."""
    hint = "a folder with config.json, e.g. one written by `rlver export`, or a Hugging Face model id"
    if not path.exists():
        raise ConfigError(f"{setting}: no model folder at {model!r} (expected {hint})")
    if not path.is_dir():
        raise ConfigError(f"{setting}: {model!r} is a file, not a model folder (expected {hint})")
    if not (path / "config.json").is_file():
        what = "is empty" if not any(path.iterdir()) else "has no config.json"
        raise ConfigError(f"{setting}: the folder {model!r} {what} (expected {hint})")
    if not any(any(path.glob(pattern)) for pattern in WEIGHT_FILES):
        # transformers would say so only after the run folder was made, in a traceback
        raise ConfigError(
            f"{setting}: the folder {model!r} has config.json but no weights (no *.safetensors, "
            "pytorch_model*.bin or their index .json): copy them in, or give the whole model's folder"
        )


def _check_hub_id(model: str, setting: str) -> None:
    """A hub id is fine when cached, or when the hub can be asked; uncached with ``HF_HUB_OFFLINE=1``
    or with the hub's host unknown (no network), it is refused at once instead of after
    huggingface_hub's retries (about 25 s, then a traceback)."""
    import os

    from rlver.models.reference import InvalidHubId, hub_cached_file

    try:
        cached = hub_cached_file(model)
    except InvalidHubId:
        raise ConfigError(
            f"{setting}: {model!r} is neither a model folder nor a Hugging Face model id"
        ) from None
    if cached is not None:
        return
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    why = "HF_HUB_OFFLINE is set" if offline else _hub_unreachable()
    if why:
        raise ConfigError(
            f"{setting}: {model!r} is not in the Hugging Face cache and {why}; download it where the hub "
            "can be reached, or give a local model folder"
        )


def _hub_unreachable() -> str:
    """Why the hub cannot be reached from here ("" when it may be): its host name does not resolve.

    Only a name lookup (no request), and skipped behind a proxy, which may resolve names itself.
    """
    import os
    import socket
    from urllib.parse import urlparse

    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return ""
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return f"{host} cannot be reached (no network?)"
    return ""
