"""rlver.charts: pygal set up static — no script, no outside address, CSS that styles only its own
chart (several are inlined into one page), every legend row inside the picture."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pygal
import pytest

from rlver.charts import CJK_FAMILIES, FONT_FAMILY, chart, integer_ticks, render
from svg_check import read_figure


def _line_chart(series: int) -> str:
    fig = chart(pygal.XY, title="t", x_title="x", y_title="y")
    for i in range(series):
        fig.add(f"series {i} 中文", [(0, i), (1, i + 1)])
    return render(fig)


def test_a_chart_is_one_static_svg_element_with_its_size() -> None:
    svg = _line_chart(3)
    root = ET.fromstring(svg)
    assert not svg.startswith("<?xml") and root.get("width") == "760" and root.get("height") == "420"
    tags = {e.tag.rsplit("}", 1)[-1] for e in root.iter() if isinstance(e.tag, str)}
    assert (
        not tags & {"script", "desc"}
        and "<!--" not in svg
        and "http" not in svg.replace("http://www.w3.org/", "")
    )
    assert read_figure(svg).legend == [f"series {i} 中文" for i in range(3)]


def test_its_css_styles_only_its_own_chart() -> None:
    first, second = _line_chart(1), _line_chart(1)
    ids = [ET.fromstring(svg).get("id") for svg in (first, second)]
    assert ids[0] != ids[1] and all(i and i.startswith("chart-") for i in ids)
    css = re.search(r"<style[^>]*>(.*?)</style>", first, re.S)
    assert css is not None
    for rule in filter(None, (r.strip() for r in css.group(1).split("}"))):
        selectors = rule.split("{", 1)[0].split(",")
        assert all(s.strip().startswith(f"#{ids[0]}") for s in selectors), rule
    assert "font-family:" + FONT_FAMILY.replace(", ", ",") in css.group(1)  # minified


def test_the_font_list_asks_for_latin_families_first_then_cjk() -> None:
    families = [f.strip().strip('"') for f in FONT_FAMILY.split(",")]
    first_cjk = min(families.index(f) for f in CJK_FAMILIES)
    assert families[0] == "DejaVu Sans" and families[-1] == "sans-serif" and first_cjk > 0
    assert families[first_cjk] == "Noto Sans CJK SC"  # Simplified Chinese first: the profiles are zh-CN


@pytest.mark.parametrize("series", [1, 2, 3, 5, 8])
def test_every_legend_row_lies_inside_the_chart(series: int) -> None:
    root = ET.fromstring(_line_chart(series))
    height = float(root.get("height", "0"))
    legends = next(e for e in root.iter() if e.get("class") == "legends")
    top = float(re.findall(r"[-\d.]+", legends.get("transform", ""))[1])
    bottoms = [
        top + float(r.get("y", "0")) + float(r.get("height", "0"))
        for r in legends.iter()
        if r.tag.endswith("rect")
    ]
    assert len(bottoms) == series and max(bottoms) <= height


def test_integer_ticks_step_by_one_two_or_five() -> None:
    assert integer_ticks(0, 8) == list(range(9))
    assert integer_ticks(1, 40) == [5, 10, 15, 20, 25, 30, 35, 40]
    assert integer_ticks(-2, 102) == [0, 20, 40, 60, 80, 100]
    assert integer_ticks(3, 3) == [3] and integer_ticks(0, 1) == [0, 1]
    assert integer_ticks(0, 2500, most=8) == [0, 500, 1000, 1500, 2000, 2500]
