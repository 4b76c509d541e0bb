"""The transformers engine on the token-level seam, checked on one device (CUDA or a CPU).

What it checks, on the tiny model (a Qwen2: rotary ``inv_freq``, tied embeddings), built in memory with
no network:

1. **parity**: the engine's sampled log-probs against a plain forward of the same sequence (the
   trainer's scoring), fp32: the largest gap must stay under 1e-3 (``LOGPROB_GAP_WARN``);
2. **batch invariance**: the same seeds give the same ids at ``max_batch_size`` 1 and 8 (their
   log-probs differ by rounding only: a padded batch computes in other shapes);
3. **release/resume**: an engine on its own copy frees its weights on release (the device's allocated
   bytes fall), and after resume and ``update_weights`` samples the same ids and log-probs, with the
   rotary buffer equal and the tie intact;
4. **compiled decode** (CUDA only): the same with ``compile_decode`` (static KV cache, compiled step),
   through release, resume and a sync, against its own samples before the release;
5. **bf16**: the mean gap under autocast stays under 0.1.

It prints one JSON object (every figure) and exits 1 when a check fails. Run from ``src/`` as the
coordinator's device check: ``PYTHONPATH=. python ../bench/engine_check.py --device cuda``; on a CPU
``tests/llm/test_engine_seam.py`` runs it too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import torch

from rlver.llm.base import SamplingParams
from rlver.llm.engine_chat import EngineChatModel, generation_eos
from rlver.llm.hf_engine import HFEngine, own_copy
from rlver.llm.precision import compute_in_bf16
from rlver.llm.weights import named_weights
from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.records import Message

ROWS = 8
CONVERSATIONS = [
    [Message(role="user", content=f"day {i}: work was hard and I feel low")] for i in range(ROWS)
]


def sample(chat: EngineChatModel, max_tokens: int = 16) -> list[tuple[list[int], list[float]]]:
    samplings = [SamplingParams(max_tokens=max_tokens, seed=100 + i) for i in range(ROWS)]
    out = asyncio.run(chat.complete_each(CONVERSATIONS, samplings))
    failed = [c for c in out if isinstance(c, BaseException)]
    if failed:
        raise failed[0]
    return [(list(c.token_ids or []), list(c.token_logprobs or [])) for c in out]  # type: ignore[union-attr]


def gaps(model: Any, chat: EngineChatModel, samples: list[tuple[list[int], list[float]]]) -> torch.Tensor:
    """|sampled log-prob - the log-prob a plain forward of the whole sequence gives| per token."""
    out = []
    device = next(model.parameters()).device
    for messages, (ids, logps) in zip(CONVERSATIONS, samples, strict=True):
        prompt = chat.prompt_ids(messages)
        seq = torch.tensor([prompt + ids], device=device)
        with torch.no_grad():
            logits = model(seq).logits[0, len(prompt) - 1 : -1].float()
        scored = torch.log_softmax(logits, -1).gather(-1, seq[0, len(prompt) :, None])[:, 0]
        out.append((scored.cpu() - torch.tensor(logps)).abs())
    return torch.cat(out)


def allocated(device: torch.device) -> int | None:
    return int(torch.cuda.memory_allocated(device)) if device.type == "cuda" else None


def release_resume(policy: Any, tokenizer: Any, device: torch.device, compile_decode: bool) -> dict[str, Any]:
    engine = HFEngine(
        own_copy(policy), tokenizer, shares_weights=False, compile_decode=compile_decode, name="copy"
    )
    chat = EngineChatModel(engine, tokenizer, eos_ids=generation_eos(policy))
    before = sample(chat)
    inv_freq = engine.model.model.rotary_emb.inv_freq.clone()
    held, bytes_before = allocated(device), engine.weights.bytes()
    engine.release()
    freed = allocated(device)
    engine.resume()
    engine.update_weights(named_weights(policy))
    after = sample(chat)
    model = engine.model
    return {
        "same_samples": after == before,
        "inv_freq_equal": bool(torch.equal(model.model.rotary_emb.inv_freq, inv_freq)),
        "tied": model.lm_head.weight is model.model.embed_tokens.weight,
        "weight_bytes": [bytes_before, engine.weights.bytes()],
        "device_allocated_bytes": [held, freed, allocated(device)],
        "released_bytes_freed": None if held is None or freed is None else held - freed,
    }


def run(device_name: str) -> dict[str, Any]:
    device = torch.device(device_name)
    torch.manual_seed(0)
    policy, tokenizer = tiny_model_and_tokenizer(0)
    policy.to(device)
    result: dict[str, Any] = {"device": str(device), "torch": torch.__version__}
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(device)
    start = time.perf_counter()

    on_policy = EngineChatModel(HFEngine(policy, tokenizer), tokenizer, eos_ids=generation_eos(policy))
    samples = sample(on_policy)
    gap = gaps(policy, on_policy, samples)
    result["fp32_gap_max"], result["fp32_gap_mean"] = float(gap.max()), float(gap.mean())
    one = EngineChatModel(
        HFEngine(policy, tokenizer, max_batch_size=1), tokenizer, eos_ids=generation_eos(policy)
    )
    alone = sample(one)
    result["batch_invariant"] = [ids for ids, _ in alone] == [ids for ids, _ in samples]
    result["batch_logprob_diff_max"] = max(
        (
            abs(a - b)
            for (_, x), (_, y) in zip(alone, samples, strict=True)
            for a, b in zip(x, y, strict=True)
        ),
        default=0.0,
    )

    result["release_resume"] = release_resume(policy, tokenizer, device, compile_decode=False)
    if device.type == "cuda":
        result["release_resume_compiled"] = release_resume(policy, tokenizer, device, compile_decode=True)

    bf16_policy, _ = tiny_model_and_tokenizer(0)
    bf16_policy.to(device)
    compute_in_bf16(bf16_policy, device)
    bf16 = EngineChatModel(HFEngine(bf16_policy, tokenizer), tokenizer, eos_ids=generation_eos(bf16_policy))
    result["bf16_gap_mean"] = float(gaps(bf16_policy, bf16, sample(bf16)).mean())
    result["seconds"] = round(time.perf_counter() - start, 1)

    checks = [result["fp32_gap_max"] < 1e-3, result["batch_invariant"], result["bf16_gap_mean"] < 0.1]
    for key in ("release_resume", "release_resume_compiled"):
        if key in result:
            r = result[key]
            checks += [
                r["same_samples"],
                r["inv_freq_equal"],
                r["tied"],
                r["weight_bytes"][0] == r["weight_bytes"][1],
            ]
            if r["released_bytes_freed"] is not None:
                checks.append(r["released_bytes_freed"] > 0)
    result["ok"] = all(checks)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(json.dumps({"device": args.device, "ok": False, "error": "no CUDA device here"}))
        return 1
    result = run(args.device)
    print(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
