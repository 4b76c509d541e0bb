"""Secrets kept out of what rlver prints and writes: values under secret-looking keys, credential-
looking tokens anywhere in a text, and passwords in URLs.

A config names the *environment variable* that holds a key (``api_key_env``), never the key; these
functions are the guard for the rest (a config printed by ``rlver config show``, written as
``config.yaml`` or sent to Weights & Biases, and error messages that quote what a user typed).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

_SECRET_KEY = re.compile(r"(api[_-]?key|secret|token|password|authorization)$", re.IGNORECASE)


#: Credential-looking tokens (OpenAI/DeepSeek ``sk-``, Hugging Face ``hf_``, GitHub, Slack), anywhere in
#: a text: what a user pastes where a variable's *name* belongs.
_SECRET_TOKEN = re.compile(r"\b(?:sk|pk|rk|hf|ghp|gho|github_pat|xox[abp])[-_][A-Za-z0-9_\-]{16,}")


def is_secret_key(name: str) -> bool:
    """Whether a key is named like a secret (``api_key``, ``token``...): its value is never shown."""
    return bool(_SECRET_KEY.search(name))


def mask_secret_tokens(text: str) -> str:
    """``text`` with every credential-looking token replaced by ``***`` (for error messages)."""
    return _SECRET_TOKEN.sub("***", text)


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
            if isinstance(k, str) and is_secret_key(k) and not k.endswith("_env") and v:
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
