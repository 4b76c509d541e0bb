"""The report's figures, drawn with matplotlib's Agg backend and returned as PNG bytes.

PNG bytes (not files) so the HTML report can embed them as base64 and stay one self-contained file,
while the Markdown report writes the same bytes next to itself. Imported lazily by the report (matplotlib
is slow to import and the CLI must stay fast).

Chinese text (profile ids, run names) needs a CJK font: matplotlib's default DejaVu Sans has no CJK
glyphs and draws empty boxes. When a CJK font is installed (``fonts-noto-cjk``, which ``make browser``
installs) it is appended to the sans-serif list, and matplotlib (>= 3.6) falls back to it glyph by glyph,
so Latin text looks the same as before. When none is installed the plots draw boxes for CJK characters
and stay quiet about it (no warning per glyph): a report must never fail over a font.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import font_manager
from matplotlib.ticker import MaxNLocator

from rlver.eval.judge import CAPABILITIES, CAPABILITY_LABELS, JudgeSummary
from rlver.eval.metrics import Metrics
from rlver.records import FAILURE_BELOW, SUCCESS_AT

#: CJK families tried in order (Simplified Chinese first: the bundled and published profiles are zh-CN).
CJK_FONT_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "Noto Sans CJK JP",
    "Noto Serif CJK SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Droid Sans Fallback",
    "Microsoft YaHei",
    "SimHei",
    "PingFang SC",
    "Heiti SC",
)


def cjk_font() -> str | None:
    """The first installed CJK font family of :data:`CJK_FONT_FAMILIES`, or None when there is none."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONT_FAMILIES if name in installed), None)


def _use_cjk_fallback() -> None:
    family = cjk_font()
    sans = list(matplotlib.rcParams["font.sans-serif"])
    if family is not None and family not in sans:
        matplotlib.rcParams["font.sans-serif"] = [*sans, family]


_use_cjk_fallback()

_COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04"]


def _color(i: int) -> str:
    return _COLORS[i % len(_COLORS)]


def _png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():  # no CJK font installed: boxes, not one warning per glyph
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from (current )?font")
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _label(name: str, limit: int = 40) -> str:
    # Matplotlib treats $...$ as math; run names are user text, so neutralise it.
    name = name.replace("$", r"\$")
    return name if len(name) <= limit else name[: limit - 1] + "…"


def trajectory_png(runs: Sequence[tuple[str, Metrics]]) -> bytes:
    """Mean emotion per turn with an interquartile band; ended dialogues carried forward."""
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    for i, (name, m) in enumerate(runs):
        if not m.trajectory:
            continue
        x = np.arange(len(m.trajectory))
        ax.plot(x, m.trajectory, marker="o", ms=3, color=_color(i), label=_label(name))
        ax.fill_between(x, m.trajectory_p25, m.trajectory_p75, color=_color(i), alpha=0.15)
    ax.axhline(SUCCESS_AT, color="#16a34a", lw=0.8, ls="--")
    ax.axhline(FAILURE_BELOW, color="#dc2626", lw=0.8, ls="--")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("turn (0 = start; after k appraisals)")
    ax.set_ylabel("emotion")
    ax.set_ylim(0, 105)
    ax.set_title("Emotion trajectory (mean, band = 25th–75th percentile)")
    ax.grid(alpha=0.3)
    if runs:
        ax.legend(fontsize=8, loc="best")
    return _png(fig)


