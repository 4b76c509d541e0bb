"""The local engine's own costs on the CPU, in one process: the chat layer against ``model.generate``,
and decode steps against the least possible when replies of staggered length share the slots.

1. **Chat layer vs generate.** ``N`` chat prompts, ``T`` new tokens each, temperature 1, top-p 1:
   through the public chat layer (``LocalChatModel.complete_many``: templating, the engine's queue, the
   decode loop, each reply's text) and through ``model.generate`` (the same chat template, left-padded
   ids, one ``batch_decode``). A forward hook pushes the stop ids down on both sides (it runs in both),
   so every row makes exactly ``T`` tokens. The sides alternate (A, B, A, B, ...) and the figure is the
   median of the per-run ratios, so load from other jobs falls on both alike.
2. **Decode steps vs the least possible.** 64 replies of 2-48 tokens in 16 slots, through one
   ``complete_each`` and through 64 concurrent ``complete`` calls (with the engine held until all 64 are
   queued, and as they arrive): the engine's decode steps, the least
   any schedule could take (``max(ceil(sum(len - 1) / slots), longest - 1)``), what first-in-first-out
   refilling takes in the call's order and with the longest first (the engine's order within one
   call, by budget: here the budgets are the lengths) and the slot occupancy. Then the static slots
   of ``compile_decode`` (run eagerly), and both paths with replies that end by a drawn stop id
   (prompts of staggered length, one budget), which the static path reads one step late; "its
   schedule" is the count each path's rule gives (``fifo_decode_steps``, ``static_decode_steps``).

Counts (steps, rows) are exact on any machine; times are noisy on a shared one (the load is recorded).

Usage: python bench/engine_speed.py [--rows 64] [--new-tokens 16] [--runs 5] [--model FOLDER] [--quick]
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

from _common import print_table, write_result


def conversations(n: int) -> list[list[Any]]:
    from rlver.records import Message

    return [
        [Message(role="user", content=f"day {i}: " + "work was long and " * (1 + i % 5))] for i in range(n)
    ]


def push_down(model: Any, ids: list[int]) -> None:
    """No stop id is ever drawn (both sides run the same hook)."""

    def hook(mod: Any, args: Any, out: Any) -> Any:
        out.logits[..., ids] = -1e4
        return out

    model.register_forward_hook(hook)


def run_chat(chat: Any, convs: list[list[Any]], new_tokens: int, seed: int) -> float:
    from rlver.llm.base import Completion, SamplingParams

    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=new_tokens, seed=seed)
    start = time.perf_counter()
    out = asyncio.run(chat.complete_many(convs, sampling))
    seconds = time.perf_counter() - start
    assert all(isinstance(c, Completion) and c.completion_tokens == new_tokens for c in out), out[:2]
    return seconds


def run_generate(model: Any, tokenizer: Any, convs: list[list[Any]], new_tokens: int, seed: int) -> float:
    import torch
    from transformers import GenerationConfig

    tokenizer.padding_side = "left"
    start = time.perf_counter()
    texts = [
        tokenizer.apply_chat_template([m.model_dump() for m in c], add_generation_prompt=True, tokenize=False)
        for c in convs
    ]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    config = GenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = model.generate(**enc, generation_config=config)
    tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    seconds = time.perf_counter() - start
    assert out.shape[1] - enc["input_ids"].shape[1] == new_tokens
    return seconds


def stop_at(model: Any, ids: list[int], position: int) -> None:
    """The first stop id is drawn for the token at ``position`` and no stop id before: a reply to a
    prompt of ``n`` tokens ends by a drawn stop after ``position - n + 1`` tokens."""

    def hook(mod: Any, args: Any, kwargs: Any, out: Any) -> Any:
        out.logits[..., ids] = -1e4
        ends = kwargs["position_ids"][:, -1] + 1 >= position
        out.logits[ends, -1, ids[0]] = 1e4
        return out

    model.register_forward_hook(hook, with_kwargs=True)


def staggered(
    chat_factory: Any, how: str, rows: int, slots: int, held: bool, static: bool = False, stops: bool = False
) -> dict[str, Any]:
    """``rows`` replies of staggered length through ``how``; ``held``: the engine waits until every
    row is queued (the count is then the engine's alone; unheld, the first rows start while the others
    are still being templated, so the count moves with the machine's load). ``static``: the static
    slots of ``compile_decode`` (run eagerly). ``stops``: every reply ends by a drawn stop id (prompts
    of staggered length, one budget), else at its budget (budgets of staggered length)."""
    from rlver.llm.base import SamplingParams
    from rlver.llm.scheduler import fifo_decode_steps, least_decode_steps
    from rlver.llm.static_slots import static_decode_steps
    from rlver.records import Message

    chat = chat_factory(slots, not stops)
    chat.engine.decoder.static_cache = static
    samplings = [
        SamplingParams(
            temperature=1.0, top_p=0.95, max_tokens=64 if stops else 2 + (i * 37) % 47, seed=500 + i
        )
        for i in range(rows)
    ]
    convs = conversations(rows)
    if stops:
        convs = [[Message(role="user", content="so " * ((i * 37) % 47))] for i in range(rows)]
        stop_at(chat.model, list(chat.stop_token_ids), max(len(chat.prompt_ids(m)) for m in convs) + 1)

    async def concurrently() -> list[Any]:
        return await asyncio.gather(*(chat.complete(m, s) for m, s in zip(convs, samplings, strict=True)))

    if held:  # the engine starts once every row is queued: its schedule, not the arrivals' pace
        scheduler, hold = chat.engine.scheduler, chat.engine.decoder._lock
        submit, queued = scheduler.submit, [0]

        def counted(requests: list[Any]) -> None:
            submit(requests)
            queued[0] += len(requests)
            if queued[0] == rows:
                hold.release()

        scheduler.submit = counted
        hold.acquire()
    out = (
        asyncio.run(chat.complete_each(convs, samplings))
        if how == "complete_each"
        else asyncio.run(concurrently())
    )
    lengths = [len(c.token_ids) for c in out]
    counts = chat.engine.scheduler.counts
    least = least_decode_steps(lengths, slots)
    order = lengths if stops else sorted(lengths, reverse=True)  # the engine's: the largest budget first
    return {
        "path": how
        + (", held until queued" if held else "")
        + (", static slots" if static else "")
        + (", ends by a stop" if stops else ""),
        "rows": rows,
        "slots": slots,
        "decode_steps": counts.decode_steps,
        "least_possible": least,
        "schedule": static_decode_steps(order, slots, known_ends=not stops)
        if static
        else fifo_decode_steps(order, slots),
        "fifo": fifo_decode_steps(lengths, slots),
        "fifo_longest_first": fifo_decode_steps(sorted(lengths, reverse=True), slots),
        "ratio_to_least": round(counts.decode_steps / least, 3),
        "occupancy": round(counts.decode_rows / max(counts.slots_offered, 1), 3),
        "prefills": counts.prefills,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="tiny (built here, no download) or a model folder")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="16 rows, 8 tokens, 3 runs, 32 staggered replies")
    ap.add_argument("--parts", nargs="+", default=["chat", "steps"], choices=["chat", "steps"])
    args = ap.parse_args()
    staggered_rows = 64
    if args.quick:
        args.rows, args.new_tokens, args.runs, staggered_rows = 16, 8, 3, 32
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    from rlver.llm.local import LocalChatModel
    from rlver.models.tiny import tiny_model_and_tokenizer

    torch.set_num_threads(1)

    def chat_factory(slots: int, push: bool = True) -> Any:
        if args.model == "tiny":
            model, tokenizer = tiny_model_and_tokenizer(0)
            chat = LocalChatModel(model, tokenizer, device="cpu", max_batch_size=slots)
        else:
            chat = LocalChatModel.from_pretrained(
                args.model, device="cpu", dtype="float32", max_batch_size=slots
            )
        if push:
            push_down(chat.model, list(chat.stop_token_ids))
        return chat

    load_before = os.getloadavg()
    chat = chat_factory(args.rows)
    convs = conversations(args.rows)
    run_chat(chat, convs[:2], 4, 0)  # warm-up: first calls allocate and pick kernels
    run_generate(chat.model, chat.tokenizer, convs[:2], 4, 0)
    chat_s: list[float] = []
    gen_s: list[float] = []
    for run in range(args.runs if "chat" in args.parts else 0):  # alternate: load hits both sides alike
        chat_s.append(run_chat(chat, convs, args.new_tokens, run))
        gen_s.append(run_generate(chat.model, chat.tokenizer, convs, args.new_tokens, run))
    ratios = [a / b for a, b in zip(chat_s, gen_s, strict=True)]
    layer = {
        "rows": args.rows,
        "new_tokens": args.new_tokens,
        "runs": args.runs,
        "chat_layer_s": [round(s, 4) for s in chat_s],
        "generate_s": [round(s, 4) for s in gen_s],
        "ratio_median": round(statistics.median(ratios), 3) if ratios else None,
        "ratios": [round(r, 3) for r in ratios],
    }
    steps = []
    if "steps" in args.parts:
        steps = [
            staggered(chat_factory, how, staggered_rows, 16, held, static, stops)
            for how, held, static, stops in (
                ("complete_each", False, False, False),
                ("concurrent complete", True, False, False),
                ("concurrent complete", False, False, False),
                ("complete_each", False, True, False),
                ("complete_each", False, False, True),
                ("complete_each", False, True, True),
            )
        ]
    payload = {
        "model": args.model,
        "threads": 1,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "chat_layer_vs_generate": layer,
        "staggered": steps,
    }
    write_result("engine_speed" + ("_quick" if args.quick else ""), payload)
    if ratios:
        print_table(
            f"Chat layer vs generate ({args.rows} replies x {args.new_tokens} tokens, {args.runs} alternating runs)",
            ["chat layer s (median)", "generate s (median)", "chat / generate (median of ratios)"],
            [[statistics.median(chat_s), statistics.median(gen_s), f"{layer['ratio_median']:.2f}x"]],
        )
    if steps:
        print_table(
            f"Decode steps, {staggered_rows} replies of 2-48 tokens in 16 slots",
            [
                "path",
                "decode steps",
                "least possible",
                "its schedule",
                "FIFO",
                "longest first",
                "steps / least",
                "occupancy",
            ],
            [
                [
                    s["path"],
                    s["decode_steps"],
                    s["least_possible"],
                    s["schedule"],
                    s["fifo"],
                    s["fifo_longest_first"],
                    f"{s['ratio_to_least']:.2f}x",
                    s["occupancy"],
                ]
                for s in steps
            ],
        )


if __name__ == "__main__":
    main()
