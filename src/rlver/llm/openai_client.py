"""An OpenAI-compatible chat model (OpenAI, DeepSeek, vLLM, SGLang, Ollama, llama.cpp) with bounded retries.

Why our own retry loop instead of the client's: the published code retried a failed call forever. Here
every call has a hard bound (``max_attempts`` attempts, each under ``timeout_s``, and an optional overall
``deadline_s``), retries only what is worth retrying (429, 5xx, timeouts, dropped connections, garbage
answers), waits with exponential backoff + jitter (honouring a server's ``Retry-After``, capped), and then
raises a typed :class:`rlver.errors.LLMError` subclass whose ``kind`` lets a run count failures by cause.

The API key is read once, from the environment variable *named* in the config, and handed to the HTTP
client. It is never stored on this object, logged, included in ``repr``/``describe`` or in an error
message. Model output is untrusted: the body is read up to a bound, the text is capped at
``max_response_chars`` and an empty or malformed answer is an error, not a silent empty string.

Why aiohttp directly rather than the ``openai`` SDK: the request is one JSON POST and the answer one
JSON object, and the SDK's per-call machinery (request options, URL and header objects, typed response
models, an httpx layer over the transport) cost ~1.5 ms of CPU per call, several times the HTTP work
itself. With hundreds of dialogues in flight the client, not the server, set the pace of a rollout
(profile in docs/performance.md). aiohttp is already a dependency; the wire format is the public
OpenAI chat-completions API, which every compatible server speaks.
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

import aiohttp
import yarl

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

#: The most we read of one answer's body, whatever ``max_response_chars`` says: a misbehaving server
#: must not make us buffer gigabytes.
MIN_BODY_LIMIT = 4 * 1024 * 1024

_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def sampling_fields(sampling: SamplingParams) -> dict[str, Any]:
    """What a chat-completions body carries of ``sampling``, beside ``model`` and ``messages``: one
    home for it, so that every route to an endpoint (``rlver eval``'s client, the verifiers harness)
    sends the same body for the same settings."""
    fields: dict[str, Any] = {}
    if sampling.max_tokens is not None:  # else the server's own limit, as SAGE's calls send none
        fields["max_tokens"] = sampling.max_tokens
    if not sampling.model_default:  # else the server samples with the model's own defaults
        fields["temperature"] = sampling.temperature
        fields["top_p"] = sampling.top_p
    if sampling.seed is not None:
        fields["seed"] = sampling.seed
    if sampling.stop:
        fields["stop"] = list(sampling.stop)
    for key, value in sampling.extra.items():
        # Server-specific fields (top_k, repetition_penalty, ...) go into the body as they are.
        fields.setdefault(key, value)
    return fields


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

    def __init__(
        self, error: LLMError, retry_after: float | None = None, empty: Completion | None = None
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after
        #: An answer whose text was empty: returned after the last attempt when the caller accepts one.
        self.empty = empty


class OpenAIChatModel(ChatModel):
    """A :class:`ChatModel` talking to ``{base_url}/chat/completions``.

    One instance owns one HTTP client and one ``asyncio.Semaphore(concurrency)``: every caller of the
    instance shares the limit, so a rollout of 512 dialogues cannot open 512 connections to a server
    that serves 32. The semaphore is held per attempt, not during backoff sleeps, so a rate-limited
    call does not block calls that could go ahead.
    """

    seeded_per_turn = False

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
        # Parsed once: aiohttp would parse a string URL again on every request.
        self._url = yarl.URL(base_url.rstrip("/") + "/chat/completions")
        self._body_limit = max(MIN_BODY_LIMIT, 8 * max_response_chars)
        self._session: aiohttp.ClientSession | None = None
        self._semaphore = asyncio.Semaphore(concurrency)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.in_flight = 0  # attempts currently holding the semaphore (for progress displays)

    def _make_session(self) -> aiohttp.ClientSession:
        """A session for the running loop; the key is read here and kept only in its headers."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=self.concurrency)
        return aiohttp.ClientSession(
            connector=connector,
            # An API client has no use for cookies; the jar's per-request filtering is pure cost.
            cookie_jar=aiohttp.DummyCookieJar(),
            headers={
                "Authorization": f"Bearer {key or DUMMY_API_KEY}",
                "User-Agent": "rlver",
                **_JSON_HEADERS,
            },
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
        )

    def _bind_loop(self) -> aiohttp.ClientSession:
        """The session (and semaphore) for the running loop, made anew for a new loop.

        asyncio primitives and pooled connections belong to the loop that first used them (the CLI
        may call ``asyncio.run`` more than once with one model).
        """
        loop = asyncio.get_running_loop()
        if self._loop is loop and self._session is not None:
            return self._session
        if self._session is not None:
            # Its connections belong to a dead loop: let go of them without touching that loop.
            self._session.detach()
        if self._loop is not None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        self._session = self._make_session()
        self._loop = loop
        return self._session

    # -- public API ------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"OpenAIChatModel(name={self.name!r}, base_url={redact_url(self.base_url)!r}, model={self.model!r})"

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "class": type(self).__name__,
            "base_url": redact_url(self.base_url),
            "model": self.model,
            "api_key_env": self.api_key_env,  # the variable's *name*, never its value
            "timeout_s": self.timeout_s,
            "max_attempts": self.max_attempts,
            "concurrency": self.concurrency,
            "deadline_s": self.deadline_s,
        }

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        if self._loop is asyncio.get_running_loop():
            await session.close()
        else:
            session.detach()  # made on another, finished loop
        self._loop = None

    async def complete(self, messages: MessagesLike, sampling: SamplingParams) -> Completion:
        session = self._bind_loop()
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
                        completion = await self._attempt(session, messages, sampling, attempt_timeout)
                    finally:
                        self.in_flight -= 1
            except _Retryable as failure:
                last = failure
                if attempt == self.max_attempts or (
                    failure.empty is not None and self.accept_empty and not self.retry_empty
                ):
                    break
                delay = self._backoff(attempt, failure.retry_after)
                if deadline is not None and time.perf_counter() + delay >= deadline:
                    break
                await asyncio.sleep(delay)
                continue
            completion.latency_s = time.perf_counter() - start
            return completion
        assert last is not None or deadline is not None
        if last is not None and last.empty is not None and self.accept_empty:
            # Empty (after every retry, with retry_empty): an answer, not an outage (SAGE reads it).
            last.empty.latency_s = time.perf_counter() - start
            return last.empty
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
        }
        for key, value in sampling_fields(sampling).items():
            body.setdefault(key, value)
        return body

    async def _attempt(
        self, session: aiohttp.ClientSession, messages: MessagesLike, sampling: SamplingParams, timeout: float
    ) -> Completion:
        data = json.dumps(self._request(messages, sampling), separators=(",", ":")).encode()
        try:
            # ClientTimeout(total=...) is a hard wall-clock bound on the whole exchange, body included,
            # so a server that drips one byte at a time cannot hold a call past it.
            # The session's own timeout is timeout_s; only a deadline-shortened attempt needs its own.
            extra: dict[str, Any] = {}
            if timeout < self.timeout_s:
                extra["timeout"] = aiohttp.ClientTimeout(total=timeout)
            async with session.post(self._url, data=data, **extra) as response:
                raw = await self._read_body(response)
                status = response.status
                headers = response.headers
        except asyncio.TimeoutError:
            raise _Retryable(LLMTimeoutError(f"{self._where()}: no answer within {timeout:g}s")) from None
        except (aiohttp.ClientPayloadError, aiohttp.ClientResponseError) as exc:
            # A body cut short or a malformed HTTP answer: the answer is broken, not the connection.
            raise _Retryable(
                LLMResponseError(f"{self._where()}: unreadable answer ({type(exc).__name__})")
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise _Retryable(
                LLMConnectionError(f"{self._where()}: connection failed ({type(exc).__name__})")
            ) from None
        if status >= 400:
            raise self._status_error(status, headers.get("Retry-After"), raw)
        try:
            answer = json.loads(raw)
        except ValueError as exc:  # a truncated or non-JSON body (UnicodeDecodeError is a ValueError)
            raise _Retryable(
                LLMResponseError(f"{self._where()}: answer is not a chat completion ({type(exc).__name__})")
            ) from None
        return self._to_completion(answer)

    async def _read_body(self, response: aiohttp.ClientResponse) -> bytes:
        """The answer's body, refusing more than ``_body_limit`` bytes (the server is untrusted)."""
        limit = self._body_limit
        length = response.content_length
        if length is not None and length <= limit:
            return await response.read()
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise _Retryable(
                    LLMResponseError(f"{self._where()}: answer body is larger than {limit} bytes")
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _status_error(self, status: int, retry_after_header: str | None, raw: bytes) -> Exception:
        detail = _short(self._scrub(_server_message(raw)))
        if status == 429:
            retry_after = parse_retry_after(retry_after_header)
            return _Retryable(
                LLMRateLimitError(f"{self._where()}: rate limited (HTTP 429){detail}"), retry_after
            )
        if status >= 500 or status in (408, 409):
            retry_after = parse_retry_after(retry_after_header)
            return _Retryable(LLMServerError(f"{self._where()}: HTTP {status}{detail}"), retry_after)
        hint = ""
        if status in (401, 403):
            hint = (
                f"; check the key in environment variable {self.api_key_env}"
                if self._key_found
                else f"; no key was found (environment variable {self.api_key_env or '(none configured)'} is unset)"
            )
        return LLMRequestError(f"{self._where()}: request rejected with HTTP {status}{detail}{hint}")

    def _to_completion(self, answer: object) -> Completion:
        """Validate an answer we cannot trust: it must be a chat completion with non-empty text."""
        if not isinstance(answer, dict):
            raise _Retryable(LLMResponseError(f"{self._where()}: answer is not a JSON object"))
        choices = answer.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _Retryable(LLMResponseError(f"{self._where()}: answer has no choices"))
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        text = message.get("content") if isinstance(message, dict) else None
        if not isinstance(text, str):
            raise _Retryable(LLMResponseError(f"{self._where()}: answer has no message text"))
        finish = choice.get("finish_reason")
        finish_reason = finish if isinstance(finish, str) else None
        if not text.strip():
            empty = Completion(text=text, finish_reason=finish_reason)
            raise _Retryable(LLMResponseError(f"{self._where()}: answer text is empty"), empty=empty)
        if len(text) > self.max_response_chars:
            text = text[: self.max_response_chars]
            finish_reason = "length"
        usage = answer.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        return Completion(
            text=text,
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            finish_reason=finish_reason,
        )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _server_message(raw: bytes) -> str:
    """The error text of a server's error body (``{"error": {"message": ...}}`` or anything else)."""
    text = raw[:4096].decode("utf-8", "replace")
    try:
        body = json.loads(raw)
    except ValueError:
        return text
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        return json.dumps(body)[:200]
    return text


def _short(text: str, limit: int = 200) -> str:
    """A server's error text, bounded and on one line (it is untrusted and may be huge)."""
    text = " ".join(text.split())
    if not text:
        return ""
    return f": {text[:limit]}" + ("…" if len(text) > limit else "")
