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
    """The actor's optimiser and schedule, and the critic's when there is a critic."""

    def __init__(
        self, policy: nn.Module, critic: nn.Module | None, settings: OptimSettings, total_steps: int
    ) -> None:
        self.actor, self.sched_actor = _adamw(policy, settings, "actor", total_steps)
        self.critic: torch.optim.Optimizer | None = None
        self.sched_critic: torch.optim.lr_scheduler.LambdaLR | None = None
        if critic is not None:
            self.critic, self.sched_critic = _adamw(critic, settings, "critic", total_steps)

    def zero_grad(self) -> None:
        self.actor.zero_grad(set_to_none=True)
        if self.critic is not None:
            self.critic.zero_grad(set_to_none=True)

    def step(self) -> None:
        """Apply the accumulated gradients: one optimiser step of every trained model."""
        self.actor.step()
        if self.critic is not None:
            self.critic.step()

    def schedule_step(self) -> dict[str, float]:
        """Advance the schedules once (one RL step); returns the learning rates the step ran with."""
        lrs = {"train/lr_actor": float(self.sched_actor.get_last_lr()[0])}
        self.sched_actor.step()
        if self.sched_critic is not None:
            lrs["train/lr_critic"] = float(self.sched_critic.get_last_lr()[0])
            self.sched_critic.step()
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint keys the trainer state has always used (``opt_actor``, ``sched_actor``...)."""
        state = {"opt_actor": self.actor.state_dict(), "sched_actor": self.sched_actor.state_dict()}
        if self.critic is not None and self.sched_critic is not None:
            state["opt_critic"] = self.critic.state_dict()
            state["sched_critic"] = self.sched_critic.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["opt_actor"])
        self.sched_actor.load_state_dict(state["sched_actor"])
        if self.critic is not None and self.sched_critic is not None:
            self.critic.load_state_dict(state["opt_critic"])
            self.sched_critic.load_state_dict(state["sched_critic"])
