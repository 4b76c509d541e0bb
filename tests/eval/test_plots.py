"""The report's figures (rlver.eval.plots) read back from their SVG: each shows its series, named in the
legend, with marks where the numbers put them; every figure is static, whole and keeps Chinese text."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rlver.charts import FAILURE_COLOR, SUCCESS_COLOR
from rlver.eval import plots
from rlver.eval.judge import CAPABILITIES, CAPABILITY_LABELS, JudgeSummary
from rlver.eval.metrics import Metrics, compute_metrics
from svg_check import SvgFigure, read_figure
from test_report import _chromium, make_episode, screenshot

BASE = "基线 baseline"  # Chinese run names are drawn as text, for the viewer's fonts
TRAINED = "trained <script>alert(1)</script>"  # and markup in a run name stays text


def _runs() -> list[tuple[str, Metrics]]:
    base = [make_episode("p1", [10, -5]), make_episode("p2", [-20, -20]), make_episode("p3", [60])]
    trained = [make_episode("p1", [30, 30]), make_episode("p2", [5]), make_episode("p3", [-40])]
    return [(BASE, compute_metrics(base)), (TRAINED, compute_metrics(trained))]


def _ys(points: list[tuple[float, float]]) -> list[float]:
    return [y for _, y in points]


def _judged(
    run: str, scores: list[float | None], orientation: float | None, style: float | None
) -> JudgeSummary:
    return JudgeSummary(
        run=run, judge_model="judge", n_judged=3, n_errors=0,
        capabilities=dict(zip(CAPABILITIES, scores, strict=True)), capability_std={},
        orientation=orientation, style=style,
    )  # fmt: skip


def test_trajectory_draws_each_runs_mean_inside_its_band_and_the_outcome_marks() -> None:
    runs = _runs()
    fig = read_figure(plots.trajectory_svg(runs))
    assert fig.title.startswith("Emotion trajectory") and fig.axis_titles[1] == "emotion"
    assert fig.legend == [
        f"{BASE} (25th–75th)",
        BASE,
        f"{TRAINED} (25th–75th)",
        TRAINED,
        "success (≥ 100)",
        "failure (< 10)",
    ]
    for name, m in runs:
        (line,) = fig.named(name).lines
        assert len(line) == len(m.trajectory) == len(fig.named(name).dots)
        # SVG's y grows downwards: a higher mean emotion is drawn higher, in proportion
        span = (line[0][1] - line[-1][1]) / (m.trajectory[-1] - m.trajectory[0])
        for (_, y), value in zip(line, m.trajectory, strict=True):
            assert y == pytest.approx(line[0][1] - span * (value - m.trajectory[0]), abs=0.01)
        (band,) = fig.named(f"{name} (25th–75th)").lines
        upper, lower = band[1 : 1 + len(line)], band[1 + len(line) : -1][::-1]
        for (_, y), (_, hi), (_, lo) in zip(line, upper, lower, strict=True):
            assert hi - 0.01 <= y <= lo + 0.01  # the mean lies between its 75th and 25th percentiles
    # a run's band and mean share its colour; runs differ; success is green, failure red
    assert [fig.color(f"{name} (25th–75th)") == fig.color(name) for name, _ in runs] == [True, True]
    assert fig.color(BASE) != fig.color(TRAINED)
    assert (fig.color("success (≥ 100)"), fig.color("failure (< 10)")) == (SUCCESS_COLOR, FAILURE_COLOR)
    success, failure = fig.named("success (≥ 100)").lines[0], fig.named("failure (< 10)").lines[0]
    assert len(set(_ys(success))) == 1 and len(set(_ys(failure))) == 1 and success[0][1] < failure[0][1]


def test_histogram_bars_hold_each_runs_counts_per_bin() -> None:
    assert plots.histogram_counts([0, 9.9, 10, 55, 99, 100, 100]) == [2, 1, 0, 0, 0, 1, 0, 0, 0, 1, 2]
    runs = _runs()
    fig = read_figure(plots.histogram_svg(runs))
    assert fig.legend == [BASE, TRAINED] and fig.axis_titles == ["final emotion", "dialogues"]
    assert "0–9" in fig.axis_labels and "100" in fig.axis_labels
    heights = {name: [h for *_, h in fig.named(name).bars] for name, _ in runs}
    per_dialogue = max(h for hs in heights.values() for h in hs) / max(
        max(plots.histogram_counts(m.final_emotions)) for _, m in runs
    )
    for name, m in runs:
        counts = plots.histogram_counts(m.final_emotions)
        assert heights[name] == pytest.approx([c * per_dialogue for c in counts], abs=0.01)


def test_outcome_bars_print_each_runs_rates_with_the_first_run_on_top() -> None:
    runs = _runs()
    fig = read_figure(plots.outcome_bars_svg(runs))
    assert fig.legend == ["success % (final ≥ 100)", "failure % (final < 10)"]
    success, failure = fig.named(fig.legend[0]), fig.named(fig.legend[1])
    # pygal draws from the bottom up: runs come reversed, so the first run's bars are on top
    assert success.values == [f"{m.success_pct:.0f}%" for _, m in reversed(runs)]
    assert failure.values == [f"{m.failure_pct:.0f}%" for _, m in reversed(runs)]
    assert success.bars[-1][1] < success.bars[0][1] and failure.bars[-1][1] < failure.bars[0][1]
    full = success.bars[0][2] / (runs[-1][1].success_pct / 100)  # a bar's length for 100%
    for bars, rates in ((success.bars, [m.success_pct for _, m in reversed(runs)]),
                        (failure.bars, [m.failure_pct for _, m in reversed(runs)])):  # fmt: skip
        assert [w for _, _, w, _ in bars] == pytest.approx([full * r / 100 for r in rates], abs=0.01)
    assert BASE in fig.axis_labels and "trained <script>alert(1)</scr…" in fig.axis_labels  # cut at 30


def test_radar_has_five_spokes_per_run_and_draws_a_missing_score_at_the_centre() -> None:
    judges = [_judged(BASE, [4, 4, 4, 4, 4], 0.1, 0.1), _judged(TRAINED, [5, math.nan, None, 2, 1], 0.2, 0.2)]
    svg = plots.radar_svg(judges)
    fig = read_figure(svg)
    assert fig.legend == [BASE, TRAINED] and fig.title == "Capabilities (LLM judge, 1–5)"
    assert all(CAPABILITY_LABELS[c] in fig.axis_labels for c in CAPABILITIES)
    (even,) = fig.named(BASE).lines
    (uneven,) = fig.named(TRAINED).lines
    assert len(even) == len(uneven) == 5
    centre = (sum(x for x, _ in even) / 5, sum(y for _, y in even) / 5)
    at_4 = [math.dist(p, centre) for p in even]
    assert max(at_4) / min(at_4) == pytest.approx(1, abs=0.03)  # round, not stretched to the box
    # spoke by spoke, the distance from the centre is the score; NaN and None at the centre
    ratios = [math.dist(p, centre) / r for p, r in zip(uneven, at_4, strict=True)]
    assert ratios == pytest.approx([5 / 4, 0, 0, 2 / 4, 1 / 4], abs=0.01)


def test_coordinate_places_and_names_each_judged_run_and_skips_one_without_a_position() -> None:
    judges = [
        _judged(BASE, [3] * 5, -0.5, 0.5), _judged("trained", [3] * 5, 0.5, -0.5),
        _judged("x", [3] * 5, None, 0.1), _judged("y", [3] * 5, math.nan, 0.1),
    ]  # fmt: skip
    fig = read_figure(plots.coordinate_svg(judges))
    assert fig.legend == [BASE, "trained"]
    (left,) = fig.named(BASE).dots
    (right,) = fig.named("trained").dots
    assert left[0] < right[0] and left[1] < right[1]  # empathy-oriented and creative: left and up
    assert fig.named(BASE).values == [BASE]
    assert fig.axis_titles == ["← empathy-oriented      solution-oriented →", "← structured      creative →"]


def _history(crossing_at: int | None) -> list[dict[str, float]]:
    rows = []
    for s in range(1, 9):
        veto = 0.3 if crossing_at is not None and s >= crossing_at else 0.05
        rows.append({"step": s, "rollout/reward_mean": 0.2 + 0.02 * s, "hack/veto_rate": veto})
    return rows


def test_reward_curve_draws_the_reward_its_mean_the_held_out_scores_and_the_first_hacking_step() -> None:
    history = _history(crossing_at=5)
    evals = [{"step": 0, "score": 30.0}, {"step": 4, "score": None}, {"step": 8, "score": 45.0}]
    fig = read_figure(plots.reward_curve_svg(history, evals, "the training protocol"))
    assert fig.legend == [
        "training dialogues", "training (5-step mean)", "held-out score (the training protocol)",
        "veto_rate > 20% from step 5",
    ]  # fmt: skip
    (raw,) = fig.named("training dialogues").lines
    (mean,) = fig.named("training (5-step mean)").lines
    assert (
        len(raw) == len(mean) == 8 and len(fig.named(fig.legend[2]).dots) == 2
    )  # the None score is left out
    assert _ys(raw)[0] == pytest.approx(_ys(mean)[0]) and _ys(raw)[-1] < _ys(mean)[-1]  # a mean lags a rise
    (mark,) = fig.named("veto_rate > 20% from step 5").lines
    step_x = dict(zip(range(1, 9), (x for x, _ in raw), strict=True))
    assert mark[0][0] == mark[1][0] == pytest.approx(step_x[5])  # a vertical line at step 5
    assert plots.smoothed([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], k=3) == [1.0, 1.5, 2.0, 3.0, 4.0, 5.0]
    quiet = read_figure(plots.reward_curve_svg(_history(None), []))
    assert quiet.legend == ["training dialogues", "training (5-step mean)"]  # never crossed: no mark


def test_hack_rates_draw_the_watched_rates_the_flags_that_fired_and_the_threshold() -> None:
    from rlver.rollout.hackwatch import WATCHED

    assert plots.hack_rates_svg([{"step": 1, "rollout/reward_mean": 0.5}]) is None
    rows = [
        {"step": s, "hack/veto_rate": 0.1 * s, "hack/broken_text": 0.0, "hack/keyword_salad": 0.25 if s == 3 else 0.0,
         "hack/reply_chars_mean": 120.0, "hack/repeated_phrase_rate": 0.0,
         **({"hack/language_mismatch_rate": 0.0} if s != 3 else {})}
        for s in range(1, 6)
    ]  # fmt: skip
    svg = plots.hack_rates_svg(rows)
    assert svg is not None
    fig = read_figure(svg)
    assert fig.legend == [*(k.removeprefix("hack/") for k in WATCHED), "keyword_salad", "20% mark"]
    assert len(fig.named("veto_rate").lines[0]) == 5
    assert len(fig.named("language_mismatch_rate").lines) == 2  # step 3 logged none: the line breaks
    (threshold,) = fig.named("20% mark").lines
    veto = fig.named("veto_rate").lines[0]
    assert veto[1][1] == pytest.approx(threshold[0][1])  # 20% at step 2 lies on the mark


@pytest.mark.parametrize("draw", ["trajectory", "histogram", "outcomes", "reward"])
def test_every_figure_is_static_sized_and_keeps_chinese_text(draw: str) -> None:
    runs = _runs()
    svg = {
        "trajectory": lambda: plots.trajectory_svg(runs),
        "histogram": lambda: plots.histogram_svg(runs),
        "outcomes": lambda: plots.outcome_bars_svg(runs),
        "reward": lambda: plots.reward_curve_svg(_history(3), [{"step": 0, "score": 20.0}], "训练协议"),
    }[draw]()
    fig: SvgFigure = read_figure(svg)  # static, finite, parsed
    assert fig.width > 300 and fig.height > 100 and "<script" not in svg
    if draw == "reward":
        assert "held-out score (训练协议)" in fig.legend
    else:
        assert BASE in fig.legend or BASE in fig.axis_labels
        assert "&lt;script&gt;" in svg


@pytest.mark.browser
def test_chinese_run_names_are_drawn_as_glyphs_in_chromium(tmp_path: Path) -> None:
    """SVG text is drawn with the viewer's fonts: with a CJK font installed (make browser), two figures
    that differ only in a Chinese run name look different. Drawn as boxes (no CJK glyphs), they would
    look the same."""
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (Debian: make browser); cannot check rendering")
    shots = []
    for name in ("基线模型", "训练之后"):
        page = tmp_path / f"{len(shots)}.html"
        svg = plots.histogram_svg([(name, _runs()[0][1])])
        page.write_text(
            f"<!doctype html><meta charset='utf-8'><body style='margin:0'>{svg}", encoding="utf-8"
        )
        shots.append(screenshot(browser, page, tmp_path / f"{len(shots)}.png", (800, 400)))
    assert shots[0] != shots[1], "Chinese drawn as boxes: install a CJK font (fonts-noto-cjk: make browser)"
