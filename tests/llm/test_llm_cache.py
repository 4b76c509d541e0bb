"""The sqlite response cache: replay bit-for-bit, across processes, only for reproducible sampling."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlver.errors import LLMServerError
from rlver.llm.base import Completion, SamplingParams
from rlver.llm.cache import CachedChatModel, cache_key, should_cache
from rlver.llm.factory import build_chat_model
from rlver.llm.local import LocalChatModel
from rlver.llm.openai_client import OpenAIChatModel
from rlver.llm.spec import ModelSpec
from rlver.records import Message
from rlver.testing.openai_server import FakeChatServer, Fault, Reply

HELLO = [Message(role="user", content="hello")]
GREEDY = SamplingParams(temperature=0.0, max_tokens=16)


def counting_responder() -> object:
    counter = itertools.count(1)
    return lambda body: f"answer #{next(counter)} to {body['messages'][-1]['content']}"


def remote(server: FakeChatServer, **kw: object) -> OpenAIChatModel:
    return OpenAIChatModel(server.url, "fake", api_key_env=None, backoff_base_s=0.01, **kw)  # type: ignore[arg-type]


def test_hit_replays_the_stored_completion_exactly(fake_server: FakeChatServer, tmp_path: Path) -> None:
    fake_server.responder = counting_responder()  # type: ignore[assignment]
    model = CachedChatModel(remote(fake_server), tmp_path / "cache.sqlite")
    first = asyncio.run(model.complete(HELLO, GREEDY))
    second = asyncio.run(model.complete(HELLO, GREEDY))
    assert fake_server.served == 1
    assert not first.cached and second.cached
    assert second.model_dump(exclude={"cached"}) == first.model_dump(exclude={"cached"})
    assert second.text == "answer #1 to hello"
    assert model.stats() == {"hits": 1, "misses": 1, "bypassed": 0}


def test_cache_survives_a_new_process(fake_server: FakeChatServer, tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    model = CachedChatModel(remote(fake_server), path)
    original = asyncio.run(model.complete(HELLO, GREEDY))
    model.close()
    # A fresh interpreter, pointed at a port where nothing listens: only the file can answer.
    script = f"""
