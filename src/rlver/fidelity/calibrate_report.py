"""The outputs of ``rlver calibrate`` a person reads: the terminal table and the HTML page.

Kept apart from :mod:`rlver.fidelity.calibrate` (the measurement) so that the numbers have no plotting
dependency; the figures are SVG drawn by :mod:`rlver.charts` (pygal) and inlined into the page.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any


def _file_cells(r: dict[str, Any]) -> list[str]:
    """One file's figures as shown in the terminal table and the HTML page (the path aside)."""
    return [
        str(r["dialogues"]),
        str(r["turns"]),
        _fmt(r["mean_recorded_change"], 2),
        _fmt(r["mean_predicted_change"], 2),
        _fmt(r["spearman"]),
        _fmt(r["sign_agreement"]),
        _fmt(r["mae"], 2),
        _fmt(r["trajectories_identical"]),
        "–" if r.get("in_fit") is None else ("yes" if r["in_fit"] else "no"),
    ]


#: Column names of the per-file table (terminal and HTML).
FILE_COLUMNS = (
    "file",
    "dialogues",
    "turns",
    "mean rec.",
    "mean pred.",
    "spearman",
    "sign",
    "MAE",
    "traj.",
    "in fit",
)
#: Column names of the per-group table.
GROUP_COLUMNS = ("files", "turns", "spearman", "sign", "MAE", "model ranking")


def _group_cells(g: dict[str, Any]) -> list[str]:
    return [
        str(g["files"]),
        str(g["turns"]),
        _fmt(g["spearman"]),
        _fmt(g["sign_agreement"]),
        _fmt(g["mae"], 2),
        _fmt(g["model_ranking_spearman"]),
    ]


def file_labels(paths: Sequence[str]) -> list[str]:
    """Released files named by their shortest unique path suffix, ``_result.jsonl`` dropped:
    ``deepseek-v3-simulator/gpt-4.1`` beside ``gpt-4o-simulator/gpt-4.1``, plain ``gpt-4.1`` alone."""
    from rlver.io import unique_suffixes

    return unique_suffixes(paths, strip="_result.jsonl")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def print_table(summary: dict[str, Any], simulator: str) -> None:
    from rich.table import Table

    table = Table(title=f"Agreement with the recorded appraisals (simulator: {simulator})")
    for col in FILE_COLUMNS:
        # The file column wraps (never cut); the figures stay on one line each.
        if col == "file":
            table.add_column(col, justify="left", overflow="fold", ratio=1)
        else:
            table.add_column(col, justify="right", no_wrap=True)
    labels = file_labels([r["path"] for r in summary["files"]])
    for r, label in zip(summary["files"], labels, strict=True):
        table.add_row(label, *_file_cells(r))
    o = summary["overall"]
    table.add_row(
        "overall",
        "",
        str(o["turns"]),
        "",
        "",
        _fmt(o["spearman"]),
        _fmt(o["sign_agreement"]),
        _fmt(o["mae"], 2),
        "",
        "",
    )
    from rlver.tables import output_console, print_fitting

    # Piped output (CI logs) is not wrapped, unless COLUMNS says a width.
    console = output_console()

    print_fitting(console, table)
    console.print(f"model-ranking Spearman: {_fmt(summary['model_ranking_spearman'])}")
    groups = summary.get("groups") or []
    if groups:
        split = Table(title="By simulator folder and by whether the learned fit saw the file")
        split.add_column("files", justify="left")
        for col in GROUP_COLUMNS:
            split.add_column(col, justify="right")
        for g in groups:
            split.add_row(g["label"], *_group_cells(g))
        print_fitting(console, split)
    print_provenance(summary.get("simulator") or {})


def provenance_rows(simulator: dict[str, Any]) -> list[tuple[str, str]]:
    """The learned appraisal's provenance as (label, value) rows; empty when the simulator has none.

    What the offline user's Chinese judgements rest on: the artefact's sha256, the released files it was
    fitted on (with theirs), the fit settings and its own held-out figures per split and simulator model.
    """
    learned = simulator.get("learned")
    if not isinstance(learned, dict):
        return []
    rows = [
        ("artefact", f"{learned.get('artefact', '')} sha256 {learned.get('artefact_sha256', '')}"),
        ("features", f"{learned.get('features_version', '')} (language {learned.get('language', '')})"),
    ]
    rows += [(f"data {d['file']}", f"sha256 {d['sha256']}") for d in learned.get("data", [])]
    settings = learned.get("settings", {})
    rows.append(("fit settings", ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))))
    for split, report in sorted(learned.get("validation", {}).items()):
        for part, fig in sorted(report.items()):
            rows.append(
                (
                    f"held out: {split} / {part}",
                    f"{fig['turns']} turns, spearman {_fmt(fig['spearman'])}, sign "
                    f"{_fmt(fig['sign_agreement'])}, model-ranking {_fmt(fig['model_ranking_spearman'])}",
                )
            )
    return rows


