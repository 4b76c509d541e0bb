"""The local engine's slots come from memory: the KV cost of a token (measured on a real cache), the
memory given, the longest sequence; an explicit ``max_batch_size`` wins, and the plan is recorded.

The real tiny model on the CPU; the memory is a budget passed in (what a card of that size would have
free), so the figures are exact on any machine.
"""

from __future__ import annotations

import pytest
import torch

from rlver.llm.decoding import cache_layers
from rlver.llm.hf_engine import HFEngine
from rlver.llm.slots import KV_SHARE, MAX_SLOTS, kv_bytes_per_token, plan_slots
from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.train.memory_guard import QWEN25_7B


def test_the_kv_cost_of_a_token_is_what_a_real_cache_holds() -> None:
    net, _ = tiny_model_and_tokenizer(0)
    ids = torch.arange(10, 47).unsqueeze(0)
    with torch.inference_mode():
        cache = net(input_ids=ids, use_cache=True).past_key_values
    held = sum(
        t.numel() * t.element_size() for layer in cache_layers(cache) for t in (layer.keys, layer.values)
    )
    per_token = kv_bytes_per_token(net.config, next(net.parameters()).element_size())
    assert per_token * ids.shape[1] == held
    assert per_token == 2 * 2 * 2 * 16 * 4  # keys and values, 2 layers, 2 KV heads of 16, fp32
    # the paper's 7B shape in bf16: 2 x 28 layers x 4 KV heads x 128 x 2 bytes
    assert kv_bytes_per_token(QWEN25_7B, 2) == 57_344


def test_unset_slots_are_sized_from_the_memory_and_the_longest_sequence() -> None:
    net, tok = tiny_model_and_tokenizer(0)
    per_slot = 512 * 2 * 2 * 2 * 16 * 4  # 512 tokens of KV
    for slots in (1, 5, 37):
        budget = slots * per_slot / KV_SHARE
        engine = HFEngine(net, tok, device="cpu", longest_tokens=512, memory_bytes=budget)
        assert engine.max_batch_size == engine.scheduler.max_slots == slots
        assert HFEngine(net, tok, longest_tokens=512, memory_bytes=budget - 1).max_batch_size == max(
            1, slots - 1
        )
        assert engine.describe()["slots"] == {
            "slots": slots,
            "source": "memory",
            "free_bytes": budget,
            "kv_bytes_per_token": 512,
            "longest_tokens": 512,
        }
    assert HFEngine(net, tok, longest_tokens=512, memory_bytes=1.0).max_batch_size == 1  # never 0
    assert HFEngine(net, tok, longest_tokens=512, memory_bytes=1e15).max_batch_size == MAX_SLOTS
    # the longest sequence defaults to the model's context (the tiny model's: 4,096)
    assert plan_slots(net, max_batch_size=None, memory_bytes=8 * 4096 * 512 / KV_SHARE).slots == 8


def test_an_explicit_slot_count_wins_and_a_bad_one_is_refused() -> None:
    net, tok = tiny_model_and_tokenizer(0)
    engine = HFEngine(net, tok, max_batch_size=3, memory_bytes=1e15)
    assert engine.max_batch_size == 3 and engine.describe()["slots"] == {"slots": 3, "source": "set"}
    with pytest.raises(ValueError, match="max_batch_size must be >= 1"):
        HFEngine(net, tok, max_batch_size=0)


def test_without_a_budget_the_device_memory_is_read() -> None:
    net, tok = tiny_model_and_tokenizer(0)
    plan = HFEngine(net, tok, device="cpu").slot_plan
    assert plan.source == "memory" and plan.free_bytes and plan.free_bytes > 0
    assert 1 <= plan.slots <= MAX_SLOTS
