"""Deterministic fault plans for :class:`~rlver.testing.openai_server.FakeChatServer`.

The fault-injection suite (``tests/test_faults.py``) and the drill that writes the table in
``docs/reliability.md`` (``bench/fault_drill.py``) both use this module, so the table in the docs comes
from exactly the code the tests run.

A :class:`FaultPlan` misbehaves in one way (``kind``) on two kinds of requests:

- **victim dialogues** — every request of a dialogue whose prompt carries :data:`VICTIM_MARKER` is
  faulted, on every attempt and every re-ask, so the dialogue must end ``status="failed"`` with the
  error kind of :data:`EXPECTED_ERROR_KIND`;
- **transient faults** — the *first* request of a non-victim conversation step is faulted when a hash
  of its prompt picks it (about one in ``transient_every``); the client's retry (or the simulator's
  re-ask) must recover, so the dialogue still finishes.

Choosing by content, not by arrival order, makes a run deterministic whatever the concurrency: the same
profiles always give the same victims and the same transient faults. The plan counts what it injected,
which is what the reliability table reports.

The drill itself (an evaluation and a training step per fault kind against a local server) lives in
``bench/fault_drill.py``: it builds evaluation and training configs, which this low layer must not
import.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlver.testing.openai_server import FakeChatServer, Fault, Reply, Responder
from rlver.testing.responders import POLICY_TEXT, SIMULATOR_TEXT

#: Victim dialogues carry this in their persona and opening line (so both simulator and policy
#: prompts show it).
VICTIM_MARKER = "fault-target"

#: The model ids the suite serves: the agent under test and the simulated user.
POLICY_MODEL = "policy"
SIMULATOR_MODEL = "sim"

#: Every fault the suite injects, in table order.
FAULT_KINDS: tuple[str, ...] = (
    "delay",
    "drop",
    "rate_limit",
    "server_error",
    "truncated",
    "empty",
    "huge",
    "huge_text",
    "nonsense",
)

#: What a victim dialogue's ``Episode.error_kind`` must be for each fault (rlver.errors kinds).
EXPECTED_ERROR_KIND: dict[str, str] = {
    "delay": "timeout",  # the answer comes after the client's per-attempt timeout
    "drop": "connection",  # the server closes the TCP connection without answering
    "rate_limit": "rate_limit",  # HTTP 429 with Retry-After, on every attempt
    "server_error": "server_error",  # HTTP 500
    "truncated": "bad_response",  # the JSON body is cut in half
    "empty": "bad_response",  # a chat completion whose text is ""
    "huge": "bad_response",  # a 1 MB body that is not JSON
    "huge_text": "appraisal_parse",  # a valid completion whose text is 1 MB of junk (capped by the client)
    "nonsense": "appraisal_parse",  # prose instead of the structured appraisal
}

#: Kinds that change what the responder says rather than how the HTTP exchange goes.
CONTENT_KINDS = frozenset({"huge_text", "nonsense"})

NONSENSE_TEXT = "Honestly I feel sort of fine? Change: plenty. Let us talk about the weather instead."
HUGE_SIZE = 1_000_000


def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def fixed_responder(request: dict[str, Any]) -> str:
    """A fixed supportive agent reply for :data:`POLICY_MODEL`, a valid simulator answer otherwise."""
    return POLICY_TEXT if request.get("model") == POLICY_MODEL else SIMULATOR_TEXT


@dataclass
class FaultPlan:
    """One fault kind, injected into victim dialogues always and into other requests transiently.

    ``target`` picks which requests may be faulted: ``"simulator"`` (every model but
    :data:`POLICY_MODEL`), ``"policy"`` or ``"all"``. ``delay_s`` must exceed the client's
    per-attempt timeout for a delay to count as a fault.
    """

    kind: str
    target: str = "simulator"
    transient_every: int = 2
    delay_s: float = 1.5
    retry_after_s: float = 0.05
    base: Responder = fixed_responder
    injected_victim: int = 0
    injected_transient: int = 0
    requests: int = 0
    _seen: Counter[int] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {', '.join(FAULT_KINDS)}")
        if self.target not in ("simulator", "policy", "all"):
            raise ValueError(f"target must be simulator, policy or all, not {self.target!r}")

    @property
    def injected(self) -> int:
        return self.injected_victim + self.injected_transient

    # -- the decision -----------------------------------------------------------------------------
    def _targeted(self, request: dict[str, Any]) -> bool:
        is_policy = request.get("model") == POLICY_MODEL
        return self.target == "all" or (self.target == "policy") == is_policy

    def _decide(self, request: dict[str, Any]) -> bool:
        """Whether to fault this request (counts it); called exactly once per request."""
        messages = request.get("messages") or []
        with self._lock:
            self.requests += 1
            if not self._targeted(request):
                return False
            if VICTIM_MARKER in json.dumps(messages, ensure_ascii=False):
                self.injected_victim += 1
                return True
            # A conversation step is its first two messages (system prompt + the dialogue so far):
            # retries repeat them and re-asks only append, so only the first request of a step is
            # faulted and the recovery path is exercised.
            step = _digest(str(request.get("model")), json.dumps(messages[:2], ensure_ascii=False))
            self._seen[step] += 1
            if self._seen[step] == 1 and step % self.transient_every == 0:
                self.injected_transient += 1
                return True
            return False

    # -- server hooks ---------------------------------------------------------------------------
    def fault_for(self, request: dict[str, Any]) -> Fault | None:
        if self.kind in CONTENT_KINDS or not self._decide(request):
            return None
        if self.kind == "delay":
            return Fault.delay(self.delay_s)
        if self.kind == "drop":
            return Fault.drop()
        if self.kind == "rate_limit":
            return Fault.rate_limit(retry_after=self.retry_after_s)
        if self.kind == "server_error":
            return Fault.server_error(500)
        if self.kind == "truncated":
            return Fault.truncated_json()
        if self.kind == "empty":
            return Fault.empty_content()
        return Fault.huge_body(HUGE_SIZE)

    def responder(self, request: dict[str, Any]) -> str | Reply:
        if self.kind in CONTENT_KINDS and self._decide(request):
            return NONSENSE_TEXT if self.kind == "nonsense" else "x" * HUGE_SIZE
        return self.base(request)

    def install(self, server: FakeChatServer) -> FaultPlan:
        """Make ``server`` follow this plan (replacing any previous plan)."""
        server.faults.clear()
        server.fault_for = self.fault_for
        server.responder = self.responder
        return self


# -- profiles -------------------------------------------------------------------------------------


def fault_profiles(n: int = 6, victims: Iterable[int] = (0, 3)) -> list[dict[str, Any]]:
    """``n`` small English profiles (our own JSONL format); those at ``victims`` carry the marker."""
    chosen = set(victims)
    rows = []
    for i in range(n):
        tag = f" ({VICTIM_MARKER})" if i in chosen else ""
        rows.append(
            {
                "id": f"fault-{i}",
                "language": "en",
                "persona": f"- Name: Sam {i}{tag}\n- Job: night-shift nurse\n- Speaking style: short, tired",
                "background": "Cause: a rota change means no weekend off for two months.",
                "goal": "Be heard about how tired they are.",
                "hidden_need": "To hear that being exhausted is not a personal failure.",
                "opening": f"I just found out I'm working every weekend until spring{tag}.",
            }
        )
    return rows


def write_fault_profiles(path: Path, n: int = 6, victims: Iterable[int] = (0, 3)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in fault_profiles(n, victims)), encoding="utf-8")
    return path


def victim_ids(n: int = 6, victims: Iterable[int] = (0, 3)) -> set[str]:
    return {f"fault-{i}" for i in victims if i < n}


# -- model blocks --------------------------------------------------------------------------------


def model_spec_dict(server_url: str, model: str, *, timeout_s: float = 0.5, max_attempts: int = 2) -> dict:
    """A model block pointing at the local server, with short deadlines so nothing can hang."""
    return {
        "kind": "openai",
        "base_url": server_url,
        "model": model,
        "api_key_env": None,
        "timeout_s": timeout_s,
        "max_attempts": max_attempts,
    }
