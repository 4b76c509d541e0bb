"""The trainer's sampler is a rollout backend from a registry (``rollout.backend``): a backend added
at run time trains a step, its ``sync`` is called after the update with the trained model, and the
run's manifest says which backend sampled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from rlver.errors import ConfigError
from rlver.train.config import load_train_config
from rlver.train.logger import read_metrics
from rlver.train.rollout_backend import BACKENDS, HFBackend, backend_names, register_backend

TINY_STEP = [
    "rollout.batch_size=2",
    "rollout.n_per_profile=2",
    "rollout.rules.max_assistant_turns=2",
    "rollout.max_new_tokens=6",
    "eval.every=0",
    "eval.at_start=false",
    "run.steps=1",
    "run.progress=false",
    "run.tensorboard=false",
]


def test_the_default_backend_and_an_unknown_one() -> None:
    assert load_train_config("tiny-offline").rollout.backend == "hf" and "hf" in backend_names()
    with pytest.raises(ConfigError, match=r"rollout\.backend.*unknown rollout backend 'vllm'.*'hf'"):
        load_train_config("tiny-offline", ["rollout.backend=vllm"])


def test_a_backend_registered_at_run_time_trains_a_step_and_is_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.set_num_threads(1)
    synced: list[Any] = []

    class CountingSync(HFBackend):
        name = "counting-hf"
        description = "the hf sampler, counting its syncs"

        def sync(self, policy: torch.nn.Module) -> None:
            synced.append(policy)

    monkeypatch.setattr("rlver.train.rollout_backend.BACKENDS", dict(BACKENDS))
    register_backend(CountingSync)
    from rlver.train.trainer import Trainer

    trainer = Trainer(
        load_train_config("tiny-offline", [*TINY_STEP, "rollout.backend=counting-hf"]), tmp_path
    )
    assert isinstance(trainer.backend, CountingSync) and trainer.chat is trainer.backend.chat
    before = {k: v.detach().clone() for k, v in trainer.policy.state_dict().items()}
    trainer.train()
    assert len(synced) == 1 and synced[0] is trainer.policy
    after = trainer.policy.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the update it synced changed weights

    manifest = json.loads((tmp_path / "transcript.jsonl").read_text().splitlines()[0])
    assert manifest["agent"]["rollout_backend"] == "counting-hf"
    assert "rollout:\n" in (tmp_path / "config.yaml").read_text()
    assert "backend: counting-hf" in (tmp_path / "config.yaml").read_text()
    (step,) = read_metrics(tmp_path)
    rollout_s = step["time/rollout_s"]
    for key in ("time/policy_s", "time/simulator_s", "time/policy_idle_s"):
        assert 0.0 <= step[key] <= rollout_s, (key, step[key], rollout_s)
    assert step["time/policy_s"] > 0 and step["time/simulator_s"] > 0
