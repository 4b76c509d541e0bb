"""A real ``--trainer verl`` launch: what verl imports on the trainer path rlver's config selects is
installed by the ``[verl]`` extra, and what can be checked before Ray starts is refused in one
``error:`` line with exit 2, writing nothing.

Needs the ``verl`` extra (``make verl-test`` runs it in its own venv); skipped cleanly without it.
The refusals run ``rlver.integrations.verl.launch._cli`` in this process (the code ``rlver train
--trainer verl`` calls), and one through the real ``rlver`` command in a subprocess.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

from rlver.integrations.verl.launch import _cli, compose_verl_config, load_verl_config, prepare


def test_the_trainer_path_rlvers_config_selects_imports(tmp_path: Path) -> None:
    """rlver sets ``trainer.use_v1=true``: verl's v1 trainer, its replay buffer and agent-loop manager
    import ``transfer_queue`` (the ``transferqueue`` package), which verl 0.9.1 does not declare. A
    launch died there, inside Ray, with ModuleNotFoundError; the dry runs never imported it."""
    cfg = load_verl_config("tiny-offline", [f"verl.out_dir={tmp_path / 'run'}", "eval.limit=2"])
    vc = compose_verl_config(prepare(cfg).overrides)
    assert vc.trainer.use_v1 is True
    for module in (
        "transfer_queue",
        "verl.trainer.main_ppo",
        "verl.trainer.ppo.v1.trainer_base",
        "verl.trainer.ppo.v1.replay_buffer",
        "verl.trainer.ppo.v1.agent_loop_tq",
        "verl.workers.engine_workers",
        f"verl.workers.engine.{vc.actor_rollout_ref.actor.strategy}",
    ):
        importlib.import_module(module)
    from verl.trainer.ppo.v1 import get_trainer_cls

    assert get_trainer_cls(vc.trainer.v1.trainer_mode).__name__.startswith("PPOTrainer")


def _refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    *overrides: str,
    env: dict[str, str | None] | None = None,
) -> str:
    """Launch for real (no --dry-run) and return the one error line; nothing may be written."""
    out = tmp_path / "run"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # this machine shows Ray no GPU, whatever it has
    for name, value in (env or {}).items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    code = _cli(["--config", config, f"verl.out_dir={out}", *overrides])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert not out.exists()
    return lines[0]


def test_a_missing_simulator_key_is_refused_before_ray(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _refused(tmp_path, capsys, monkeypatch, "ppo-think", env={"DEEPSEEK_API_KEY": None})
    assert "simulator.model.api_key_env" in line and "export DEEPSEEK_API_KEY=" in line


def test_more_gpus_than_this_machine_shows_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _refused(tmp_path, capsys, monkeypatch, "tiny-offline", "verl.gpus_per_node=2")
    assert "verl.gpus_per_node=2" in line and "0 GPU(s)" in line and "verl.ray_address" in line


def test_several_nodes_without_a_cluster_address_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _refused(tmp_path, capsys, monkeypatch, "tiny-offline", "verl.nnodes=2")
    assert "verl.nnodes=2 without verl.ray_address" in line


def test_a_model_folder_that_is_not_here_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-such-model"
    line = _refused(tmp_path, capsys, monkeypatch, "tiny-offline", f"model.path={missing}")
    assert f"model.path {missing}: no such folder" in line


def test_a_hub_model_not_cached_with_the_hub_off_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    line = _refused(
        tmp_path,
        capsys,
        monkeypatch,
        "tiny-offline",
        "model.path=rlver-tests/not-cached",
        env={"HF_HUB_OFFLINE": "1"},
    )
    assert "model.path rlver-tests/not-cached: not in the Hugging Face cache" in line


def test_rlver_train_engine_verl_refuses_in_one_line(tmp_path: Path) -> None:
    """The user's command, in a subprocess: no traceback, exit 2, the key named, no run folder."""
    env = {k: v for k, v in os.environ.items() if k != "DEEPSEEK_API_KEY"}
    out = tmp_path / "run"
    argv = ["train", "--config", "ppo-think", "--trainer", "verl", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: simulator.model.api_key_env")
    assert not out.exists()
