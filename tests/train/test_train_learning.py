"""Learning tests: the tiny model, trained against the offline user, gets better on held-out users.

The criterion (``_not_learned``): the held-out score rises strictly above ``before + MARGIN`` and the
training reward rises.

Mutation checks apply deliberate bugs to the code under test and require the criterion to fail: the
sign of the GRPO advantages flipped, the assistant mask replaced by "every token", the mask shifted
by one token in either direction, and three trainers that do nothing (learning rate 0, advantages 0,
optimiser step skipped; issue 42, measured in the table above ``MARGIN``). Masks are mutated where the trainer gets them, by monkeypatching
``rlver.train.learner.episode_to_tensors`` (the mask builder as the learner calls it), never by editing
source. Fixed seeds make each run deterministic on CPU.

Measured on the 2-core CPU box (held-out score = mean final emotion of 16 dialogues, before -> after
10 steps; gain; one run per cell; seeds via ``run.seed``; the same ``_learn`` and mutations as below;
the sign-flip row is the earlier measurement this file carried):

=========  ================  ==========================  ==========================
algorithm  mask              seed 0                      seed 1
=========  ================  ==========================  ==========================
GRPO       correct           21.2 -> 33.0 (+11.8)
GRPO       sign flipped      21.2 -> 17.3 (-3.9)
GRPO       every token       21.2 -> 14.9 (-6.3)         21.2 -> 21.7 (+0.5)
GRPO       one token early   21.2 -> 13.2 (-7.9)
GRPO       one token late    21.2 -> 13.4 (-7.8)
PPO (2 mb) correct           21.2 -> 27.7 (+6.5)         21.2 -> 29.7 (+8.5)
PPO (2 mb) every token       21.2 -> 29.8 (+8.6)         21.2 -> 30.3 (+9.1)
PPO (2 mb) one token early   21.2 -> 21.2 (+0.0)
PPO (2 mb) one token late    21.2 -> 27.6 (+6.4)
=========  ================  ==========================  ==========================

The table was measured on this branch before it was merged with the algorithm table (dual-clip c = 3
and friends). On the merged code (main + this branch, ``pytest -s -k reward_rises``, one run each):
GRPO 21.2 -> 33.0 (unchanged), PPO 21.2 -> 30.2 (+9.0, was +6.5); PPO one token early 21.2 -> 21.2
(caught), PPO every token 21.2 -> 29.3 (+8.1, still not caught: xfailed). The other mutation rows were
not re-measured there.

So GRPO's margin (+8) catches all three mask bugs, and PPO's (+4) catches "one token early" (the reply's
end token never trained: replies run to the token limit). PPO trained on every token, or one token late
(first reply token untrained, the newline after the end token trained), learns as well as with the right
mask on this model: the score cannot tell them apart, and neither could the drift of the context
tokens' log-prob (correct: -1.04 / -1.66 nats, every token: -1.62). Those two cases are ``xfail(strict)``
below: a known gap, visible in every run, that turns into an error (XPASS) once a criterion catches them.

On the merged token-exact code (Qwen-trap tiny model, own sampler; ``pytest -n 2``, one run): GRPO
17.9 -> 31.3 with one-early and 17.9 -> 31.6 with one-late, and PPO 17.9 -> 21.1 (+3.2) with the right
mask: the score alone no longer separates a shifted mask from the right one, so the learning criterion
also requires ``rollout/unsampled_trained_tokens`` and ``rollout/sampled_untrained_tokens`` to be 0 at
every step (exactly the sampled tokens are trained). Every mutation below fails that; the PPO margin is
2 points, under the +3.2 measured.

With the broken-text veto in the offline user (``rlver-offline-v4``; the tiny model's partial-UTF-8
tokens now gate a reply; ``pytest -s tests/train/test_train_learning.py``, one run): GRPO 12.9 -> 21.8
(+8.9, margin 8: little headroom), PPO 12.9 -> 16.1 (+3.2), and every mutation still fails the criterion
(sign flip 11.3, GRPO every-token 14.4, one-early 22.2, one-late 18.0, PPO one-early 12.9, every-token
18.1, one-late 14.5; caught by the score or by the trained-token counts).

With ``rlver-offline-v5`` (content vetoes that no real reply trips; ``pytest -s
tests/train/test_train_learning.py``, 1 run, 334 s): GRPO 12.9 -> 21.2 (+8.3), which left 0.3 of headroom
over the old margin of 8, so GRPO's margin is now 6; PPO 12.9 -> 16.1. Every mutation still fails:
sign flip 11.3 and every-token 14.4 by the score (both under 12.9 + 6), one-early 22.2 and one-late 18.0
by the trained-token counts; PPO one-early 12.9, every-token 18.1, one-late 14.5 likewise.

Issue 23: the counters and ``rollout/logprob_diff_*`` are read off the collated micro-batches the loss
consumes (``rlver.train.grid``), the mutations include ``action_mask`` shifted at collation, every
test runs seeds 0 and 1, and the margins' measured gains (correct code and every mutation, both seeds)
are the table above ``MARGIN``.

Since 2026-11-23 the six mask mutations train one step and check the trained-token counts alone: those
counts catch every mask bug at its first step (they are part of the criterion, so the criterion fails),
and the nine further steps and two evaluations measured nothing more while costing ~3 minutes of CI.
The sign flip, which no count can see, still runs the whole criterion.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch

from rlver.train.config import load_train_config

if TYPE_CHECKING:
    from rlver.train.trainer import Trainer

pytestmark = pytest.mark.slow

STEPS = 10
#: The held-out score must rise above ``before + MARGIN``, strictly, in ``STEPS`` steps (plus the
#: training reward rising, plus the trained-token counts read off the collated micro-batches being 0 at
#: every step).
#:
#: Issue 33: measured over 10 seeds, for the correct code and the one mutation the score must catch
#: (held-out score of 16 dialogues, before -> after 10 steps; 2-core CPU box, transformers 5.24.0,
#: torch 2.13.0+cpu as pinned in constraints.txt; ``RLVER_LEARNING_SEEDS=0-9 pytest -rP -n 2 -k
#: "reward_rises or can_fail" tests/train/test_train_learning.py``, 1 run per cell). Re-measured on
#: 2026-11-26 after issue 35's on-device sampler, which draws other tokens for the same seed (inverse
#: CDF of one uniform per row per step, docs/training.md "The local sampler"):
#:
#: ==============  ===========================================================  =============
#: run             gain by seed 0 1 2 3 4 5 6 7 8 9                              range
#: ==============  ===========================================================  =============
#: GRPO correct    +5.7 +7.8 +0.8 +6.6 +4.3 +3.4 +5.3 +5.8 +8.7 +5.9            +0.8 .. +8.7
#: GRPO sign flip  -2.1 -2.5 -2.0 -2.3 -2.5 -2.0 -2.2 -1.5 -1.8 -1.7            -2.5 .. -1.5
#: PPO correct     +1.1 +6.1 +3.3 +1.8 +5.0 +4.3 +7.2 +3.8 +3.3 +4.0            +1.1 .. +7.2
#: ==============  ===========================================================  =============
#:
#: (With the earlier per-row ``torch.multinomial`` sampler, 2026-11-25: GRPO correct +0.9 .. +8.0,
#: sign flip -2.4 .. -1.3, PPO correct +0.9 .. +5.7.) The margins before issue 33 (GRPO 6, PPO 2) sat
#: inside the correct code's own spread, and failed on a reviewer's machine too, whose CPU kernels give
#: other numbers for the same seed. A margin of 0 (the score must not fall) sits between the two GRPO
#: distributions: 0.8 under the smallest correct gain and 1.5 over the largest sign-flip gain. PPO
#: has no mutation the score must catch: its mask mutations (and GRPO's) fail the trained-token counts
#: at their first step on every seed measured (seeds 0-4, ``test_mask_bugs_fail_the_learning_test``),
#: whatever the score does; the older table in the module docstring shows why the score alone could
#: not. CI runs seeds 0 and 1.
#:
#: The training reward (mean of the first three steps -> the last three), the same 10 seeds: GRPO
#: correct rises on every seed (0.126 -> 0.146 at the least, seed 2), PPO likewise (0.120 -> 0.131,
#: seed 8), and the sign flip falls on 9 of 10 seeds (seed 9: 0.116 -> 0.117), so on those it fails
#: that part of the criterion too; the held-out score fails it on every seed.
#:
#: Issue 42: a trainer that does nothing passed the held-out check, then ``after >= before``: the
#: evaluation runs at a fixed seed, so unchanged weights score exactly what they scored before, and
#: what was left, the training reward's trend, is a coin flip for such a trainer. The check is now
#: strict (``after > before``), and three do-nothing controls run the whole criterion
#: (``test_a_trainer_that_does_nothing_fails_the_learning_test``; GRPO; ``RLVER_LEARNING_SEEDS=0-4
#: nice -n 10 pytest -s -rA -k does_nothing``, then ``RLVER_LEARNING_SEEDS=0-9 ... -k reward_rises``
#: for the correct code, same box, 2026-11-27, 1 run per cell; 15 control runs took 5.6 CPU-minutes):
#:
#: ======================  ===============================  ===========================================
#: run                     held-out score, seeds 0-4        training reward, first 3 -> last 3 steps
#: ======================  ===============================  ===========================================
#: learning rate 0         13.1 -> 13.1 on every seed,      0.124->0.118  0.116->0.116  0.123->0.126
#: advantages 0            bit for bit (``after ==          0.121->0.125  0.118->0.125 (seeds 0-4;
#: optimiser step skipped  before``): fails, 5 of 5         the same for all three controls)
#: ======================  ===============================  ===========================================
#:
#: So the training reward rose on seeds 2, 3 and 4 of the do-nothing trainer: the old criterion passed
#: it there. The correct code on the same code, seeds 0-9, reproduced the table above to the tenth
#: (GRPO +0.8 .. +8.7, PPO +1.1 .. +7.2: every gain is a strict rise, passing on 10 of 10 seeds for
#: both). The controls run seed 0 in CI (``CONTROL_SEEDS``; ~40 s each on an idle 2-core box).
MARGIN = {"grpo": 0.0, "ppo": 0.0}
EXTRA = {"grpo": (), "ppo": ("algorithm.minibatches=2",)}


def _seeds(default: str = "0,1") -> tuple[int, ...]:
    """Seeds 0 and 1 in CI; ``RLVER_LEARNING_SEEDS=0-9`` (or ``0,3,7``) measures more, as the margins were."""
    spec = os.environ.get("RLVER_LEARNING_SEEDS", default)
    if "-" in spec:
        low, high = spec.split("-")
        return tuple(range(int(low), int(high) + 1))
    return tuple(int(s) for s in spec.split(","))


SEEDS = _seeds()
#: The do-nothing controls run one seed in CI (~40 s each): unchanged weights give the same held-out
#: score at every seed, so more seeds add time, not evidence. ``RLVER_LEARNING_SEEDS`` runs them on its
#: seeds as well, as their table was measured.
CONTROL_SEEDS = _seeds("0")


def _trainer(algorithm: str, tmp_path: Path, steps: int, seed: int = 0) -> Trainer:
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    config = load_train_config(
        "tiny-offline",
        [
            f"algorithm.name={algorithm}",
            f"run.steps={steps}",
            f"run.seed={seed}",
            "eval.every=0",
            "eval.at_start=false",
            "run.tensorboard=false",
            "run.progress=false",
            *EXTRA[algorithm],
        ],
    )
    return Trainer(config, tmp_path)


def _learn(algorithm: str, tmp_path: Path, seed: int = 0) -> tuple[float, float, list[dict[str, Any]]]:
    trainer = _trainer(algorithm, tmp_path, STEPS, seed)
    before = trainer.evaluate()["score"]
    history = trainer.train()
    after = trainer.eval_history[-1]["score"]
    return before, after, history


def _mask_failures(history: list[dict[str, Any]]) -> list[str]:
    """The first step at which the trained tokens were not exactly the sampled ones (empty: none)."""
    for step, h in enumerate(history, 1):
        bad = {k: h[k] for k in ("rollout/unsampled_trained_tokens", "rollout/sampled_untrained_tokens")}
        if any(bad.values()):
            return [f"step {step}: the mask does not cover exactly the sampled tokens: {bad}"]
    return []


def _reward_trend(history: list[dict[str, Any]]) -> str:
    """``training reward 0.130 -> 0.171``: the mean of the first three steps and of the last three."""
    rewards = [h["rollout/reward_mean"] for h in history]
    return f"training reward {sum(rewards[:3]) / 3:.3f} -> {sum(rewards[-3:]) / 3:.3f}"


def _not_learned(algorithm: str, before: float, after: float, history: list[dict[str, Any]]) -> list[str]:
    """What the run failed to show (empty: it learned, and trained exactly the sampled tokens)."""
    failures = _mask_failures(history)
    rewards = [h["rollout/reward_mean"] for h in history]
    if not after > before + MARGIN[algorithm]:  # strictly: unchanged weights give after == before
        failures.append(
            f"held-out score {before:.1f} -> {after:.1f} did not rise by more than {MARGIN[algorithm]}"
        )
    if not sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3:
        failures.append(f"training reward did not rise: {rewards}")
    return failures


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_reward_rises_on_held_out_users(algorithm: str, seed: int, tmp_path: Path) -> None:
    before, after, history = _learn(algorithm, tmp_path, seed)
    print(f"{algorithm} seed {seed}: held-out score {before:.1f} -> {after:.1f}; {_reward_trend(history)}")
    failures = _not_learned(algorithm, before, after, history)
    assert not failures, f"{algorithm}: {failures}"


@pytest.mark.parametrize("seed", SEEDS)
def test_the_learning_test_can_fail(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation check of the test above: with the GRPO advantages' sign flipped (a deliberate bug in
    the code under test) the held-out score must not rise by the margin — so a wrong sign fails CI."""
    from rlver.train.algorithms import core

    real = core.group_advantages

    def flipped(*args: object, **kwargs: object) -> torch.Tensor:
        return -real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(core, "group_advantages", flipped)
    before, after, history = _learn("grpo", tmp_path, seed)
    print(
        f"grpo seed {seed}, sign flipped: held-out score {before:.1f} -> {after:.1f}; {_reward_trend(history)}"
    )
    assert _not_learned("grpo", before, after, history), (
        f"flipped sign still learned: {before:.1f} -> {after:.1f}"
    )


