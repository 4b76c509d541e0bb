"""An OpenAI-compatible chat model (OpenAI, DeepSeek, vLLM, SGLang, Ollama, llama.cpp) with bounded retries.

Why our own retry loop instead of the client's: the published code retried a failed call forever. Here
every call has a hard bound (``max_attempts`` attempts, each under ``timeout_s``, and an optional overall
``deadline_s``), retries only what is worth retrying (429, 5xx, timeouts, dropped connections, garbage
answers), waits with exponential backoff + jitter (honouring a server's ``Retry-After``, capped), and then
raises a typed :class:`rlver.errors.LLMError` subclass whose ``kind`` lets a run count failures by cause.

The API key is read once, from the environment variable *named* in the config, and handed to the HTTP
client. It is never stored on this object, logged, included in ``repr``/``describe`` or in an error
message. Model output is untrusted: the text is capped at ``max_response_chars`` and an empty or
malformed answer is an error, not a silent empty string.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai
from openai.types.chat import ChatCompletion

from rlver.errors import (
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
)
from rlver.llm.base import ChatModel, Completion, MessagesLike, SamplingParams

#: Used when no key is configured: local servers (vLLM, Ollama, llama.cpp) accept any string.
DUMMY_API_KEY = "EMPTY"


class LLMRequestError(LLMError):
    """The server rejected the request itself (400, 401, 403, 404, 422): retrying cannot help."""

    kind = "request_rejected"


def redact_url(url: str) -> str:
    """``url`` without user:password and query string, which can carry credentials."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date); None if absent/invalid."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


