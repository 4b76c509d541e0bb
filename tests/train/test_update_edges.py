"""Two edges of ``PPOUpdate.update`` (``train/update.py``) that no training run meets, each telling apart a
mutant ``bench/mutants.py`` once listed as equivalent: a labelled mutant must be one no input can tell
from the original, and these inputs can. A minibatch whose approximate KL equals ``target_kl`` exactly
does not stop the step (the rule is *passes* it, CleanRL's ``>``); an update of a batch with no samples
takes no optimiser step and logs zero skipped steps (a count, 0.0, not missing). And the counts each
micro-batch divides by, which two survivors of that run changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from rlver.train.learner import Batch
from test_learner_mutants import four, learner, record_minibatch_steps, sample


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_a_minibatch_whose_kl_equals_the_target_does_not_stop_the_step(tmp_path: Path) -> None:
    """One run without a target reads each minibatch's approx_kl (the first runs at ratio 1: 0); the same
    run with the largest of them as its target takes all four updates and does not say it stopped (no
    minibatch passed the target), and one a hair lower stops after the minibatch that had it."""
    sets = ("algorithm.name=grpo", "algorithm.epochs=2")

    def run(target: float | None) -> tuple[dict[str, float], list[dict[str, float]]]:
        lr = learner(tmp_path, *sets, minibatch_samples=2)
        lr.settings = lr.settings.model_copy(update={"target_kl": target})
        seen = record_minibatch_steps(lr)
        return lr.update(lr.score(four()), 1, torch.Generator().manual_seed(0)), seen

    _, seen = run(None)
    kls = [s["train/approx_kl"] for s in seen]
    assert len(kls) == 4 and kls[0] == 0.0 and max(kls) > 0.0
    tie, tie_seen = run(max(kls))
    assert [s["train/approx_kl"] for s in tie_seen] == kls  # the same numbers: the tie is exact
    assert tie["train/minibatch_updates"] == 4.0 and tie["train/early_stopped"] == 0.0
    below, _ = run(max(kls) * (1 - 1e-6))
    assert below["train/minibatch_updates"] == kls.index(max(kls)) + 1 and below["train/early_stopped"] == 1.0


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")
def test_an_update_of_no_samples_takes_no_step_and_counts_no_skips(tmp_path: Path) -> None:
    lr = learner(tmp_path, "algorithm.name=grpo")
    empty = Batch(
        samples=[], mask=torch.zeros(0, 0), token_rewards=torch.zeros(0, 0), scores=torch.zeros(0),
        groups=torch.zeros(0, dtype=torch.long),
    )  # fmt: skip
    stats = lr.update(empty, 1, torch.Generator().manual_seed(0))
    assert stats["train/optimizer_steps"] == 0.0
    assert stats["train/nonfinite_skips"] == 0.0 and isinstance(stats["train/nonfinite_skips"], float)


def test_each_micro_batch_divides_by_the_minibatchs_tokens_and_samples(tmp_path: Path) -> None:
    """The counts every micro-batch's loss divides by: the minibatch's action tokens (on the shifted grid,
    from position 1) and its samples with at least one. A 2-token sample whose one action token is at
    position 1 counts as a sample; with a 9-token one (5 action tokens): 6 tokens, 2 samples."""
    lr = learner(tmp_path, "algorithm.name=grpo", minibatch_samples=2, micro_batch_tokens=16)
    seen: list[tuple[float, float]] = []
    real = lr._micro_batch

    def recorded(b: Batch, group: list[int], counts: tuple[float, float], grid: Any) -> dict[str, float]:
        seen.append(counts)
        return real(b, group, counts, grid)

    lr._micro_batch = recorded  # type: ignore[method-assign]
    lr.update(
        lr.score([sample(2, 1, 1.0, "a", 0), sample(9, 4, 0.0, "a", 1)]), 1, torch.Generator().manual_seed(0)
    )
    assert len(seen) == 2 and set(seen) == {
        (6.0, 2.0)
    }  # two micro-batches (2 x 9 padded > 16), one set of counts
