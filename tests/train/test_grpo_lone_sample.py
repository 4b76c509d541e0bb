"""A GRPO group of one sample gets verl 0.9.1's advantage by default, or 0 as an option (issue 42, item 4).

verl (``verl/trainer/ppo/core_algos.py:315-317``, ``compute_grpo_outcome_advantage``) gives a group of
one mean 0 and std 1, so its advantage is ``score / (1 + eps)`` (``score`` without the std division).
``algorithm.grpo_lone_sample: zero`` gives it 0 (no baseline to compare with) on the local engine and
is refused under ``--trainer verl``. The figures were computed with verl 0.9.1's own function on these
inputs (three samples, groups a, a, b; scores 0.7, 0.2, 0.9): 0.7071, −0.7071, 0.9000 with the std
division and 0.25, −0.25, 0.9 without.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlver.errors import ConfigError
from rlver.integrations.verl.config import refuse_unsupported
from rlver.integrations.verl.launch import load_verl_config
from rlver.train.algorithms import get_algorithm
from rlver.train.algorithms.base import AdvantageInputs
from rlver.train.algorithms.core import group_advantages
from rlver.train.algorithms.grpo import GRPO, GRPOSettings

SCORES = torch.tensor([0.7, 0.2, 0.9])
GROUPS = torch.tensor([0, 0, 1])


def test_a_lone_sample_gets_verls_raw_score_or_zero() -> None:
    raw = group_advantages(SCORES, GROUPS, eps=1e-6, lone="raw")
    assert raw.tolist() == pytest.approx([0.70711, -0.70711, 0.9 / (1 + 1e-6)], abs=1e-5)
    # divided by (std 1 + eps), as verl: visible with a large eps
    assert group_advantages(SCORES, GROUPS, eps=0.5, lone="raw")[2].item() == pytest.approx(0.6)
    unscaled = group_advantages(SCORES, GROUPS, scale=False, lone="raw")
    assert unscaled.tolist() == pytest.approx([0.25, -0.25, 0.9])
    assert group_advantages(SCORES, GROUPS, lone="zero")[2].item() == 0.0


def _inputs() -> AdvantageInputs:
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    return AdvantageInputs(mask=mask, token_rewards=torch.zeros_like(mask), scores=SCORES, groups=GROUPS)


def test_grpo_defaults_to_verls_choice_and_the_option_gives_zero() -> None:
    assert GRPOSettings().grpo_lone_sample == "raw"
    grpo = get_algorithm("grpo")
    default = grpo.advantages(_inputs(), GRPOSettings())
    assert default.advantages[2].tolist() == pytest.approx([0.0, 0.0, 0.9], abs=1e-5)
    assert default.stats["train/flat_groups"] == 0.0
    zero = grpo.advantages(_inputs(), GRPOSettings(grpo_lone_sample="zero"))
    assert zero.advantages[2].abs().sum().item() == 0.0 and zero.stats["train/flat_groups"] == 1.0
    assert default.advantages[:2].tolist() == zero.advantages[:2].tolist()  # groups of two: unchanged


def test_zero_is_refused_under_verl_and_raw_is_not(tmp_path: Path) -> None:
    assert GRPO().verl_refusals(GRPOSettings()) == []
    args = [f"verl.out_dir={tmp_path / 'verl'}", "algorithm.grpo_lone_sample=zero"]
    with pytest.raises(ConfigError, match=r"algorithm\.grpo_lone_sample=zero: verl 0\.9\.1 gives a group"):
        refuse_unsupported(load_verl_config("tiny-offline", args))
    refuse_unsupported(load_verl_config("tiny-offline", args[:1]))
