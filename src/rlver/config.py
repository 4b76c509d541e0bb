"""Configuration: pydantic models loaded from YAML, with ``dotted.key=value`` overrides.

Unknown keys and wrong types are errors that name the key (``ConfigError``). Secrets never live in a
config: configs name the *environment variable* that holds a key (``api_key_env``), and
:func:`redacted` masks anything that looks like a secret before a config is printed or written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from rlver.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

_SECRET_KEY = re.compile(r"(api[_-]?key|secret|token|password|authorization)$", re.IGNORECASE)
#: Credential-looking tokens (OpenAI/DeepSeek ``sk-``, Hugging Face ``hf_``, GitHub, Slack), anywhere in
#: a text: what a user pastes where a variable's *name* belongs.
_SECRET_TOKEN = re.compile(r"\b(?:sk|pk|rk|hf|ghp|gho|github_pat|xox[abp])[-_][A-Za-z0-9_\-]{16,}")


def mask_secret_tokens(text: str) -> str:
    """``text`` with every credential-looking token replaced by ``***`` (for error messages)."""
    return _SECRET_TOKEN.sub("***", text)


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
            raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. train.lr=1e-6")
        key, _, value = item.partition("=")
        parts = key.strip().split(".")
        if not all(part.strip() for part in parts):
            raise ConfigError(f"override {item[:80]!r}: empty key part in {key!r}, e.g. train.lr=1e-6")
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {key!r}: {part!r} is not a section")
            node = child
        node[parts[-1]] = _parse_scalar(value)
    return data


def _format_validation_error(exc: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid configuration"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key")
        else:
            # the input may be a key pasted into the wrong field: never print one back. A value refused
            # by a key-variable field (``api_key_env``) is hidden whatever it looks like: short or
            # unusual keys slip past the token pattern.
            field = str(err["loc"][-1]) if err["loc"] else ""
            if field.endswith("key_env") or _SECRET_KEY.search(field):
                shown = "'***'"
            else:
                shown = mask_secret_tokens(repr(err.get("input")))
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            lines.append(f"  {key}: {mask_secret_tokens(err['msg'])} (got {shown})")
    return "\n".join(lines)


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping; every failure is a ``ConfigError`` naming
    the file (missing, unreadable, not UTF-8, not YAML, absurdly nested, not a mapping)."""
    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid UTF-8") from None
    except (ValueError, RecursionError) as exc:  # 4300+-digit integers, absurdly deep nesting
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise ConfigError(f"{path}: not valid YAML: {why}") from None
    except OSError as exc:  # a folder, no permission
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
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
    data: dict[str, Any] = dict(base or {})
    source = "config"
    if path is not None:
        source = str(path)
        loaded = read_yaml_mapping(path)
        data = deep_merge(data, loaded)
    apply_overrides(data, overrides)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, source)) from None


def deep_merge(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``new``, merging nested mappings key by key (neither input is changed)."""
    out = dict(base)
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def redacted(obj: Any) -> Any:
    """A copy of a nested dict/list with secret-looking values replaced by ``"***"``.

    Keys named like ``api_key``/``token`` are masked; ``api_key_env`` (the *name* of a variable) is
    kept because it is not a secret.
    """
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if isinstance(k, str) and _SECRET_KEY.search(k) and not k.endswith("_env") and v:
                out[k] = "***"
            else:
                out[k] = redacted(v)
        return out
    if isinstance(obj, list):
        return [redacted(v) for v in obj]
    return obj


#: Values that look like credentials whatever their key is called (OpenAI/HF/GitHub/Slack-style tokens).
_SECRET_VALUE = re.compile(r"^(?:sk|pk|rk|hf|ghp|gho|github_pat|xox[abp])[-_][A-Za-z0-9_\-]{16,}$")
#: ``scheme://user:password@host`` — keep the user, mask the password.
_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.\-]*://[^/:@\s]+:)[^/@\s]+(@)", re.IGNORECASE)


def mask_secret_values(obj: Any) -> Any:
    """Mask credential-looking *values* (``sk-...`` tokens, passwords in URLs) anywhere in a dump.

    :func:`redacted` goes by key names; this catches a key pasted where a URL or a name belongs.
    Used by ``rlver config show`` and for the config sent to Weights & Biases.
    """
    if isinstance(obj, dict):
        return {k: mask_secret_values(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [mask_secret_values(v) for v in obj]
    if isinstance(obj, str):
        if _SECRET_VALUE.match(obj.strip()):
            return "***"
        return _URL_PASSWORD.sub(r"\1***\2", obj)
    return obj


def registered(name: str, registry: Mapping[str, object], what: str) -> str:
    """``name`` when it is a key of ``registry``, else a ``ValueError`` listing the choices.

    For the pydantic validators of registry-backed config fields (algorithm, reward mode): pydantic
    reports the error with the field's path, and a new registry entry is accepted without a schema edit.
    """
    if name not in registry:
        raise ValueError(f"unknown {what} {name!r}; choices: {', '.join(sorted(registry))}")
    return name
