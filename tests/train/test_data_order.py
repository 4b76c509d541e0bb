"""The order the data is trained in: a fresh shuffle of the profiles every pass over the set, and a fresh
shuffle of the samples into minibatches every step and every epoch of the update, each reproducible
from ``run.seed``.

Why: a review planted the minibatches never shuffled (each then holds whole groups in batch order), the
shuffle seeded with the run seed (the same permutation every step) and the same profile order every
epoch, and no test failed: each trains, only worse. The minibatch order is read off the real trainer's
update (the samples each optimiser step is given, recorded on the way through).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers import TINY_TRAIN_SETS
from rlver.train.trainer import profiles_at

#: 4 profiles × 2 dialogues = 8 samples a step, in 2 minibatches of 4, over 2 epochs
SETS = (
    *TINY_TRAIN_SETS, "rollout.batch_size=4", "algorithm.minibatches=2", "algorithm.epochs=2",
    "run.steps=2", "run.checkpoint_every=0",
)  # fmt: skip


def _orders(tmp_path: Path, seed: int) -> list[list[list[int]]]:
    """``orders[step][epoch]``: the sample indices of the update's optimiser steps, in order."""
    from rlver.train.config import load_train_config
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    trainer = Trainer(load_train_config("tiny-offline", [*SETS, f"run.seed={seed}"]), tmp_path)
    learner = trainer.learner
    minibatch_step = learner._minibatch_step
    seen: list[tuple[int, list[int]]] = []

    def recorded(b: object, idx: list[int], grid: object, step: int) -> dict[str, float]:
        seen.append((step, list(idx)))
        return minibatch_step(b, idx, grid, step)  # type: ignore[arg-type]

    learner._minibatch_step = recorded  # type: ignore[method-assign]
    trainer.train()
    orders: list[list[list[int]]] = []
    for step in (1, 2):
        chunks = [idx for s, idx in seen if s == step]
        assert [len(c) for c in chunks] == [4, 4, 4, 4], chunks  # 2 minibatches × 2 epochs
        orders.append([chunks[0] + chunks[1], chunks[2] + chunks[3]])
    return orders


@pytest.mark.slow  # two 2-step tiny runs: 15-22 s on the shared 2-core box
def test_minibatches_are_shuffled_afresh_every_step_and_epoch_from_the_seed(tmp_path: Path) -> None:
    orders = _orders(tmp_path / "a", seed=0)
    flat = [order for step in orders for order in step]
    assert all(sorted(order) == list(range(8)) for order in flat), flat  # every sample once an epoch
    assert all(order != list(range(8)) for order in flat), flat  # shuffled, not in batch order
    for step in orders:
        assert step[0] != step[1], step  # each epoch its own order
    assert orders[0][0] != orders[1][0] and orders[0][1] != orders[1][1], orders  # each step its own
    assert _orders(tmp_path / "b", seed=0) == orders  # reproducible from the seed


def test_profiles_are_shuffled_afresh_every_pass_and_from_the_seed() -> None:
    """Ten profiles, three passes: each pass every profile once, each in its own order; the same from
    the same seed, another from another; any window of the stream is where the whole stream has it
    (a resumed run starts at its data position)."""
    profiles = list(range(10))
    stream = profiles_at(profiles, 0, 30, seed=0)  # type: ignore[arg-type]
    passes = [stream[0:10], stream[10:20], stream[20:30]]
    assert all(sorted(p) == profiles for p in passes), passes
    assert passes[0] != passes[1] and passes[1] != passes[2] and passes[0] != passes[2], passes
    assert passes[0] != profiles
    assert profiles_at(profiles, 0, 30, seed=0) == stream  # type: ignore[arg-type]
    assert profiles_at(profiles, 0, 30, seed=1) != stream  # type: ignore[arg-type]
    assert profiles_at(profiles, 7, 9, seed=0) == stream[7:16]  # type: ignore[arg-type]
