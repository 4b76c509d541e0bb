"""Sequence-level TIS over long samples is warned about (issue 42, item 4).

A sequence weight is exp(sum of the row's per-token log-ratios): over the think-full layout's thousands
of tokens the bf16 gap alone spreads that sum far past ln 2, so about half the weights clip at 2 and
many sit near 0. verl 0.9.1 offers no geometric-mean weight (its ``rollout_is`` levels are ``token``
and ``sequence`` only, ``rollout_corr_helper.py:565``; ``seq_mean_k1`` is a rejection filter), so the
warning points to ``token``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from rlver.train.algorithms import core
from rlver.train.algorithms.core import SEQUENCE_IS_LONG_TOKENS, sequence_is_warning


def _mask(action_tokens: int) -> torch.Tensor:
    """Two rows: a short one, and one whose ``action_tokens`` positions are split by a user turn."""
    mask = torch.zeros(2, action_tokens + 40)
    mask[0, 5:15] = 1.0
    mask[1, 10 : 10 + action_tokens // 2] = 1.0
    mask[1, 30 + action_tokens // 2 : 30 + action_tokens] = 1.0
    return mask


def test_the_warning_names_the_setting_the_length_and_the_way_out() -> None:
    longest = SEQUENCE_IS_LONG_TOKENS + 1
    message = sequence_is_warning(_mask(longest), "sequence", 2.0)
    assert message is not None
    assert f"algorithm.rollout_is=sequence with samples of up to {longest} action tokens" in message
    assert "clip at 2" in message and "algorithm.rollout_is=token" in message


def test_no_warning_at_the_bound_for_token_level_or_off() -> None:
    assert sequence_is_warning(_mask(SEQUENCE_IS_LONG_TOKENS), "sequence", 2.0) is None
    long = _mask(4 * SEQUENCE_IS_LONG_TOKENS)
    assert sequence_is_warning(long, "token", 2.0) is None
    assert sequence_is_warning(long, None, 2.0) is None
    assert sequence_is_warning(torch.zeros(0, 0), "sequence", 2.0) is None


@pytest.mark.parametrize("level", ["sequence", "token"])
def test_a_run_warns_once_for_sequence_level_only(
    level: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two real steps of the tiny model (replies of at most 8 tokens, so the bound is lowered to 2):
    the trainer warns at the first update and not again; token-level TIS never warns."""
    from rlver.train.trainer import Trainer
    from test_train_loop import _config

    monkeypatch.setattr(core, "SEQUENCE_IS_LONG_TOKENS", 2)
    torch.manual_seed(0)
    trainer = Trainer(_config("run.steps=2", "eval.every=0", f"algorithm.rollout_is={level}"), tmp_path)
    with caplog.at_level(logging.WARNING, logger="rlver.train.update"):
        trainer.train_step()
        trainer.train_step()
    warned = [r for r in caplog.records if "algorithm.rollout_is=sequence" in r.getMessage()]
    assert len(warned) == (1 if level == "sequence" else 0)
