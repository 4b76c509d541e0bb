"""The optimisers of a run: AdamW and a learning-rate schedule per trained model (policy, critic).

Kept out of the trainer so that the step reads as RL, not bookkeeping: the trainer zeroes, steps and
saves them through :class:`Optimisers`, whatever the algorithm trains.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import torch
from torch import nn

from rlver.train.config import OptimSettings
from rlver.train.loading import trainable_parameters


def lr_lambda(schedule: str, warmup: int, total: int) -> Callable[[int], float]:
    """Multiplier of the base learning rate after ``n`` optimiser-schedule steps (one per RL step).

    The same curve as verl's FSDP schedulers (0-indexed, so with warm-up the first step runs at lr 0):
    a run means the same thing on both engines.
    """

    def f(n: int) -> float:
        if warmup and n < warmup:
            return n / warmup
        if schedule == "constant":
            return 1.0
        progress = min(1.0, (n - warmup) / max(1, total - warmup))
        if schedule == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return f


def _adamw(
    model: nn.Module, o: OptimSettings, which: Literal["actor", "critic"], total_steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    opt = torch.optim.AdamW(
        trainable_parameters(model),
        lr=o.actor_lr if which == "actor" else o.critic_lr,
        betas=o.betas,
        eps=o.eps,
        weight_decay=o.weight_decay,
    )
    return opt, torch.optim.lr_scheduler.LambdaLR(
        opt, lr_lambda(o.schedule, o.warmup(which, total_steps), total_steps)
    )


class Optimisers:
    """An optimiser and a schedule per trained model: the actor's, and the critic's when there is one.

    The models sit in one table (``actor``, then ``critic``), so nothing here asks whether the run has
    a critic: every method goes over the table.
    """

    def __init__(
        self, policy: nn.Module, critic: nn.Module | None, settings: OptimSettings, total_steps: int
    ) -> None:
        models: dict[Literal["actor", "critic"], nn.Module | None] = {"actor": policy, "critic": critic}
        self.trained = {
            which: _adamw(model, settings, which, total_steps)
            for which, model in models.items()
            if model is not None
        }

    def zero_grad(self) -> None:
        for opt, _ in self.trained.values():
            opt.zero_grad(set_to_none=True)

    def step(self) -> None:
        """Apply the accumulated gradients: one optimiser step of every trained model."""
        for opt, _ in self.trained.values():
            opt.step()

    def schedule_step(self) -> dict[str, float]:
        """Advance the schedules once (one RL step); returns the learning rates the step ran with."""
        lrs = {}
        for which, (_, sched) in self.trained.items():
            lrs[f"train/lr_{which}"] = float(sched.get_last_lr()[0])
            sched.step()
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint keys the trainer state has always used (``opt_actor``, ``sched_actor``...)."""
        state: dict[str, Any] = {}
        for which, (opt, sched) in self.trained.items():
            state[f"opt_{which}"] = opt.state_dict()
            state[f"sched_{which}"] = sched.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for which, (opt, sched) in self.trained.items():
            opt.load_state_dict(state[f"opt_{which}"])
            sched.load_state_dict(state[f"sched_{which}"])
