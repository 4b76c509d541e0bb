"""The tiny local chat model: fast, deterministic, and a real HF model + tokenizer with assistant masks."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlver.models.tiny import (
    BUILD_STAMP,
    IM_END,
    THINK_CLOSE,
    THINK_OPEN,
    build_tiny_model,
    ensure_tiny_model,
    tiny_model_and_tokenizer,
    tiny_model_dir,
    train_tokenizer,
)

torch.set_num_threads(1)

EN_DIALOGUE = [
    {"role": "system", "content": "You are a warm, patient listener."},
    {"role": "user", "content": "My best friend moved away and I feel so alone."},
    {"role": "assistant", "content": f"{THINK_OPEN}She misses her friend.{THINK_CLOSE}That sounds lonely."},
    {"role": "user", "content": "Yeah. Nobody calls me anymore."},
    {"role": "assistant", "content": "I'm here, and I'm listening."},
]
ZH_DIALOGUE = [
    {"role": "system", "content": "你是一个耐心的倾听者。"},
    {"role": "user", "content": "我又和妈妈吵架了。"},
    {"role": "assistant", "content": "听起来你很难过，愿意多说说吗？"},
    {"role": "user", "content": "她总是不理解我的选择。"},
    {"role": "assistant", "content": f"{THINK_OPEN}先共情。{THINK_CLOSE}被最亲的人误解，真的很委屈。"},
]


@pytest.fixture(scope="module")
def tiny_dir() -> Path:
    return tiny_model_dir(0)


@pytest.mark.timing  # wall-clock bounds: run alone, after the parallel suite
def test_build_is_fast_and_reloads_with_auto_classes(tiny_dir: Path, tmp_path: Path) -> None:
    # tiny_dir already paid the one-off import of transformers' modelling code; this measures the build.
    start = time.perf_counter()
    path = build_tiny_model(tmp_path / "m", seed=3)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"tiny model build took {elapsed:.2f}s"
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.config.num_hidden_layers == 2
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    assert 1500 <= len(tokenizer) <= 2100
    assert tokenizer.eos_token == IM_END
    assert tokenizer.pad_token_id is not None and tokenizer.pad_token_id != tokenizer.eos_token_id


def test_same_seed_same_files_other_seed_other_weights(tmp_path: Path) -> None:
    a = build_tiny_model(tmp_path / "a", seed=7)
    b = build_tiny_model(tmp_path / "b", seed=7)
    c = build_tiny_model(tmp_path / "c", seed=8)
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    wa, wb, wc = (load_file(str(p / "model.safetensors")) for p in (a, b, c))
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert any(not torch.equal(wa[k], wc[k]) for k in wa)


def test_ensure_reuses_a_matching_build_and_rebuilds_another(tmp_path: Path) -> None:
    """The one builder behind the trainer's, the verl launcher's and the eval runner's tiny model."""
    target = tmp_path / "run" / "tiny"
    assert ensure_tiny_model(target, seed=7) == target
    weights = target / "model.safetensors"
    built = weights.stat().st_mtime_ns
    assert ensure_tiny_model(target, seed=7) == target and weights.stat().st_mtime_ns == built  # reused
    first = load_file(str(weights))
    ensure_tiny_model(target, seed=8)  # other settings: rebuilt, not silently reused
    second = load_file(str(weights))
    assert any(not torch.equal(first[k], second[k]) for k in first)
    weights.unlink()  # what the old in-place build left when killed: config.json, no weights, no stamp
    (target / BUILD_STAMP).unlink()
    (tmp_path / "run" / ".tiny.killed").mkdir()
    ensure_tiny_model(target, seed=8)
    assert weights.exists() and not list((tmp_path / "run").glob(".tiny.*"))


def test_build_does_not_disturb_the_callers_rng(tmp_path: Path) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model(tmp_path / "m", seed=0)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(
    "text",
    [
        "Hello, how are you? I'm fine, thanks.",
        "我又和妈妈吵架了，好难过。",
        f"{THINK_OPEN}she wants to be heard{THINK_CLOSE}I'm listening.",
        "mixed 中文 and English 😀 with  two spaces\nand a newline",
    ],
)
def test_tokenizer_round_trips(tiny_dir: Path, text: str) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text


def test_think_tags_are_single_tokens_kept_when_skipping_specials(tiny_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    ids = tokenizer.encode(f"{THINK_OPEN}x{THINK_CLOSE}ok{IM_END}", add_special_tokens=False)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[0] == THINK_OPEN and THINK_CLOSE in tokens and tokens[-1] == IM_END
    assert tokenizer.decode(ids, skip_special_tokens=True) == f"{THINK_OPEN}x{THINK_CLOSE}ok"


def test_in_memory_and_reloaded_tokenizers_agree(tiny_dir: Path) -> None:
    fresh = train_tokenizer()
    reloaded = AutoTokenizer.from_pretrained(tiny_dir)
    for text in ["Ｆｕｌｌwidth ﬁ café", "我 爱 你!!\n\n", " leading space", "tabs\tand 123456"]:
        assert fresh.encode(text) == reloaded.encode(text)


def _assistant_spans(mask: list[int]) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


@pytest.mark.parametrize("dialogue", [EN_DIALOGUE, ZH_DIALOGUE], ids=["en", "zh"])
def test_assistant_mask_covers_content_and_im_end_only(
    tiny_dir: Path, dialogue: list[dict[str, str]]
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    out = tokenizer.apply_chat_template(dialogue, return_assistant_tokens_mask=True, return_dict=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    assert len(ids) == len(mask)
    spans = _assistant_spans(mask)
    contents = [m["content"] for m in dialogue if m["role"] == "assistant"]
    assert len(spans) == len(contents)
    for (start, end), content in zip(spans, contents, strict=True):
        assert tokenizer.decode(ids[start:end]) == content + IM_END
        # The header "<|im_start|>assistant\n" right before the span is not the policy's output.
        assert tokenizer.decode(ids[:start]).endswith("<|im_start|>assistant\n")
    # Everything outside the spans (system, user turns, headers) is unmasked.
    assert sum(mask) == sum(end - start for start, end in spans)


def test_generation_prompt_and_seeded_sampling(tiny_dir: Path) -> None:
    model, tokenizer = tiny_model_and_tokenizer(0)
    enc = tokenizer.apply_chat_template(
        EN_DIALOGUE[:2], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    assert tokenizer.decode(enc["input_ids"][0]).endswith("<|im_start|>assistant\n")
    outs = []
    for _ in range(2):
        torch.manual_seed(11)
        gen = model.generate(**enc, do_sample=True, max_new_tokens=12, pad_token_id=tokenizer.pad_token_id)
        outs.append(gen[0, enc["input_ids"].shape[1] :].tolist())
    assert outs[0] == outs[1]
    assert 1 <= len(outs[0]) <= 12


def test_fresh_copies_do_not_share_state() -> None:
    m1, t1 = tiny_model_and_tokenizer(0)
    m2, t2 = tiny_model_and_tokenizer(0)
    with torch.no_grad():
        m1.get_input_embeddings().weight.add_(1.0)
    t1.padding_side = "left"
    assert not torch.equal(m1.get_input_embeddings().weight, m2.get_input_embeddings().weight)
    assert t2.padding_side == "right"


def test_small_variant_is_about_30m_parameters() -> None:
    from transformers import Qwen2ForCausalLM

    from rlver.models.tiny import _model_config

    config = _model_config(train_tokenizer(), "small")
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    n = sum(p.numel() for p in model.parameters())
    assert 25e6 <= n <= 35e6, n
