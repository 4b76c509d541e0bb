"""The token-level engine seam (``rlver.llm.engine``), the chat layer over it (``rlver.llm.engine_chat``)
and the transformers engine (``rlver.llm.hf_engine``): release and resume on a rotary model with tied
embeddings keep the rotary buffers and the tie and sample what they sampled before; the chat layer
works over an engine that is not the transformers one; the sampler's record names the engine that
sampled, in its own words."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from rlver.llm.base import SamplingParams
from rlver.llm.engine import TokenEngine, TokenOutput, sampler_record
from rlver.llm.engine_chat import EngineChatModel, generation_eos, reply_text
from rlver.llm.hf_engine import HFEngine, own_copy
from rlver.llm.precision import compute_in_bf16
from rlver.llm.weights import named_weights
from rlver.models.tiny import IM_END, tiny_model_and_tokenizer
from rlver.records import Message

torch.set_num_threads(1)

CONVERSATIONS = [
    [Message(role="user", content=f"day {i}: my work was hard and I feel low")] for i in range(4)
]
SAMPLING = SamplingParams(temperature=1.0, max_tokens=12)


def _sample(chat: EngineChatModel) -> list[tuple[list[int], list[float]]]:
    samplings = [SAMPLING.model_copy(update={"seed": 100 + i}) for i in range(len(CONVERSATIONS))]
    out = asyncio.run(chat.complete_each(CONVERSATIONS, samplings))
    assert all(not isinstance(c, BaseException) for c in out), out
    return [(list(c.token_ids or []), list(c.token_logprobs or [])) for c in out]  # type: ignore[union-attr]


def _rotary(model: Any) -> Any:
    return model.model.rotary_emb


def _own_engine(policy: Any, tokenizer: Any) -> tuple[HFEngine, EngineChatModel]:
    engine = HFEngine(own_copy(policy), tokenizer, shares_weights=False, name="copy")
    return engine, EngineChatModel(engine, tokenizer, eos_ids=generation_eos(policy))


def test_release_and_resume_keep_the_rotary_buffers_and_the_tied_weights() -> None:
    """The tiny model is a Qwen2 (rotary ``inv_freq``, a non-persistent buffer that no state_dict
    carries) with tied embeddings. Its own copy, released (weights and buffers freed), resumed and
    loaded by name, samples the same ids with the same log-probs, holds the same bytes, and keeps
    the embeddings and the LM head one tensor."""
    policy, tokenizer = tiny_model_and_tokenizer(0)
    assert policy.config.tie_word_embeddings and "inv_freq" in _rotary(policy)._non_persistent_buffers_set
    engine, chat = _own_engine(policy, tokenizer)
    model = engine.model
    before = _sample(chat)
    inv_freq = _rotary(model).inv_freq.clone()
    size = engine.weights.bytes()
    assert 0.9e6 < size < 1.1e6  # 1.0 MB: the tied matrix counted once

    engine.release()
    assert engine.weights.bytes() == 0 and _rotary(model).inv_freq.numel() == 0  # really freed
    with pytest.raises(RuntimeError, match="released"):
        engine.generate([[1, 2]], SAMPLING, seeds=[0], stop_token_ids=chat.stop_token_ids)
    engine.resume()
    with pytest.raises(RuntimeError, match="never loaded"):
        engine.generate([[1, 2]], SAMPLING, seeds=[0], stop_token_ids=chat.stop_token_ids)
    engine.update_weights(named_weights(policy))

    assert torch.equal(_rotary(model).inv_freq, inv_freq)
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still one tensor
    assert engine.weights.bytes() == size
    assert _sample(chat) == before  # same ids, same log-probs, bit for bit


def test_after_an_update_the_synced_copy_samples_what_the_trained_model_samples() -> None:
    """The trained model changes (embeddings included); the released copy, resumed and synced, samples
    exactly what an engine on the trained model itself samples, and the tie still holds."""
    policy, tokenizer = tiny_model_and_tokenizer(0)
    engine, chat = _own_engine(policy, tokenizer)
    _sample(chat)
    engine.release()
    with torch.no_grad():  # "the update": every weight moves, the tied matrix once
        generator = torch.Generator().manual_seed(5)
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.05)
    engine.resume()
    engine.update_weights(named_weights(policy))
    on_policy = EngineChatModel(HFEngine(policy, tokenizer), tokenizer, eos_ids=generation_eos(policy))
    assert _sample(chat) == _sample(on_policy)
    assert engine.model.lm_head.weight is engine.model.model.embed_tokens.weight


def test_an_engine_on_the_trained_model_copies_nothing_and_keeps_its_weights_through_release() -> None:
    policy, tokenizer = tiny_model_and_tokenizer(0)
    engine = HFEngine(policy, tokenizer)  # shares_weights: the hf backend's engine
    ptrs = {k: v.data_ptr() for k, v in policy.state_dict().items()}
    engine.release()
    engine.resume()
    assert engine.weights.load(named_weights(policy)) == 0
    assert {k: v.data_ptr() for k, v in policy.state_dict().items()} == ptrs


def test_a_weight_the_engine_does_not_have_is_named() -> None:
    policy, tokenizer = tiny_model_and_tokenizer(0)
    engine = HFEngine(own_copy(policy), tokenizer, shares_weights=False)
    with pytest.raises(KeyError, match=r"no weight named 'model\.extra\.weight'"):
        engine.update_weights([("model.extra.weight", torch.zeros(2))])
    with pytest.raises(ValueError, match=r"lm_head\.weight has shape \(2,\)"):
        engine.update_weights([("lm_head.weight", torch.zeros(2))])


def test_the_own_copy_of_a_bf16_model_runs_its_own_forward() -> None:
    """``compute_in_bf16`` wraps the instance's bound forward; a plain deep copy would keep calling the
    original's forward, on the original's weights."""
    policy, _ = tiny_model_and_tokenizer(0)
    compute_in_bf16(policy, torch.device("cpu"))
    assert copy.deepcopy(policy).forward.__wrapped__.__self__ is policy  # the trap
    twin = own_copy(policy)
    assert twin.forward.__wrapped__.__self__ is twin
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        want = policy(ids).logits
        for p in policy.parameters():
            p.zero_()
        assert torch.equal(twin(ids).logits, want)  # its own weights, untouched by the original's


# -- the chat layer over another engine ------------------------------------------------------------------
class ScriptedEngine(TokenEngine):
    """An engine that returns given ids (a stand-in for a model's output, not for the chat layer)."""

    name = "scripted"

    def __init__(self, replies: list[list[int]]) -> None:
        self.replies = replies
        self.calls: list[tuple[list[list[int]], list[int | None], list[int]]] = []

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        seeds: Sequence[int | None],
        stop_token_ids: Sequence[int],
    ) -> list[TokenOutput]:
        self.calls.append(([list(p) for p in prompts], list(seeds), list(stop_token_ids)))
        out = []
        for ids in self.replies[: len(prompts)]:
            cut = next((k + 1 for k, t in enumerate(ids) if t in stop_token_ids), None)
            kept = ids[:cut] if cut else ids[: sampling.max_tokens]
            out.append(TokenOutput(kept, [-0.5] * len(kept), "stop" if cut else "length"))
        return out

    def sampling_settings(self, sampling: SamplingParams) -> dict[str, Any]:
        return {"temperature": sampling.temperature}

    def sampler(self) -> dict[str, Any]:
        return {"draws": "scripted"}

    def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        pass

    def release(self) -> None:
        pass

    def resume(self, tags: Sequence[str] = ("weights", "kv_cache")) -> None:
        pass


