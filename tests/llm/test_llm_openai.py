"""OpenAIChatModel against a real OpenAI-compatible HTTP server on 127.0.0.1, faults included."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp import web

from rlver.errors import (
    LLMConnectionError,
    LLMRateLimitError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
)
from rlver.llm.base import SamplingParams
from rlver.llm.openai_client import LLMRequestError, OpenAIChatModel, parse_retry_after
from rlver.records import Message
from rlver.testing.openai_server import FakeChatServer, Fault, Reply

FAKE_KEY = "sk-rlver-test-DO-NOT-LEAK-7f3a9c"
HELLO = [Message(role="user", content="hello there")]
GREEDY = SamplingParams(temperature=0.0, max_tokens=32)


class InspectingServer(FakeChatServer):
    """The real fake server, also counting requests in flight and recording Authorization headers."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.now = 0
        self.peak = 0
        self.auth_headers: list[str] = []
        self.echo_key_401 = False

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        self.auth_headers.append(auth)
        if self.echo_key_401:  # like a real provider: "Incorrect API key provided: <key>"
            self.served += 1
            msg = {"error": {"message": f"Incorrect API key provided: {auth.removeprefix('Bearer ')}"}}
            return web.json_response(msg, status=401)
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            return await super()._handle_chat(request)
        finally:
            self.now -= 1


@pytest.fixture()
def server() -> Any:
    with InspectingServer() as s:
        yield s


def client(server: FakeChatServer, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("api_key_env", None)
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    return OpenAIChatModel(server.url, "fake-model", **kw)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_success_maps_sampling_and_returns_usage(server: InspectingServer) -> None:
    model = client(server)
    sampling = SamplingParams(
        temperature=0.3, top_p=0.9, max_tokens=77, seed=5, stop=["\nUser:"], extra={"top_k": 20}
    )
    out = run(model.complete([Message(role="system", content="be kind"), *HELLO], sampling))
    assert out.text == "echo: hello there"
    assert out.finish_reason == "stop"
    assert out.completion_tokens == 3 and out.prompt_tokens == 4
    assert out.latency_s > 0 and not out.cached
    body = server.requests[0]
    assert body["model"] == "fake-model"
    assert body["messages"] == [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": "hello there"},
    ]
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.3, 0.9, 77, 5)
    assert body["stop"] == ["\nUser:"] and body["top_k"] == 20


@pytest.mark.timing  # wall-clock bounds: run alone, after the parallel suite
def test_rate_limit_with_retry_after_then_success(server: InspectingServer) -> None:
    server.faults.append(Fault.rate_limit(retry_after=0.3))
    model = client(server)
    start = time.perf_counter()
    out = run(model.complete(HELLO, GREEDY))
    elapsed = time.perf_counter() - start
    assert out.text == "echo: hello there"
    assert server.served == 2
    assert 0.3 <= elapsed < 3.0  # Retry-After honoured (backoff alone would be ~0.01 s)
    assert out.latency_s >= 0.3  # latency is what the caller waited, retries included


@pytest.mark.timing  # wall-clock bounds: run alone, after the parallel suite
def test_retry_after_is_capped(server: InspectingServer) -> None:
    server.faults.append(Fault.rate_limit(retry_after=600))
    model = client(server, retry_after_max_s=0.05)
    start = time.perf_counter()
    run(model.complete(HELLO, GREEDY))
    assert time.perf_counter() - start < 3.0


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_error_then_success(server: InspectingServer, status: int) -> None:
    server.faults.extend([Fault.server_error(status), Fault.server_error(status)])
    out = run(client(server, max_attempts=3).complete(HELLO, GREEDY))
    assert out.text == "echo: hello there" and server.served == 3


def test_persistent_rate_limit_raises_typed_error_after_bounded_attempts(server: InspectingServer) -> None:
    server.fault_for = lambda body: Fault.rate_limit(retry_after=None)
    with pytest.raises(LLMRateLimitError) as info:
        run(client(server, max_attempts=3).complete(HELLO, GREEDY))
    assert server.served == 3
    assert info.value.kind == "rate_limit"
    assert "3 attempt" in str(info.value)


def test_persistent_server_error(server: InspectingServer) -> None:
    server.fault_for = lambda body: Fault.server_error(500)
    with pytest.raises(LLMServerError, match="HTTP 500"):
        run(client(server, max_attempts=2).complete(HELLO, GREEDY))
    assert server.served == 2


@pytest.mark.timing  # wall-clock bounds: run alone, after the parallel suite
def test_timeout_exhaustion_is_quick_and_typed(server: InspectingServer) -> None:
    server.latency_s = 1.0
    model = client(server, timeout_s=0.2, max_attempts=2)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError) as info:
        run(model.complete(HELLO, GREEDY))
    elapsed = time.perf_counter() - start
    assert elapsed < 0.9, elapsed  # two 0.2 s attempts, not two 1 s answers
    assert info.value.kind == "timeout"
    assert server.served == 2


