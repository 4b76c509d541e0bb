"""Benchmark metrics: leaderboard numbers, trajectory, CIs, paired comparison."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from rlver.eval.metrics import (
    compute_metrics,
    emotion_path,
    paired_comparison,
    round_half_up,
    sign_test_p,
)
from rlver.records import Appraisal, Episode, Message, UserTurn
from rlver.simulator.emotion import tier_of
from rlver.stats import bootstrap_ci


def make_episode(
    pid: str, path: list[int], *, status: str = "finished", sample: int = 0, **meta: object
) -> Episode:
    """An episode whose emotion goes start → path[1] → ... with one appraisal per step."""
    messages = [Message(role="user", content="hi")]
    turns = [UserTurn(text="hi")]
    for before, after in itertools.pairwise(path):
        messages += [Message(role="assistant", content="reply"), Message(role="user", content="answer")]
        turns.append(
            UserTurn(
                text="answer",
                appraisal=Appraisal(
                    raw_change=after - before,
                    change=after - before,
                    emotion_before=before,
                    emotion_after=after,
                    tier=tier_of(after),
                ),
            )
        )
    return Episode(
        profile_id=pid,
        sample_index=sample,
        messages=messages,
        user_turns=turns,
        start_emotion=path[0],
        final_emotion=path[-1],
        emotions=path[1:],
        status=status,  # type: ignore[arg-type]
        error_kind="timeout" if status == "failed" else None,
        policy_tokens=10 * (len(path) - 1),
        meta=dict(meta),
    )


def test_leaderboard_numbers_and_failed_runs_excluded() -> None:
    eps = [
        make_episode("a", [40, 50, 60, 70, 80, 90, 100]),  # success
        make_episode("b", [40, 30, 20, 10, 5]),  # failure
        make_episode("c", [40, 45]),
        make_episode("d", [40, 0], status="failed"),  # excluded from the score
    ]
    m = compute_metrics(eps)
    assert m.n == 3
    assert m.n_failed_runs == 1
    assert m.failed_run_kinds == {"timeout": 1}
    assert m.score == pytest.approx((100 + 5 + 45) / 3)
    assert m.score_rounded == 50.0
    assert (m.success, m.failure) == (1, 1)
    assert m.success_pct == pytest.approx(100 / 3)
    assert m.mean_turns == pytest.approx((6 + 4 + 1) / 3)
    assert m.mean_policy_tokens == pytest.approx((60 + 40 + 10) / 3)
    assert m.final_emotions == [100, 5, 45]


def test_boundaries_success_at_100_failure_below_10() -> None:
    m = compute_metrics(
        [make_episode("a", [40, 99]), make_episode("b", [40, 10]), make_episode("c", [40, 9])]
    )
    assert (m.success, m.failure) == (0, 1)


def test_trajectory_carries_forward_ended_dialogues() -> None:
    eps = [make_episode("a", [40, 50, 60, 70]), make_episode("b", [40, 30])]
    m = compute_metrics(eps)
    # turn 0: both 40; turn 1: 50, 30; turn 2: 60, 30 (carried); turn 3: 70, 30
    assert m.trajectory == pytest.approx([40, 40, 45, 50])
    assert m.trajectory_live == [2, 2, 1, 1]
    assert m.trajectory[-1] == pytest.approx(m.score)


def test_emotion_path_falls_back_to_appraisals() -> None:
    ep = make_episode("a", [40, 47, 52]).model_copy(update={"emotions": []})
    assert emotion_path(ep) == [40, 47, 52]


def test_round_half_up_matches_the_leaderboard() -> None:
    assert round_half_up(Fraction(5475, 100)) == 54.8
    assert round_half_up(Fraction(6265, 100)) == 62.7  # banker's rounding would give 62.6
    assert round_half_up(Fraction(6814, 100)) == 68.1
    assert round_half_up(79.25) == 79.3


def test_bootstrap_ci_is_deterministic_and_brackets_the_mean() -> None:
    values = [0, 100, 50, 60, 70, 20, 100, 5, 45, 80] * 5
    low, high = bootstrap_ci(values)
    assert (low, high) == bootstrap_ci(values)
    mean = sum(values) / len(values)
    assert low < mean < high
    assert high - low < 40
    assert bootstrap_ci([]) == (None, None)  # no data, no interval (and never NaN)


def test_breakdowns_by_behaviour_and_difficulty() -> None:
    eps = [
        make_episode("a", [40, 100], behaviour="cooperative", difficulty="easy"),
        make_episode("b", [40, 5], behaviour="escalating", difficulty="easy"),
        make_episode("c", [40, 60], behaviour="escalating", difficulty="hard"),
    ]
    m = compute_metrics(eps)
    assert set(m.breakdowns) == {"behaviour", "difficulty"}
    esc = m.breakdowns["behaviour"]["escalating"]
    assert (esc.n, esc.score, esc.success, esc.failure) == (2, 32.5, 0, 1)
    assert m.breakdowns["difficulty"]["easy"].success == 1


def test_sign_test_known_values() -> None:
    assert sign_test_p(8, 2) == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert sign_test_p(5, 5) == 1.0
    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(10, 0) == pytest.approx(2 / 1024)


def test_paired_comparison_matches_profiles() -> None:
    a = [make_episode(f"p{i}", [40, 40 + 5 * i]) for i in range(10)]
    b = [make_episode(f"p{i}", [40, 40]) for i in range(9)]  # p9 only in a
    b.append(make_episode("q", [40, 50]))  # only in b
    cmp = paired_comparison(a, b)
    assert cmp.n_pairs == 9
    assert (cmp.only_in_a, cmp.only_in_b) == (1, 1)
    assert (cmp.wins, cmp.ties, cmp.losses) == (8, 1, 0)
    assert cmp.mean_diff == pytest.approx(sum(5 * i for i in range(9)) / 9)
    assert cmp.diff_ci_low <= cmp.mean_diff <= cmp.diff_ci_high
    assert cmp.sign_test_p == pytest.approx(2 / 256)
    # failed dialogues never pair
    c = [make_episode(f"p{i}", [40, 0], status="failed") for i in range(10)]
    assert paired_comparison(a, c).n_pairs == 0