def test_the_chat_layer_over_another_engine_applies_the_template_and_the_stop_rules() -> None:
    _, tokenizer = tiny_model_and_tokenizer(0)
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    hello = tokenizer.encode("hello there", add_special_tokens=False)
    tail = tokenizer.encode(" and more", add_special_tokens=False)
    engine = ScriptedEngine([[*hello, im_end, *tail], [*hello, *tail]])
    chat = EngineChatModel(engine, tokenizer)
    samplings = [SAMPLING.model_copy(update={"seed": s}) for s in (7, 8)]
    first, second = asyncio.run(chat.complete_each(CONVERSATIONS[:2], samplings))
    assert not isinstance(first, BaseException) and not isinstance(second, BaseException)
    (prompts, seeds, stops), *_ = engine.calls
    assert prompts == [chat.prompt_ids(c) for c in CONVERSATIONS[:2]] and seeds == [7, 8]
    assert stops[0] == im_end  # the template's turn end first
    assert first.token_ids == [*hello, im_end] and first.text == "hello there"
    assert first.finish_reason == "stop" and first.token_logprobs == [-0.5] * (len(hello) + 1)
    assert second.finish_reason == "length" and second.text == "hello there and more"
    cut = asyncio.run(chat.complete(CONVERSATIONS[0], SAMPLING.model_copy(update={"stop": [" there"]})))
    assert cut.text == "hello" and cut.finish_reason == "stop"
    record = chat.describe()["sampler"]
    assert record["engine"].endswith("test_engine_seam.ScriptedEngine") and record["draws"] == "scripted"
    assert "described_by" not in record and record["stop_token_ids"] == chat.stop_token_ids


