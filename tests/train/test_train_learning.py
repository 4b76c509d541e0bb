"""Learning tests: the tiny model, trained for 10 steps against the offline user, gets better on held-out
users; a trainer with a bug in its credit, its critic, its sign or its mask, or one that does nothing, does
not.

The criterion (``_not_learned``; ``tiny-offline``, 16 held-out dialogues at a fixed seed):

1. the held-out score rises by more than ``MARGIN`` (GRPO and MAPO 0, PPO 2.0), strictly: unchanged
   weights score exactly what they scored before;
2. the training reward rises (the mean of the last three steps above the first three's);
3. every step trained exactly the sampled tokens (``rollout/unsampled_trained_tokens`` and
   ``rollout/sampled_untrained_tokens`` 0, read off the micro-batches the loss consumes);
4. PPO only: the critic learned what the policy's dialogues are worth: over the last three steps its
   mean value (``train/value_mean``) is within ``CRITIC_GAP`` (0.05) of the mean training reward, which,
   with the final reward and gamma = 1, is every action token's return.

PPO trains its critic at 2e-3 here (the preset's 2e-2 made the values swing by ±0.9 around returns of
0.13, so the critic was noise and no critic bug could show; seed 0 then gained +1.1, with the value
targets taken from the whitened advantages +3.9, with each turn's reward on its first token +1.4).

Power, measured on the 2-core dev box, one run per cell (``RLVER_LEARNING_SEEDS=0-9 pytest -s -rA -k
reward_rises`` on this file, ``0-4`` with ``-k credit_and_critic`` and ``-k can_fail``; 2026-11-28, on
the tree with fidelity round 5's in-training evaluation, which moved the score before training from 13.1
to 12.4; the earlier table is in docs/notes/2026-11-28-training-round5.md). Held-out gain (after - before,
before 12.4 for every run):

===========================================  ====================================================  ========
run                                          gain by seed 0 1 2 3 4 5 6 7 8 9                      passes
===========================================  ====================================================  ========
GRPO                                         +8.3 +6.5 +0.0 +7.3 +3.9 +7.3 +6.0 +7.7 +7.8 +7.7      9 of 10
PPO                                          +2.4 +5.3 +5.7 +7.0 +5.7 +4.1 +6.7 +3.2 +2.2 +2.6     10 of 10
  its critic gap (criterion 4)               .011 .022 .017 .016 .013 .026 .011 .022 .008 .012
MAPO (``rollout.reward.mode=delta``)         +5.9 +5.1 +3.8 +6.0 +6.8 +2.4 +1.8 +0.1 +1.0 +1.8     10 of 10
PPO, each turn's reward on its first token   +0.7 +0.7 +3.0 +0.5 +2.7                               0 of 5
  its critic gap                             .051 .059 .078 .055 .075
PPO, value targets from whitened advantages  +4.5 +6.8 +2.7 +2.9 +4.0                               0 of 5
  its critic gap                             .173 .156 .215 .172 .175
GRPO, advantages' sign flipped               -1.2 -2.3 +0.0 -0.8 -2.1                               0 of 5
===========================================  ====================================================  ========

(GRPO seed 2 stays at 12.4 and its training reward falls, 0.124 -> 0.120: it fails. The do-nothing
controls score after == before bit for bit by construction, whatever the tree: GRPO's and MAPO's, seed 0.)

So: GRPO, PPO and MAPO pass on at least 9 of 10 seeds; PPO's two credit/critic bugs fail on every seed
measured (seeds 0-4) by the critic's gap (the reward on each turn's first token 0.051 to 0.078, the value
targets rebuilt from the whitened advantages 0.156 to 0.215; the correct code's 0.008 to 0.026), the
first of them on seeds 0, 1 and 3 by the margin too (PPO's margin, 2.0, sits under the correct code's
smallest gain, +2.2, and over that bug's gains on those seeds); the value-target bug's held-out gain
reaches +6.8, so the critic's gap is what catches it. The sign flip fails the held-out check on every
seed. Seeds 0 and 1 run in CI; the bugs and the controls seed 0 (``BUG_SEEDS``, ``CONTROL_SEEDS``). The
margins were chosen from these runs: a reviewer's machine, whose CPU kernels give other numbers for a
seed, may land a seed on the other side.

The mask mutations (every token, one early, one late, shifted at collation) train one step and fail the
trained-token counts at that step, for GRPO and PPO (seeds 0-4 measured). Bugs are planted by monkeypatching the code
under test (the mask builder where the learner calls it, ``collate`` where the learner imports it, the
algorithms' functions), never by editing source; fixed seeds make each run deterministic on CPU.
The history of these margins is in docs/notes/2026-11-28-training-round5.md.
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
#: The held-out score must rise by more than this (criterion 1); the table in the module docstring is
#: where the values come from (MICA's and CTC-GRPO's: test_algorithms_turn_credit_learning.py's).
MARGIN = {"grpo": 0.0, "ppo": 2.0, "mapo": 0.0, "mica": 2.0, "ctc_grpo": 4.0}
#: PPO's critic must end within this of the training reward (criterion 4).
CRITIC_GAP = 0.05
EXTRA = {
    "grpo": (),
    "ppo": ("algorithm.minibatches=2", "optim.critic_lr=2e-3"),
    "mapo": ("rollout.reward.mode=delta",),  # its credit is each turn's emotion change
    "mica": (
        "rollout.reward.mode=delta",
    ),  # the turn credit algorithms: test_algorithms_turn_credit_learning.py
    "ctc_grpo": ("rollout.reward.mode=delta",),
}


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
#: PPO's credit and critic bugs run one seed in CI (they failed on seeds 0-4, measured; the table).
BUG_SEEDS = _seeds("0")


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


def _critic_gap(history: list[dict[str, Any]]) -> float | None:
    """How far PPO's critic is from the returns it should predict: the mean, over the last three steps,
    of |the critic's mean value - the step's mean training reward| (with the final reward and gamma 1,
    every action token's return is its dialogue's reward). ``None`` without a critic."""
    if "train/value_mean" not in history[-1]:
        return None
    last = history[-3:]
    return sum(abs(h["train/value_mean"] - h["rollout/reward_mean"]) for h in last) / len(last)


def _summary(history: list[dict[str, Any]]) -> str:
    """``training reward 0.130 -> 0.171``: the mean of the first three steps and of the last three (and
    PPO's critic gap)."""
    rewards = [h["rollout/reward_mean"] for h in history]
    gap = _critic_gap(history)
    critic = "" if gap is None else f"; critic gap {gap:.3f}"
    return f"training reward {sum(rewards[:3]) / 3:.3f} -> {sum(rewards[-3:]) / 3:.3f}{critic}"


def _not_learned(
    algorithm: str, before: float, after: float, history: list[dict[str, Any]], margin: float | None = None
) -> list[str]:
    """What the run failed to show (empty: it learned, and trained exactly the sampled tokens).
    ``margin``: the held-out margin, ``MARGIN[algorithm]`` unless given (another test's own table)."""
    failures = _mask_failures(history)
    rewards = [h["rollout/reward_mean"] for h in history]
    margin = MARGIN[algorithm] if margin is None else margin
    if not after > before + margin:  # strictly: unchanged weights give after == before
        failures.append(f"held-out score {before:.1f} -> {after:.1f} did not rise by more than {margin}")
    if not sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3:
        failures.append(f"training reward did not rise: {rewards}")
    gap = _critic_gap(history)
    if gap is not None and not gap < CRITIC_GAP:
        failures.append(f"the critic did not learn the returns: its mean value ends {gap:.3f} from them")
    return failures


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("algorithm", ["grpo", "ppo", "mapo"])
def test_reward_rises_on_held_out_users(algorithm: str, seed: int, tmp_path: Path) -> None:
    before, after, history = _learn(algorithm, tmp_path, seed)
    print(f"{algorithm} seed {seed}: held-out score {before:.1f} -> {after:.1f}; {_summary(history)}")
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
    print(f"grpo seed {seed}, sign flipped: held-out score {before:.1f} -> {after:.1f}; {_summary(history)}")
    assert _not_learned("grpo", before, after, history), (
        f"flipped sign still learned: {before:.1f} -> {after:.1f}"
    )


# -- PPO's credit and critic bugs -------------------------------------------------------------------------
def _reward_on_each_turns_first_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each turn's reward moved from the turn's last action token to its first, where the learner builds
    the padded batch (``rlver.train.learner.pad_batch``): GAE then credits only what precedes it."""
    from rlver.train import learner as learner_module

    real = learner_module.pad_batch

    def mutated(samples: Any) -> Any:
        batch = real(samples)
        moved = torch.zeros_like(batch.token_rewards)
        for row, t in (batch.token_rewards != 0).nonzero().tolist():
            first = t
            while first > 0 and batch.mask[row, first - 1] > 0:
                first -= 1
            moved[row, first] += batch.token_rewards[row, t]
        batch.token_rewards = moved
        return batch

    monkeypatch.setattr(learner_module, "pad_batch", mutated)


def _value_targets_from_whitened_advantages(monkeypatch: pytest.MonkeyPatch) -> None:
    """PPO's value targets rebuilt as the whitened advantages + the values (``PPO.advantages``), instead
    of the returns GAE computed before whitening."""
    from rlver.train.algorithms.ppo import PPO

    real = PPO.advantages

    def mutated(self: PPO, inputs: Any, settings: Any) -> Any:
        out = real(self, inputs, settings)
        out.returns = (out.advantages + inputs.values) * inputs.mask
        return out

    monkeypatch.setattr(PPO, "advantages", mutated)


PPO_BUGS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "reward-on-first-token": _reward_on_each_turns_first_token,
    "value-targets-from-whitened": _value_targets_from_whitened_advantages,
}


@pytest.mark.parametrize("seed", BUG_SEEDS)
@pytest.mark.parametrize("bug", list(PPO_BUGS))
def test_ppo_credit_and_critic_bugs_fail_the_learning_test(
    bug: str, seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two PPO bugs the criterion used to pass (with margin 0 and no critic check): the reward on the
    wrong token must miss the margin, the wrong value targets the critic's gap (table above)."""
    PPO_BUGS[bug](monkeypatch)
    before, after, history = _learn("ppo", tmp_path, seed)
    print(f"ppo seed {seed}, {bug}: held-out score {before:.1f} -> {after:.1f}; {_summary(history)}")
    assert _not_learned("ppo", before, after, history), f"{bug} still learned: {before:.1f} -> {after:.1f}"


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
    padded batch is built (``rlver.train.batch.collate``), the tokenised episodes left right: wherever a
    micro-batch is collated, the learner's scoring and the update (``rlver.train.update``)."""
    from rlver.train import learner as learner_module
    from rlver.train import update as update_module

    real = learner_module.collate

    def mutated(*args: Any, **kwargs: Any) -> Any:
        mb = real(*args, **kwargs)
        mb.action_mask = torch.roll(mb.action_mask, shifts=shift, dims=1)
        return mb

    for module in (learner_module, update_module):
        monkeypatch.setattr(module, "collate", mutated)


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
    """The advantages forced to 0 where each algorithm computes them: GRPO's where the sign flip changes
    them (``core.group_advantages``), MAPO's as ``MAPO.advantages`` returns them."""
    from rlver.train.algorithms import core
    from rlver.train.algorithms.mapo import MAPO

    real = core.group_advantages

    def zero(*args: object, **kwargs: object) -> torch.Tensor:
        return torch.zeros_like(real(*args, **kwargs))  # type: ignore[arg-type]

    real_mapo = MAPO.advantages

    def zero_mapo(self: MAPO, inputs: Any, settings: Any) -> Any:
        out = real_mapo(self, inputs, settings)
        out.advantages = torch.zeros_like(out.advantages)
        return out

    monkeypatch.setattr(core, "group_advantages", zero)
    monkeypatch.setattr(MAPO, "advantages", zero_mapo)


def _optimiser_step_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gradients computed and clipped, never applied (``Optimisers.step`` does nothing)."""
    from rlver.train.optim import Optimisers

    monkeypatch.setattr(Optimisers, "step", lambda self: None)


DO_NOTHING: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "learning-rate-0": _learning_rate_zero,
    "advantages-0": _advantages_zero,
    "optimiser-step-skipped": _optimiser_step_skipped,
}
#: GRPO with each control; MAPO with the one that reaches its own code (a zero learning rate and a
#: skipped optimiser step act on the optimiser every algorithm shares: measured once on MAPO, the table)
CONTROLS = [*(("grpo", control) for control in DO_NOTHING), ("mapo", "advantages-0")]


@pytest.mark.parametrize("seed", CONTROL_SEEDS)
@pytest.mark.parametrize(("algorithm", "control"), CONTROLS)
# the skipped optimiser step makes torch warn that the schedule stepped first: that is the control
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")
def test_a_trainer_that_does_nothing_fails_the_learning_test(
    algorithm: str, control: str, seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: the criterion must fail a trainer that leaves the weights as they were. Its held-out
    check alone must: the evaluation runs at a fixed seed, so unchanged weights give ``after ==
    before`` exactly, which the strict rise refuses (the training-reward check is a coin flip for a
    trainer that does nothing, so it is not what this test relies on)."""
    DO_NOTHING[control](monkeypatch)
    before, after, history = _learn(algorithm, tmp_path, seed)
    same = "exactly equal" if after == before else "different"
    print(
        f"{algorithm} seed {seed}, {control}: held-out {before:.1f} -> {after:.1f} ({same}); "
        f"{_summary(history)}"
    )
    failures = _not_learned(algorithm, before, after, history)
    assert any(f.startswith("held-out score") for f in failures), (
        f"{control}: the held-out check passed a trainer that does nothing ({before:.1f} -> {after:.1f})"
    )
