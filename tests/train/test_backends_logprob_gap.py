"""A step warns when the trainer is not scoring what the sampler sampled (``train/step_metrics``,
``LOGPROB_GAP_WARN``): in fp32 when one trained token's sampling log-prob is more than 1e-3 off the
trainer's, in bf16 when the mean passes 0.1. A rollout engine on its own copy of the policy trains
without it; the same copy with its rotary ``inv_freq`` lost (what a release/resume that rebuilds
tensors by name left behind) warns at the first step."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, get_args

import pytest
import torch

from helpers import add_for_test
from rlver.llm.engine import TokenEngine
from rlver.llm.hf_engine import HFEngine, own_copy
from rlver.registry import Entry
from rlver.train.backends import BACKENDS
from rlver.train.backends.base import BackendSettings, RolloutBackend
from rlver.train.config import ModelSettings, load_train_config
from rlver.train.logger import read_metrics
from rlver.train.step_metrics import LOGPROB_GAP_WARN, warn_logprob_gap

STEP = [
    "rollout.batch_size=2", "rollout.n_per_profile=2", "rollout.rules.max_assistant_turns=2",
    "rollout.max_new_tokens=16", "eval.every=0", "eval.at_start=false", "run.progress=false", "run.tensorboard=false",
]  # fmt: skip


class OwnCopy(RolloutBackend[BackendSettings]):
    """The transformers engine on its own copy of the policy: released, resumed and synced each step."""

    lose_inv_freq = False

    def build(self, policy: torch.nn.Module, tokenizer: Any, device: torch.device) -> TokenEngine:
        engine = HFEngine(own_copy(policy), tokenizer, shares_weights=False, name="copy")
        if self.lose_inv_freq:
            engine.model.model.rotary_emb.inv_freq.zero_()
        return engine


class LostInvFreq(OwnCopy):
    lose_inv_freq = True


def _steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: type[OwnCopy], steps: int
) -> list[dict[str, Any]]:
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    add_for_test(monkeypatch, BACKENDS, Entry("copy", "its own copy of the policy", backend))
    overrides = [*STEP, "rollout.backend=copy", f"run.steps={steps}"]
    Trainer(load_train_config("tiny-offline", overrides), tmp_path).train()
    return read_metrics(tmp_path)


def _gap_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "rollout log-prob gap" in r.getMessage()]


def test_an_engine_on_its_own_copy_trains_without_the_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two steps: the second rollout samples from the copy released, resumed and synced after the first
    update, and still scores as the trainer does."""
    with caplog.at_level(logging.WARNING):
        steps = _steps(tmp_path, monkeypatch, OwnCopy, 2)
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["rollout/logprob_diff_max"] < 1e-5 for s in steps) and not _gap_warnings(caplog)


def test_a_lost_rotary_buffer_warns_at_the_first_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        (step,) = _steps(tmp_path, monkeypatch, LostInvFreq, 1)
    (message,) = _gap_warnings(caplog)
    assert step["rollout/logprob_diff_max"] > 1e-3
    assert message.startswith("step 1: the rollout log-prob gap rollout/logprob_diff_max is ")
    assert "above 0.001 for model.dtype=float32" in message and "inv_freq" in message


@pytest.mark.parametrize(
    ("dtype", "metrics", "warns"),
    [
        ("float32", {"rollout/logprob_diff_max": 9.5e-7, "rollout/logprob_diff_mean": 1e-7}, False),
        ("float32", {"rollout/logprob_diff_max": 1.0e-3, "rollout/logprob_diff_mean": 1e-4}, False),
        ("float32", {"rollout/logprob_diff_max": 2.0e-3, "rollout/logprob_diff_mean": 1e-4}, True),
        ("bfloat16", {"rollout/logprob_diff_max": 0.21, "rollout/logprob_diff_mean": 0.045}, False),
        ("bfloat16", {"rollout/logprob_diff_max": 0.21, "rollout/logprob_diff_mean": 0.11}, True),
        ("float32", {}, False),  # a step without sampling log-probs (no sampled tokens trained)
    ],
)
def test_the_line_by_precision(dtype: str, metrics: dict[str, float], warns: bool) -> None:
    assert warn_logprob_gap(3, metrics, dtype) is warns
    assert set(LOGPROB_GAP_WARN) == set(get_args(ModelSettings.model_fields["dtype"].annotation))
