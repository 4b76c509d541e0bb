"""The package's statistics, written once: rank correlation, agreement of predicted with recorded
changes, and the bootstrap interval of a mean.

Numpy only, and strict JSON out: a figure that is undefined (fewer than two values, a constant
series) is ``None``, never NaN. The calibration of a simulator (:mod:`rlver.fidelity`), the fit of the
learned appraisal and the benchmark's metrics (:mod:`rlver.eval.metrics`) all read these, so a
Spearman in one report means what it means in another.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Resamples of the bootstrap interval (the benchmark's confidence interval of the score).
BOOTSTRAP_SAMPLES = 10_000
#: Fixed bootstrap seed: the same run always gets the same interval.
BOOTSTRAP_SEED = 20250701


def ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x``, ties sharing their average rank (what Spearman's rho needs)."""
    order = np.argsort(x, kind="mergesort")
    out = np.empty(len(x), dtype=float)
    sx = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sx[j + 1] == sx[i]:
            j += 1
        out[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation (6 decimals) with average ranks for ties; ``None`` if undefined."""
    if len(a) != len(b) or len(a) < 2:
        return None
    ra, rb = ranks(np.asarray(a, dtype=float)), ranks(np.asarray(b, dtype=float))
    if ra.std() == 0 or rb.std() == 0:
        return None
    value = float(np.corrcoef(ra, rb)[0, 1])
    return round(value, 6) if math.isfinite(value) else None


def sign_agreement(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Share of turns whose two changes have the same sign (0 counts as a sign of its own)."""
    return float(np.mean(np.sign(np.asarray(a, dtype=float)) == np.sign(np.asarray(b, dtype=float))))


def agreement(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, digits: int = 6
) -> dict[str, Any]:
    """Turns, per-turn Spearman, sign agreement and mean absolute error of two series of changes
    (recorded and predicted, either order), rounded to ``digits``.

    All three are symmetric in theory; the Spearman's last bit can follow the order (numpy divides by
    the two spreads in turn), so each caller keeps the order its published figures were made with.
    The Spearman is rounded to 6 decimals first (:func:`spearman`), then to ``digits``.
    """
    n = len(a)
    if n == 0:
        return {"turns": 0, "spearman": None, "sign_agreement": None, "mae": None}
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rho = spearman(list(x), list(y))
    return {
        "turns": n,
        "spearman": None if rho is None else round(rho, digits),
        "sign_agreement": round(sign_agreement(x, y), digits),
        "mae": round(float(np.mean(np.abs(x - y))), digits),
    }


def bootstrap_ci(
    values: Sequence[float],
    *,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> tuple[float, float] | tuple[None, None]:
    """Percentile bootstrap interval of the mean. Fixed seed: the same run always gets the same interval.

    No values give ``(None, None)``: there is no interval (and NaN is not valid JSON).
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return (None, None)
    if arr.size == 1:
        return (float(arr[0]), float(arr[0]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(samples, arr.size))
    means = arr[idx].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(low), float(high))
