"""The report's figures, drawn as SVG text with pygal (:mod:`rlver.charts`).

SVG text (not files) so the HTML report can inline each figure and stay one self-contained file,
while the Markdown report writes the same text next to itself. Every figure is static: no script, no
address outside the file. Run names and profile ids are drawn by the viewer's fonts, so Chinese text
renders wherever a CJK font is installed (the charts' font list names the common ones).

Reference lines (the success and failure marks, the reward-hacking threshold and its first crossing)
are drawn as two-point series with a dash, so each is named in the legend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pygal

from rlver.charts import (
    DASHED,
    DOTTED,
    FAILURE_COLOR,
    SUCCESS_COLOR,
    WARNING_COLOR,
    chart,
    integer_ticks,
    palette_color,
    render,
)
from rlver.eval.judge import CAPABILITIES, CAPABILITY_LABELS, JudgeSummary
from rlver.eval.metrics import Metrics
from rlver.records import FAILURE_BELOW, SUCCESS_AT

#: Final-emotion bins of the histogram: tens, and a last bin that holds exactly 100 (a success).
HISTOGRAM_BINS = (*range(0, 100, 10), 100)


def _label(name: str, limit: int = 40) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _level(y: float, x_from: float, x_to: float) -> list[tuple[float, float]]:
    """A horizontal reference line, as a two-point series."""
    return [(x_from, y), (x_to, y)]


def trajectory_svg(runs: Sequence[tuple[str, Metrics]]) -> str:
    """Mean emotion per turn with an interquartile band; ended dialogues carried forward."""
    last = max(1, max((len(m.trajectory) for _, m in runs), default=1) - 1)
    fig = chart(
        pygal.XY,
        title="Emotion trajectory (mean, band = 25th–75th percentile)",
        # each run's band and its mean in the run's colour, then the two outcome marks
        colors=[
            *(palette_color(i) for i in range(len(runs)) for _ in ("band", "mean")),
            SUCCESS_COLOR,
            FAILURE_COLOR,
        ],
        opacity=0.15,
        x_title="turn (0 = start; after k appraisals)",
        y_title="emotion",
        range=(0, 105),
        xrange=(0, last),
        x_labels=integer_ticks(0, last),
        y_labels=[0, 20, 40, 60, 80, 100],
        dots_size=2.5,
    )
    for name, m in runs:
        turns = range(len(m.trajectory))
        # the band: along the 75th percentile and back along the 25th, filled (pygal closes the path
        # through y=0 at the first turn, a line of no width)
        band = [
            *zip(turns, m.trajectory_p75, strict=True),
            *reversed(list(zip(turns, m.trajectory_p25, strict=True))),
        ]
        fig.add(f"{_label(name)} (25th–75th)", band, fill=True, show_dots=False, stroke_style={"width": 0})
        fig.add(_label(name), list(zip(turns, m.trajectory, strict=True)))
    fig.add(f"success (≥ {SUCCESS_AT})", _level(SUCCESS_AT, 0, last), show_dots=False, stroke_style=DASHED)
    fig.add(
        f"failure (< {FAILURE_BELOW})", _level(FAILURE_BELOW, 0, last), show_dots=False, stroke_style=DASHED
    )
    return render(fig)


def histogram_counts(final_emotions: Sequence[float]) -> list[int]:
    """How many of ``final_emotions`` fall in each bin of :data:`HISTOGRAM_BINS` (0–9, ..., 90–99, 100)."""
    counts = [0] * len(HISTOGRAM_BINS)
    for e in final_emotions:
        if 0 <= e <= 100:
            counts[min(int(e // 10), len(HISTOGRAM_BINS) - 1)] += 1
    return counts


def histogram_svg(runs: Sequence[tuple[str, Metrics]]) -> str:
    """Final emotions in bins of 10; the last bin holds exactly 100 (a success)."""
    per_run = [histogram_counts(m.final_emotions) for _, m in runs]
    fig = chart(
        pygal.Bar,
        title="Final emotion",
        colors=[palette_color(i) for i in range(len(runs))],
        x_title="final emotion",
        y_title="dialogues",
        x_labels=[f"{b}–{b + 9}" if b < 100 else "100" for b in HISTOGRAM_BINS],
        y_labels=integer_ticks(0, max((max(c) for c in per_run), default=1), most=8),
        show_x_guides=False,
        height=380,
    )
    for (name, _), counts in zip(runs, per_run, strict=True):
        fig.add(_label(name), counts)
    return render(fig)


def outcome_bars_svg(runs: Sequence[tuple[str, Metrics]]) -> str:
    """Success (≥ 100) and failure (< 10) rates per run."""
    fig = chart(
        pygal.HorizontalBar,
        title="Success and failure per run",
        colors=[SUCCESS_COLOR, FAILURE_COLOR],
        x_title="% of dialogues",
        range=(0, 100),
        y_labels=[0, 20, 40, 60, 80, 100],
        # pygal draws the first label at the bottom: reversed, the first run is on top
        x_labels=[_label(n, 30) for n, _ in reversed(runs)],
        print_values=True,
        formatter=lambda v: f"{v:.0f}%",
        height=150 + 56 * max(1, len(runs)),
        show_x_guides=False,
    )
    fig.add(f"success % (final ≥ {SUCCESS_AT})", [m.success_pct for _, m in reversed(runs)])
    fig.add(f"failure % (final < {FAILURE_BELOW})", [m.failure_pct for _, m in reversed(runs)])
    return render(fig)


def radar_svg(summaries: Sequence[JudgeSummary]) -> str:
    """The five capabilities (mean judge score 1–5) per run on a radar chart."""
    fig = chart(
        pygal.Radar,
        title="Capabilities (LLM judge, 1–5)",
        colors=[palette_color(i) for i in range(len(summaries))],
        opacity=0.12,
        x_labels=[CAPABILITY_LABELS[c] for c in CAPABILITIES],
        range=(0, 5),
        y_labels=[1, 2, 3, 4, 5],
        fill=True,
        width=620,
        # pygal stretches a radar to its plot's box: as tall as wide, whatever the legend's rows
        height=640 + 18 * -(-len(summaries) // 2),
    )
    for s in summaries:
        values = [v if _finite(v := s.capabilities.get(c)) else 0.0 for c in CAPABILITIES]
        fig.add(_label(s.run), values)
    return render(fig)


def coordinate_svg(summaries: Sequence[JudgeSummary]) -> str:
    """Each run on the social cognition coordinate: empathy↔solution (x), structured↔creative (y)."""
    placed = [(i, s) for i, s in enumerate(summaries) if _finite(s.orientation) and _finite(s.style)]
    ticks = [-1, -0.5, 0, 0.5, 1]
    fig = chart(
        pygal.XY,
        title="Social cognition coordinate",
        colors=[palette_color(i) for i, _ in placed],
        stroke=False,
        dots_size=6,
        x_title="← empathy-oriented      solution-oriented →",
        y_title="← structured      creative →",
        range=(-1.05, 1.05),
        xrange=(-1.05, 1.05),
        x_labels=ticks,
        y_labels=ticks,
        x_labels_major=[0],
        y_labels_major=[0],
        major_guides=True,  # the axes through 0
        print_labels=True,
        margin_right=120,  # a label beside a point at the right edge
        width=620,
        height=560,
    )
    for _, s in placed:
        name = _label(s.run, 24)
        fig.add(name, [{"value": (s.orientation, s.style), "label": name}])
    return render(fig)


def hacking_mark(
    history: Sequence[dict[str, Any]], low: float, high: float
) -> tuple[str, list[tuple[float, float]]] | None:
    """The first step where a ``hack/*`` rate (:mod:`rlver.rollout.hackwatch`) passed its threshold, as
    a vertical line from ``low`` to ``high`` and its legend text: a reward that rises from there on may
    be the simulator being gamed. None when no rate crossed."""
    from rlver.rollout.hackwatch import HACK_THRESHOLD, first_crossing

    crossing = first_crossing(history)
    if crossing is None:
        return None
    step, key = crossing
    return f"{key.removeprefix('hack/')} > {HACK_THRESHOLD:.0%} from step {step}", [(step, low), (step, high)]


def smoothed(values: Sequence[float], k: int = 5) -> list[float]:
    """The trailing mean of up to ``k`` values at each position."""
    return [sum(values[max(0, i - k + 1) : i + 1]) / min(k, i + 1) for i in range(len(values))]


def reward_curve_svg(
    history: Sequence[dict[str, Any]], evals: Sequence[dict[str, Any]], protocol: str | None = None
) -> str:
    """A training run's reward per step (raw and a 5-step mean) with its held-out scores on top.

    ``history`` holds the trainer's metrics rows that have ``rollout/reward_mean`` (reward in [0, 1],
    drawn x 100 to share the axis with the score); ``evals`` holds ``{"step", "score"}`` points.
    ``protocol`` (``rlver.env.dialogue.protocol_label``) goes into the held-out legend, so the curve
    is never read as benchmark scores when it was measured on the training dialogue.
    """
    steps = [h["step"] for h in history]
    rewards = [100 * h["rollout/reward_mean"] for h in history]
    points = [(e["step"], e["score"]) for e in evals if e.get("score") is not None]
    k = 5
    series: list[tuple[str, list[tuple[float, float]], dict[str, Any]]] = [
        ("training dialogues", list(zip(steps, rewards, strict=True)), {"stroke_style": {"width": 1.2}})
    ]
    colors = ["#a5bbd3"]  # the curve's blue, pale: the raw reward sits behind its mean
    if len(rewards) >= k:
        series.append((f"training ({k}-step mean)", list(zip(steps, smoothed(rewards, k), strict=True)), {}))
        colors.append("#4c78a8")
    if points:
        label = f"held-out score ({protocol})" if protocol else "held-out score"
        series.append((label, points, {"dots_size": 3.5}))
        colors.append("#e45756")
    ys = [*rewards, *(y for _, y in points)]
    mark = hacking_mark(history, min(ys), max(ys)) if ys else None
    if mark is not None:
        series.append((mark[0], mark[1], {"show_dots": False, "stroke_style": DASHED}))
        colors.append(WARNING_COLOR)
    xs = [x for _, values, _ in series for x, _ in values]
    fig = chart(
        pygal.XY,
        title="Reward curve",
        colors=colors,
        x_title="RL step",
        y_title="final emotion (reward x 100)",
        x_labels=integer_ticks(min(xs, default=0), max(xs, default=1)),
        dots_size=1.5,
        height=420,
    )
    for name, values, options in series:
        fig.add(name, values, **options)
    return render(fig)


def hack_rates_svg(history: Sequence[dict[str, Any]]) -> str | None:
    """The ``hack/*`` rates of a training run per step (``rlver.rollout.hackwatch``), in % of replies.

    The watched rates are always drawn; a single flag's rate only when it was ever above zero, so the
    legend names what happened. None when no row holds a ``hack/`` rate (a run from before the watch).
    """
    from rlver.rollout.hackwatch import HACK_THRESHOLD, WATCHED

    rows = [h for h in history if any(k.startswith("hack/") for k in h)]
    if not rows:
        return None
    seen = {
        k
        for h in rows
        for k, v in h.items()
        if k.startswith("hack/") and isinstance(v, int | float) and v > 0
    }
    # reply_chars_mean is a length, not a share; wrong_language is language_mismatch_rate again
    flags = sorted(seen - {"hack/reply_chars_mean", "hack/wrong_language", *WATCHED})
    keys = [*WATCHED, *flags]
    steps = [h["step"] for h in rows]
    fig = chart(
        pygal.XY,
        title="Reward-hacking watch: replies that trip a veto",
        colors=[*(palette_color(i) for i in range(len(keys))), WARNING_COLOR],
        x_title="RL step",
        y_title="% of the step's replies",
        range=(-2, 102),
        y_labels=[0, 20, 40, 60, 80, 100],
        x_labels=integer_ticks(min(steps), max(steps)),
        allow_interruptions=True,
        dots_size=1.5,
        height=400,
    )
    for key in keys:
        values = [(h["step"], 100 * v if isinstance(v := h.get(key), int | float) else None) for h in rows]
        fig.add(key.removeprefix("hack/"), values, stroke_style=None if key in WATCHED else DOTTED)
    fig.add(
        f"{HACK_THRESHOLD:.0%} mark",
        _level(100 * HACK_THRESHOLD, min(steps), max(steps)),
        show_dots=False,
        stroke_style=DASHED,
    )
    return render(fig)
