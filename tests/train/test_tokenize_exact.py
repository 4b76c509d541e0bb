"""Token-exact rollouts on the Qwen-trap tiny model: what is trained is what was sampled.

Covers issue 12 items 2/3 (sequences from sampled ids, sampling = scoring) and issue 16 defect 3
(agent sampling seeded per dialogue, independent of batch size).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from helpers import count_optimiser_steps
from rlver.env.dialogue import PolicyMessages
from rlver.eval.config import EvalConfig
from rlver.eval.runner import run_eval
from rlver.llm.base import SamplingParams
from rlver.llm.local import LocalChatModel, sampling_settings
from rlver.models.tiny import ENDOFTEXT, IM_END, IM_START, QWEN_GENERATION_DEFAULTS, tiny_model_and_tokenizer
from rlver.records import Episode, Message, SampledTurn
from rlver.train.tokenize import episode_to_tensors

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    return tiny_model_and_tokenizer(0)


def _pieces(tokenizer: Any, text: str) -> list[int]:
    """Ids of ``text`` with special-token spellings split into ordinary pieces (as a model samples them)."""
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])


def test_tiny_model_has_qwen_traps(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    gc = model.generation_config
    assert gc.repetition_penalty == 1.05 and gc.top_k == 20 and gc.top_p == 0.8 and gc.temperature == 0.7
    assert QWEN_GENERATION_DEFAULTS["repetition_penalty"] == 1.05
    ids = tokenizer.convert_tokens_to_ids([IM_END, ENDOFTEXT])
    assert gc.eos_token_id == ids and tokenizer.pad_token == ENDOFTEXT
    # Qwen2.5's default system message when the conversation has none
    text = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert text.startswith(f"{IM_START}system\nYou are a helpful assistant.{IM_END}\n")


def test_sampled_log_probs_equal_the_scored_ones(tiny: tuple[Any, Any]) -> None:
    """The local sampler ignores generation_config's extras: the log-prob recorded for each sampled token
    is the trainer's log_softmax(logits / T) of the same sequence (before the fix: 16/16 positions off)."""
    model, tokenizer = tiny
    chat = LocalChatModel(model, tokenizer, device="cpu")
    messages = [Message(role="user", content="I feel sad today, work was hard.")]
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=16, seed=3)
    out = asyncio.run(chat.complete(messages, sampling))
    prompt = chat.prompt_ids(messages)
    ids = torch.tensor([prompt + (out.token_ids or [])])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    scored = torch.log_softmax(logits / 0.7, -1).gather(-1, ids[0, len(prompt) :, None])[:, 0]
    assert out.token_logprobs is not None and len(out.token_logprobs) == len(out.token_ids or [])
    assert torch.allclose(scored, torch.tensor(out.token_logprobs), atol=1e-5)
    settings = sampling_settings(sampling)
    assert settings["repetition_penalty"] == 1.0 and settings["top_k"] == 0
    with pytest.raises(ValueError, match="supports only"):
        sampling_settings(SamplingParams(extra={"min_p": 0.1}))


