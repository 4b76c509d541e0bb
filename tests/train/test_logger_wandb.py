"""Weights & Biases as an optional logger (issue 16, defect 13), tested in ``WANDB_MODE=offline``:
wandb writes its run files locally and needs no network. Skipped when wandb is not installed
(``pip install -e '.[wandb]'`` in the checkout; the ``[dev]`` extra includes it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TINY_TRAIN_SETS, train_argv

pytest.importorskip("wandb")

KEY = "sk-canaryWANDB0123456789abcdef"
URL_SECRET = "sk-canaryURL0123456789abcdefgh"


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.slow  # 9 s CPU, 36 s on the shared 2-core box (issue 26)
def test_train_logs_to_wandb_offline_without_keys(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_API_KEY": KEY,  # must never be written anywhere
        "WANDB_SILENT": "true",
        "WANDB_CACHE_DIR": str(tmp_path / "cache"),
        "WANDB_CONFIG_DIR": str(tmp_path / "config"),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
    }
    sets = [
        *TINY_TRAIN_SETS, "run.wandb.enabled=true", "run.wandb.project=rlver-test",
        # a key pasted into a URL (the offline simulator never calls it): masked before upload
        "simulator.model.kind=openai", "simulator.model.model=m",
        f"simulator.model.base_url=http://user:{URL_SECRET}@127.0.0.1:9/v1",
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", *train_argv("run", *sets, steps=2)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "run"
    offline = list((run / "wandb").glob("offline-run-*"))
    assert len(offline) == 1, list((run / "wandb").iterdir())
    run_id = (run / "wandb_run_id").read_text().strip()
    assert offline[0].name.endswith(run_id)
    data = b"".join(p.read_bytes() for p in _files(offline[0]))
    assert b"rollout/reward_mean" in data  # the step metrics went to W&B
    assert b"rlver-test" in data  # the project setting was used
    for path in _files(tmp_path):
        blob = path.read_bytes()
        assert KEY.encode() not in blob, path
        assert URL_SECRET.encode() not in blob, path
    assert KEY not in proc.stdout + proc.stderr and URL_SECRET not in proc.stdout + proc.stderr


def test_wandb_missing_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlver.errors import ConfigError
    from rlver.train.config import WandbSettings
    from rlver.train.logger import MetricsLogger

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[wandb\]' in the rlver checkout"):
        MetricsLogger(tmp_path, tensorboard=False, wandb=WandbSettings(enabled=True, mode="offline"))
