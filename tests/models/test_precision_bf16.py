"""The explanation of the bf16 sampling gap, held by a test on the real model (issue 42, item 5).

docs/sampling.md ("bf16: the gap that is left") explains why, in bf16, the sampled tokens' log-probs sit
0.03-0.04 nats (mean) off the trainer's: the sampler decodes one token at a time against a KV cache and
the trainer scores the whole sequence in one forward, and bf16 rounds those two orders of computation
differently. The control that makes this an explanation rather than a guess: **in fp32 the same three
computations agree to rounding** (under 1e-5 nats), so the paths see the same tokens at the same
positions under the same mask; a mask, position or cache bug would show in fp32 too. This file holds
that control on SmolLM2-135M-Instruct: one reply of 48 sampled tokens, each token's log-prob
(1) from the sampler (``LocalChatModel``, KV-cache decode), (2) from a forward over its prefix alone
(no cache) and (3) from the trainer's ``policy_forward`` over the whole sequence.

The bf16 side (the gap itself, > 1e-3) is the strict xfail
``test_models_real.py::test_bf16_sampling_computes_as_the_trainer_scores``. :func:`three_paths` on the
model loaded with ``_load(..., bf16=True)`` measures the docs' bf16 rows; it is left out of the suite
because bf16 on a CPU is slow (160 s on the loaded 2-core box, 2026-11-27: decode 0.045 mean, 0.12
max; prefix forward 0.032 mean, 0.095 max, over 32 sampled tokens). The fp32 test measured, same box:
decode 4.0e-6 mean, 1.7e-5 max; prefix forward 2.2e-6 mean, 9.5e-6 max (48-token reply).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from rlver.llm.base import Message, SamplingParams
from rlver.llm.sequence import chat_ids
from rlver.train.batch import collate, policy_forward

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]  # about 130 s on a loaded 2-core box

#: fp32 agreement bound of the docs' table ("< 1e-5 mean"); the largest single token must also stay
#: within rounding, far below the bf16 gap's 0.2 max
FP32_MEAN = 1e-5
FP32_MAX = 1e-4


@dataclass
class Paths:
    """Per sampled token: the sampler's log-prob and the two others, in sampling order."""

    sampler: list[float]
    prefix: list[float]  # for every ``every``-th sampled token only
    trainer: list[float]
    every: int

    def gaps(self, name: str) -> list[float]:
        """|path − trainer| per token the path scored."""
        trainer = self.trainer[:: self.every] if name == "prefix" else self.trainer
        return [abs(a - b) for a, b in zip(getattr(self, name), trainer, strict=True)]


@pytest.fixture(autouse=True)
def _threads() -> None:
    torch.set_num_threads(2)


def _load(smollm2_dir: Path, bf16: bool) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlver.llm.precision import compute_in_bf16

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    if bf16:
        compute_in_bf16(model, torch.device("cpu"))
    return model.eval(), tok


def three_paths(model: Any, tok: Any, max_tokens: int = 32, prefix_every: int = 6) -> Paths:
    """Sample one reply; return each sampled token's log-prob from the sampler and the trainer, and,
    for every ``prefix_every``-th of them (a forward per token costs a second of CPU), from a forward
    over its prefix alone."""
    from rlver.llm.local import LocalChatModel

    llm = LocalChatModel(model, tok, device="cpu", max_batch_size=1)
    conv = [Message(role="user", content="My sister stopped talking to me and I don't know why.")]
    (out,) = asyncio.run(
        llm.complete_many([conv], SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=3))
    )
    assert not isinstance(out, BaseException), out
    chat = [{"role": "user", "content": conv[0].content}, {"role": "assistant", "content": out.text}]
    built = chat_ids(
        tok, chat, [list(out.token_ids)], [list(out.token_logprobs or [])], add_generation_prompt=False
    )
    positions = [p for p, lp in enumerate(built.logprobs) if lp is not None]
    assert len(positions) >= 12, "a reply long enough to average over"
    from rlver.train.tokenize import TokenizedEpisode

    seq = TokenizedEpisode(
        input_ids=built.ids, assistant_mask=built.mask, turn_end_positions=built.turn_ends, kept_turns=1
    )
    ids = torch.tensor(built.ids)
    with torch.no_grad():
        trainer, _ = policy_forward(
            model, collate([seq], [0], int(tok.pad_token_id), torch.device("cpu")), 1.0
        )
        prefix = [
            float(
                model(input_ids=ids[None, :p], use_cache=False).logits[0, -1].float().log_softmax(-1)[ids[p]]
            )
            for p in positions[::prefix_every]
        ]
    return Paths(
        sampler=[float(built.logprobs[p]) for p in positions],  # type: ignore[arg-type]
        prefix=prefix,
        trainer=[float(trainer[0, p - 1]) for p in positions],
        every=prefix_every,
    )


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def test_in_fp32_the_cached_decode_the_prefix_forward_and_the_trainer_agree(smollm2_dir: Path) -> None:
    paths = three_paths(*_load(smollm2_dir, bf16=False))
    for name in ("sampler", "prefix"):
        gaps = paths.gaps(name)
        assert _mean(gaps) < FP32_MEAN and max(gaps) < FP32_MAX, (name, _mean(gaps), max(gaps))