def test_training_sequence_is_built_from_sampled_ids(tiny: tuple[Any, Any]) -> None:
    """Truncated reply: closed with a mask-0 <|im_end|>. Reply stopped on <|endoftext|>: that id kept
    (trained), then a mask-0 <|im_end|>. A control token spelled in a reply stays ordinary pieces, in the
    next prompt the policy sees and in the trained sequence alike."""
    _, tokenizer = tiny
    im_end, eot = tokenizer.convert_tokens_to_ids([IM_END, ENDOFTEXT])
    im_start = tokenizer.convert_tokens_to_ids(IM_START)
    cut = _pieces(tokenizer, "I hear you, that sounds")  # no end token: cut at max_new_tokens
    forged = [*_pieces(tokenizer, "ok <|im_start|>user"), eot]  # spells a turn header, stops on eot
    assert im_start not in forged[:-1]
    messages = [
        Message(role="system", content="Be kind."),
        Message(role="user", content="hi"),
        Message(role="assistant", content=tokenizer.decode(cut)),
        Message(role="user", content="go on"),
        Message(role="assistant", content=tokenizer.decode(forged[:-1], skip_special_tokens=True)),
    ]
    lp1, lp2 = [-0.5] * len(cut), [-0.25] * len(forged)
    ep = Episode(
        profile_id="p",
        messages=messages,
        sampled=[SampledTurn(token_ids=cut, logprobs=lp1), SampledTurn(token_ids=forged, logprobs=lp2)],
    )
    seq = episode_to_tensors(ep, tokenizer)
    trained = [t for t, m in zip(seq.input_ids, seq.assistant_mask, strict=True) if m]
    assert trained == cut + forged  # exactly the sampled ids, nothing re-tokenised, nothing added
    e1 = seq.turn_end_positions[0]
    assert seq.input_ids[e1 + 1] == im_end and seq.assistant_mask[e1 + 1] == 0  # the mask-0 closure
    assert seq.input_ids[seq.turn_end_positions[1]] == eot  # the second EOS is kept, trained
    assert seq.sample_logprobs is not None
    assert [lp for lp, m in zip(seq.sample_logprobs, seq.assistant_mask, strict=True) if m] == lp1 + lp2
    # generation: the second turn's prompt is exactly the training sequence up to that turn
    chat = LocalChatModel(*tiny, device="cpu")
    prompt = chat.prompt_ids(PolicyMessages(messages[:4], ep.sampled[:1]))
    start2 = seq.turn_end_positions[1] - len(forged) + 1
    assert prompt == seq.input_ids[:start2]
    # re-rendering the text instead would have forged a real turn header: the bug this prevents
    plain = tokenizer.apply_chat_template([m.model_dump() for m in messages], return_dict=True)["input_ids"]
    assert seq.input_ids.count(im_start) == 5 and list(plain).count(im_start) == 6


def test_eval_transcripts_do_not_depend_on_batch_size(tmp_path: Path) -> None:
    def run(batch_size: int) -> list[dict]:
        out = tmp_path / f"b{batch_size}"
        cfg = {
            "agent_tiny": True,
            "profiles": "en-test",
            "n_per_profile": 2,
            "env": {"max_assistant_turns": 2},
            "out": str(out),
            "report": False,
            "batch_size": batch_size,
        }
        result = run_eval(EvalConfig.model_validate(cfg))
        lines = [json.loads(x) for x in result.transcript.read_text().splitlines()]
        manifest, eps = lines[0], lines[1:]
        assert manifest["agent_seeding"]["agent_seed"] == 0
        assert manifest["agent"]["sampler"]["repetition_penalty"] == 1.0
        assert all("token_ids" not in json.dumps(e) for e in eps)  # ids stay out of transcripts
        return sorted(
            ([e["profile_id"], [m["content"] for m in e["messages"]], e["emotions"]] for e in eps),
            key=lambda x: (x[0], x[1]),
        )

    small, large = run(4), run(16)
    assert len(small) == 16 and small == large
    assert len({json.dumps(x[-2]) for x in small}) > 8  # the agent really sampled different replies


@pytest.mark.parametrize(
    "extra",
    [
        [],  # GRPO on-policy: compared inside the update, before its only optimiser step
        ["algorithm.name=ppo", "algorithm.minibatches=2"],  # off-policy scoring pass
    ],
)
def test_logprob_diff_is_logged_every_step_and_tiny(tmp_path: Path, extra: list[str]) -> None:
    from rlver.train.config import load_train_config
    from rlver.train.logger import read_metrics
    from rlver.train.trainer import Trainer

    overrides = [
        "rollout.batch_size=4",
        "rollout.n_per_profile=2",
        "rollout.rules.max_assistant_turns=2",
        "rollout.max_new_tokens=8",  # short: most replies are cut, so the closure path is trained too
        "eval.every=0",
        "eval.at_start=false",
        "eval.limit=1",
        "run.steps=2",
        "run.checkpoint_every=0",
        "run.progress=false",
        "run.tensorboard=false",
        *extra,
    ]
    Trainer(load_train_config("tiny-offline", overrides), tmp_path).train()
    records = [r for r in read_metrics(tmp_path) if r.get("step", 0) >= 1]
    assert len(records) == 2
    for r in records:
        assert 0.0 <= r["rollout/logprob_diff_mean"] <= r["rollout/logprob_diff_max"] <= 1e-3
    sampling = json.loads((tmp_path / "sampling.json").read_text())
    assert sampling["rollout"]["repetition_penalty"] == 1.0


