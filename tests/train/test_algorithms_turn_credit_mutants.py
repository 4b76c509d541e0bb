"""Killing tests for the survivors of ``python bench/mutants.py turncredit``. In CTC-GRPO
(``train/algorithms/ctc_grpo.py``): the outcome's ``grpo_scale_by_std``, a ``groups`` tensor shorter
than the samples refused, the verl refusal's words, the floored-groups count at a std equal to the floor
and for a group of one. In MAPO's ``on_turn_tokens``: a value for a turn the
batch does not hold refused. Each expected number is worked out here."""

from __future__ import annotations

import dataclasses
import re
import warnings

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


def test_a_std_equal_to_the_floor_is_not_counted_as_floored() -> None:
    """Three one-turn dialogues of one group with outcomes 0, 0.5, 1: mean 0.5, unbiased std
    sqrt((0.25 + 0 + 0.25) / 2) = 0.5 exactly (in float32 too), the floor itself. The floor leaves it
    as it is, so the count of groups it replaced is 0, and the advantages are -1, 0, +1 (no turn
    credit: one turn each). A floor of 0.75 replaces it: (o - 0.5) / 0.75, counted once."""
    inputs = _whole_layout([[0.0], [0.5], [1.0]], [0, 0, 0])
    at_floor = CTC.advantages(inputs, CTCGRPOSettings(grpo_eps=1e-12, ctc_std_min=0.5))
    assert _per_turn(at_floor.advantages, inputs) == pytest.approx({(0, 0): -1.0, (1, 0): 0.0, (2, 0): 1.0})
    assert at_floor.stats == {"train/floored_groups": 0.0}
    above = CTC.advantages(inputs, CTCGRPOSettings(grpo_eps=1e-12, ctc_std_min=0.75))
    assert _per_turn(above.advantages, inputs) == pytest.approx({(0, 0): -2 / 3, (1, 0): 0.0, (2, 0): 2 / 3})
    assert above.stats == {"train/floored_groups": 1.0}


def test_a_group_of_one_dialogue_is_not_asked_for_its_std() -> None:
    """Dialogue 2 alone in group 1: it has no std (torch warns, degrees of freedom <= 0, and gives nan),
    so the floored-groups count skips it rather than take one and warn in every step's log. Group 0's
    outcomes 0.3 and 0.1 (std 0.14) are above the floor 0.1: nothing floored."""
    inputs = _whole_layout([[0.1, 0.2], [0.3, -0.2], [0.2, 0.1]], [0, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = CTC.advantages(inputs, CTCGRPOSettings())
    assert out.stats == {"train/floored_groups": 0.0}


@pytest.mark.parametrize("key", [(4, 0), (0, 2)], ids=["dialogue", "turn"])
def test_a_value_for_a_turn_the_batch_does_not_hold_is_refused(key: tuple[int, int]) -> None:
    """MAPO's table of (dialogue, turn) values is as large as the batch's dialogues and turns (0-3, 0-1
    here): a value for dialogue 4 or turn 2 is an IndexError, not written into a spare row and dropped."""
    inputs = _whole_layout(TURN_REWARDS, GROUPS)
    with pytest.raises(IndexError):
        on_turn_tokens(inputs, [key], torch.tensor([1.0]))
