"""The learning-rate schedule (``rlver.train.optim.lr_lambda``) by hand: the multiplier of the base rate
after ``n`` schedule steps, 0-indexed as verl 0.9.1's FSDP schedulers (``verl.utils.torch_functional``
``get_constant_schedule_with_warmup`` / ``get_cosine_schedule_with_warmup``): with a warm-up the first
step runs at 0, and the decay's progress is counted over the steps after the warm-up.

``tests/integrations/test_verl_maths.py`` compares the same function with verl's own, step by step, on
the published presets' warm-ups (2 % and 5 % of 1,000 steps).
"""

from __future__ import annotations

import math

import pytest

from rlver.train.config import OptimSettings
from rlver.train.optim import lr_lambda

approx = pytest.approx


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
def test_the_warm_up_starts_at_zero_and_rises_by_one_over_warmup_a_step(schedule: str) -> None:
    f = lr_lambda(schedule, 4, 20)
    assert [f(n) for n in range(4)] == [0.0, 0.25, 0.5, 0.75]
    assert f(4) == 1.0  # the first step after the warm-up runs at the full rate, whatever the decay


def test_the_decay_runs_over_the_steps_after_the_warm_up() -> None:
    """warm-up 2 of 10 steps: progress (n - 2) / 8, so step 6 is half-way (cosine 0.5, linear 0.5)."""
    cosine, linear = lr_lambda("cosine", 2, 10), lr_lambda("linear", 2, 10)
    assert cosine(6) == approx(0.5) and linear(6) == approx(0.5)
    assert cosine(3) == approx(0.5 * (1 + math.cos(math.pi / 8)))
    assert linear(3) == approx(7 / 8)
    assert cosine(10) == approx(0.0, abs=1e-12) and linear(10) == 0.0
    assert lr_lambda("constant", 2, 10)(9) == 1.0


def test_past_the_last_step_the_rate_stays_where_the_decay_ended() -> None:
    """Read past ``total`` (a run never is: it steps its schedule once per RL step), the multiplier stays
    at the decay's end, 0, rather than rising again (cosine) or going below 0 (linear)."""
    cosine, linear = lr_lambda("cosine", 2, 10), lr_lambda("linear", 2, 10)
    for n in (11, 12, 14, 18, 30):
        assert cosine(n) == approx(0.0, abs=1e-12) and linear(n) == 0.0, n


def test_without_a_warm_up_the_first_step_runs_at_the_full_rate() -> None:
    assert lr_lambda("cosine", 0, 10)(0) == 1.0
    assert lr_lambda("cosine", 0, 10)(5) == approx(0.5)
    assert lr_lambda("linear", 0, 4)(1) == 0.75


def test_the_published_presets_warm_up_as_verl_counts_them() -> None:
    """``actor_warmup_ratio 0.02`` and ``critic_warmup_ratio 0.05`` of 1,000 steps: 20 and 50 steps
    (``int(ratio * steps)``, verl's rule), the first at rate 0 and step 20 (or 50) at the full rate."""
    optim = OptimSettings(actor_warmup_ratio=0.02, critic_warmup_ratio=0.05)
    assert (optim.warmup("actor", 1000), optim.warmup("critic", 1000)) == (20, 50)
    actor, critic = lr_lambda("constant", 20, 1000), lr_lambda("constant", 50, 1000)
    assert (actor(0), actor(1), actor(19), actor(20)) == (0.0, 0.05, 0.95, 1.0)
    assert (critic(0), critic(25), critic(49), critic(50)) == (0.0, 0.5, 0.98, 1.0)
