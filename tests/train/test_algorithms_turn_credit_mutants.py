"""Killing tests for the survivors of ``python bench/mutants.py turncredit``. In CTC-GRPO
(``train/algorithms/ctc_grpo.py``): the outcome's ``grpo_scale_by_std``, a ``groups`` tensor shorter
than the samples refused, the verl refusal's words. In MAPO's ``on_turn_tokens``: a value for a turn the
batch does not hold refused. Each expected number is worked out here."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from rlver.train.algorithms import get_algorithm
from rlver.train.algorithms.ctc_grpo import CTCGRPOSettings
from rlver.train.algorithms.mapo import on_turn_tokens
from test_mapo import _per_turn, _whole_layout

CTC = get_algorithm("ctc_grpo")
#: each dialogue's change per turn, and its user's group: outcomes 0.3, 0.1 (group 0), 0.1, 0.2 (group 1)
TURN_REWARDS = [[0.1, 0.2], [0.3, -0.2], [0.0, 0.1], [0.2]]
GROUPS = [0, 0, 1, 1]


def test_the_outcome_follows_grpo_scale_by_std() -> None:
    """Without the turn credit and unscaled, each turn carries its dialogue's outcome less its group's
    mean outcome: group 0 (0.3, 0.1) +-0.1, group 1 (0.1, 0.2) -+0.05."""
    inputs = _whole_layout(TURN_REWARDS, GROUPS)
    out = CTC.advantages(inputs, CTCGRPOSettings(grpo_scale_by_std=False, ctc_turn_weight=0.0))
    expected = {
        (0, 0): 0.1,
        (0, 1): 0.1,
        (1, 0): -0.1,
        (1, 1): -0.1,
        (2, 0): -0.05,
        (2, 1): -0.05,
        (3, 0): 0.05,
    }
    assert _per_turn(out.advantages, inputs) == pytest.approx(expected, abs=1e-6)


def test_a_groups_tensor_shorter_than_the_samples_is_refused_as_bad_input() -> None:
    """One group id short: a ValueError naming the lengths (zip's), not a KeyError for the dialogue left
    without a group."""
    inputs = _whole_layout(TURN_REWARDS, GROUPS)
    shorter = dataclasses.replace(inputs, groups=inputs.groups[:-1])
    with pytest.raises(ValueError, match="zip"):
        CTC.advantages(shorter, CTCGRPOSettings())


def test_verl_is_refused_with_the_way_to_train_it() -> None:
    (refusal,) = CTC.verl_refusals(CTCGRPOSettings())
    pattern = r"^algorithm\.name=ctc_grpo: .* cannot credit a dialogue's turns apart \(core_algos\); train it with --trainer local$"
    assert re.match(pattern, refusal), refusal


@pytest.mark.parametrize("key", [(4, 0), (0, 2)], ids=["dialogue", "turn"])
def test_a_value_for_a_turn_the_batch_does_not_hold_is_refused(key: tuple[int, int]) -> None:
    """MAPO's table of (dialogue, turn) values is as large as the batch's dialogues and turns (0-3, 0-1
    here): a value for dialogue 4 or turn 2 is an IndexError, not written into a spare row and dropped."""
    inputs = _whole_layout(TURN_REWARDS, GROUPS)
    with pytest.raises(IndexError):
        on_turn_tokens(inputs, [key], torch.tensor([1.0]))
