"""What a model reference names and where it lives — the one place rlver reads a model reference.

Wherever rlver takes a model (``model.path``, ``--agent-local``, verl's ``model.path``) the value is one
of four things:

* ``tiny`` — the bundled random test model, built on demand (:func:`base_model_folder`);
* a fetchable model's name (``smollm2-135m-instruct``) — its fetched folder
  (:func:`rlver.models.fetch.resolve_model_path`; not fetched yet is an error naming the fetch command);
* a local folder — used as it is (anything that exists, or is written like a path: ``/``, ``./``,
  ``~``, ``a/b/c``);
* a Hugging Face hub id (``name`` or ``org/name``) — loaded through transformers.

Why one module: the model factory's source check, the memory guard's architecture read, the training
loader and verl's launcher each used to tell these apart and each looked into the Hugging Face cache
their own way (three ``try_to_load_from_cache`` calls with three error handlings). Now
:func:`resolve_reference` decides what a reference is and :func:`hub_cached_file` is the only lookup
in the hub cache (``tests/models/test_reference.py`` holds that no other module makes one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rlver.models.fetch import FETCHABLE, resolve_model_path
from rlver.models.tiny import Size as TinySize
from rlver.models.tiny import ensure_tiny_model

#: What a reference names.
ReferenceKind = Literal["tiny", "fetchable", "folder", "hub"]

#: The folder of a run that holds the base model when ``model.path`` is ``tiny``: one name for both
#: engines (the local trainer and verl's launcher), so a run folder reads the same whichever trained it.
BASE_MODEL_DIR = "base_model"


class InvalidHubId(ValueError):
    """The string is not a valid Hugging Face repo id (so it cannot be in the hub cache)."""


@dataclass(frozen=True)
class ModelReference:
    """A model reference, read: what it is (``kind``) and where it lives (``location``).

    ``location`` is ``tiny`` for the test model, the folder for a fetched or local model (as written,
    ``~`` not expanded, so messages quote the user's own text) and the id for a hub model.
    """

    given: str
    kind: ReferenceKind
    location: str

    @property
    def folder(self) -> Path | None:
        """The local folder (``~`` expanded) for a fetched or local model; ``None`` otherwise."""
        return Path(self.location).expanduser() if self.kind in ("fetchable", "folder") else None

    def config_file(self) -> Path | None:
        """The model's ``config.json`` when it is at hand without a network call: a folder's own, or
        the hub cache's copy for a hub id; ``None`` for ``tiny``, a folder without one, an uncached id."""
        if self.kind == "tiny":
            return None
        folder = self.folder
        if folder is not None:
            file = folder / "config.json"
            return file if file.is_file() else None
        try:
            return hub_cached_file(self.location)
        except InvalidHubId:
            return None


def resolve_reference(value: str) -> ModelReference:
    """Read ``value`` (see the module docstring for the four kinds).

    Raises :class:`rlver.errors.ConfigError` for a fetchable name that is not fetched yet (the message
    names ``rlver models fetch``), never a hub lookup that would hang on a machine without hub access.
    """
    if value == "tiny":
        return ModelReference(value, "tiny", value)
    if value in FETCHABLE:
        return ModelReference(value, "fetchable", resolve_model_path(value))
    if Path(value).expanduser().exists() or looks_like_path(value):
        return ModelReference(value, "folder", value)
    return ModelReference(value, "hub", value)


def looks_like_path(model: str) -> bool:
    """A hub id is ``name`` or ``org/name``; anything absolute, relative-dotted or home-based is a path."""
    return model.startswith(("/", "./", "../", "~")) or model.count("/") > 1 or "\\" in model


def hub_cached_file(repo_id: str, filename: str = "config.json") -> Path | None:
    """``filename`` of hub model ``repo_id`` from the local Hugging Face cache, or ``None``; no network.

    The only place rlver looks into the hub cache. Raises :class:`InvalidHubId` for a string that is
    not a repo id (callers that validate a user's setting say so; others treat it as not cached).
    Without ``huggingface_hub`` (transformers depends on it) nothing is cached.
    """
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return None
    try:
        found = try_to_load_from_cache(repo_id, filename)
    except ValueError as exc:  # huggingface_hub's HFValidationError
        raise InvalidHubId(str(exc)) from None
    except Exception:  # a cache the library cannot read: not cached
        return None
    return Path(found) if isinstance(found, str) else None


def base_model_folder(
    path: str, run_dir: Path, *, tiny_seed: int = 0, tiny_size: TinySize = "tiny"
) -> Path | str:
    """The base model a training run starts from — the one home of this decision for both engines.

    ``tiny`` is built (once, atomically) into ``run_dir/base_model``, so a resumed run finds it again; a
    fetchable model's name (``smollm2-135m-instruct``) is its fetched folder; anything else (a folder, a
    hub id) is passed through for the model loader to read.
    """
    ref = resolve_reference(path)
    if ref.kind == "tiny":
        return ensure_tiny_model(run_dir / BASE_MODEL_DIR, seed=tiny_seed, size=tiny_size)
    return ref.location
