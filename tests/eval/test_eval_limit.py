"""``--limit`` is a bound, as ``head -n`` is: a limit past the set's size evaluates the whole set and
says so in one warning, so a run meant to be larger is not taken for one."""

from __future__ import annotations

import warnings

import pytest

from rlver.eval.config import EvalConfig
from rlver.eval.runner import select_profiles
from rlver.profiles.sets import load_profile_set


def test_a_limit_past_the_set_evaluates_all_and_says_so() -> None:
    size = len(load_profile_set("bundled-test"))
    with pytest.warns(UserWarning) as caught:
        chosen = select_profiles(EvalConfig(profiles="bundled-test", limit=size + 489, agent_tiny=True))
    assert len(chosen) == size
    assert [str(w.message) for w in caught] == [
        f"--limit {size + 489}: bundled-test holds {size} profiles; all {size} are evaluated"
    ]


@pytest.mark.parametrize("extra", [0, -1])
def test_a_limit_within_the_set_is_silent(extra: int) -> None:
    size = len(load_profile_set("bundled-test"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chosen = select_profiles(EvalConfig(profiles="bundled-test", limit=size + extra, agent_tiny=True))
    assert len(chosen) == size + extra