def _every_token(mask: list[int]) -> list[int]:
    return [1] * len(mask)


def _one_early(mask: list[int]) -> list[int]:
    return [*mask[1:], 0]


def _one_late(mask: list[int]) -> list[int]:
    return [0, *mask[:-1]]


MUTATIONS: dict[str, Callable[[list[int]], list[int]]] = {
    "every-token": _every_token,
    "one-early": _one_early,
    "one-late": _one_late,
}


def _shifted_at_collation(monkeypatch: pytest.MonkeyPatch, shift: int) -> None:
    """The bug the old counters could not see: ``action_mask`` shifted by ``shift`` positions while the
    padded batch is built (``rlver.train.batch.collate``), the tokenised episodes left right."""
    from rlver.train import learner as learner_module

    real = learner_module.collate

    def mutated(*args: Any, **kwargs: Any) -> Any:
        mb = real(*args, **kwargs)
        mb.action_mask = torch.roll(mb.action_mask, shifts=shift, dims=1)
        return mb

    monkeypatch.setattr(learner_module, "collate", mutated)


def _mutate_mask(monkeypatch: pytest.MonkeyPatch, mutation: str) -> None:
    """Apply one mask mutation: to the tokenised episode (``episode_to_tensors``) or at collation."""
    from rlver.train import learner as learner_module

    if mutation.startswith("collate"):
        _shifted_at_collation(monkeypatch, -1 if mutation == "collate-early" else 1)
        return
    real = learner_module.episode_to_tensors
    mutate = MUTATIONS[mutation]

    def mutated(*args: Any, **kwargs: Any) -> Any:
        seq = real(*args, **kwargs)
        seq.assistant_mask = mutate(list(seq.assistant_mask))
        return seq

    monkeypatch.setattr(learner_module, "episode_to_tensors", mutated)