class _Retryable(Exception):
    """Internal: one failed attempt, already mapped to the typed error we would raise at the end."""

    def __init__(self, error: LLMError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


class OpenAIChatModel(ChatModel):
    """A :class:`ChatModel` talking to ``{base_url}/chat/completions``.

    One instance owns one HTTP client and one ``asyncio.Semaphore(concurrency)``: every caller of the
    instance shares the limit, so a rollout of 512 dialogues cannot open 512 connections to a server
    that serves 32. The semaphore is held per attempt, not during backoff sleeps, so a rate-limited
    call does not block calls that could go ahead.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        max_attempts: int = 5,
        concurrency: int = 32,
        name: str | None = None,
        deadline_s: float | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        retry_after_max_s: float = 60.0,
        max_response_chars: int = 65_536,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.base_url = base_url
        self.model = model
        self.name = name or model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.concurrency = concurrency
        self.deadline_s = deadline_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.retry_after_max_s = retry_after_max_s
        self.max_response_chars = max_response_chars
        key = os.environ.get(api_key_env) if api_key_env else None
        # Whether a real key was found, for error messages; the key itself lives only in the client.
        self._key_found = bool(key)
        self._client = self._make_client(key or DUMMY_API_KEY)
        self._semaphore = asyncio.Semaphore(concurrency)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.in_flight = 0  # attempts currently holding the semaphore (for progress displays)

    def _make_client(self, key: str) -> openai.AsyncOpenAI:
        import httpx2

        limits = httpx2.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        return openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=key,
            max_retries=0,  # retries are ours: bounded, typed, jittered
            timeout=self.timeout_s,
            http_client=_http_client(limits),
        )

    def _bind_loop(self) -> None:
        """Rebind the semaphore (and client) when used from a new event loop (e.g. a second asyncio.run).

        asyncio primitives and pooled connections belong to the loop that first used them.
        """
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None:
            # The old client's connections belong to a dead loop; a fresh client reads the key again
            # from the same place rather than keeping a copy of it here.
            key = os.environ.get(self.api_key_env) if self.api_key_env else None
            self._client = self._make_client(key or DUMMY_API_KEY)
            self._semaphore = asyncio.Semaphore(self.concurrency)
        self._loop = loop

    # -- public API ------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"OpenAIChatModel(name={self.name!r}, base_url={redact_url(self.base_url)!r}, model={self.model!r})"

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": type(self).__name__,
            "base_url": redact_url(self.base_url),
            "model": self.model,
            "api_key_env": self.api_key_env,  # the variable's *name*, never its value
            "timeout_s": self.timeout_s,
            "max_attempts": self.max_attempts,
            "concurrency": self.concurrency,
            "deadline_s": self.deadline_s,
        }

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(self, messages: MessagesLike, sampling: SamplingParams) -> Completion:
        self._bind_loop()
        start = time.perf_counter()
        deadline = start + self.deadline_s if self.deadline_s is not None else None
        last: _Retryable | None = None
        made = 0
        for attempt in range(1, self.max_attempts + 1):
            attempt_timeout = self.timeout_s
            if deadline is not None:
                attempt_timeout = min(attempt_timeout, deadline - time.perf_counter())
                if attempt_timeout <= 0:
                    break
            made = attempt
            try:
                async with self._semaphore:
                    self.in_flight += 1
                    try:
                        completion = await self._attempt(messages, sampling, attempt_timeout)
                    finally:
                        self.in_flight -= 1
            except _Retryable as failure:
                last = failure
                if attempt == self.max_attempts:
                    break
                delay = self._backoff(attempt, failure.retry_after)
                if deadline is not None and time.perf_counter() + delay >= deadline:
                    break
                await asyncio.sleep(delay)
                continue
            completion.latency_s = time.perf_counter() - start
            return completion
        assert last is not None or deadline is not None
        if last is None:
            raise LLMTimeoutError(f"{self._where()}: overall deadline of {self.deadline_s:g}s passed")
        error = last.error
        raise type(error)(f"{error} (gave up after {made} attempt(s))") from None

    # -- one attempt ----------------------------------------------------------------------------
    def _where(self) -> str:
        return f"model {self.model!r} at {redact_url(self.base_url)}"

    def _scrub(self, text: str) -> str:
        """Remove the key from a server's text (some servers echo a rejected key back)."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key and len(key) >= 4:
            text = text.replace(key, "***")
        return text

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter; a server's Retry-After wins, capped so it cannot stall a run."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_max_s) + random.uniform(0, self.backoff_base_s / 10)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def _request(self, messages: MessagesLike, sampling: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.extra:
            # Server-specific fields (top_k, repetition_penalty, ...) go into the body as they are.
            for key, value in sampling.extra.items():
                body.setdefault(key, value)
        return body

    async def _attempt(self, messages: MessagesLike, sampling: SamplingParams, timeout: float) -> Completion:
        request = self._request(messages, sampling)
        started = time.perf_counter()
        try:
            # wait_for is a hard wall-clock bound; httpx's own timeout is per read, and a server that
            # drips one byte at a time would never trip it.
            # POST the plain JSON body through the SDK's client rather than `chat.completions.create`:
            # the SDK's typed-dict transform of `messages` costs ~5 ms of CPU per call, which at
            # hundreds of concurrent dialogues made the client, not the server, the bottleneck.
            response = await asyncio.wait_for(
                self._client.post(
                    "/chat/completions",
                    body=request,
                    cast_to=ChatCompletion,
                    options={"timeout": timeout},
                ),
                timeout + 1.0,
            )
        except (asyncio.TimeoutError, openai.APITimeoutError):
            if time.perf_counter() - started < 0.9 * timeout:
                # The aiohttp transport reports a connection the server closed mid-request as a
                # timeout; one that ends well before the deadline was really a dropped connection.
                raise _Retryable(
                    LLMConnectionError(f"{self._where()}: connection closed before an answer")
                ) from None
            raise _Retryable(LLMTimeoutError(f"{self._where()}: no answer within {timeout:g}s")) from None
        except openai.APIConnectionError as exc:
            raise _Retryable(
                LLMConnectionError(f"{self._where()}: connection failed ({type(exc).__name__})")
            ) from None
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        except (openai.APIResponseValidationError, ValueError) as exc:
            # json.JSONDecodeError is a ValueError: a truncated or non-JSON body.
            raise _Retryable(
                LLMResponseError(f"{self._where()}: answer is not a chat completion ({type(exc).__name__})")
            ) from None
        return self._to_completion(response)

    def _status_error(self, exc: openai.APIStatusError) -> Exception:
        status = exc.status_code
        detail = _short(self._scrub(_server_message(exc)))
        if status == 429:
            retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
            return _Retryable(
                LLMRateLimitError(f"{self._where()}: rate limited (HTTP 429){detail}"), retry_after
            )
        if status >= 500 or status in (408, 409):
            retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
            return _Retryable(LLMServerError(f"{self._where()}: HTTP {status}{detail}"), retry_after)
        hint = ""
        if status in (401, 403):
            hint = (
                f"; check the key in environment variable {self.api_key_env}"
                if self._key_found
                else f"; no key was found (environment variable {self.api_key_env or '(none configured)'} is unset)"
            )
        return LLMRequestError(f"{self._where()}: request rejected with HTTP {status}{detail}{hint}")

    def _to_completion(self, response: object) -> Completion:
        """Validate an answer we cannot trust: it must be a chat completion with non-empty text."""
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise _Retryable(LLMResponseError(f"{self._where()}: answer has no choices"))
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None)
        if not isinstance(text, str):
            raise _Retryable(LLMResponseError(f"{self._where()}: answer has no message text"))
        if not text.strip():
            raise _Retryable(LLMResponseError(f"{self._where()}: answer text is empty"))
        finish = getattr(choice, "finish_reason", None)
        finish_reason = finish if isinstance(finish, str) else None
        if len(text) > self.max_response_chars:
            text = text[: self.max_response_chars]
            finish_reason = "length"
        usage = getattr(response, "usage", None)
        return Completion(
            text=text,
            prompt_tokens=_count(getattr(usage, "prompt_tokens", 0)),
            completion_tokens=_count(getattr(usage, "completion_tokens", 0)),
            finish_reason=finish_reason,
        )


def _http_client(limits: Any) -> Any:
    """The SDK's aiohttp transport when available, else its default httpx2 one.

    httpcore's pool scans every pooled connection on every request; with hundreds of dialogues in
    flight that bookkeeping cost more CPU than the rest of a rollout together (measured in
    bench/rollout_concurrency.py). The SDK ships an aiohttp-backed transport, and aiohttp is already a
    dependency of ours, so we use it.
    """
    try:
        return openai.DefaultAioHttpClient(limits=limits)
    except RuntimeError:  # the SDK's aiohttp shim is unavailable
        return openai.DefaultAsyncHttpxClient(limits=limits)


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        return json.dumps(body)[:200]
    return str(body or "")


def _short(text: str, limit: int = 200) -> str:
    """A server's error text, bounded and on one line (it is untrusted and may be huge)."""
    text = " ".join(text.split())
    if not text:
        return ""
    return f": {text[:limit]}" + ("…" if len(text) > limit else "")
