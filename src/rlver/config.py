"""Configuration: pydantic models loaded from YAML files and flags, with ``dotted.key=value`` overrides.

Unknown keys and wrong types are errors that name the key (``ConfigError``, worded by
:mod:`rlver.config_errors`). Secrets never live in a config: configs name the *environment variable*
that holds a key (``api_key_env``); :mod:`rlver.redaction` masks what looks like a secret before a
config is printed or written.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from rlver.config_errors import ConfigLayer, duplicate_key, format_validation_error, yaml_problem
from rlver.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

#: The largest count, size or token cap a setting takes. torch, tokenizers and the C libraries under
#: them index with 32-bit integers in places, so a larger number failed deep inside a run (an
#: ``OverflowError`` traceback after the model loaded) rather than meaning "no limit"; no run has
#: 2**31 steps, dialogues or tokens in a reply.
MAX_COUNT = 2**31 - 1


def _parse_scalar(text: str) -> Any:
    """Parse an override value the way YAML would (``1`` → int, ``true`` → bool, ``[a,b]`` → list)."""
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, RecursionError):  # also 4300+-digit ints, absurd nesting
        return text


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a nested dict (in place) and return it."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. optim.actor_lr=1e-6")
        key, _, value = item.partition("=")
        parts = key.strip().split(".")
        if not all(part.strip() for part in parts):
            raise ConfigError(f"override {item[:80]!r}: empty key part in {key!r}, e.g. optim.actor_lr=1e-6")
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {key!r}: {part!r} is not a section")
            node = child
        node[parts[-1]] = _parse_scalar(value)
    return data


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping; every failure is a ``ConfigError`` naming
    the file (missing, unreadable, not UTF-8, not YAML, absurdly nested, not a mapping)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        loaded = yaml.safe_load(text) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except yaml.YAMLError as exc:
        raise ConfigError(str(yaml_problem(path, exc))) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid UTF-8") from None
    except (ValueError, RecursionError) as exc:  # 4300+-digit integers, absurdly deep nesting
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise ConfigError(f"{path}: not valid YAML: {why}") from None
    except OSError as exc:  # a folder, no permission
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    twice = duplicate_key(Path(path), text)
    if twice:
        raise ConfigError(twice)
    if not loaded:
        # An empty file silently meant "all defaults": a 100-step PPO run on en-train, or an eval config.
        raise ConfigError(
            f"{path}: the config file is empty; start from a preset, e.g. "
            "`rlver config show tiny-offline > my.yaml` (training) or give the settings as flags"
        )
    return loaded


def load_config(
    model: type[M],
    path: str | Path | None = None,
    overrides: Iterable[str] = (),
    *,
    base: dict[str, Any] | None = None,
) -> M:
    """Build ``model`` from ``base`` updated by the YAML file at ``path`` and by ``overrides``."""
    layers = [ConfigLayer("config", base or {})]
    if path is not None:
        layers.append(ConfigLayer(str(path), read_yaml_mapping(path), Path(path)))
    return load_layers(model, layers, overrides)


def load_layers(model: type[M], layers: Sequence[ConfigLayer], overrides: Iterable[str] = ()) -> M:
    """Build ``model`` from ``layers`` merged in order (a later one wins, key by key), then ``overrides``.

    A validation error names where each bad key came from: ``--set KEY`` for an override,
    ``FILE:LINE`` for a key of a YAML file, the layer's name otherwise; an unknown key gets the
    nearest valid one (``did you mean optim.actor_lr?``).
    """
    data: dict[str, Any] = {}
    for layer in layers:
        data = deep_merge(data, dict(layer.data))
    data = copy.deepcopy(data)  # the overrides below must not change a layer (its keys name origins)
    overrides = list(overrides)
    apply_overrides(data, overrides)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, model, layers, overrides)) from None


def deep_merge(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``new``, merging nested mappings key by key (neither input is changed)."""
    out = dict(base)
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out
