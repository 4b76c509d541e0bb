"""rlver's rollout sampler (``LocalChatModel``) vs transformers' ``model.generate``, on a real model.

Both sample the same distribution (temperature 1, top-p 1, no top-k, no repetition penalty) from the
same left-padded chat prompts, and both produce exactly ``max_new_tokens`` per row: ``generate`` gets
``min_new_tokens = max_new_tokens``, and the sampler's stop tokens are cleared for the benchmark, so
the token counts match and tokens/s compare like for like. The two run in alternation (A, B, A, B)
inside one process, so load from other jobs on a shared machine falls on both; the figure to read is
the per-batch median ratio.

What the sampler does beyond ``generate``: one ``torch.Generator`` per row, pre-drawing that row's
uniforms (a completion depends on its own seed, not on its batch), and the log-prob of each sampled
token under the plain softmax, which the trainer compares with its own. Sampling itself runs batched
on the model's device (``rlver.llm.sampling``), and rows that stop leave the batch (not exercised here:
stop tokens are cleared so both sides make the same number of tokens).

Usage: python bench/sampler_vs_generate.py [--batches 1 8 32] [--new-tokens 32] [--runs 3] [--quick]
       [--device cuda --dtype bfloat16 [--compile-decode]]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DEFAULT_MODEL, messages_for, model_folder_or_exit, print_table, write_result


def run_sampler(chat: Any, batch: int, new_tokens: int, seed: int) -> tuple[float, int]:
    """Seconds and generated tokens for one batched rollout call through ``complete_many``."""
    from rlver.llm.base import SamplingParams
    from rlver.records import Message

    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=new_tokens, seed=seed)
    start = time.perf_counter()
    out = asyncio.run(
        chat.complete_many([[Message(**m) for m in conv] for conv in messages_for(batch)], sampling)
    )
    seconds = time.perf_counter() - start
    for c in out:
        if isinstance(c, BaseException):
            raise c
    return seconds, sum(c.completion_tokens for c in out)  # type: ignore[union-attr]


def run_generate(model: Any, tokenizer: Any, batch: int, new_tokens: int, seed: int) -> tuple[float, int]:
    """Seconds and generated tokens for ``model.generate`` with the sampler's distribution."""
    import torch
    from transformers import GenerationConfig

    tokenizer.padding_side = "left"
    start = time.perf_counter()
    texts = [
        tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
        for m in messages_for(batch)
    ]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    config = GenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        repetition_penalty=1.0,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = model.generate(**enc, generation_config=config)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return seconds, int((out.shape[1] - enc["input_ids"].shape[1]) * batch)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads, both sides (default 1)")
    ap.add_argument("--quick", action="store_true", help="batches 1 and 4, 8 new tokens, one run")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument(
        "--compile-decode", action="store_true", help="the sampler's static-cache compiled decode (CUDA)"
    )
    args = ap.parse_args()
    args.model = model_folder_or_exit(args.model)
    if args.quick:
        args.batches, args.new_tokens, args.runs = [1, 4], 8, 1
    # Before torch loads: OpenMP reads it once, and the sampler runs in a worker thread (asyncio.to_thread)
    # whose thread team is sized from it, while set_num_threads sizes this thread's. On a loaded machine
    # 2 spinning OpenMP threads per op cost generate (main thread) 3-6x its 1-thread speed: one thread
    # on both sides keeps the comparison about the code.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    from rlver.llm.local import LocalChatModel

    torch.set_num_threads(args.threads)
    chat = LocalChatModel.from_pretrained(
        args.model,
        device=args.device,
        dtype=args.dtype,
        max_batch_size=max(args.batches),
        compile_decode=args.compile_decode,
    )
    chat.stop_token_ids = []  # every row runs to max_new_tokens, as generate does with min_new_tokens
    load_before = os.getloadavg()
    worker_threads = asyncio.run(asyncio.to_thread(torch.get_num_threads))
    run_sampler(chat, 2, 4, 0)  # warm-up: first calls allocate and pick kernels
    run_generate(chat.model, chat.tokenizer, 2, 4, 0)
    rows: list[dict[str, Any]] = []
    for batch in args.batches:
        sampler: list[float] = []
        generate: list[float] = []
        for run in range(args.runs):  # alternate, so drifting load hits both sides alike
            s, n = run_sampler(chat, batch, args.new_tokens, run)
            sampler.append(n / s)
            s, n = run_generate(chat.model, chat.tokenizer, batch, args.new_tokens, run)
            generate.append(n / s)
        ratios = [a / b for a, b in zip(sampler, generate, strict=True)]
        rows.append(
            {
                "batch": batch,
                "sampler_tok_s": sampler,
                "generate_tok_s": generate,
                "sampler_median": statistics.median(sampler),
                "generate_median": statistics.median(generate),
                "ratio_median": statistics.median(ratios),
                "load": os.getloadavg(),
            }
        )
        print(rows[-1], flush=True)
    payload = {
        "model": args.model,
        "new_tokens": args.new_tokens,
        "runs": args.runs,
        "threads": args.threads,
        "device": args.device,
        "dtype": args.dtype,
        "compile_decode": chat.compile_decode,
        "threads_in_worker": worker_threads,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "rows": rows,
    }
    write_result("sampler_vs_generate" + ("_quick" if args.quick else ""), payload)
    print_table(
        f"Sampler vs generate ({args.new_tokens} new tokens, median of {args.runs})",
        ["batch", "sampler tok/s", "generate tok/s", "sampler / generate"],
        [
            [
                r["batch"],
                f"{r['sampler_median']:.1f}",
                f"{r['generate_median']:.1f}",
                f"{r['ratio_median']:.2f}x",
            ]
            for r in rows
        ],
    )


if __name__ == "__main__":
    main()
