"""GPU smoke run: ``rlver train`` on CUDA, bf16, for the tiny model and SmolLM2, LoRA and full, PPO and GRPO.

One step each with small settings. For every run it records the trainer's ``perf/*`` and ``time/*``
metrics, ``rollout/logprob_diff_max`` (the largest gap between a sampled token's log-prob in the
rollout and the trainer's score of it: bf16 generation vs bf16 scoring), and the peak GPU memory,
read by polling ``nvidia-smi`` for the run's process every 0.2 s (the trainer does not log
``torch.cuda.max_memory_allocated``; nvidia-smi sees what the process reserved, allocator cache
included, so it is an upper bound on what the tensors needed). Results go to
``bench/results/gpu_smoke.json``.

On a machine without CUDA it says so and exits 0 (nothing to test there).

Usage: python bench/gpu_smoke.py [--models tiny smollm2-135m-instruct] [--quick]
       make gpu-smoke
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_result

#: Settings that keep one step small on any model: 2 profiles x 2 samples, 2 short replies.
SMALL = [
    "rollout.batch_size=2",
    "rollout.n_per_profile=2",
    "rollout.rules.max_assistant_turns=2",
    "rollout.max_new_tokens=32",
    "eval.limit=1",
    "eval.at_start=false",
    "eval.every=0",
    "eval.samples_per_profile=1",
    "eval.dialogue=training",
    "run.checkpoint_every=0",
    "run.progress=false",
    "run.tensorboard=false",
]


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def config_for(model: str) -> tuple[str, list[str]]:
    """The preset and extra settings a model runs with (the tiny model has its own preset)."""
    if model == "tiny":
        return "tiny-offline", []
    return "smollm2-offline", [f"model.path={model}"]


def poll_gpu_memory(pid: int, stop: threading.Event, peak: list[int]) -> None:
    """Keep the largest MiB nvidia-smi reports for ``pid`` (``peak[0]``) until ``stop`` is set."""
    query = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    while not stop.is_set():
        try:
            out = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        for line in out.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) == pid and parts[1].isdigit():
                peak[0] = max(peak[0], int(parts[1]))
        stop.wait(0.2)


def run_one(model: str, algorithm: str, lora: bool, work: Path, device: str = "cuda") -> dict[str, Any]:
    """One ``rlver train --steps 1`` on CUDA; its last metrics line, peak GPU MiB and wall time."""
    preset, extra = config_for(model)
    out = work / f"{Path(model).name}-{algorithm}-{'lora' if lora else 'full'}"
    sets = [
        *SMALL,
        *extra,
        f"model.device={device}",
        "model.dtype=bfloat16",
        f"algorithm.name={algorithm}",
        f"model.lora.enabled={'true' if lora else 'false'}",
    ]
    if lora:
        sets.append("optim.actor_lr=1e-4")
    cmd = [sys.executable, "-c", "import sys; from rlver.cli import main; sys.exit(main())"]
    cmd += ["train", "--config", preset, "--steps", "1", "--out", str(out)]
    for s in sets:
        cmd += ["--set", s]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stop, peak = threading.Event(), [0]
    poller = threading.Thread(target=poll_gpu_memory, args=(proc.pid, stop, peak), daemon=True)
    poller.start()
    log, _ = proc.communicate()
    stop.set()
    poller.join()
    row: dict[str, Any] = {
        "model": model,
        "algorithm": algorithm,
        "lora": lora,
        "rc": proc.returncode,
        "wall_s": time.perf_counter() - start,
        "peak_gpu_mib_nvidia_smi": peak[0] or None,
        "command": " ".join(cmd[3:]),
    }
    metrics_file = out / "metrics.jsonl"
    if proc.returncode != 0 or not metrics_file.exists():
        row["log_tail"] = log[-2000:]
        return row
    last = json.loads(metrics_file.read_text().strip().splitlines()[-1])
    row["metrics"] = {
        k: v for k, v in last.items() if k.startswith(("perf/", "time/", "rollout/logprob_diff", "memory/"))
    }
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["tiny", "smollm2-135m-instruct"])
    ap.add_argument("--algorithms", nargs="+", default=["grpo", "ppo"], choices=["grpo", "ppo"])
    ap.add_argument("--quick", action="store_true", help="the tiny model only, GRPO, LoRA and full")
    ap.add_argument("--device", default="cuda", help="cpu: check this script's plumbing without a GPU")
    args = ap.parse_args()
    if args.device == "cuda" and not cuda_available():
        print(
            "gpu-smoke: skipped: no CUDA device here (torch.cuda.is_available() is False); run it on a GPU machine"
        )
        return 0
    if shutil.which("nvidia-smi") is None:
        print("gpu-smoke: note: no nvidia-smi on PATH, so peak GPU memory is not recorded")
    if args.quick:
        args.models, args.algorithms = ["tiny"], ["grpo"]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rlver-gpu-smoke-") as tmp:
        for model in args.models:
            for algorithm in args.algorithms:
                for lora in (True, False):
                    row = run_one(model, algorithm, lora, Path(tmp), args.device)
                    print(json.dumps({k: v for k, v in row.items() if k != "log_tail"}), flush=True)
                    rows.append(row)
    name = "gpu_smoke" if args.device == "cuda" else f"gpu_smoke_{args.device}"
    write_result(name, {"device": args.device, "load": os.getloadavg(), "rows": rows})
    print_table(
        f"GPU smoke (1 step each, bf16, device {args.device})",
        [
            "model",
            "algorithm",
            "policy",
            "rc",
            "gen tok/s",
            "trained tok/s",
            "peak GPU MiB",
            "logprob diff max",
        ],
        [_cells(r) for r in rows],
    )
    failed = [r for r in rows if r["rc"] != 0]
    for r in failed:
        print(
            f"error: {r['model']} {r['algorithm']} {'LoRA' if r['lora'] else 'full'} failed:\n{r.get('log_tail', '')}"
        )
    return 1 if failed else 0


def _cells(r: dict[str, Any]) -> list[str]:
    m = r.get("metrics", {})

    def fmt(key: str, spec: str) -> str:
        return format(m[key], spec) if key in m else "-"

    return [
        Path(r["model"]).name,
        r["algorithm"],
        "LoRA" if r["lora"] else "full",
        str(r["rc"]),
        fmt("perf/generated_tokens_per_s", ".0f"),
        fmt("perf/trained_tokens_per_s", ".0f"),
        str(r["peak_gpu_mib_nvidia_smi"] or "-"),
        fmt("rollout/logprob_diff_max", ".3g"),
    ]


if __name__ == "__main__":
    sys.exit(main())
