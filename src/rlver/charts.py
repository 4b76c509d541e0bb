"""SVG charts drawn with pygal, made static: the one setup every figure of rlver's reports uses.

The reports draw their figures as SVG text, not images: pygal is pure Python (no matplotlib, fonts or
image libraries), so the light install draws every figure. An SVG is only as self-contained as it is
made, so each chart here is rendered

- with no JavaScript: pygal's tooltip script is an address on the web (``js`` is emptied), and the
  inline ``<script>`` holding its config, the ``<desc>`` tooltip data and the generator comments are
  removed (:func:`static_svg`);
- with its CSS scoped to the chart's own id, so several charts inlined into one HTML page never style
  each other or the page;
- with its size written on the root (``explicit_size``), so a Markdown viewer shows the file at the size
  it was drawn.

Text is drawn by the viewer with its own fonts: :data:`FONT_FAMILY` names a sans-serif list with CJK
families after the Latin ones (the bundled and published profiles are Chinese), as the HTML report's
own style does, and a browser falls back glyph by glyph to any installed font that has the character.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pygal
from pygal.style import Style

#: CJK families a viewer may have, Simplified Chinese first (the bundled and published profiles are zh-CN).
CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "PingFang SC",
    "Microsoft YaHei",
    "WenQuanYi Micro Hei",
    "Noto Sans CJK JP",
)
#: What every chart's text asks for (a CSS font-family): Latin families first, so Latin text looks the
#: same everywhere, then the CJK ones, then whatever sans-serif the viewer has.
FONT_FAMILY = ", ".join(f'"{family}"' for family in ("DejaVu Sans", "Noto Sans", "Arial", *CJK_FAMILIES))
FONT_FAMILY += ", sans-serif"

#: Series colours, in order (a run keeps its colour across the report's figures).
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04")

#: The colours of the dialogue outcomes and of the reward-hacking mark, shared by every figure.
SUCCESS_COLOR = "#16a34a"
FAILURE_COLOR = "#dc2626"
WARNING_COLOR = "#f58518"

DASHED = {"width": 1.2, "dasharray": "6,4"}
DOTTED = {"width": 1.5, "dasharray": "2,3"}

ChartT = TypeVar("ChartT", bound=pygal.graph.graph.Graph)


def palette_color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def style(
    colors: Sequence[str], *, opacity: float = 0.85, dot_opacity: float = 1.0, major_guides: bool = False
) -> Style:
    """The report's look: white, grey guides, ``colors`` for the series in the order they are added,
    ``opacity`` for filled areas (bars, bands) and ``dot_opacity`` for points, the same with or without
    a pointer over them.

    pygal picks "major" labels of its own (round numbers) and draws their guides darker; they look like
    the others unless ``major_guides`` (a chart that names its majors, such as the axes through 0)."""
    return Style(
        background="white",
        plot_background="white",
        foreground="#374151",
        foreground_strong="#111827",
        foreground_subtle="#d1d5db",
        guide_stroke_color="#d1d5db",
        major_guide_stroke_color="#6b7280" if major_guides else "#d1d5db",
        guide_stroke_dasharray="2,3",
        major_guide_stroke_dasharray="0" if major_guides else "2,3",
        font_family=FONT_FAMILY,
        title_font_size=14,
        legend_font_size=11,
        label_font_size=11,
        major_label_font_size=11,
        value_font_size=10,
        value_label_font_size=10,
        colors=tuple(colors) or PALETTE,
        opacity=str(opacity),
        opacity_hover=str(opacity),
        stroke_opacity="1",
        stroke_opacity_hover="1",
        stroke_width="1.8",
        stroke_width_hover="1.8",
        dot_opacity=str(dot_opacity),
        transition="0s",
    )


def chart(
    kind: Callable[..., ChartT],
    *,
    title: str,
    colors: Sequence[str] = PALETTE,
    opacity: float = 0.85,
    dot_opacity: float = 1.0,
    major_guides: bool = False,
    width: int = 760,
    height: int = 420,
    **config: Any,
) -> ChartT:
    """A pygal chart of ``kind`` (``pygal.XY``, ``pygal.Bar``, ...) set up static, in the report's style.

    ``colors``, ``opacity``, ``dot_opacity`` and ``major_guides`` go to :func:`style`; ``config`` is
    pygal's own (``x_title``, ``range``, ``x_labels``, ...). Legends go below the plot and are never cut
    (run names are cut by the caller, to a length it chooses).
    """
    settings: dict[str, Any] = {
        "legend_at_bottom": True,
        "legend_at_bottom_columns": 2,
        "truncate_legend": -1,
        "truncate_label": -1,
        "margin": 12,
        **config,
    }
    made = kind(
        style=style(colors, opacity=opacity, dot_opacity=dot_opacity, major_guides=major_guides),
        title=title,
        width=width,
        height=height,
        js=[],
        explicit_size=True,
        disable_xml_declaration=True,
        **settings,
    )
    made.add_xml_filter(static_svg)
    return made


def static_svg(root: Any) -> Any:
    """Remove from a rendered chart what only pygal's tooltip script reads (the ``<script>`` with its
    config, the ``<desc>`` tooltip data) and the generator's comments. Works on the tree of
    ``xml.etree`` and of ``lxml``, which pygal uses when it is installed."""
    for parent in list(root.iter()):
        for child in list(parent):
            tag = child.tag if isinstance(child.tag, str) else ""  # comments' tags are functions
            if tag.rsplit("}", 1)[-1] in ("", "script", "desc"):
                parent.remove(child)
    return root


def render(chart: pygal.graph.graph.Graph) -> str:
    """The chart as one ``<svg>`` element (no XML declaration), to inline into HTML or write to a file."""
    _room_for_the_last_legend_row(chart)
    svg = chart.render()
    return svg if isinstance(svg, str) else svg.decode("utf-8")


def _room_for_the_last_legend_row(chart: pygal.graph.graph.Graph) -> None:
    """Make room under the plot for every legend row. pygal (3.1.3) reserves ``series // columns`` rows,
    one short when the last row is part-filled, and that row falls off the bottom of the chart."""
    columns = chart.config.legend_at_bottom_columns
    if not (chart.config.show_legend and chart.config.legend_at_bottom and columns):
        return
    series = len(chart.raw_series)
    missing = -(-series // columns) - series // columns
    row = 1.5 * max(chart.config.style.legend_font_size, chart.config.legend_box_size)
    chart.config.margin_bottom = chart.config.margin + missing * row


def integer_ticks(low: float, high: float, most: int = 10) -> list[int]:
    """Whole-number ticks from ``low`` to ``high`` at a step of 1, 2 or 5 x 10^k, at most ``most`` + 1
    of them (steps, turns and counts are whole numbers)."""
    low_i, high_i = int(low // 1), int(-(-high // 1))
    span = max(1, high_i - low_i)
    step = 1
    while span / step > most:
        step = _next_step(step)
    first = -(-low_i // step) * step
    return list(range(first, high_i + 1, step))


def _next_step(step: int) -> int:
    """1, 2, 5, 10, 20, 50, ..."""
    digits = str(step)
    lead, zeros = int(digits[0]), len(digits) - 1
    return {1: 2, 2: 5, 5: 10}[lead] * 10**zeros