import asyncio, json
from rlver.llm.base import SamplingParams
from rlver.llm.cache import CachedChatModel
from rlver.llm.openai_client import OpenAIChatModel
from rlver.records import Message
inner = OpenAIChatModel("http://127.0.0.1:9/v1", "fake", api_key_env=None, max_attempts=1, timeout_s=2)
model = CachedChatModel(inner, {str(path)!r})
out = asyncio.run(model.complete([Message(role="user", content="hello")], SamplingParams(temperature=0.0, max_tokens=16)))
print(json.dumps(out.model_dump()))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    replayed = Completion.model_validate(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert replayed.cached
    assert replayed.model_dump(exclude={"cached"}) == original.model_dump(exclude={"cached"})


def test_key_covers_model_messages_and_sampling() -> None:
    base = cache_key("m", HELLO, GREEDY)
    assert base == cache_key("m", [Message(role="user", content="hello")], GREEDY.model_copy())
    assert base != cache_key("other", HELLO, GREEDY)
    assert base != cache_key("m", [Message(role="user", content="hello!")], GREEDY)
    assert base != cache_key("m", [Message(role="system", content="hello")], GREEDY)
    assert base != cache_key("m", HELLO, GREEDY.model_copy(update={"seed": 1}))
    assert base != cache_key("m", HELLO, GREEDY.model_copy(update={"max_tokens": 17}))
    assert base != cache_key("m", HELLO, GREEDY.model_copy(update={"extra": {"top_k": 5}}))


def test_only_reproducible_sampling_is_cached_by_default(fake_server: FakeChatServer, tmp_path: Path) -> None:
    fake_server.responder = counting_responder()  # type: ignore[assignment]
    assert should_cache(GREEDY) and should_cache(SamplingParams(temperature=1.0, seed=3))
    hot = SamplingParams(temperature=1.0)
    assert not should_cache(hot)
    model = CachedChatModel(remote(fake_server), tmp_path / "c.sqlite")
    texts = {asyncio.run(model.complete(HELLO, hot)).text for _ in range(2)}
    assert len(texts) == 2  # two samples stay two samples
    assert model.stats()["bypassed"] == 2 and len(model) == 0
    always = CachedChatModel(remote(fake_server), tmp_path / "a.sqlite", policy="always")
    assert len({asyncio.run(always.complete(HELLO, hot)).text for _ in range(2)}) == 1


def test_failures_are_not_cached(fake_server: FakeChatServer, tmp_path: Path) -> None:
    model = CachedChatModel(remote(fake_server, max_attempts=1), tmp_path / "c.sqlite")
    fake_server.faults.append(Fault.server_error(500))
    with pytest.raises(LLMServerError):
        asyncio.run(model.complete(HELLO, GREEDY))
    assert len(model) == 0
    assert asyncio.run(model.complete(HELLO, GREEDY)).text == "echo: hello"


def test_concurrent_identical_misses_all_get_the_first_stored_answer(
    fake_server: FakeChatServer, tmp_path: Path
) -> None:
    counter = itertools.count(1)
    fake_server.responder = lambda body: Reply(text=f"answer #{next(counter)}", delay_s=0.05)
    model = CachedChatModel(remote(fake_server), tmp_path / "c.sqlite")

    async def main() -> list[Completion]:
        return await asyncio.gather(*(model.complete(HELLO, GREEDY) for _ in range(4)))

    out = asyncio.run(main())
    assert len({c.text for c in out}) == 1  # what a later replay would also return
    assert asyncio.run(model.complete(HELLO, GREEDY)).text == out[0].text


def test_complete_many_sends_only_misses_as_one_batch(tmp_path: Path) -> None:
    from rlver.models.tiny import tiny_model_and_tokenizer

    net, tokenizer = tiny_model_and_tokenizer(0)
    local = LocalChatModel(net, tokenizer, device="cpu", name="tiny")
    batches: list[int] = []

    def prefill(mod: Any, args: Any, kwargs: Any) -> None:  # one prefill pass per batched generation
        if kwargs.get("past_key_values") is None and kwargs.get("cache") is None:
            batches.append(kwargs["input_ids"].shape[0])

    local.model.register_forward_pre_hook(prefill, with_kwargs=True)
    model = CachedChatModel(local, tmp_path / "c.sqlite")
    prompts = [[Message(role="user", content=f"prompt {i}")] for i in range(3)]
    sampling = SamplingParams(temperature=1.0, max_tokens=5, seed=7)
    first = asyncio.run(model.complete_many(prompts[:2], sampling))
    mixed = asyncio.run(model.complete_many(prompts, sampling))
    assert batches == [2, 1]  # the second call generated only the one new prompt
    assert [c.cached for c in mixed] == [True, True, False]  # type: ignore[union-attr]
    assert [c.token_ids for c in mixed[:2]] == [c.token_ids for c in first]  # type: ignore[union-attr]


def test_factory_builds_each_kind_and_wraps_cache(fake_server: FakeChatServer, tmp_path: Path) -> None:
    from rlver.models.tiny import tiny_model_dir

    remote_spec = ModelSpec(
        kind="openai", model="fake", base_url=fake_server.url, api_key_env=None, max_attempts=2
    )
    model = build_chat_model(remote_spec)
    assert isinstance(model, OpenAIChatModel) and model.max_attempts == 2
    assert asyncio.run(model.complete(HELLO, GREEDY)).text == "echo: hello"
    cached = build_chat_model(remote_spec.model_copy(update={"cache": str(tmp_path / "c.sqlite")}))
    assert isinstance(cached, CachedChatModel) and cached.describe()["cache"]["path"].endswith("c.sqlite")
    local = build_chat_model(ModelSpec(kind="local", model=str(tiny_model_dir(0)), device="cpu"))
    assert isinstance(local, LocalChatModel)
    assert asyncio.run(local.complete(HELLO, SamplingParams(max_tokens=3, seed=0))).completion_tokens <= 3


def test_factory_reports_missing_local_model(tmp_path: Path) -> None:
    from rlver.errors import ConfigError

    with pytest.raises(ConfigError, match="no model folder at"):
        build_chat_model(ModelSpec(kind="local", model=str(tmp_path / "nope"), device="cpu"))
    # A folder that exists but holds no model is refused before the loader is asked.
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="is empty"):
        build_chat_model(ModelSpec(kind="local", model=str(tmp_path / "empty"), device="cpu"))
    # One with files but no config.json is refused the same way.
    (tmp_path / "empty" / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"has no config\.json"):
        build_chat_model(ModelSpec(kind="local", model=str(tmp_path / "empty"), device="cpu"))
