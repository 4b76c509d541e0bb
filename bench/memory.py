"""Benchmark 4: peak resident memory (RSS) of ``rlver demo`` and of one training step at each size.

Each command runs in a fresh subprocess; its peak RSS is read with ``resource.getrusage
(RUSAGE_CHILDREN).ru_maxrss`` by a small wrapper process that runs only that command (RUSAGE_CHILDREN
keeps the largest child ever waited for, so every measurement needs its own parent). The peak covers
the whole command: Python, torch and transformers, the model(s), optimiser state, generation and the
update.

* ``baseline``: Python importing torch + transformers + rlver (the floor under every other row);
* ``demo``: ``rlver demo --minutes M`` (tiny model, evaluate → train → evaluate → report);
* ``train-<size>``: ``rlver train --config tiny-offline --steps 1`` with ``model.tiny_size=<size>``
  (rollout of 32 dialogues, scoring, one GRPO update, a checkpoint, a one-profile evaluation).

Usage: python bench/memory.py [--runs 3] [--demo-minutes 0.5] [--sizes tiny small]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_result

BASELINE = "import torch, transformers, rlver.train.trainer, rlver.llm.local"


def _rlver() -> list[str]:
    """The rlver CLI of this interpreter's environment."""
    return [sys.executable, "-c", "import sys; from rlver.cli import main; sys.exit(main())"]


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``cmd`` under a fresh wrapper process; return (peak RSS in MiB, wall seconds)."""
    wrapper = (
        "import json, resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.run(json.loads(sys.argv[1]), stdout=subprocess.DEVNULL).returncode\n"
        "print(json.dumps({'rc': rc, 'kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
        " 'wall': time.perf_counter() - t}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapper, json.dumps(cmd)], env=env, capture_output=True, text=True, check=True
    )
    info = json.loads(out.stdout.strip().splitlines()[-1])
    if info["rc"] != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {info['rc']}:\n{out.stderr[-2000:]}")
    return info["kib"] / 1024, info["wall"]


def commands(args: argparse.Namespace, work: Path) -> list[tuple[str, list[str]]]:
    cmds: list[tuple[str, list[str]]] = [("baseline (imports only)", [sys.executable, "-c", BASELINE])]
    if not args.skip_demo:
        cmds.append(
            (
                f"rlver demo --minutes {args.demo_minutes:g}",
                [*_rlver(), "demo", "--minutes", f"{args.demo_minutes:g}", "--out", str(work / "demo")],
            )
        )
    for size in args.sizes:
        cmds.append(
            (
                f"rlver train (1 step, {size})",
                [
                    *_rlver(),
                    "train",
                    "--config",
                    "tiny-offline",
                    "--steps",
                    "1",
                    "--out",
                    str(work / f"train-{size}"),
                    "--set",
                    f"model.tiny_size={size}",
                    "--set",
                    "eval.at_start=false",
                    "--set",
                    "eval.limit=1",
                    "--set",
                    "eval.samples_per_profile=1",
                    "--set",
                    "run.tensorboard=false",
                    "--set",
                    "run.progress=false",
                ],
            )
        )
    return cmds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--demo-minutes", type=float, default=0.5)
    ap.add_argument("--sizes", nargs="+", default=["tiny", "small"], choices=["tiny", "small"])
    ap.add_argument("--skip-demo", action="store_true")
    args = ap.parse_args()

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    rows: list[list[Any]] = []
    records: list[dict[str, Any]] = []
    names = [name for name, _ in commands(args, Path("."))]
    for k, name in enumerate(names):
        peaks, walls = [], []
        shown: list[str] = []
        for _ in range(args.runs):
            # Every run writes into a fresh folder (train refuses a folder that already holds a run).
            with tempfile.TemporaryDirectory(prefix="rlver-bench-mem-") as tmp:
                cmd = commands(args, Path(tmp))[k][1]
                peak, wall = measure(cmd, env)
            peaks.append(peak)
            walls.append(wall)
            shown = cmd[3:] if cmd[:3] == _rlver() else cmd
        rows.append(
            [
                name,
                f"{statistics.median(peaks):,.0f}",
                f"{min(peaks):,.0f}–{max(peaks):,.0f}",
                f"{statistics.median(walls):.1f}",
            ]
        )
        records.append({"what": name, "command": shown, "peak_rss_mib": peaks, "wall_s": walls})
    print_table(
        f"Peak RSS (MiB), median of {args.runs} runs", ["what", "peak RSS MiB", "range", "wall s"], rows
    )
    path = write_result("memory", {"runs": args.runs, "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
