"""The turn end comes from the chat template, not from ``eos_token_id``.

A tokenizer whose eos is not the template's turn end (Qwen2.5 base and many fine-tunes: eos
``<|endoftext|>``, turns closed with ``<|im_end|>``; Gemma: ``<end_of_turn>``) used to get a mask-0 eos
inserted after every reply, and the template's own closing dropped. The real-model track checks the
same on SmolLM2 (tests/models/test_models_real.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from rlver.llm.local import LocalChatModel
from rlver.llm.sequence import chat_ids, end_of_turn_id
from rlver.models.tiny import tiny_model_and_tokenizer

CHAT = [
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi there"},
    {"role": "user", "content": "I am sad"},
    {"role": "assistant", "content": "I hear you"},
]


def _tokenizer(eos: str | None = None) -> Any:
    _, tok = tiny_model_and_tokenizer()
    if eos is not None:
        tok.eos_token = eos
    return tok


@pytest.mark.parametrize("eos", [None, "<|endoftext|>"])
def test_the_turn_end_is_read_from_the_template_whatever_eos_is(eos: str | None) -> None:
    tok = _tokenizer(eos)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert end_of_turn_id(tok) == im_end
    want = list(tok.apply_chat_template(CHAT, tokenize=True, return_dict=True)["input_ids"])
    sampled = [tok(m["content"], add_special_tokens=False)["input_ids"] + [im_end] for m in CHAT[1::2]]
    built = chat_ids(tok, CHAT, sampled, add_generation_prompt=False)
    assert built.ids == want, "a mask-0 eos was inserted or the template's closing dropped"
    assert sum(built.mask) == sum(len(s) for s in sampled)


def test_the_sampler_stops_on_the_templates_turn_end_first() -> None:
    net, tok = tiny_model_and_tokenizer()
    tok.eos_token = "<|endoftext|>"
    llm = LocalChatModel(net, tok, device="cpu")
    assert llm.stop_token_ids[0] == tok.convert_tokens_to_ids("<|im_end|>")


def test_a_template_that_writes_nothing_after_a_reply_falls_back_to_eos() -> None:
    tok = _tokenizer()
    tok.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{% endfor %}"
    assert end_of_turn_id(tok) == tok.eos_token_id


@pytest.mark.parametrize("eos", [None, "<|endoftext|>"])
def test_the_verl_agent_loop_closes_and_stops_on_the_same_turn_end(eos: str | None) -> None:
    pytest.importorskip("verl", reason="the verl extra (make verl-test) runs this")
    from rlver.integrations.verl.agent_loop import stop_token_ids, turn_end_token_id

    tok = _tokenizer(eos)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert turn_end_token_id(tok) == im_end
    assert im_end in stop_token_ids(tok)
