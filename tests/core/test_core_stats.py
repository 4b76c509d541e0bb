"""The package's one home for statistics (rlver.stats) and for the hashed seed (rlver.seeding).

The figures here are worked out by hand in the comments; the seeds are pinned, because recorded runs
(agent sampling on both engines, calibrate's simulator seeds) were made with them.
"""

from __future__ import annotations

import hashlib

from rlver.seeding import hashed_seed
from rlver.stats import agreement, bootstrap_ci, sign_agreement, spearman


def test_spearman_handles_ties_and_constant_input() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == 1.0
    assert spearman([1, 2, 3], [3, 2, 1]) == -1.0
    assert spearman([1, 1, 2, 2], [1, 1, 2, 2]) == 1.0
    assert spearman([1, 1, 1], [1, 2, 3]) is None  # undefined, never NaN
    assert spearman([1], [1]) is None
    assert spearman([1, 2], [1, 2, 3]) is None  # unequal lengths
    # ranks [1, 2.5, 2.5, 4] and [1, 3, 2, 4]: 4.5 / sqrt(4.5 * 5) = 0.9486833
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == 0.948683


def test_agreement_counts_signs_and_errors_and_rounds_to_the_callers_digits() -> None:
    recorded, predicted = [5, -5, 0, 10], [3, -2, 1, 10]
    # signs agree on 3 of 4 (0 against + does not); |errors| 2, 3, 1, 0
    assert agreement(recorded, predicted) == {"turns": 4, "spearman": 1.0, "sign_agreement": 0.75, "mae": 1.5}
    assert sign_agreement(recorded, predicted) == 0.75
    tied = agreement([1, 2, 2, 3], [1, 3, 2, 4], digits=2)
    assert tied["spearman"] == 0.95 and tied["mae"] == 0.5  # 0.948683 -> 0.95; two errors of 1 in 4
    assert agreement([], []) == {"turns": 0, "spearman": None, "sign_agreement": None, "mae": None}


def test_bootstrap_interval_is_reproducible_and_defined_for_tiny_samples() -> None:
    values = [10.0, 20.0, 30.0, 40.0]
    low, high = bootstrap_ci(values, samples=2_000)
    assert (low, high) == bootstrap_ci(values, samples=2_000)
    assert low is not None and high is not None and 10.0 <= low < 25.0 < high <= 40.0
    assert bootstrap_ci([7.0]) == (7.0, 7.0) and bootstrap_ci([]) == (None, None)


def test_hashed_seed_is_the_31_bit_sha256_of_the_joined_parts() -> None:
    def by_hand(text: str) -> int:
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF

    assert hashed_seed("agent", 1, 10, 1) == by_hand("agent:1:10:1") == 1081310941
    assert hashed_seed(7, "m1_result.jsonl", "d3", 2) == 1526693292  # calibrate's per-turn seed
    assert len({hashed_seed("agent", 1, d, t) for d in range(50) for t in range(5)}) == 250
    assert all(0 <= hashed_seed(i) < 2**31 for i in range(100))