def print_provenance(simulator: dict[str, Any]) -> None:
    """The learned appraisal's provenance under the agreement table (nothing for other simulators)."""
    rows = provenance_rows(simulator)
    if not rows:
        return

    from rich.table import Table

    table = Table(title="Learned appraisal (Chinese profiles): provenance")
    table.add_column("what", justify="left")
    table.add_column("value", justify="left", overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    from rlver.tables import output_console

    output_console().print(table)


def figures(summary: dict[str, Any], predictions: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """The page's two figures as SVG: every turn's recorded against predicted change, and each file's
    means (the model ranking).

    Changes are whole numbers, so thousands of turns fall on a few hundred points: each point is drawn
    once, its area in proportion to its turns (a jittered cloud of every turn, as drawn before, made a
    page of megabytes)."""
    import pygal

    from rlver.charts import FAILURE_COLOR, PALETTE, chart, render

    pairs = Counter((int(p["recorded_change"]), int(p["predicted_change"])) for p in predictions)
    scatter = chart(
        pygal.XY,
        title="Per-turn change, teacher-forced",
        colors=[PALETTE[0], "#9ca3af"],
        dot_opacity=0.45,
        stroke=False,
        x_title="recorded change",
        y_title="predicted change",
        width=600,
        height=560,
    )
    if pairs:
        most = max(pairs.values())
        scatter.add(
            f"turns (area = count, largest {most})",
            [
                {"value": xy, "node": {"r": round(1.5 + 12 * (n / most) ** 0.5, 2)}}
                for xy, n in sorted(pairs.items())
            ],
        )
        low = min(min(xy) for xy in pairs)
        high = max(max(xy) for xy in pairs)
        scatter.add("predicted = recorded", [(low, low), (high, high)], stroke=True, show_dots=False)

    paths = [r["path"] for r in summary["files"]]
    labels = dict(zip(paths, file_labels(paths), strict=True))
    rows = [r for r in summary["files"] if r["mean_recorded_change"] is not None]
    ranking = chart(
        pygal.XY,
        title=f"Model ranking (Spearman {_fmt(summary['model_ranking_spearman'])})",
        colors=[FAILURE_COLOR],
        stroke=False,
        dots_size=4,
        print_labels=True,
        show_legend=False,
        x_title="mean recorded change per turn",
        y_title="mean predicted change per turn",
        # room for a file's label beside the rightmost point (about 6 px a character at 10 px)
        margin_right=20 + 6 * max((len(labels[r["path"]]) for r in rows), default=0),
        width=700,
        height=560,
    )
    ranking.add(
        "files",
        [
            {"value": (r["mean_recorded_change"], r["mean_predicted_change"]), "label": labels[r["path"]]}
            for r in rows
        ],
    )
    return render(scatter), render(ranking)


def render_html(
    summary: dict[str, Any], predictions: Sequence[dict[str, Any]], simulator: dict[str, Any]
) -> str:
    scatter, ranking = figures(summary, predictions)
    esc = html.escape
    head = "".join(f"<th>{c}</th>" for c in FILE_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(v)}</td>" for v in (r["path"], *_file_cells(r))) + "</tr>"
        for r in summary["files"]
    )
    o = summary["overall"]
    group_rows = "".join(
        "<tr>" + "".join(f"<td>{esc(v)}</td>" for v in (g["label"], *_group_cells(g))) + "</tr>"
        for g in summary.get("groups") or []
    )
    groups_html = (
        "<h2>By simulator folder and by whether the learned fit saw the file</h2><table><tr><th>files</th>"
        + "".join(f"<th>{c}</th>" for c in GROUP_COLUMNS)
        + f"</tr>{group_rows}</table>"
        if group_rows
        else ""
    )
    prov = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in provenance_rows(simulator))
    prov_html = f"<h2>Learned appraisal: provenance</h2><table class='prov'>{prov}</table>" if prov else ""
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\"><title>rlver calibrate</title>"
        "<style>body{font-family:sans-serif;max-width:960px;margin:2em auto}td,th{padding:2px 8px;"
        "border-bottom:1px solid #ddd;text-align:right}td:first-child{text-align:left}.prov td{text-align:left;word-break:break-all}.fig svg{max-width:100%;height:auto}</style></head><body>"
        f"<h1>Simulator calibration</h1><p>Simulator: <code>{esc(json.dumps(simulator, ensure_ascii=False))}</code></p>"
        f"<p>Overall: {o['turns']} turns, per-turn Spearman {_fmt(o['spearman'])}, sign agreement "
        f"{_fmt(o['sign_agreement'])}, MAE {_fmt(o['mae'], 2)}; model-ranking Spearman "
        f"{_fmt(summary['model_ranking_spearman'])}.</p>"
        f"<table><tr>{head}</tr>{body}</table>{groups_html}{prov_html}"
        f"<h2>Recorded vs predicted</h2><div class='fig' role='img' aria-label='scatter'>{scatter}</div>"
        f"<h2>Model ranking</h2><div class='fig' role='img' aria-label='ranking'>{ranking}</div>"
        "</body></html>"
    )
