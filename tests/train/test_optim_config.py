"""The optimisers are built from ``optim:`` field by field, the actor's and the critic's each on its own
schedule, and a step's update advances each schedule once, however many optimiser steps it takes.

Why these tests: a review planted AdamW's betas reversed and ``optim.weight_decay`` left unpassed (torch's
default 0.01 then applies) and no test failed; the schedule stepped on every optimiser step as well as
every RL step (think mode's many optimiser steps a step then run warm-up and decay too fast) was caught
only by the slow resume test. Each setting below is away from torch's default, so that a field left out
reads as a wrong value here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from rlver.train.config import OptimSettings
from rlver.train.optim import Optimisers, lr_lambda
from test_learner_mutants import learner, sample

#: every AdamW field away from torch's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01), the
#: two betas far apart so that reversing them shows
SETTINGS = OptimSettings(
    actor_lr=3e-4, critic_lr=7e-3, betas=(0.8, 0.95), eps=1e-5, weight_decay=0.05,
    schedule="cosine", actor_warmup_ratio=0.25, critic_warmup_ratio=0.5,
)  # fmt: skip


class _Model(nn.Module):
    """Two trainable layers and a frozen one (a LoRA base's weights are frozen so)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)
        self.frozen = nn.Linear(3, 3)
        self.frozen.requires_grad_(False)


@pytest.mark.parametrize("settings", [SETTINGS, SETTINGS.model_copy(update={"weight_decay": 0.0})])
def test_each_optimiser_takes_every_adamw_field_from_the_config(settings: OptimSettings) -> None:
    """Actor and critic: lr (each its own), betas in order, eps, weight decay (0.05, and 0.0 as
    tiny-offline's, which torch's default would replace), and exactly the trainable parameters."""
    actor, critic = _Model(), _Model()
    optimisers = Optimisers(actor, critic, settings, total_steps=8)
    assert set(optimisers.trained) == {"actor", "critic"}
    for which, model, lr in (("actor", actor, 3e-4), ("critic", critic, 7e-3)):
        opt, _ = optimisers.trained[which]  # type: ignore[index]
        assert isinstance(opt, torch.optim.AdamW)
        (group,) = opt.param_groups
        assert group["initial_lr"] == lr, which
        assert tuple(group["betas"]) == (0.8, 0.95), which
        assert group["eps"] == 1e-5, which
        assert group["weight_decay"] == settings.weight_decay, which
        trained = {id(p) for g in opt.param_groups for p in g["params"]}
        wanted = {id(p) for p in model.parameters() if p.requires_grad}
        assert trained == wanted and len(wanted) == 4, which  # body and head; not the frozen layer


def test_the_weight_decay_reaches_the_weights() -> None:
    """One step with zero gradients moves a weight only by AdamW's decay: w × (1 − lr × wd)."""
    model = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(2.0)
    settings = OptimSettings(actor_lr=0.1, weight_decay=0.5)
    optimisers = Optimisers(model, None, settings, total_steps=4)
    model.weight.grad = torch.zeros_like(model.weight)
    optimisers.step()
    assert model.weight.detach().flatten().tolist() == pytest.approx([2.0 * (1 - 0.1 * 0.5)] * 2)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step()`")
def test_the_critic_runs_its_own_schedule_and_resumes_it() -> None:
    """Cosine over 8 steps, the actor's warm-up 2 steps and the critic's 4: each optimiser's rate at
    every step is its own base rate × its own curve; a schedule state saved after 3 steps and loaded
    into fresh optimisers continues both curves where they were."""
    total = 8
    optimisers = Optimisers(_Model(), _Model(), SETTINGS, total_steps=total)
    actor, critic = lr_lambda("cosine", 2, total), lr_lambda("cosine", 4, total)
    seen = [optimisers.schedule_step() for _ in range(3)]
    saved = optimisers.state_dict()
    resumed = Optimisers(_Model(), _Model(), SETTINGS, total_steps=total)
    resumed.load_state_dict(saved)
    seen += [resumed.schedule_step() for _ in range(total - 3)]
    assert [s["train/lr_actor"] for s in seen] == pytest.approx([3e-4 * actor(n) for n in range(total)])
    assert [s["train/lr_critic"] for s in seen] == pytest.approx([7e-3 * critic(n) for n in range(total)])
    assert [s["train/lr_critic"] for s in seen][:5] == pytest.approx(
        [0.0, 7e-3 / 4, 7e-3 / 2, 7e-3 * 3 / 4, 7e-3]
    )
    # the critic's optimiser runs at its scheduled rate, not the actor's
    opt, _ = resumed.trained["critic"]
    assert opt.param_groups[0]["lr"] == pytest.approx(7e-3 * critic(total))


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_one_update_of_several_optimiser_steps_advances_the_schedule_once(
    tmp_path: Path, algorithm: str
) -> None:
    """Four samples in minibatches of one: four optimiser steps, and every schedule (the actor's, PPO's
    critic's) one step on: warm-up 4 of 10 steps, so the rate goes from 0 to a quarter, not to the full
    rate and on into the decay."""
    sets = [
        f"algorithm.name={algorithm}", "optim.schedule=cosine",
        "optim.warmup_steps=4", "run.steps=10", "optim.actor_lr=0.01", "optim.critic_lr=0.02",
    ]  # fmt: skip
    lrn = learner(tmp_path, *sets, minibatch_samples=1)
    samples = [sample(9, 3, reward, f"p{i // 2}", k=i) for i, reward in enumerate([0.1, 0.9, 0.3, 0.5])]
    batch = lrn.score(samples)
    stats = lrn.update(batch, step=1, generator=torch.Generator().manual_seed(0))
    assert stats["train/optimizer_steps"] == 4
    assert stats["train/lr_actor"] == 0.0  # the rate the step ran with
    for which, base in (("actor", 0.01), ("critic", 0.02)):
        if which in lrn.parts.optimisers.trained:
            opt, sched = lrn.parts.optimisers.trained[which]  # type: ignore[index]
            assert sched.last_epoch == 1, which
            assert opt.param_groups[0]["lr"] == pytest.approx(base * 0.25), which
    assert ("critic" in lrn.parts.optimisers.trained) == (algorithm == "ppo")


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step()`")
def test_the_schedule_named_in_the_config_is_the_one_run() -> None:
    """``optim.schedule`` reaches each optimiser's scheduler: linear, warm-up 3 of 4 steps (so the
    decay has one step: ``total - warmup`` = 1, the rate reaching 0 at the end)."""
    settings = OptimSettings(actor_lr=1.0, critic_lr=2.0, schedule="linear", warmup_steps=3)
    optimisers = Optimisers(_Model(), _Model(), settings, total_steps=4)
    seen = [optimisers.schedule_step() for _ in range(4)]
    assert [s["train/lr_actor"] for s in seen] == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    assert [s["train/lr_critic"] for s in seen] == pytest.approx([0.0, 2 / 3, 4 / 3, 2.0])
    assert optimisers.schedule_step()["train/lr_actor"] == 0.0  # after the last step: decayed to 0
    constant = Optimisers(_Model(), None, OptimSettings(actor_lr=1.0, schedule="constant"), total_steps=4)
    assert [constant.schedule_step()["train/lr_actor"] for _ in range(4)] == [1.0] * 4


def test_zero_grad_frees_the_gradients() -> None:
    """Between optimiser steps the gradients are dropped (``None``), not kept as zeros: no memory held
    for them, and a parameter that gets no gradient in the next minibatch is not moved by AdamW's
    momentum or decay."""
    actor, critic = _Model(), _Model()
    optimisers = Optimisers(actor, critic, SETTINGS, total_steps=4)
    for model in (actor, critic):
        model.head(model.body(torch.ones(1, 3))).sum().backward()
    optimisers.zero_grad()
    assert all(p.grad is None for model in (actor, critic) for p in model.parameters())