@pytest.mark.timing  # wall-clock bounds: run alone, after the parallel suite
def test_overall_deadline_bounds_the_whole_call(server: InspectingServer) -> None:
    server.latency_s = 1.0
    model = client(server, timeout_s=10.0, max_attempts=10, deadline_s=0.3)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError):
        run(model.complete(HELLO, GREEDY))
    assert time.perf_counter() - start < 0.9


@pytest.mark.parametrize(
    "fault",
    [
        Fault.garbage(),
        Fault.truncated_json(),
        Fault.empty_content(),
        Fault.huge_body(200_000),
        Fault.garbage(b'{"unexpected": "shape"}'),
        Fault.garbage(b'"just a string"'),
    ],
    ids=["html", "truncated", "empty", "huge", "wrong-shape", "string"],
)
def test_bad_answers_raise_response_error_after_bounded_attempts(
    server: InspectingServer, fault: Fault
) -> None:
    server.fault_for = lambda body: fault
    with pytest.raises(LLMResponseError) as info:
        run(client(server, max_attempts=3).complete(HELLO, GREEDY))
    assert server.served == 3
    assert info.value.kind == "bad_response"


def test_garbage_once_then_success(server: InspectingServer) -> None:
    server.faults.append(Fault.garbage())
    assert run(client(server).complete(HELLO, GREEDY)).text == "echo: hello there"
    assert server.served == 2


def test_dropped_connection_is_retried_then_typed(server: InspectingServer) -> None:
    server.faults.append(Fault.drop())
    assert run(client(server).complete(HELLO, GREEDY)).text == "echo: hello there"
    server.fault_for = lambda body: Fault.drop()
    with pytest.raises(LLMConnectionError):
        run(client(server, max_attempts=2).complete(HELLO, GREEDY))


def test_request_rejection_is_not_retried(server: InspectingServer) -> None:
    server.faults.append(Fault.server_error(400))
    with pytest.raises(LLMRequestError, match="HTTP 400"):
        run(client(server, max_attempts=5).complete(HELLO, GREEDY))
    assert server.served == 1


def test_response_text_is_capped(server: InspectingServer) -> None:
    server.responder = lambda body: "x" * 50_000
    out = run(client(server, max_response_chars=1000).complete(HELLO, GREEDY))
    assert len(out.text) == 1000 and out.finish_reason == "length"


def test_concurrency_limit_is_shared_by_all_callers(server: InspectingServer) -> None:
    server.responder = lambda body: Reply(text="ok", delay_s=0.15)
    model = client(server, concurrency=3)

    async def main() -> None:
        singles = [model.complete(HELLO, GREEDY) for _ in range(5)]
        batch = model.complete_many([HELLO] * 5, GREEDY)
        results = await asyncio.gather(*singles, batch)
        assert all(r.text == "ok" for r in results[:5])
        assert all(getattr(r, "text", None) == "ok" for r in results[5])

    start = time.perf_counter()
    run(main())
    assert server.served == 10
    assert server.peak == 3  # reached the limit (parallel) and never exceeded it
    assert time.perf_counter() - start >= 0.15 * 10 / 3 * 0.9


def test_instance_survives_a_second_event_loop(server: InspectingServer) -> None:
    model = client(server, concurrency=2)
    for _ in range(2):  # the CLI may call asyncio.run more than once with one model
        out = run(model.complete_many([HELLO] * 3, GREEDY))
        assert [o.text for o in out] == ["echo: hello there"] * 3  # type: ignore[union-attr]


def test_key_is_sent_but_never_shown(server: InspectingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLVER_TEST_KEY", FAKE_KEY)
    model = client(server, api_key_env="RLVER_TEST_KEY")
    run(model.complete(HELLO, GREEDY))
    assert server.auth_headers[-1] == f"Bearer {FAKE_KEY}"  # really read from the env var
    assert FAKE_KEY not in repr(model)
    assert FAKE_KEY not in str(model.describe())
    assert model.describe()["api_key_env"] == "RLVER_TEST_KEY"
    assert not any(v == FAKE_KEY for v in vars(model).values())
    server.echo_key_401 = True  # a provider that echoes the rejected key in its error message
    with pytest.raises(LLMRequestError) as info:
        run(model.complete(HELLO, GREEDY))
    assert "HTTP 401" in str(info.value) and "RLVER_TEST_KEY" in str(info.value)
    assert FAKE_KEY not in str(info.value) and FAKE_KEY not in repr(info.value)


def test_unset_key_variable_uses_dummy_key(server: InspectingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLVER_UNSET_KEY", raising=False)
    run(client(server, api_key_env="RLVER_UNSET_KEY").complete(HELLO, GREEDY))
    assert server.auth_headers[-1] == "Bearer EMPTY"


def test_credentials_in_base_url_are_redacted() -> None:
    model = OpenAIChatModel("http://user:hunter2@127.0.0.1:9/v1?token=abc", "m", api_key_env=None)
    assert "hunter2" not in repr(model) and "abc" not in str(model.describe())


@pytest.mark.parametrize(
    ("header", "expected"), [("2", 2.0), ("0.25", 0.25), (None, None), ("soon", None), ("-3", 0.0)]
)
def test_parse_retry_after(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header) == expected