def test_a_subclass_that_does_not_describe_its_sampler_is_recorded_as_such() -> None:
    class Quieter(ScriptedEngine):
        def generate(self, *args: Any, **kwargs: Any) -> list[TokenOutput]:
            return []

    record = sampler_record(Quieter([]))
    assert record["engine"].endswith("Quieter")
    assert record["described_by"].endswith("test_engine_seam.ScriptedEngine")


@pytest.mark.parametrize("key", ["name", "class", "sampler"])
def test_an_engine_describing_itself_with_a_reserved_key_is_refused_loudly(key: str) -> None:
    """The chat layer writes ``name``, ``class`` and ``sampler`` itself: an engine's own ``describe``
    using one is refused, naming the engine and the key, instead of vanishing from the manifest."""
    _, tokenizer = tiny_model_and_tokenizer(0)

    class Boastful(ScriptedEngine):
        def describe(self) -> dict[str, Any]:
            return {"device": "cpu", key: "mine"}

    with pytest.raises(TypeError, match=rf"Boastful\.describe\(\) returned {key}: the chat layer writes"):
        EngineChatModel(Boastful([]), tokenizer).describe()
    plain = EngineChatModel(ScriptedEngine([]), tokenizer, name="m").describe()
    assert (plain["name"], plain["class"]) == ("m", "EngineChatModel") and "sampler" in plain


def test_think_tags_stay_in_the_text_even_when_the_tokenizer_calls_them_special() -> None:
    _, tokenizer = tiny_model_and_tokenizer(0)
    think, end_think = tokenizer.convert_tokens_to_ids(["<think>", "</think>"])
    ids = [think, *tokenizer.encode("hmm", add_special_tokens=False), end_think]
    ids += [*tokenizer.encode("hello", add_special_tokens=False), tokenizer.eos_token_id]
    assert reply_text(tokenizer, ids) == "<think>hmm</think>hello"
    tokenizer.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    assert think in tokenizer.all_special_ids  # now special: a plain decode would drop the tags
    assert "<think>" not in tokenizer.decode(ids, skip_special_tokens=True)
    assert reply_text(tokenizer, ids) == "<think>hmm</think>hello"


def test_token_output_needs_one_log_prob_per_id() -> None:
    with pytest.raises(ValueError, match="2 token ids but 1 log-probs"):
        TokenOutput([1, 2], [-0.1], "stop")


def test_the_device_check_script_passes_on_the_cpu() -> None:
    """``bench/engine_check.py`` is the one-line check of this seam on a CUDA machine; on the CPU it
    runs every check but the compiled decode, so it cannot rot between GPU runs."""
    script = Path(__file__).resolve().parents[2] / "bench" / "engine_check.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(script), "--device", "cpu"], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["ok"] and result["fp32_gap_max"] < 1e-5 and result["release_resume"]["same_samples"]
