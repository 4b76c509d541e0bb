"""Update memory of a real model (SmolLM2-135M-Instruct, fp32, CPU), before vs after chunked log-probs.

One micro-batch of ``N = rows x width`` random tokens goes through what the trainer does for the
policy in an update: ``policy_forward(..., with_entropy=True, entropy_grad=True, chunk_tokens=C)``, a
clipped-ratio loss with an entropy bonus, and ``backward()``. Each configuration runs in a fresh
subprocess, which reports its peak resident memory above the memory it had after loading the model:

* ``before``: the model's own forward (``rlver.train.batch._body_and_head`` patched to return None),
  which materialises the ``[N, vocab]`` logits and keeps several full-vocabulary tensors for backward;
* ``after``: the transformer body once, then the head, log-softmax and entropy over ``C`` positions at
  a time, each chunk checkpointed.

Peak: the kernel's high-water mark ``VmHWM`` (reset through ``/proc/self/clear_refs`` after loading, so
the load's own transient peak does not hide the update's); ``ru_maxrss`` is reported beside it.
glibc's adaptive mmap threshold is pinned (``MALLOC_MMAP_THRESHOLD_``) so freed tensors go back to the
kernel and RSS follows what torch holds.

The figures are then compared with ``predict`` (``rlver.train.memory_guard``), a formula from the
architecture (docs/memory.md). The per-token constant ``k`` of the full-vocabulary tensors is measured on the
head alone (``--calibrate``; it depends on the autograd graph of log-softmax + entropy, not on the
model), everything else is counted.

Usage: python bench/update_memory.py [--tokens 1024 2048] [--chunk 512] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DEFAULT_MODEL, model_folder_or_exit, print_table, write_result

# The formula (predict, update_peak and their terms) lives in the package, where `rlver train` checks
# it before any weights load (rlver.train.memory_guard); this script measures it.
from rlver.train.memory_guard import QWEN25_7B, predict, update_peak
from rlver.train.memory_guard import count_params as _count_params

__all__ = ["QWEN25_7B", "_count_params", "predict", "update_peak"]

MIB = 1024 * 1024


# ---------------------------------------------------------------------------------------- child side
def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS counter (VmHWM) to the current RSS; False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _micro_batch(vocab: int, rows: int, width: int) -> Any:
    """A fixed random micro-batch: right-padded like the trainer's (the last row is a quarter shorter)."""
    import torch

    from rlver.train.batch import MicroBatch

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (rows, width), generator=g)
    attn = torch.ones_like(ids)
    attn[-1, width - width // 4 :] = 0
    amask = attn[:, 1:].float()
    return MicroBatch(list(range(rows)), ids, attn, amask)


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this process: load, reset the peak, forward + loss + backward, read the peak."""
    import resource

    import torch
    from transformers import AutoModelForCausalLM

    from rlver.train import batch as batch_mod

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.train()
    for p in model.parameters():  # out of the safetensors mmap: untouched file pages are not in RSS yet
        p.data = p.data.clone()
    if args.mode == "before":
        batch_mod._body_and_head = lambda model: None  # type: ignore[assignment]
    mb = _micro_batch(int(model.config.vocab_size), args.rows, args.width)
    rss_loaded = _status_kib("VmRSS")
    for p in model.parameters():  # earlier micro-batches of the step: their gradients are accumulated here
        p.grad = torch.zeros_like(p)
    reset = _reset_peak()
    start = time.perf_counter()
    logp, entropy = batch_mod.policy_forward(
        model, mb, 1.0, with_entropy=True, entropy_grad=True, chunk_tokens=args.chunk
    )
    assert entropy is not None
    ratio = torch.exp(logp - logp.detach())
    adv = torch.linspace(-1, 1, logp.shape[0]).unsqueeze(1)
    pg = -torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    n_tok = mb.action_mask.sum()
    loss = ((pg - 0.001 * entropy) * mb.action_mask).sum() / n_tok
    loss.backward()
    seconds = time.perf_counter() - start
    peak = _status_kib("VmHWM")
    return {
        "mode": args.mode,
        "rows": args.rows,
        "width": args.width,
        "tokens": args.rows * args.width,
        "chunk": args.chunk if args.mode == "after" else None,
        "rss_loaded_mib": rss_loaded / 1024,
        "peak_mib": peak / 1024,
        "update_mib": (peak - rss_loaded) / 1024,
        "ru_maxrss_minus_loaded_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_loaded)
        / 1024,
        "hwm_reset": reset,
        "seconds": seconds,
        "threads": args.threads,
    }


def calibrate(args: argparse.Namespace) -> dict[str, Any]:
    """Full-vocabulary tensors alive at the head's peak, in units of ``N x vocab x 4`` bytes (``k``).

    The head alone (an ``[N, hidden] -> [N, vocab]`` linear, then the same log-prob + entropy + loss
    + backward as the update), on random hidden states: the peak above the inputs, divided by one
    full-vocabulary fp32 tensor, less the head's weight gradient.
    """
    import torch

    from rlver.train.batch import _token_stats

    torch.set_num_threads(args.threads)
    n, hidden, vocab = args.rows * args.width, args.hidden, args.vocab
    head = torch.nn.Linear(hidden, vocab, bias=False)
    x = torch.randn(n, hidden, requires_grad=True)
    labels = torch.randint(0, vocab, (n,))
    rss = _status_kib("VmRSS")
    _reset_peak()
    logp, entropy = _token_stats(head(x), labels, 1.0, True, True)
    assert entropy is not None
    (logp.sum() - 0.001 * entropy.sum()).backward()
    extra = (_status_kib("VmHWM") - rss) * 1024 - head.weight.numel() * 4 - x.numel() * 4
    return {"tokens": n, "vocab": vocab, "k": extra / (n * vocab * 4)}


# --------------------------------------------------------------------------------------- parent side
def run_child(argv: list[str]) -> dict[str, Any]:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    env.setdefault("OMP_NUM_THREADS", "2")
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *argv], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"update_memory child {argv} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def shape_for(tokens: int) -> tuple[int, int]:
    """rows x width for a micro-batch of ``tokens`` (dialogues of 256 tokens, as short SmolLM2 replies give)."""
    width = 256 if tokens >= 256 else tokens
    return max(1, tokens // width), width


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 1024])
    ap.add_argument("--chunk", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument(
        "--quick", action="store_true", help="one small micro-batch (256 tokens, chunk 64), one run"
    )
    ap.add_argument(
        "--from-results", action="store_true", help="recompute predictions for the measurements already saved"
    )
    ap.add_argument("--name", default="update_memory", help="results file: bench/results/NAME.json")
    ap.add_argument("--child", choices=["before", "after"], help=argparse.SUPPRESS)
    ap.add_argument("--calibrate", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, default=4, help=argparse.SUPPRESS)
    ap.add_argument("--width", type=int, default=256, help=argparse.SUPPRESS)
    ap.add_argument("--hidden", type=int, default=576, help=argparse.SUPPRESS)
    ap.add_argument("--vocab", type=int, default=49152, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.mode = args.child
        print(json.dumps(child(args)))
        return
    if args.calibrate:
        print(json.dumps(calibrate(args)))
        return
    args.model = model_folder_or_exit(args.model)
    if args.quick:
        args.tokens, args.runs, args.chunk = [256], 1, 64
    if args.from_results:
        from _common import RESULTS_DIR

        saved = json.loads((RESULTS_DIR / f"{args.name}.json").read_text())
        report(args, saved["rows"], saved["calibration"], saved["load_before"], saved["load_after"])
        return
    measure(args)


def measure(args: argparse.Namespace) -> None:
    """Calibrate k, run every (tokens, mode) configuration ``runs`` times (alternating), compare."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(args.model).to_dict()
    load_before = os.getloadavg()
    common = ["--model", args.model, "--threads", str(args.threads), "--chunk", str(args.chunk)]
    calib = run_child(["--calibrate", "--rows", "4", "--width", "256", "--vocab", str(cfg["vocab_size"])])
    rows: list[dict[str, Any]] = []
    for tokens in args.tokens:
        r, w = shape_for(tokens)
        for run in range(args.runs):
            for mode in ("before", "after"):
                got = run_child([f"--child={mode}", "--rows", str(r), "--width", str(w), *common])
                got["run"] = run
                print(json.dumps(got), flush=True)
                rows.append(got)
    report(args, rows, calib, load_before, os.getloadavg())


def report(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    calib: dict[str, Any],
    load_before: Any,
    load_after: Any,
) -> None:
    """Predicted vs measured for each row, the Qwen2.5-7B predictions, the JSON and the tables."""
    from transformers import AutoConfig

    from rlver.train.batch import LOGIT_CHUNK_TOKENS

    cfg = AutoConfig.from_pretrained(args.model).to_dict()
    params = _count_params(cfg)
    k = round(calib["k"], 2)
    for got in rows:
        pred = predict(cfg, params, got["tokens"], got["chunk"], k)
        got.update(predicted_mib=pred["total"] / MIB, terms_mib={t: v / MIB for t, v in pred.items()})
        got["predicted_over_measured"] = got["predicted_mib"] / got["update_mib"]
    qwen = []
    for algo in ("grpo", "ppo"):
        for lora in (True, False):
            for chunk in (None, LOGIT_CHUNK_TOKENS):
                terms = update_peak(
                    QWEN25_7B, 16384, chunk, k=k, lora=lora, critic=algo == "ppo", checkpointing=True
                )
                qwen.append(
                    {
                        "algorithm": algo,
                        "lora": lora,
                        "chunk": chunk,
                        "gb": {t: v / 1e9 for t, v in terms.items()},
                    }
                )
    payload = {
        "model": args.model,
        "params": params,
        "k_full_vocab": k,
        "calibration": calib,
        "load_before": load_before,
        "load_after": load_after,
        "rows": rows,
        "qwen25_7b_predicted": {"micro_batch_tokens": 16384, "gradient_checkpointing": True, "rows": qwen},
    }
    write_result(args.name + ("_quick" if args.quick else ""), payload)
    print_table(
        f"Update memory above the loaded model (fp32, CPU), k = {k}",
        ["mode", "tokens", "chunk", "measured MiB", "predicted MiB", "pred/meas", "s"],
        [
            [x["mode"], x["tokens"], x["chunk"] or "-", f"{x['update_mib']:.0f}", f"{x['predicted_mib']:.0f}",
             f"{x['predicted_over_measured']:.2f}", f"{x['seconds']:.1f}"]
            for x in rows
        ],
    )  # fmt: skip
    print_table(
        "Qwen2.5-7B, one GPU, bf16 autocast, micro_batch_tokens 16384, gradient checkpointing (predicted GB)",
        ["algorithm", "policy", "log-probs", "weights+grads+Adam", "activations", "vocab", "critic", "total"],
        [
            [q["algorithm"], "LoRA" if q["lora"] else "full", f"chunk {q['chunk']}" if q["chunk"] else "whole",
             f"{q['gb']['weights_grads_adam']:.1f}", f"{q['gb']['activations']:.1f}", f"{q['gb']['vocab']:.1f}",
             f"{q['gb']['critic']:.1f}", f"{q['gb']['total']:.1f}"]
            for q in qwen
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
