"""The report's figures, drawn with matplotlib's Agg backend and returned as PNG bytes.

PNG bytes (not files) so the HTML report can embed them as base64 and stay one self-contained file,
while the Markdown report writes the same bytes next to itself. Imported lazily by the report (matplotlib
is slow to import and the CLI must stay fast).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from rlver.eval.judge import CAPABILITIES, CAPABILITY_LABELS, JudgeSummary
from rlver.eval.metrics import Metrics
from rlver.records import FAILURE_BELOW, SUCCESS_AT

_COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04"]


def _color(i: int) -> str:
    return _COLORS[i % len(_COLORS)]


def _png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
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
