"""A content-addressed response cache (sqlite) so a run can be replayed bit-for-bit.

Why: the simulator's judgement is the reward. A leaderboard number is only reproducible if a third party
can replay the exact simulator answers, and a crashed run is only cheap to resume if the answers it
already paid for are kept. The key is a sha256 over (model name, messages, sampling settings incl. seed),
so the cache file can be shared: any run asking the same question of the same model gets the same answer.

Caching a *random* sample is wrong, though: two identical unseeded calls at temperature 1 are meant to
differ (GRPO samples n answers to one prompt). :func:`should_cache` says when an answer is reproducible
(temperature 0, or a fixed seed); by default :class:`CachedChatModel` passes other calls straight
through. The simulator factory turns the cache on for the simulator at temperature 0.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Literal

from rlver.llm.base import ChatModel, Completion, MessagesLike, SamplingParams
from rlver.llm.sampling import is_greedy

CachePolicy = Literal["deterministic", "always"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    completion TEXT NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now'))
)
"""


def should_cache(sampling: SamplingParams) -> bool:
    """True when the answer to these settings is meant to be reproducible: greedy, or seeded."""
    return is_greedy(sampling.temperature) or sampling.seed is not None


def cache_key(model_name: str, messages: MessagesLike, sampling: SamplingParams) -> str:
    """sha256 over a canonical JSON of (model, messages, sampling): equal questions, equal keys."""
    payload = {
        "model": model_name,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "sampling": sampling.model_dump(mode="json"),
    }
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class CachedChatModel(ChatModel):
    """Wraps a :class:`ChatModel`; answers from ``path`` when it can, records new answers otherwise.

    Thread- and task-safe: one sqlite connection (WAL mode, so a second process may read the file while
    this one writes) guarded by a lock, used from worker threads so the event loop never blocks on disk.
    When two identical calls miss at the same time, the first answer stored wins and both callers get it,
    exactly as a later replay would.
    """

    def __init__(self, inner: ChatModel, path: str | Path, *, policy: CachePolicy = "deterministic") -> None:
        self.inner = inner
        self.batch_serially = inner.batch_serially
        self.name = inner.name
        self.path = Path(path)
        self.policy = policy
        self.hits = 0
        self.misses = 0
        self.bypassed = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)

    @property  # type: ignore[override]
    def accept_empty(self) -> bool:
        """The wrapped model's (its client decides what an empty answer is)."""
        return self.inner.accept_empty

    @accept_empty.setter
    def accept_empty(self, value: bool) -> None:
        self.inner.accept_empty = value

    # -- storage -----------------------------------------------------------------------------------
    def _get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        data = json.loads(row[0])
        token_ids = data.pop("token_ids", None)
        completion = Completion.model_validate(data)
        completion.token_ids = token_ids
        completion.cached = True
        return completion

    def _put(self, key: str, completion: Completion) -> None:
        data = completion.model_dump(mode="json")
        data["cached"] = False
        data["token_ids"] = completion.token_ids  # excluded from transcripts, but part of a replay
        blob = json.dumps(data, ensure_ascii=False, sort_keys=True)
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO responses (key, model, completion) VALUES (?, ?, ?)",
                (key, self.inner.name, blob),
            )

    # -- ChatModel ----------------------------------------------------------------------------------
    def _cacheable(self, sampling: SamplingParams) -> bool:
        return self.policy == "always" or should_cache(sampling)

    async def complete(self, messages: MessagesLike, sampling: SamplingParams) -> Completion:
        if not self._cacheable(sampling):
            self.bypassed += 1
            return await self.inner.complete(messages, sampling)
        key = cache_key(self.inner.name, messages, sampling)
        hit = await asyncio.to_thread(self._get, key)
        if hit is not None:
            self.hits += 1
            return hit
        self.misses += 1
        fresh = await self.inner.complete(messages, sampling)
        return await asyncio.to_thread(self._store_and_reread, key, fresh)

    def _store_and_reread(self, key: str, fresh: Completion) -> Completion:
        self._put(key, fresh)
        stored = self._get(key)
        if stored is None:  # cannot happen after INSERT OR IGNORE; keep the fresh answer to be safe
            return fresh
        stored.cached = False  # this call did reach the model (or raced one that did)
        return stored

    async def complete_many(
        self, batch: list[MessagesLike] | Any, sampling: SamplingParams
    ) -> list[Completion | BaseException]:
        """Answer hits from the file and send only the misses to the inner model, as one batch.

        Keeping the misses batched matters for local models, where one ``complete_many`` is one
        ``generate`` call.
        """
        batch = list(batch)
        if not self._cacheable(sampling):
            self.bypassed += len(batch)
            return await self.inner.complete_many(batch, sampling)
        keys = [cache_key(self.inner.name, m, sampling) for m in batch]
        results: list[Completion | BaseException | None] = list(
            await asyncio.to_thread(lambda: [self._get(k) for k in keys])
        )
        missing = [i for i, r in enumerate(results) if r is None]
        self.hits += len(batch) - len(missing)
        self.misses += len(missing)
        if missing:
            answers = await self.inner.complete_many([batch[i] for i in missing], sampling)
            for i, answer in zip(missing, answers, strict=True):
                if isinstance(answer, Completion):
                    results[i] = await asyncio.to_thread(self._store_and_reread, keys[i], answer)
                else:
                    results[i] = answer  # failures are never cached
        return [r for r in results if r is not None]

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "bypassed": self.bypassed}

    def __len__(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT COUNT(*) FROM responses").fetchone()
        return int(row[0])

    def describe(self) -> dict[str, Any]:
        info = dict(self.inner.describe())
        info["cache"] = {"path": str(self.path), "policy": self.policy}
        return info

    def close(self) -> None:
        with self._lock:
            self._db.close()

    async def aclose(self) -> None:
        self.close()
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"CachedChatModel({self.inner!r}, path={str(self.path)!r})"
