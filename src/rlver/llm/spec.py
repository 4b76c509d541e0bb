"""How a run names a model: a ``ModelSpec`` in a config or built from CLI flags.

Specs never hold a key, only the *name* of the environment variable that holds it, so a spec can be
written into a manifest as is.
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from rlver.config import MAX_COUNT
from rlver.llm.base import SamplingParams
from rlver.migrate import OPENAI_BASE_URL
from rlver.registry import Entry, Registry

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


def no_endpoint(subject: str, url_flag: str) -> str:
    """The one wording of the rule "no silent default endpoint": a model reached over the network
    needs the endpoint that serves it, given by the user (``subject``: the model and where it was
    named; ``url_flag``: the flag or config key that takes the endpoint).

    Why a rule: ``--sim-model`` or ``--agent-model`` without a base URL quietly called OpenAI's public
    endpoint; it failed 46 s later (a key for another server, or none) and left a run folder. OpenAI's
    own (:data:`rlver.migrate.OPENAI_BASE_URL`, where specs without one went before) is named here
    for whoever means it, never used unasked; a spec recorded before reads as sent there.
    """
    return (
        f"{subject} has no endpoint: give {url_flag} (OpenAI's own is {OPENAI_BASE_URL}); rlver calls "
        "no endpoint it was not given"
    )


#: The model kinds ``ModelSpec.kind`` accepts: one line each, read when a spec is validated (a kind
#: added at run time, :func:`rlver.llm.factory.register_model_kind`, is accepted from then on). The
#: builders live in :mod:`rlver.llm.factory`, which imports this module: lazy ``"module:attr"``
#: entries name them without an import cycle (and without importing the model clients).
KINDS: Registry[Any] = Registry(
    "model kind",
    [
        Entry(
            "openai",
            "an OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, Ollama, ...)",
            "rlver.llm.factory:build_openai",
        ),
        Entry(
            "local",
            "a transformers model folder or hub id, loaded in this process",
            "rlver.llm.factory:build_local",
        ),
    ],
)


class ModelSpec(BaseModel):
    """A model to talk to.

    ``kind="openai"``: any OpenAI-compatible endpoint (OpenAI, DeepSeek, vLLM, SGLang, Ollama, ...).
    ``kind="local"``: a transformers model folder or hub id loaded in this process.
    Other kinds: whatever :func:`rlver.llm.factory.register_model_kind` added.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    kind: str = Field(
        default="openai", description="a kind of :data:`KINDS` (``openai`` or ``local`` built in)"
    )
    model: str = Field(min_length=1, description="model id on the server, or a local path / hub id")
    base_url: str | None = Field(
        default=None,
        validate_default=True,
        description="Required for ``kind: openai`` (:func:`no_endpoint`): there is no default endpoint.",
    )
    api_key_env: str | None = Field(
        default="OPENAI_API_KEY",
        description=(
            "The environment variable the API key is read from (the key itself is never written in a config)."
        ),
    )
    timeout_s: float = Field(
        default=120.0, gt=0, description="Seconds one call may take before it is retried."
    )
    max_attempts: int = Field(
        default=5,
        ge=1,
        le=50,
        description="Tries per call when the server fails or times out (with backoff).",
    )
    retry_empty: bool = Field(
        default=False,
        description=(
            "Where an empty answer is taken as an answer (the agent under test, a published-text "
            "simulator): ask again, up to ``max_attempts``, while it stays empty. Default: taken at the "
            "first call, as SAGE calls its agent and its judge once."
        ),
    )
    concurrency: int = Field(
        default=32, ge=1, le=MAX_COUNT, description="Calls in flight at once to this model."
    )
    cache: str | None = Field(
        default=None, description="sqlite file for the response cache (replay); None = no cache"
    )
    sampling: SamplingParams = Field(
        default_factory=SamplingParams,
        description="How this model samples (temperature, top_p, max_tokens, seed...).",
    )
    # local only
    device: str | None = Field(default=None, description='"cpu", "cuda", "cuda:1"; None = cuda if available')
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description="``kind: local`` only: the weights' dtype (``auto``: as the checkpoint stores them).",
    )
    max_batch_size: int | None = Field(
        default=None,
        ge=1,
        le=MAX_COUNT,
        description="``kind: local`` only: slots of the engine's running batch (a freed slot takes the next waiting request); unset: sized from the device's free memory and the KV cost of a token.",
    )
    compile_decode: bool = Field(
        default=False, description="CUDA: static KV cache + compiled decode step (rlver.llm.local)"
    )

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        return KINDS.check(value)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return check_key_env_name(value)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("kind") == "openai":
            raise ValueError(no_endpoint(f"model {info.data.get('model', '')!r}", "its base_url"))
        return check_base_url(value)
