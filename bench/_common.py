"""Shared helpers for the benchmark scripts: timing, medians, machine description, JSON output."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(os.environ.get("RLVER_BENCH_OUT", Path(__file__).resolve().parent / "results"))


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    import torch

    mem_gib = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }


def median_of(runs: int, fn: Callable[[], float]) -> tuple[float, list[float]]:
    """Run ``fn`` ``runs`` times (it returns seconds or any figure) and return (median, all)."""
    values = [fn() for _ in range(runs)]
    return statistics.median(values), values


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def write_result(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {"benchmark": name, "machine": machine(), **payload}
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    return path


def print_table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for h in header:
        table.add_column(h)
    for row in rows:
        table.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row])
    Console().print(table)


#: The real model the real-model benchmarks run by default.
DEFAULT_MODEL = "smollm2-135m-instruct"  # a name `rlver models fetch` knows, or any model folder


def model_folder_or_exit(value: str) -> str:
    """The model's folder; a fetchable name that is not fetched yet skips the benchmark (exit 0)."""
    from rlver.errors import RlverError
    from rlver.models.fetch import resolve_model_path

    try:
        return resolve_model_path(value)
    except RlverError as exc:
        print(f"skipped: {exc}")
        raise SystemExit(0) from None


#: One-turn chats for the sampler benchmarks (bench/sampler_vs_generate.py, bench/gpu_bench.py).
QUESTIONS = [
    "I failed my driving test again today.",
    "My sister hasn't called me in weeks and I don't know why.",
    "Work has been exhausting lately.",
    "I think my best friend is drifting away from me, and it hurts more than I expected.",
    "Can you help me calm down? I have an interview tomorrow.",
    "My cat is sick.",
    "Nobody at the party talked to me.",
    "I got the job!",
]


def messages_for(batch: int) -> list[list[dict[str, str]]]:
    """``batch`` one-turn conversations of different lengths, so the batch is left-padded."""
    return [[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}] for i in range(batch)]