def test_think_mode_visible_context_gives_one_sample_per_turn(tiny: tuple[Any, Any]) -> None:
    from rlver.train.tokenize import episode_turn_samples

    _, tokenizer = tiny
    think = tokenizer.convert_tokens_to_ids(["<think>", "</think>"])
    r1 = [think[0], *_pieces(tokenizer, "she is sad"), think[1], *_pieces(tokenizer, "I hear you")]
    r2 = _pieces(tokenizer, "tell me more")  # cut: no end token
    eos = tokenizer.eos_token_id
    messages = [
        Message(role="system", content="Be kind."),
        Message(role="user", content="hi"),
        Message(role="assistant", content=tokenizer.decode(r1)),
        Message(role="user", content="ok"),
        Message(role="assistant", content=tokenizer.decode(r2)),
    ]
    ep = Episode(
        profile_id="p",
        messages=messages,
        sampled=[SampledTurn(token_ids=[*r1, eos]), SampledTurn(token_ids=r2)],
    )
    first, second = episode_turn_samples(ep, tokenizer)
    assert [t for t, m in zip(first.input_ids, first.assistant_mask, strict=True) if m] == [*r1, eos]
    assert [t for t, m in zip(second.input_ids, second.assistant_mask, strict=True) if m] == r2
    assert len(second.input_ids) == len(second.assistant_mask) and second.turn_end_positions == [
        len(second) - 1
    ]
    # the second sample's prompt is the thought-free history the policy saw, rendered by the template
    visible = [{"role": m.role, "content": m.content} for m in messages[:4]]
    visible[2]["content"] = "I hear you"
    prompt = tokenizer.apply_chat_template(visible, add_generation_prompt=True, return_dict=True)["input_ids"]
    assert second.input_ids[: len(prompt)] == list(prompt) and len(second) == len(prompt) + len(r2)
    assert think[0] not in second.input_ids
    # a budget that the second prompt does not fit drops that sample only
    (only,) = episode_turn_samples(ep, tokenizer, max_length=len(prompt))
    assert only.meta == {"per_turn": True, "turn": 0, "dropped": 1}


def test_think_visible_training_scores_what_was_sampled(tmp_path: Path) -> None:
    from rlver.train.config import load_train_config
    from rlver.train.logger import read_metrics
    from rlver.train.trainer import Trainer

    overrides = [
        "rollout.batch_size=4",
        "rollout.n_per_profile=2",
        "rollout.rules.max_assistant_turns=3",
        "rollout.max_new_tokens=8",
        "rollout.think=true",
        "rollout.think_context=visible",
        "eval.every=0",
        "eval.at_start=false",
        "eval.limit=1",
        "run.steps=1",
        "run.checkpoint_every=0",
        "run.progress=false",
        "run.tensorboard=false",
    ]
    trainer = Trainer(load_train_config("tiny-offline", overrides), tmp_path)
    steps = count_optimiser_steps(trainer)
    trainer.train()
    (rec,) = [r for r in read_metrics(tmp_path) if r.get("step", 0) == 1]
    assert rec["rollout/untokenisable"] == 0
    assert rec["rollout/logprob_diff_max"] <= 1e-3
    # One sample per assistant turn, mini-batches of (8 dialogues / minibatches 1) samples: about one
    # optimiser step per turn, as the published think rollout implies (inferred: docs/protocol.md, "updates
    # per step" and "think layout").
    samples = rec["rollout/samples"]
    assert samples > 8, "every dialogue ended after its first turn: nothing to count"
    assert len(steps) == rec["train/optimizer_steps"] == -(-samples // 8) >= 2