MASK_MUTATIONS = ("every-token", "one-early", "one-late", "collate-early", "collate-late")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mutation", MASK_MUTATIONS)
@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_mask_bugs_fail_the_learning_test(
    algorithm: str, mutation: str, seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _mutate_mask(monkeypatch, mutation)
    # One step is enough: the trained-token counts, part of the learning criterion and read off the
    # collated micro-batches the loss consumes (rlver.train.grid), catch every mask bug at the first
    # step, and with the right mask they are 0 at every step (test_reward_rises_...).
    history = _trainer(algorithm, tmp_path, 1, seed).train()
    assert _mask_failures(history), (
        f"{algorithm} with the mask bug {mutation!r} trained exactly the sampled tokens"
    )


# -- do-nothing controls (issue 42) ----------------------------------------------------------------------
def _learning_rate_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every learning rate 0: the schedule's multiplier is 0 from the first step (the config refuses
    ``optim.actor_lr=0``, so the bug is planted where the rate is formed, ``rlver.train.optim``)."""
    from rlver.train import optim

    monkeypatch.setattr(optim, "lr_lambda", lambda *args, **kwargs: lambda n: 0.0)


def _advantages_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """GRPO's advantages forced to 0 where the sign flip changes them (``core.group_advantages``)."""
    from rlver.train.algorithms import core

    real = core.group_advantages

    def zero(*args: object, **kwargs: object) -> torch.Tensor:
        return torch.zeros_like(real(*args, **kwargs))  # type: ignore[arg-type]

    monkeypatch.setattr(core, "group_advantages", zero)


