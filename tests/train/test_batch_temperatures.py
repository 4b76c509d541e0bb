"""The two temperatures of a training run, kept apart: the rollouts sample at ``rollout.temperature`` and
the update scores their tokens at that same temperature; the held-out evaluation samples at
``eval.temperature``. Every other test config sets the two equal, where mixing them up changes nothing.

Both are read off real runs on the tiny model: the sampler records each sampled token's log-prob, and
rescoring those tokens at the temperature that should have produced them must give the same numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers import TINY_TRAIN_SETS
from rlver.train.batch import collate, policy_forward
from rlver.train.config import load_train_config
from rlver.train.grid import sampled_logprobs
from rlver.train.learner import make_samples

#: rollouts at 1.0 and the evaluation at 0.5: a log-prob at one temperature is far from the other's
TEMPERATURES = (
    "rollout.temperature=1.0",
    "eval.temperature=0.5",
    "eval.limit=2",
    "eval.samples_per_profile=2",
)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _trainer(tmp_path: Path):  # type: ignore[no-untyped-def]
    from rlver.train.trainer import Trainer

    return Trainer(
        load_train_config("tiny-offline", [*TINY_TRAIN_SETS, *TEMPERATURES, "run.steps=1"]), tmp_path
    )


def test_the_update_scores_the_rollout_at_the_rollout_temperature(tmp_path: Path) -> None:
    """``rollout/logprob_diff_max`` compares the log-prob each trained token was sampled with (at 1.0)
    with the one the loss uses: scoring at the evaluation's 0.5 would put it near a nat, not at 0."""
    metrics = _trainer(tmp_path).train_step()
    assert metrics["rollout/logprob_diff_max"] < 1e-4, metrics["rollout/logprob_diff_max"]


def test_the_held_out_evaluation_samples_at_the_eval_temperature(tmp_path: Path) -> None:
    """The held-out dialogues' replies, rescored by the policy at ``eval.temperature`` (0.5), carry the
    log-probs the sampler recorded: they were drawn from softmax(logits / 0.5), not at the rollouts' 1.0."""
    trainer = _trainer(tmp_path)
    episodes = trainer.evaluate_episodes()
    samples, dropped = make_samples(
        episodes, trainer.tokenizer, trainer.cfg.rollout, trainer.cfg.model.max_length
    )
    assert len(samples) == 4 and dropped == 0
    seqs = [s.seq for s in samples]
    mb = collate(seqs, range(len(seqs)), int(trainer.tokenizer.pad_token_id), trainer.device)
    with torch.no_grad():
        at_eval, _ = policy_forward(trainer.policy, mb, 0.5)
        at_rollout, _ = policy_forward(trainer.policy, mb, 1.0)
    recorded = sampled_logprobs(mb, seqs)
    known = ~torch.isnan(recorded) & (mb.action_mask > 0)
    assert int(known.sum()) >= 8
    assert (at_eval[known] - recorded[known]).abs().max() < 1e-4
    assert (at_rollout[known] - recorded[known]).abs().max() > 1e-2  # the check can tell the two apart
