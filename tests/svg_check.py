"""The report's SVG figures read back as data, for tests: what a reader sees, series by series.

A figure is checked for what it shows (its title, axis titles, legend, and the marks of each series:
line points, dots, bars, printed values) and for being static and whole: it parses as XML, holds no
script and no address outside itself, and no coordinate is NaN or infinite.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_NOT_FINITE = re.compile(r"\b(?:nan|inf|infinity)\b", re.IGNORECASE)
_GEOMETRY = ("d", "x", "y", "cx", "cy", "r", "width", "height", "transform", "points", "viewBox")


@dataclass
class Series:
    """The marks of one series (pygal's ``serie-N`` groups, wherever they are drawn)."""

    lines: list[list[tuple[float, float]]] = field(default_factory=list)  # one point list per path
    dots: list[tuple[float, float]] = field(default_factory=list)
    dot_radii: list[float] = field(default_factory=list)
    bars: list[tuple[float, float, float, float]] = field(default_factory=list)  # x, y, width, height
    values: list[str] = field(default_factory=list)  # printed values and labels


@dataclass
class SvgFigure:
    title: str
    axis_titles: list[str]
    legend: list[str]
    axis_labels: list[str]
    series: dict[int, Series]
    colors: dict[int, str]  # each series' colour, from the chart's CSS
    width: float
    height: float

    def named(self, legend_entry: str) -> Series:
        """The series drawn under ``legend_entry`` (pygal numbers series in legend order)."""
        return self.series.get(self.legend.index(legend_entry), Series())

    def color(self, legend_entry: str) -> str:
        return self.colors[self.legend.index(legend_entry)]


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _points(d: str) -> list[tuple[float, float]]:
    numbers = [float(n) for n in _NUMBER.findall(d)]
    return list(zip(numbers[0::2], numbers[1::2], strict=False))


def _classes(e: ET.Element) -> set[str]:
    return set((e.get("class") or "").split())


def assert_static_and_finite(svg: str) -> None:
    """No script, no reference outside the file, every coordinate a finite number."""
    root = ET.fromstring(svg)
    assert _local(root.tag) == "svg" and root.get("viewBox"), "not one <svg> element with a viewBox"
    for e in root.iter():
        assert _local(e.tag) not in ("script", "foreignObject", "image"), (
            f"<{_local(e.tag)}> in a static figure"
        )
        for key, value in e.attrib.items():
            name = _local(key)
            assert not name.startswith("on"), f"event handler {name}"
            if name == "href":
                assert value.startswith("#"), f"reference outside the file: {value}"
            if name in _GEOMETRY:
                assert not _NOT_FINITE.search(value), f"<{_local(e.tag)} {name}={value!r}>"
    style = "".join(e.text or "" for e in root.iter() if _local(e.tag) == "style")
    assert "@import" not in style and "url(" not in style, "the style loads something"
    assert not re.search(r"(?:https?:)?//", style), "an address in the style"


def read_figure(svg: str) -> SvgFigure:
    """``svg`` (one figure of :mod:`rlver.eval.plots` or the calibration page) as data, after
    :func:`assert_static_and_finite`."""
    assert_static_and_finite(svg)
    root = ET.fromstring(svg)
    series: dict[int, Series] = {}
    legend: list[str] = []
    axis_titles: list[str] = []
    axis_labels: list[str] = []
    title = ""
    for g in root.iter():
        classes = _classes(g)
        if "legend" in classes:
            legend.append("".join(t.text or "" for t in g if _local(t.tag) == "text"))
        if "titles" in classes:
            for t in g:
                if "plot_title" in _classes(t):
                    title = t.text or ""
                else:
                    axis_titles.append(t.text or "")
        if "axis" in classes:
            axis_labels += [t.text or "" for t in g.iter() if _local(t.tag) == "text"]
        index = next((int(c.removeprefix("serie-")) for c in classes if re.fullmatch(r"serie-\d+", c)), None)
        if index is None or "series" not in classes:
            continue
        s = series.setdefault(index, Series())
        for e in g.iter():
            tag, mine = _local(e.tag), _classes(e)
            if tag == "path" and "line" in mine:
                s.lines.append(_points(e.get("d", "")))
            elif tag == "circle":
                s.dots.append((float(e.get("cx", "0")), float(e.get("cy", "0"))))
                s.dot_radii.append(float(e.get("r", "0")))
            elif tag == "rect" and "rect" in mine:
                s.bars.append(tuple(float(e.get(k, "0")) for k in ("x", "y", "width", "height")))  # type: ignore[misc]
            elif tag == "text":
                s.values.append(e.text or "")
    css = "".join(e.text or "" for e in root.iter() if _local(e.tag) == "style")
    colors = {int(i): c for i, c in re.findall(r"\.color-(\d+) a:visited\{stroke:([^;}]+)", css)}
    return SvgFigure(
        title=title,
        axis_titles=axis_titles,
        legend=legend,
        axis_labels=axis_labels,
        series=series,
        colors=colors,
        width=float(root.get("width", "0")),
        height=float(root.get("height", "0")),
    )


def inline_figures(html: str) -> list[str]:
    """The ``<svg>`` elements inlined into an HTML page, in order (pygal never nests one in another)."""
    return re.findall(r"<svg\b.*?</svg>", html, re.S)
