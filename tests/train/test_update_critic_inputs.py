"""The critic's micro-batch in ``train/update.py`` (``ValueCritic.backward``) reaches the value loss with
each input where it belongs: its values now, the values at scoring time (the clip's reference), the
returns, the token count and the sample count. Killing tests for the survivors of
``python bench/mutants.py update`` that swapped or dropped one of them (the trainer-level tests see a
positive value loss either way). The expected numbers are the value loss worked out here, by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlver.train.batch import collate, value_forward
from rlver.train.learner import pad_batch
from rlver.train.update import ValueCritic
from test_learner_mutants import four, learner

#: counts unlike the batch's own (19 action tokens, 4 rows), so that each is seen to be used
TOKENS, SAMPLES = 50.0, 7.0
CLIP = 0.2


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_the_value_loss_takes_each_input_in_its_place(tmp_path: Path) -> None:
    """Under ``seq-mean-token-sum`` the loss divides by the sample count and the clip fraction by the token
    count; the clip binds on most tokens (the old values are far from the critic's), so the values at
    scoring time and the returns each change the number."""
    lr = learner(
        tmp_path,
        "algorithm.name=ppo",
        "algorithm.loss_agg_mode=seq-mean-token-sum",
        f"algorithm.value_clip={CLIP}",
    )
    assert isinstance(lr.critic, ValueCritic)
    b = pad_batch(four())
    gen = torch.Generator().manual_seed(3)
    b.scored["values"] = torch.randn(b.mask.shape, generator=gen) * b.mask
    b.returns = (torch.randn(b.mask.shape, generator=gen) + 1.0) * b.mask
    mb = collate(b.seqs, [0, 1, 2, 3], lr.parts.pad_id, lr.parts.device)
    stats = lr.critic.backward(mb, (TOKENS, SAMPLES), b)

    mask = mb.action_mask
    with torch.no_grad():
        now = value_forward(lr.critic.model, mb)
    old, ret = b.values[:, : mask.shape[1]], b.returns[:, : mask.shape[1]]
    clipped = torch.minimum(torch.maximum(now, old - CLIP), old + CLIP)
    err, err_clipped = (now - ret) ** 2, (clipped - ret) ** 2
    loss = float((0.5 * torch.maximum(err, err_clipped) * mask).sum()) / SAMPLES
    fraction = float(((err_clipped > err).float() * mask).sum()) / TOKENS
    assert 0.1 < fraction * TOKENS / float(mask.sum()) < 1.0  # the clip binds, not everywhere
    assert stats == {
        "value_loss": pytest.approx(loss, rel=1e-5),
        "value_clip_fraction": pytest.approx(fraction),
    }


@pytest.mark.parametrize("missing", ["values", "returns"])
def test_a_batch_without_values_or_returns_is_refused_by_name(tmp_path: Path, missing: str) -> None:
    """A critic's micro-batch needs both the scored values and the returns; either one missing is the
    caller's error, named, not a TypeError from inside the loss."""
    lr = learner(tmp_path, "algorithm.name=ppo")
    assert isinstance(lr.critic, ValueCritic)
    b = pad_batch(four())
    b.scored["values"] = torch.zeros(b.mask.shape)
    b.returns = torch.zeros(b.mask.shape)
    if missing == "values":
        del b.scored["values"]
    else:
        b.returns = None
    mb = collate(b.seqs, [0, 1], lr.parts.pad_id, lr.parts.device)
    with pytest.raises(AssertionError, match=r"^scored and advantaged with a critic$"):
        lr.critic.backward(mb, (TOKENS, SAMPLES), b)
