"""``rlver report``: one self-contained HTML page (and a Markdown twin) for one or more runs.

The HTML has no external assets (figures are base64 PNGs, styles inline, and a Content-Security-Policy
that forbids scripts and remote loads), so it can be mailed, archived or opened offline. Every piece of
text that came from a model or a data file — agent replies, think blocks, the simulator's reasoning,
profile ids, run names — is HTML-escaped by Jinja2's autoescaping: model output is untrusted input.

Sections: metrics table; paired comparison (each run against the first); emotion trajectory, final-emotion
histogram and success/failure bars; breakdowns by behaviour mode / difficulty; the LLM judge's radar and
coordinate plots when ``rlver judge`` has been run; a per-profile table linking to every dialogue, which
is rendered turn by turn with the simulated user's emotion, its change and its reasoning.

A command that orchestrates runs (``rlver demo``) passes a :class:`Preface`: its own paragraphs, figures
and a few dialogues picked out in full, shown above the standard sections. So the demo's page *is* the
standard report, with one home for how runs, metrics and dialogues are drawn.

What the report shows is derived in :mod:`rlver.eval.report_view`; this module lays it out (HTML,
Markdown) and writes the files.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import jinja2

from rlver import __version__
from rlver.eval.judge import CAPABILITIES, CAPABILITY_LABELS
from rlver.eval.report_parts import Preface
from rlver.eval.report_view import ReportView, dialogue_item, dialogue_lines, judge_by_key, preface_view
from rlver.eval.runs import RunData
from rlver.eval.training_report import training_report
from rlver.io import atomic_write_text


def render_html(view: ReportView) -> str:
    """The report as one HTML string (no external assets)."""
    runs = view.runs
    dialogue_runs = []
    for i, run in enumerate(runs):
        judged, think = judge_by_key(run), run.manifest.think
        dialogues = [dialogue_item(i, ep, judged, think) for ep in run.episodes]
        dialogue_runs.append({"name": run.name, "dialogues": dialogues})

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=False)
    template_text = (
        resources.files("rlver.eval").joinpath("templates", "report.html.j2").read_text(encoding="utf-8")
    )
    template = env.from_string(template_text)
    shared = (
        "metric_rows",
        "comparisons",
        "figures",
        "judge_figures",
        "judges",
        "breakdowns",
        "profile_rows",
    )
    return template.render(
        title=view.title,
        preface=preface_view(runs, view.preface),
        generated=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        version=__version__,
        runs=view.run_views,
        metric_headers=list(view.metric_rows[0]) if view.metric_rows else ["run"],
        capabilities=CAPABILITIES,
        capability_labels=CAPABILITY_LABELS,
        dialogue_runs=dialogue_runs,
        **{name: getattr(view, name) for name in shared},  # the view's tables under their own names
    )


def _md_cell(text: object) -> str:
    """Markdown table cells: escape pipes and markup so model/user text cannot break the table."""
    s = str(text).replace("\n", " ")
    return re.sub(r"([\\`*_{}\[\]<>|#])", r"\\\1", s)


def _md_preface(preface: Preface | None, figure_dir: str) -> list[str]:
    if preface is None:
        return []
    lines = []
    for p in preface.paragraphs:
        lines += [p, ""]
    lines += [f"![{fig.alt}]({figure_dir}/{fig.name}.svg)" for fig in preface.figures]
    lines.append("")
    for f in preface.featured:
        lines += [f"## {f.caption}", "", "```", *dialogue_lines(f.episode), "```", ""]
    return lines


def _md_comparisons(view: ReportView) -> list[str]:
    comps = view.comparisons
    if not comps:
        return []
    lines = [f"## Paired comparison (against {_md_cell(view.runs[0].name)})", ""]
    lines += [
        "| run | pairs | Δ | 95% CI | wins/ties/losses | sign test p |",
        "|---|---|---|---|---|---|",
    ]
    for c in comps:
        cmp = c["cmp"]
        lines.append(
            f"| {_md_cell(c['name'])} | {cmp.n_pairs} | {cmp.mean_diff:+.1f} | "
            f"[{cmp.diff_ci_low:+.1f}, {cmp.diff_ci_high:+.1f}] | {cmp.wins}/{cmp.ties}/{cmp.losses} | "
            f"{cmp.sign_test_p:.3g} |"
        )
    lines.append("")
    return lines


def render_markdown(view: ReportView, figure_dir: str) -> str:
    """A Markdown summary; figures are referenced from ``figure_dir`` (relative to the .md file)."""
    lines = [f"# {view.title}", "", *_md_preface(view.preface, figure_dir)]
    for r in view.run_views:
        parts = [f"**{_md_cell(r.name)}**", r.counts, r.truncation]
        parts += [f"{k}: {_md_cell(v)}" for k, v in r.setup.items()]
        lines.append("- " + " · ".join(parts))
    lines.append("")
    rows = view.metric_rows
    if rows:
        headers = list(rows[0])
        lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(_md_cell(row[h]) for h in headers) + " |" for row in rows]
    lines += [
        "",
        "Score = mean final emotion; success = final ≥ 100; failure = final < 10; failed runs are excluded.",
        "",
    ]
    lines += _md_comparisons(view)
    lines += ["## Plots", ""]
    for fig in [*view.figures, *view.judge_figures]:
        lines.append(f"![{fig.alt}]({figure_dir}/{fig.name}.svg)")
    if not view.figures:
        lines.append("No dialogue finished: nothing to plot.")
    lines.append("")
    lines += _md_breakdowns(view)
    lines += _md_judges(view)
    lines += ["## Per profile (final emotion)", ""]
    lines.append("| profile | " + " | ".join(_md_cell(r.name) for r in view.run_views) + " |")
    lines.append("|---|" + "---|" * len(view.run_views))
    for row in view.profile_rows:
        cells = [str(c["final"]) if c else "—" for c in row["cells"]]
        lines.append(f"| {_md_cell(row['profile_id'])} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def _md_breakdowns(view: ReportView) -> list[str]:
    lines: list[str] = []
    for b in view.breakdowns:
        lines += [
            f"## By {b['key']}",
            "",
            "| run | value | n | score | success | failure |",
            "|---|---|---|---|---|---|",
        ]
        for r in b["rows"]:
            g = r["g"]
            lines.append(
                f"| {_md_cell(r['run'])} | {_md_cell(r['value'])} | {g.n} | {g.score:.1f} | {g.success} | {g.failure} |"
            )
        lines.append("")
    return lines


def _md_judges(view: ReportView) -> list[str]:
    if not view.judges:
        return []
    lines = ["## Capability analysis (LLM judge)", ""]
    lines.append(
        "| run | " + " | ".join(CAPABILITY_LABELS[c] for c in CAPABILITIES) + " | orientation | style |"
    )
    lines.append("|---|" + "---|" * (len(CAPABILITIES) + 2))
    for s in view.judges:
        caps = " | ".join(f"{s.capabilities[c]:.2f}" for c in CAPABILITIES)
        lines.append(f"| {_md_cell(s.run)} | {caps} | {s.orientation:+.2f} | {s.style:+.2f} |")
    lines.append("")
    return lines


def write_report(
    runs: Sequence[RunData],
    out_html: str | Path,
    *,
    title: str = "Sentient Benchmark report",
    preface: Preface | None = None,
) -> tuple[Path, Path]:
    """Write ``out_html`` (self-contained) and a Markdown twin ``<stem>.md`` with figures in ``<stem>_files/``."""
    html_path = Path(out_html)
    if preface is None:  # a training run folder: its curves, and an early and a late step side by side
        runs, preface = training_report(runs)
    view = ReportView.build(runs, title=title, preface=preface)
    atomic_write_text(html_path, render_html(view))
    md_path = html_path.with_suffix(".md")
    fig_dir_name = f"{html_path.stem}_files"
    extra = list(preface.figures) if preface is not None else []
    for fig in [*extra, *view.figures, *view.judge_figures]:
        atomic_write_text(html_path.parent / fig_dir_name / f"{fig.name}.svg", fig.svg)
    atomic_write_text(md_path, render_markdown(view, fig_dir_name))
    return html_path, md_path