def histogram_png(runs: Sequence[tuple[str, Metrics]]) -> bytes:
    """Final emotions in bins of 10; the last bin holds exactly 100 (a success)."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    bins = np.array([0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 101])
    width = 8.0 / max(1, len(runs))
    for i, (name, m) in enumerate(runs):
        counts, _ = np.histogram(m.final_emotions, bins=bins)
        x = bins[:-1] + 1 + i * width
        ax.bar(x, counts, width=width, align="edge", color=_color(i), alpha=0.85, label=_label(name))
    ax.set_xticks(bins[:-1] + 5)
    ax.set_xticklabels([f"{b}–{b + 9}" if b < 100 else "100" for b in bins[:-1]], fontsize=7)
    ax.set_xlabel("final emotion")
    ax.set_ylabel("dialogues")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Final emotion")
    ax.grid(axis="y", alpha=0.3)
    if runs:
        ax.legend(fontsize=8)
    return _png(fig)


def outcome_bars_png(runs: Sequence[tuple[str, Metrics]]) -> bytes:
    """Success (≥ 100) and failure (< 10) rates per run."""
    fig, ax = plt.subplots(figsize=(7.5, 0.6 + 0.5 * max(1, len(runs))))
    names = [_label(n, 30) for n, _ in runs]
    y = np.arange(len(runs))
    succ = [m.success_pct for _, m in runs]
    fail = [m.failure_pct for _, m in runs]
    ax.barh(y - 0.18, succ, height=0.35, color="#16a34a", label="success % (final ≥ 100)")
    ax.barh(y + 0.18, fail, height=0.35, color="#dc2626", label="failure % (final < 10)")
    for yi, s, f in zip(y, succ, fail, strict=True):
        ax.text(s + 0.5, yi - 0.18, f"{s:.0f}%", va="center", fontsize=8)
        ax.text(f + 0.5, yi + 0.18, f"{f:.0f}%", va="center", fontsize=8)
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 112)  # room for a "100%" label
    ax.set_xticks([0, 20, 40, 60, 80, 100])
    ax.set_xlabel("% of dialogues")
    # above the axes, so it never hides a bar (a 100% failure bar used to run under it)
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def radar_png(summaries: Sequence[JudgeSummary]) -> bytes:
    """The five capabilities (mean judge score 1–5) per run on a radar chart."""
    labels = [CAPABILITY_LABELS[c] for c in CAPABILITIES]
    angles = np.linspace(0, 2 * np.pi, len(labels), endpoint=False).tolist()
    fig, ax = plt.subplots(figsize=(5.5, 5.0), subplot_kw={"polar": True})
    for i, s in enumerate(summaries):
        found = [s.capabilities.get(c) for c in CAPABILITIES]
        values = [0.0 if v is None or np.isnan(v) else v for v in found]
        ax.plot([*angles, angles[0]], [*values, values[0]], color=_color(i), label=_label(s.run))
        ax.fill([*angles, angles[0]], [*values, values[0]], color=_color(i), alpha=0.12)
    ax.set_xticks(angles)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylim(0, 5)
    ax.set_yticks([1, 2, 3, 4, 5])
    ax.set_title("Capabilities (LLM judge, 1–5)", pad=18)
    ax.legend(fontsize=8, loc="upper right", bbox_to_anchor=(1.3, 1.1))
    return _png(fig)


def coordinate_png(summaries: Sequence[JudgeSummary]) -> bytes:
    """Each run on the social cognition coordinate: empathy↔solution (x), structured↔creative (y)."""
    fig, ax = plt.subplots(figsize=(5.5, 5.0))
    ax.axhline(0, color="#9ca3af", lw=0.8)
    ax.axvline(0, color="#9ca3af", lw=0.8)
    for i, s in enumerate(summaries):
        if s.orientation is None or s.style is None or np.isnan(s.orientation) or np.isnan(s.style):
            continue
        ax.scatter([s.orientation], [s.style], s=70, color=_color(i), zorder=3)
        ax.annotate(
            _label(s.run, 24), (s.orientation, s.style), xytext=(6, 6), textcoords="offset points", fontsize=8
        )
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("← empathy-oriented      solution-oriented →")
    ax.set_ylabel("← structured      creative →")
    ax.set_title("Social cognition coordinate")
    ax.grid(alpha=0.3)
    return _png(fig)


def _mark_hacking(ax: Any, history: Sequence[dict[str, Any]]) -> None:
    """A dashed line at the first step where a ``hack/*`` rate (``rlver.rollout.hackwatch``) passed its
    threshold: a reward that rises from there on may be the simulator being gamed."""
    from rlver.rollout.hackwatch import HACK_THRESHOLD, first_crossing

    crossing = first_crossing(history)
    if crossing is None:
        return
    step, key = crossing
    ax.axvline(
        step,
        color="#f58518",
        linestyle="--",
        label=f"{key.removeprefix('hack/')} > {HACK_THRESHOLD:.0%} from step {step}",
    )


def reward_curve_png(
    history: Sequence[dict[str, Any]], evals: Sequence[dict[str, Any]], protocol: str | None = None
) -> bytes:
    """A training run's reward per step (raw and a 5-step mean) with its held-out scores on top.

    ``history`` holds the trainer's metrics rows that have ``rollout/reward_mean`` (reward in [0, 1],
    drawn x 100 to share the axis with the score); ``evals`` holds ``{"step", "score"}`` points.
    ``protocol`` (``rlver.env.dialogue.protocol_label``) goes into the held-out legend, so the curve
    is never read as benchmark scores when it was measured on the training dialogue.
    """
    fig, ax = plt.subplots(figsize=(7, 3.6))
    steps = [h["step"] for h in history]
    rewards = [100 * h["rollout/reward_mean"] for h in history]
    ax.plot(steps, rewards, color="#4c78a8", alpha=0.5, label="training dialogues")
    k = 5
    if len(rewards) >= k:
        smooth = [sum(rewards[max(0, i - k + 1) : i + 1]) / min(k, i + 1) for i in range(len(rewards))]
        ax.plot(steps, smooth, color="#4c78a8", label=f"training ({k}-step mean)")
    if evals:
        points = [e for e in evals if e.get("score") is not None]
        ax.plot(
            [e["step"] for e in points],
            [e["score"] for e in points],
            "o-",
            color="#e45756",
            label=f"held-out score ({protocol})" if protocol else "held-out score",
        )
    _mark_hacking(ax, history)
    ax.set_xlabel("RL step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_ylabel("final emotion (reward x 100)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _png(fig)


def hack_rates_png(history: Sequence[dict[str, Any]]) -> bytes | None:
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
    fig, ax = plt.subplots(figsize=(7, 3.6))
    steps = [h["step"] for h in rows]
    for i, key in enumerate([*WATCHED, *flags]):
        values = [100 * v if isinstance(v := h.get(key), int | float) else np.nan for h in rows]
        ax.plot(
            steps, values, color=_color(i), ls="-" if key in WATCHED else ":", label=key.removeprefix("hack/")
        )
    ax.axhline(100 * HACK_THRESHOLD, color="#f58518", lw=0.8, ls="--", label=f"{HACK_THRESHOLD:.0%} mark")
    ax.set_xlabel("RL step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("% of the step's replies")
    ax.set_title("Reward-hacking watch: replies that trip a veto")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=7, ncol=2)
    return _png(fig)
