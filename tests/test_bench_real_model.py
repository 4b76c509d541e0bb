"""The real-model benchmarks' own logic: the memory formula's parameter count, and the skips.

The figures themselves are in docs/performance.md and docs/training.md; these tests check that the
formula counts parameters the way the models do, and that the scripts step aside cleanly on a machine
without the model or without CUDA (``make bench`` and ``make gpu-smoke`` must not fail there).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import update_memory  # noqa: E402

SMOLLM2 = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
    "attention_bias": False,
}


def _meta_parameter_count(config: object) -> int:
    """Parameters of the real transformers model for ``config``, built on the meta device (no memory)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def test_formula_counts_smollm2_parameters_like_the_model() -> None:
    from transformers import LlamaConfig

    config = LlamaConfig(**{k: v for k, v in SMOLLM2.items()})
    assert update_memory._count_params(SMOLLM2) == _meta_parameter_count(config)


def test_formula_counts_qwen25_7b_parameters_like_the_model() -> None:
    from transformers import Qwen2Config

    cfg = update_memory.QWEN25_7B
    config = Qwen2Config(**{k: v for k, v in cfg.items() if k != "attention_bias"})
    assert update_memory._count_params(cfg) == _meta_parameter_count(config)


def test_chunking_caps_only_the_full_vocabulary_term() -> None:
    whole = update_memory.predict(SMOLLM2, 1000, 4096, None, k=5.0)
    chunked = update_memory.predict(SMOLLM2, 1000, 4096, 512, k=5.0)
    assert whole["activations"] == chunked["activations"] and whole["grads"] == chunked["grads"]
    assert whole["vocab"] == pytest.approx(chunked["vocab"] * 8)
    assert update_memory.predict(SMOLLM2, 1000, 256, 512, k=5.0)["vocab"] == pytest.approx(
        update_memory.predict(SMOLLM2, 1000, 256, None, k=5.0)["vocab"]
    )


def _run(script: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("script", ["update_memory.py", "sampler_vs_generate.py"])
def test_a_model_not_fetched_skips_with_the_command_to_fetch_it(tmp_path: Path, script: str) -> None:
    env = {**os.environ, "RLVER_DATA_DIR": str(tmp_path), "RLVER_BENCH_OUT": str(tmp_path)}
    proc = _run(script, "--quick", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "skipped:" in proc.stdout and "rlver models fetch smollm2-135m-instruct" in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="the skip is for machines without CUDA")
def test_gpu_smoke_skips_without_cuda(tmp_path: Path) -> None:
    proc = _run("gpu_smoke.py", env={**os.environ, "RLVER_BENCH_OUT": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "skipped: no CUDA device" in proc.stdout
    assert not (tmp_path / "gpu_smoke.json").exists()
