"""A real OpenAI-compatible chat server on 127.0.0.1, scriptable and able to misbehave on demand.

Tests, benchmarks and the fault-injection suite talk to it over real HTTP through the real ``openai``
client, so the code under test is exactly the code users run. What the server *says* is a test double
(a responder function), how it *fails* is configured per request:

    def responder(request: dict) -> str:            # the JSON body of /v1/chat/completions
        return "hello"

    with FakeChatServer(responder, latency_s=0.1) as server:
        client = OpenAIChatModel(base_url=server.url, model="fake", api_key_env=None)
        ...
        server.faults.extend([Fault.rate_limit(retry_after=0.05), Fault.server_error()])

Faults are consumed one per request, before the responder runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    """A responder may return this instead of a string to control the answer fully."""

    text: str = ""
    finish_reason: str = "stop"
    delay_s: float = 0.0


@dataclass
class Fault:
    """One misbehaviour, applied to one request."""

    kind: str  # delay | drop | status | truncated | empty | huge | garbage
    status: int = 200
    delay_s: float = 0.0
    retry_after: float | None = None
    body: bytes | None = None

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        return cls("delay", delay_s=seconds)

    @classmethod
    def drop(cls) -> Fault:
        return cls("drop")

    @classmethod
    def rate_limit(cls, retry_after: float | None = 0.05) -> Fault:
        return cls("status", status=429, retry_after=retry_after)

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls("status", status=status)

    @classmethod
    def rejected(cls, status: int = 401, message: str = "invalid API key") -> Fault:
        """An error answer with ``message`` in the OpenAI error format (servers often echo the key)."""
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
        return cls("status", status=status, body=body)

    @classmethod
    def truncated_json(cls) -> Fault:
        return cls("truncated")

    @classmethod
    def empty_content(cls) -> Fault:
        return cls("empty")

    @classmethod
    def huge_body(cls, size: int = 1_000_000) -> Fault:
        return cls("huge", body=b"x" * size)

    @classmethod
    def garbage(cls, text: bytes = b"<html>not json</html>") -> Fault:
        return cls("garbage", body=text)


Responder = Callable[[dict[str, Any]], "str | Reply"]


def _echo(request: dict[str, Any]) -> str:
    last = request.get("messages", [{}])[-1].get("content", "")
    return f"echo: {last}"


@dataclass
class FakeChatServer:
    """Serves ``POST /v1/chat/completions`` (and ``GET /v1/models``) on 127.0.0.1 in a thread."""

    responder: Responder = _echo
    latency_s: float = 0.0  # added to every answer
    host: str = "127.0.0.1"
    port: int = 0
    faults: deque[Fault] = field(default_factory=deque)
    fault_for: Callable[[dict[str, Any]], Fault | None] | None = None  # per-request choice
    requests: list[dict[str, Any]] = field(default_factory=list)
    served: int = 0
    #: The ``Authorization`` header of every chat request, in order (proves a key was sent; the
    #: secrets tests check it never lands on disk).
    authorizations: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> FakeChatServer:
        self._thread = threading.Thread(target=self._run, name="fake-openai", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            with contextlib.suppress(Exception):  # best effort on shutdown
                fut.result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_get("/v1/_stats", self._handle_stats)
        self._runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, self.host, self.port, backlog=2048)
        loop.run_until_complete(site.start())
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        loop.run_forever()
        loop.close()

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- handlers ------------------------------------------------------------------------------
    async def _handle_models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def _handle_stats(self, request: web.Request) -> web.Response:
        return web.json_response({"served": self.served})

    def _next_fault(self, body: dict[str, Any]) -> Fault | None:
        with self._lock:
            if self.faults:
                return self.faults.popleft()
        return self.fault_for(body) if self.fault_for else None

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "invalid JSON body"}}, status=400)
        with self._lock:
            self.requests.append(body)
            self.authorizations.append(request.headers.get("Authorization"))
            self.served += 1
        fault = self._next_fault(body)
        delay = self.latency_s + (fault.delay_s if fault else 0.0)
        if fault and fault.kind == "drop":
            # Close the TCP connection without an HTTP answer.
            transport = request.transport
            if transport is not None:
                transport.close()
            raise asyncio.CancelledError
        if fault and fault.kind == "status":
            if delay:
                await asyncio.sleep(delay)
            headers = {}
            if fault.retry_after is not None:
                headers["Retry-After"] = f"{fault.retry_after:g}"
            if fault.body is not None:  # a scripted error body (e.g. one echoing the key back)
                return web.Response(
                    body=fault.body, status=fault.status, headers=headers, content_type="application/json"
                )
            return web.json_response(
                {"error": {"message": f"injected HTTP {fault.status}", "type": "injected"}},
                status=fault.status,
                headers=headers,
            )
        try:
            out = self.responder(body)
        except Exception as exc:  # a broken responder is a 500, as a real server would answer
            return web.json_response({"error": {"message": repr(exc)}}, status=500)
        reply = out if isinstance(out, Reply) else Reply(text=str(out))
        delay += reply.delay_s
        if delay:
            await asyncio.sleep(delay)
        if fault and fault.kind in ("garbage", "huge"):
            return web.Response(body=fault.body or b"", content_type="application/json")
        text = "" if fault and fault.kind == "empty" else reply.text
        payload = self._completion(body, text, reply.finish_reason)
        raw = json.dumps(payload).encode()
        if fault and fault.kind == "truncated":
            raw = raw[: len(raw) // 2]
        return web.Response(body=raw, content_type="application/json")

    @staticmethod
    def _completion(body: dict[str, Any], text: str, finish_reason: str) -> dict[str, Any]:
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        completion_tokens = len(text.split())
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _load_responder(spec: str) -> Responder:
    """``"package.module:function"`` → the function."""
    import importlib

    module_name, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]


class ServerProcess:
    """A :class:`FakeChatServer` in its own process, so that timing-sensitive tests and benchmarks do
    not share the GIL (and a CPU core) with the server they measure.

    ``responder`` names a module-level function as ``"package.module:function"``.
    """

    def __init__(self, responder: str = "rlver.testing.openai_server:_echo", latency_s: float = 0.0) -> None:
        self.responder = responder
        self.latency_s = latency_s
        self.url = ""
        self._proc: Any = None

    def __enter__(self) -> ServerProcess:
        import subprocess
        import sys

        self._proc = subprocess.Popen(
            [sys.executable, "-m", "rlver.testing.openai_server", self.responder, str(self.latency_s)],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self._proc.stdout.readline() if self._proc.stdout else ""
        if not line.startswith("http://"):
            self._proc.kill()
            raise RuntimeError(f"test server did not start: {line!r}")
        self.url = line.strip()
        return self

    @property
    def served(self) -> int:
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/_stats", timeout=10) as resp:
            return int(json.loads(resp.read())["served"])

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except Exception:
                self._proc.kill()


def _serve_forever(responder: str, latency_s: float) -> None:
    server = FakeChatServer(_load_responder(responder), latency_s=latency_s).start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:  # pragma: no cover
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _serve_forever(
        sys.argv[1] if len(sys.argv) > 1 else "rlver.testing.openai_server:_echo",
        float(sys.argv[2]) if len(sys.argv) > 2 else 0.0,
    )
