"""``rlver.testing.openai_server`` itself: the server other tests trust must answer and fail as told.

Every test that talks to an LLM goes through this server, so a fault that silently did nothing would
make those tests pass for the wrong reason. Here each fault is checked with a plain HTTP client
(``urllib``), not with rlver's own client, so the two cannot share a mistake.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from rlver.testing.openai_server import FakeChatServer, Fault, Reply


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer k"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


BODY = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}


def test_answers_with_the_responder_and_records_the_request() -> None:
    with FakeChatServer(lambda body: Reply("hi", finish_reason="length")) as server:
        status, _, raw = post(server.url, BODY)
        assert status == 200
        answer = json.loads(raw)
        assert answer["choices"][0]["message"]["content"] == "hi"
        assert answer["choices"][0]["finish_reason"] == "length"
        assert answer["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}
        assert server.requests == [BODY] and server.authorizations == ["Bearer k"] and server.served == 1


@pytest.mark.parametrize(
    ("fault", "status", "check"),
    [
        (Fault.rate_limit(retry_after=0.5), 429, lambda h, raw: h.get("Retry-After") == "0.5"),
        (Fault.server_error(503), 503, lambda h, raw: b"injected HTTP 503" in raw),
        (Fault.rejected(), 401, lambda h, raw: b"invalid API key" in raw),
        (Fault.truncated_json(), 200, lambda h, raw: raw and not _parses(raw)),
        (Fault.garbage(), 200, lambda h, raw: raw == b"<html>not json</html>"),
        (
            Fault.empty_content(),
            200,
            lambda h, raw: json.loads(raw)["choices"][0]["message"]["content"] == "",
        ),
    ],
)
def test_each_fault_is_applied_to_one_request_then_gone(fault: Fault, status: int, check: Any) -> None:
    with FakeChatServer() as server:
        server.faults.append(fault)
        got, headers, raw = post(server.url, BODY)
        assert got == status and check(headers, raw), (got, headers, raw[:200])
        again, _, raw = post(server.url, BODY)  # consumed: the next request is answered normally
        assert again == 200 and json.loads(raw)["choices"][0]["message"]["content"] == "echo: hello there"


def test_a_dropped_connection_gets_no_answer() -> None:
    with FakeChatServer() as server:
        server.faults.append(Fault.drop())
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            post(server.url, BODY)
        assert server.served == 1


def test_a_responder_that_raises_is_a_500() -> None:
    def broken(body: dict[str, Any]) -> str:
        raise RuntimeError("responder bug")

    with FakeChatServer(broken) as server:
        status, _, raw = post(server.url, BODY)
        assert status == 500 and b"responder bug" in raw


def _parses(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True
