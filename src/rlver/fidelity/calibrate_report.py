"""The outputs of ``rlver calibrate`` a person reads: the terminal table and the HTML page.

Kept apart from :mod:`rlver.fidelity.calibrate` (the measurement) so that the numbers have no plotting
dependency; matplotlib is imported only when the page is drawn.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

import numpy as np


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


def _pngs(summary: dict[str, Any], predictions: Sequence[dict[str, Any]], seed: int) -> tuple[bytes, bytes]:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def png(fig: Any) -> bytes:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        return buf.getvalue()

    rng = np.random.default_rng(seed)
    rec = np.asarray([p["recorded_change"] for p in predictions], dtype=float)
    pre = np.asarray([p["predicted_change"] for p in predictions], dtype=float)
    fig, ax = plt.subplots(figsize=(5.5, 5))
    if len(rec):
        ax.scatter(
            rec + rng.uniform(-0.8, 0.8, len(rec)),
            pre + rng.uniform(-0.8, 0.8, len(pre)),
            s=4,
            alpha=0.3,
            color="#2563eb",
        )
    ax.axline((0, 0), slope=1, color="#9ca3af", lw=1)
    ax.set_xlabel("recorded change (jittered)")
    ax.set_ylabel("predicted change (jittered)")
    ax.set_title("Per-turn change, teacher-forced")
    scatter = png(fig)

    paths = [r["path"] for r in summary["files"]]
    labels = dict(zip(paths, file_labels(paths), strict=True))
    rows = [r for r in summary["files"] if r["mean_recorded_change"] is not None]
    fig, ax = plt.subplots(figsize=(6.5, 5))
    for r in rows:
        ax.scatter(r["mean_recorded_change"], r["mean_predicted_change"], color="#dc2626")
        ax.annotate(
            labels[r["path"]].replace("$", r"\$"),
            (r["mean_recorded_change"], r["mean_predicted_change"]),
            fontsize=7,
        )
    ax.set_xlabel("mean recorded change per turn")
    ax.set_ylabel("mean predicted change per turn")
    ax.set_title(f"Model ranking (Spearman {_fmt(summary['model_ranking_spearman'])})")
    ranking = png(fig)
    return scatter, ranking


def render_html(
    summary: dict[str, Any], predictions: Sequence[dict[str, Any]], simulator: dict[str, Any]
) -> str:
    import base64

    scatter, ranking = _pngs(summary, predictions, 0)
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
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src data:; "
        "style-src 'unsafe-inline'\"><title>rlver calibrate</title>"
        "<style>body{font-family:sans-serif;max-width:960px;margin:2em auto}td,th{padding:2px 8px;"
        "border-bottom:1px solid #ddd;text-align:right}td:first-child{text-align:left}.prov td{text-align:left;word-break:break-all}</style></head><body>"
        f"<h1>Simulator calibration</h1><p>Simulator: <code>{esc(json.dumps(simulator, ensure_ascii=False))}</code></p>"
        f"<p>Overall: {o['turns']} turns, per-turn Spearman {_fmt(o['spearman'])}, sign agreement "
        f"{_fmt(o['sign_agreement'])}, MAE {_fmt(o['mae'], 2)}; model-ranking Spearman "
        f"{_fmt(summary['model_ranking_spearman'])}.</p>"
        f"<table><tr>{head}</tr>{body}</table>{groups_html}{prov_html}"
        f"<h2>Recorded vs predicted</h2><img alt='scatter' src='data:image/png;base64,{base64.b64encode(scatter).decode()}'>"
        f"<h2>Model ranking</h2><img alt='ranking' src='data:image/png;base64,{base64.b64encode(ranking).decode()}'>"
        "</body></html>"
    )
