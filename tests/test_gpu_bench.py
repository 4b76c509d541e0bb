"""``make gpu-bench`` (bench/gpu_bench.py) on a machine without a GPU.

Without CUDA it must say so and exit 0 (``make`` must not fail there), writing nothing. Its plumbing
(the shaped model built from a config, the sampler and ``generate`` timed both ways, the JSON) runs
on a CPU with a toy shape and the tiny model's tokenizer, so a GPU run does not fail on a typo.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _run(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLVER_BENCH_OUT": str(out), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, str(BENCH / "gpu_bench.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="the skip is for machines without CUDA")
def test_gpu_bench_says_it_needs_cuda_and_exits_0(tmp_path: Path) -> None:
    proc = _run(out=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "gpu-bench: skipped: it needs CUDA" in proc.stdout
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_gpu_bench_plumbing_on_cpu_with_a_toy_shape(tmp_path: Path) -> None:
    from rlver.models.tiny import tiny_model_dir

    argv = ["--device", "cpu", "--preset", "toy", "--tokenizer", str(tiny_model_dir()), "--batches", "2"]
    argv += ["--profile-batch", "2"]
    proc = _run(*argv, "--new-tokens", "4", "--runs", "1", "--skip", "step", "smollm2", out=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "gpu_bench_cpu.json").read_text())
    eager, compiled = result["decode"]
    assert (eager["mode"], compiled["mode"]) == ("eager", "compiled")
    for row in (eager, compiled):
        assert row["sampler_median"] > 0 and row["generate_median"] > 0
        assert row["sampler_over_generate"] == pytest.approx(row["sampler_median"] / row["generate_median"])
    assert compiled["sampler_over_eager_generate"] == pytest.approx(
        compiled["sampler_median"] / eager["generate_median"]
    )
    assert "step" not in result and result["params_b"] > 0
    for row in (eager, compiled):  # each side's cost per decode step apart from its fixed cost per call
        # a fit of two lengths' times, 1 run on a CPU: its sign is the load's, so only a number is asked
        assert all(math.isfinite(row[k]) for k in ("engine_ms_per_step", "generate_ms_per_step"))
        assert {"engine_fixed_ms", "generate_fixed_ms", "chat_layer_over_engine"} <= set(row)
    for row in (eager, compiled):  # on a CPU the compiled row stays on the dynamic cache (a warning)
        refill = row["refill"]
        assert refill["rows"] == 8 and refill["least_possible"] <= refill["decode_steps"]
        assert refill["decode_steps"] == refill["schedule_steps"] and 0 < refill["occupancy"] <= 1
    for side in ("sampler", "generate"):  # both sides decode in the profiling thread
        top = result["profile"][side]["top_host"]
        assert any(row["op"] == "aten::mm" and row["calls"] > 0 for row in top), top


def test_the_step_without_the_published_prompts_is_skipped_before_the_model_is_built(tmp_path: Path) -> None:
    """A GPU machine has no network: the grpo-think step reads the published training prompts, so their
    absence is said first and the step recorded as skipped, instead of a failed step minutes later."""
    from rlver.models.tiny import tiny_model_dir

    env = {k: v for k, v in os.environ.items() if k != "RLVER_SHARED_DATA"}
    env.update(
        RLVER_BENCH_OUT=str(tmp_path / "out"), RLVER_DATA_DIR=str(tmp_path / "empty"), OMP_NUM_THREADS="1"
    )
    argv = [
        "--device",
        "cpu",
        "--preset",
        "toy",
        "--tokenizer",
        str(tiny_model_dir()),
        "--skip",
        "decode",
        "smollm2",
    ]
    proc = subprocess.run([sys.executable, str(BENCH / "gpu_bench.py"), *argv], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    first = proc.stdout.splitlines()[0]
    assert first.startswith("gpu-bench: warning: the step is skipped") and "system_prompt.py" in first
    result = json.loads((tmp_path / "out" / "gpu_bench_cpu.json").read_text())
    assert "rlver/system_prompt.py" in result["step"]["skipped"] and "metrics" not in result["step"]
