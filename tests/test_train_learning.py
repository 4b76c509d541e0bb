"""Learning tests: the tiny model, trained against the offline user, gets better on held-out users.

These fail if the policy-gradient sign, the advantage estimator or the assistant masks are wrong: with
the sign flipped the held-out score *falls* over the same steps (`test_the_learning_test_can_fail`
flips it on every run). Fixed seeds make each run deterministic on CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlver.train.config import load_train_config

pytestmark = pytest.mark.slow

STEPS = 10


def _learn(algorithm: str, tmp_path: Path, *extra: str) -> tuple[float, float, list[float]]:
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    config = load_train_config(
        "tiny-offline",
        [
            f"algorithm.name={algorithm}",
            f"run.steps={STEPS}",
            "eval.every=0",
            "eval.at_start=false",
            "run.tensorboard=false",
            "run.progress=false",
            *extra,
        ],
    )
    trainer = Trainer(config, tmp_path)
    before = trainer.evaluate()["score"]
    history = trainer.train()
    after = trainer.eval_history[-1]["score"]
    return before, after, [h["rollout/reward_mean"] for h in history]


# Measured on 2 CPU cores (held-out score, mean final emotion of 16 dialogues, before -> after 10 steps):
#   GRPO 21.2 -> 33.0 (sign flipped: 21.2 -> 17.3); PPO 21.2 -> 27.2 (sign flipped, checked once: 18.4).
# The margins sit well above what a flipped sign or a wrong mask can reach (it lowers the score).
@pytest.mark.parametrize(
    ("algorithm", "margin", "extra"),
    [("grpo", 8.0, ()), ("ppo", 4.0, ("algorithm.minibatches=2",))],
)
def test_reward_rises_on_held_out_users(
    algorithm: str, margin: float, extra: tuple[str, ...], tmp_path: Path
) -> None:
    before, after, rewards = _learn(algorithm, tmp_path, *extra)
    print(f"{algorithm}: held-out score {before:.1f} -> {after:.1f}")
    assert after >= before + margin, f"{algorithm}: held-out score {before:.1f} -> {after:.1f}"
    # the training reward moves the same way
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3, rewards


def test_the_learning_test_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation check of the test above: with the GRPO advantages' sign flipped (a deliberate bug in
    the code under test) the held-out score must not rise by the margin — so a wrong sign fails CI."""
    from rlver.train import algorithms

    real = algorithms.group_advantages

    def flipped(*args: object, **kwargs: object) -> torch.Tensor:
        return -real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(algorithms, "group_advantages", flipped)
    before, after, _ = _learn("grpo", tmp_path)
    print(f"grpo, sign flipped: held-out score {before:.1f} -> {after:.1f}")
    assert after < before + 8.0, f"flipped sign still learned: {before:.1f} -> {after:.1f}"