def _optimiser_step_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gradients computed and clipped, never applied (``Optimisers.step`` does nothing)."""
    from rlver.train.optim import Optimisers

    monkeypatch.setattr(Optimisers, "step", lambda self: None)


DO_NOTHING: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "learning-rate-0": _learning_rate_zero,
    "advantages-0": _advantages_zero,
    "optimiser-step-skipped": _optimiser_step_skipped,
}


@pytest.mark.parametrize("seed", CONTROL_SEEDS)
@pytest.mark.parametrize("control", list(DO_NOTHING))
# the skipped optimiser step makes torch warn that the schedule stepped first: that is the control
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")
def test_a_trainer_that_does_nothing_fails_the_learning_test(
    control: str, seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: the criterion must fail a trainer that leaves the weights as they were. Its held-out
    check alone must: the evaluation runs at a fixed seed, so unchanged weights give ``after ==
    before`` exactly, which the strict rise refuses (the training-reward check is a coin flip for a
    trainer that does nothing, so it is not what this test relies on)."""
    DO_NOTHING[control](monkeypatch)
    before, after, history = _learn("grpo", tmp_path, seed)
    same = "exactly equal" if after == before else "different"
    print(
        f"grpo seed {seed}, {control}: held-out {before:.1f} -> {after:.1f} ({same}); {_reward_trend(history)}"
    )
    failures = _not_learned("grpo", before, after, history)
    assert any(f.startswith("held-out score") for f in failures), (
        f"{control}: the held-out check passed a trainer that does nothing ({before:.1f} -> {after:.1f})"
    )
