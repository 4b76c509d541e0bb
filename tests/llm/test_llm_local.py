"""LocalChatModel on the real tiny HF model: batched left-padded generation, seeds, masks of the trainer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from rlver.llm.base import Completion, SamplingParams
from rlver.llm.local import LocalChatModel
from rlver.models.tiny import IM_END, build_tiny_model, tiny_model_and_tokenizer
from rlver.records import Message

torch.set_num_threads(1)

PROMPTS = [
    [Message(role="user", content="hi")],
    [
        Message(role="system", content="Be a kind and patient listener."),
        Message(role="user", content="My best friend moved away and I feel so alone these days."),
    ],
    [Message(role="user", content="我又和妈妈吵架了。")],
]
GREEDY = SamplingParams(temperature=0.0, max_tokens=12)


@pytest.fixture(scope="module")
def decisive_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A larger init than the default makes greedy outputs differ from prompt to prompt, so comparing a
    # batched run with single runs really checks the padding (a near-uniform model says "\n" to all).
    return build_tiny_model(tmp_path_factory.mktemp("decisive"), seed=0, initializer_range=0.2)


def ok(results: list[Completion | BaseException]) -> list[Completion]:
    assert all(isinstance(r, Completion) for r in results), results
    return [r for r in results if isinstance(r, Completion)]


def test_batched_left_padded_generation_equals_one_by_one(decisive_dir: Path) -> None:
    model = LocalChatModel.from_pretrained(decisive_dir, device="cpu", name="tiny")
    calls: list[tuple[int, int]] = []

    def hook(mod: Any, args: Any, kwargs: Any) -> None:
        if (
            kwargs.get("past_key_values") is None and kwargs.get("cache") is None
        ):  # the prefill pass of one batched generation
            calls.append(tuple(kwargs["input_ids"].shape))
            # Left padding: every row's last prompt token sits at the right edge.
            assert bool(kwargs["attention_mask"][:, -1].all())

    model.model.register_forward_pre_hook(hook, with_kwargs=True)
    batched = ok(asyncio.run(model.complete_many(PROMPTS, GREEDY)))
    assert len(calls) == 1 and calls[0][0] == 3  # ONE batched generation for the whole batch
    singles = [asyncio.run(model.complete(p, GREEDY)) for p in PROMPTS]
    assert [b.token_ids for b in batched] == [s.token_ids for s in singles]
    assert (
        len({tuple(b.token_ids or []) for b in batched}) == 3
    )  # the prompts really led to different outputs
    lengths = [b.prompt_tokens for b in batched]
    assert len(set(lengths)) == 3  # different-length prompts were padded


def test_chunks_of_max_batch_size(decisive_dir: Path) -> None:
    model = LocalChatModel.from_pretrained(decisive_dir, device="cpu", max_batch_size=2)
    sizes: list[int] = []

    def hook(mod: Any, args: Any, kwargs: Any) -> None:
        if kwargs.get("past_key_values") is None and kwargs.get("cache") is None:
            sizes.append(kwargs["input_ids"].shape[0])

    model.model.register_forward_pre_hook(hook, with_kwargs=True)
    out = ok(asyncio.run(model.complete_many(PROMPTS, GREEDY)))
    assert sizes == [2, 1] and len(out) == 3


def test_seeded_sampling_is_deterministic_and_leaves_global_rng_alone() -> None:
    net, tokenizer = tiny_model_and_tokenizer(0)
    model = LocalChatModel(net, tokenizer, device="cpu")
    sampling = SamplingParams(temperature=1.0, top_p=0.95, max_tokens=10, seed=123)
    torch.manual_seed(0)
    expected_next = torch.rand(2)
    torch.manual_seed(0)
    first = ok(asyncio.run(model.complete_many(PROMPTS, sampling)))
    assert torch.equal(torch.rand(2), expected_next)
    second = ok(asyncio.run(model.complete_many(PROMPTS, sampling)))
    other = ok(asyncio.run(model.complete_many(PROMPTS, sampling.model_copy(update={"seed": 124}))))
    assert [c.token_ids for c in first] == [c.token_ids for c in second]
    assert [c.token_ids for c in first] != [c.token_ids for c in other]


def test_completion_fields_and_stop_at_end_of_turn(decisive_dir: Path) -> None:
    model = LocalChatModel.from_pretrained(decisive_dir, device="cpu")
    tokenizer = model.tokenizer
    im_end = tokenizer.convert_tokens_to_ids(IM_END)

    # A bias towards <|im_end|> makes some seeded samples end early (stop, then padding in the batch)
    # and others run into max_tokens (length).
    def bias(mod: Any, args: Any, out: Any) -> Any:
        out.logits[..., im_end] += 3.0
        return out

    model.model.register_forward_hook(bias)
    sampling = SamplingParams(temperature=1.0, max_tokens=6, seed=1)
    out = ok(asyncio.run(model.complete_many(PROMPTS * 4, sampling)))
    reasons = [c.finish_reason for c in out]
    assert "stop" in reasons and "length" in reasons
    assert any(c.finish_reason == "stop" and c.completion_tokens > 1 for c in out)
    for c in out:
        ids = c.token_ids or []
        assert c.completion_tokens == len(ids) <= 6
        if c.finish_reason == "stop":
            assert ids[-1] in model.stop_token_ids
            assert all(t not in model.stop_token_ids for t in ids[:-1])
            assert c.text == tokenizer.decode(ids[:-1], skip_special_tokens=True)
        else:
            assert c.finish_reason == "length" and len(ids) == 6
            assert c.text == tokenizer.decode(ids, skip_special_tokens=True)
    assert im_end in model.stop_token_ids


def test_training_mode_restored_and_generation_runs_in_eval(decisive_dir: Path) -> None:
    model = LocalChatModel.from_pretrained(decisive_dir, device="cpu")
    seen: list[bool] = []
    model.model.register_forward_hook(lambda mod, args, out: seen.append(mod.training))
    model.model.train()
    asyncio.run(model.complete(PROMPTS[0], GREEDY))
    assert seen and not any(seen)
    assert model.model.training
    model.model.eval()
    asyncio.run(model.complete(PROMPTS[0], GREEDY))
    assert not model.model.training


def test_event_loop_keeps_running_during_generation() -> None:
    net, tokenizer = tiny_model_and_tokenizer(0)
    model = LocalChatModel(net, tokenizer, device="cpu")
    sampling = SamplingParams(temperature=1.0, max_tokens=48, seed=0)
    model.stop_token_ids = [-1]  # never stop early: every reply runs to max_tokens

    async def main() -> tuple[int, float]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.005)
                ticks += 1

        task = asyncio.create_task(ticker())
        start = time.perf_counter()
        out = ok(await model.complete_many(PROMPTS, sampling))
        elapsed = time.perf_counter() - start
        done.set()
        await task
        assert all(len(c.token_ids or []) == 48 for c in out)
        return ticks, elapsed

    ticks, elapsed = asyncio.run(main())
    assert ticks >= 3, (ticks, elapsed)


def test_describe_and_requires_chat_template() -> None:
    net, tokenizer = tiny_model_and_tokenizer(0)
    model = LocalChatModel(net, tokenizer, name="tiny-0")
    assert model.describe()["name"] == "tiny-0" and model.describe()["device"] == "cpu"
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="chat template"):
        LocalChatModel(net, tokenizer)


def test_stop_strings_cut_the_reply(decisive_dir: Path) -> None:
    model = LocalChatModel.from_pretrained(decisive_dir, device="cpu")
    full = asyncio.run(model.complete(PROMPTS[1], GREEDY))
    assert len(full.text) >= 6, full.text
    stop = full.text[3:6]
    cut = asyncio.run(model.complete(PROMPTS[1], GREEDY.model_copy(update={"stop": [stop]})))
    assert cut.text == full.text[: full.text.find(stop)]
    assert cut.finish_reason == "stop"
    assert (cut.token_ids or []) == (full.token_ids or [])[: len(cut.token_ids or [])]
    # the decode itself stopped at the string (not at its budget, with the text cut afterwards)
    assert len(cut.token_ids or []) < len(full.token_ids or []), (cut.token_ids, full.token_ids)
