"""How a run names a model: a ``ModelSpec`` in a config or built from CLI flags.

Specs never hold a key, only the *name* of the environment variable that holds it, so a spec can be
written into a manifest as is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlver.config import MAX_COUNT
from rlver.llm.base import SamplingParams

#: What an environment variable's name looks like (POSIX): a key pasted in its place does not.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_key_env_name(name: str | None) -> str | None:
    """``name`` if it can name an environment variable; else ValueError *without* echoing the value.

    The usual mistake is pasting the key itself (``sk-...``) where its variable's name belongs; the
    value would then be written into every manifest and error message as if it were a name.
    """
    if name and not _ENV_NAME.match(name):
        raise ValueError(
            "must be the name of an environment variable that holds the key (letters, digits and _, "
            "e.g. OPENAI_API_KEY), not the key itself; put the key in that variable"
        )
    return name


def check_base_url(url: str | None) -> str | None:
    """``url`` if it can be an OpenAI-compatible endpoint (``http(s)://host...``); else ValueError.

    Without this, a typo (``notaurl``, ``localhost:8000/v1`` without its scheme) was accepted and each
    dialogue then spent every retry on it before failing as ``connection``. The message does not repeat
    the value (a key is sometimes pasted in the wrong flag); the caller names it, masked.
    """
    if url is None:
        return None
    problem = "" if url.strip() == url and " " not in url else "has spaces"
    if not problem:
        parts = urlsplit(url)
        try:
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            problem = "has a port that is not a number"
        else:
            if parts.scheme.lower() not in ("http", "https"):
                problem = "does not start with http:// or https://"
            elif not parts.hostname:
                problem = "names no host"
    if problem:
        raise ValueError(f"not an endpoint URL: it {problem}; expected e.g. http://localhost:8000/v1")
    return url


#: The kinds ``ModelSpec.kind`` accepts, read when a spec is validated. The registry's module
#: (:mod:`rlver.llm.factory`) hands over its table when imported (:func:`read_kind_registry`); until
#: then no other kind can have been registered, so the built-in two are the whole list.
def _built_in_kinds() -> tuple[str, ...]:
    return ("openai", "local")


_kind_names: Callable[[], tuple[str, ...]] = _built_in_kinds


def read_kind_registry(names: Callable[[], tuple[str, ...]]) -> None:
    """Called once by :mod:`rlver.llm.factory`, below its table (which imports this module)."""
    global _kind_names
    _kind_names = names


def check_model_kind(name: str) -> str:
    """``name`` if it is a registered model kind; else a ValueError naming the kinds, so a config with
    a typo is refused when it is read."""
    names = [repr(n) for n in _kind_names()]
    if name not in _kind_names():
        expected = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        raise ValueError(f"unknown model kind {name!r}; expected {expected}")
    return name


class ModelSpec(BaseModel):
    """A model to talk to.

    ``kind="openai"``: any OpenAI-compatible endpoint (OpenAI, DeepSeek, vLLM, SGLang, Ollama, ...).
    ``kind="local"``: a transformers model folder or hub id loaded in this process.
    Other kinds: whatever :func:`rlver.llm.factory.register_model_kind` added.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    #: a kind of :data:`rlver.llm.factory.KINDS` (``openai`` or ``local`` built in)
    kind: str = "openai"
    model: str = Field(min_length=1, description="model id on the server, or a local path / hub id")
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout_s: float = Field(default=120.0, gt=0)
    max_attempts: int = Field(default=5, ge=1, le=50)
    concurrency: int = Field(default=32, ge=1, le=MAX_COUNT)
    cache: str | None = None  # sqlite file for the response cache (replay); None = no cache
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    # local only
    device: str | None = None  # "cpu", "cuda", "cuda:1"; None = cuda if available
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_batch_size: int = Field(default=16, ge=1, le=MAX_COUNT)
    compile_decode: bool = False  # CUDA: static KV cache + compiled decode step (rlver.llm.local)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        return check_model_kind(value)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return check_key_env_name(value)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return check_base_url(value)
