"""Checkpoints written atomically, and everything needed to resume bit-for-bit.

A checkpoint is a folder ``checkpoints/step_000012/`` with

* ``policy/`` — a Hugging Face folder (the LoRA adapter, or the full model) + tokenizer;
* ``value/`` — the critic's body (adapter or full) and ``value_head.pt`` (PPO only);
* ``trainer_state.pt`` — optimisers, schedulers, RNG states (python, numpy, torch, cuda), step, data
  position;
* ``state.json`` — the same step/data position for humans.

It is first written to a hidden temporary folder beside it, every file is fsynced, and the folder is
renamed into place; only then is ``checkpoints/latest`` (a one-line file) replaced atomically. A crash
at any moment therefore leaves either the previous checkpoint or the new one, never half of one.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlver.io import _fsync_dir, atomic_write_json, atomic_write_text, make_temp_dir, share_like_umask

LATEST = "latest"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(Path(dirpath) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def step_dir_name(step: int) -> str:
    return f"step_{step:06d}"


def save_checkpoint(
    root: Path,
    step: int,
    *,
    policy: Any,
    tokenizer: Any,
    critic: Any | None,
    trainer_state: dict[str, Any],
    info: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write checkpoint ``step`` under ``root`` atomically; prune to the newest ``keep``; return it."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / step_dir_name(step)
    tmp = make_temp_dir(root, f".{final.name}.")
    try:
        policy.save_pretrained(tmp / "policy")
        tokenizer.save_pretrained(tmp / "policy")
        if critic is not None:
            critic.save(tmp / "value")
        torch.save(trainer_state, tmp / "trainer_state.pt")
        atomic_write_json(tmp / "state.json", info)
        share_like_umask(tmp)  # save_pretrained writes the weights 0600
        _fsync_tree(tmp)
        old = _hide(final) if final.exists() else None  # an earlier attempt at this step (a re-run)
        os.replace(tmp, final)
        _fsync_dir(root)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_text(root / LATEST, final.name + "\n")
    _prune(root, keep)
    return final


def _hide(folder: Path) -> Path:
    """Rename ``folder`` to a hidden sibling (atomic) and return the new path.

    A checkpoint is deleted by renaming it out of the ``step_*`` namespace *first*: ``rmtree`` removes
    file after file, and a crash half-way through must not leave a visible ``step_*`` folder that
    looks like a checkpoint but is missing half its files.
    """
    hidden = folder.with_name(f".trash.{folder.name}.{os.getpid()}.{time.monotonic_ns()}")
    os.replace(folder, hidden)
    _fsync_dir(folder.parent)
    return hidden


def _prune(root: Path, keep: int) -> None:
    steps = sorted(p for p in root.glob("step_*") if p.is_dir())
    for old in steps[:-keep]:
        shutil.rmtree(_hide(old), ignore_errors=True)
    # temporary folders of a crashed save, and deletions a crash interrupted
    for stale in [*root.glob(".step_*"), *root.glob(".trash.*")]:
        shutil.rmtree(stale, ignore_errors=True)


def latest_checkpoint(root: Path) -> Path | None:
    pointer = root / LATEST
    if pointer.exists():
        candidate = root / pointer.read_text(encoding="utf-8").strip()
        if (candidate / "trainer_state.pt").exists():
            return candidate
    steps = sorted(p for p in root.glob("step_*") if (p / "trainer_state.pt").exists())
    return steps[-1] if steps else None


def load_trainer_state(checkpoint: Path) -> dict[str, Any]:
    # weights_only=False: the state holds numpy RNG tuples and python's random state.
    state: dict[str, Any] = torch.load(
        checkpoint / "trainer_state.pt", map_location="cpu", weights_only=False
    )
    return state
