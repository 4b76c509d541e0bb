"""What a report shows, derived once from its runs: the run headers, the metric and comparison tables,
the breakdowns, the per-profile rows, the figures and each dialogue turn by turn.

:class:`ReportView` is built here and only laid out by :mod:`rlver.eval.report` (HTML and Markdown), so
the page and its Markdown twin cannot disagree. Text that came from a model or a data file is kept as
it is here; the HTML template escapes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlver.env.thinking import split_think
from rlver.eval.judge import Judgement, JudgeSummary
from rlver.eval.metrics import PairedComparison, metrics_table_rows, paired_comparison
from rlver.eval.report_parts import Figure, Preface
from rlver.eval.runs import RunData
from rlver.manifest import RunManifest
from rlver.records import Appraisal, Episode
from rlver.redaction import redacted
from rlver.simulator.emotion import tier_of

MAX_SHOWN_CHARS = 20_000  # a single message longer than this is cut in the report


REASONING_LABELS = (
    ("understanding", "What the agent meant"),
    ("goal_fit", "Fit with goal and hidden need"),
    ("inner_reaction", "Inner reaction"),
    ("feeling", "How it felt"),
)


@dataclass
class TurnView:
    role: str
    text: str
    thought: str | None = None
    well_formed: bool = True
    # Whether the run used think mode (None: unknown). In a no-think run a stray think tag is not a
    # "malformed think block" — the agent was never asked to think — so the report labels it neutrally.
    think_mode: bool | None = None
    appraisal: Appraisal | None = None
    reasoning: tuple[tuple[str, str], ...] = ()
    unappraised: str | None = None
    emotion: int | None = None
    tier: str = "B"
    ends: str | None = None


def _cut(text: str) -> str:
    return (
        text
        if len(text) <= MAX_SHOWN_CHARS
        else text[:MAX_SHOWN_CHARS] + f"\n[… {len(text) - MAX_SHOWN_CHARS} more characters not shown]"
    )


def _anchor(run_index: int, episode: Episode) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]", "-", episode.profile_id)[:64]
    return f"r{run_index}-{slug}-{episode.sample_index}"


def _reasoning(a: Appraisal) -> tuple[tuple[str, str], ...]:
    out = [(label, _cut(getattr(a, field))) for field, label in REASONING_LABELS if getattr(a, field).strip()]
    if a.features:
        feats = ", ".join(f"{k} {v:+.2f}" for k, v in sorted(a.features.items()))
        out.append(("Offline features", feats))
    return tuple(out)


def dialogue_view(episode: Episode, *, think: bool | None = None) -> list[TurnView]:
    """The dialogue turn by turn, each agent reply followed by the simulated user's appraisal of it.

    Assistant reply *k* (0-based) is appraised by user turn *k + 1* (user turn 0 is the opening line);
    a reply with no following appraisal is marked as such (the published protocol's unappraised 10th reply).
    ``think`` is the run's think mode (the manifest's ``env.think``); the episode's own ``meta["think"]``
    wins when present.
    """
    meta_think = episode.meta.get("think")
    think_mode = meta_think if isinstance(meta_think, bool) else think

    views: list[TurnView] = []
    n_assistant = 0
    n_user = 0
    for msg in episode.messages:
        if msg.role == "system":
            views.append(TurnView(role="system", text=_cut(msg.content)))
        elif msg.role == "user":
            turn = episode.user_turns[n_user] if n_user < len(episode.user_turns) else None
            emotion: int | None = None
            if n_user == 0:
                emotion = episode.start_emotion
            elif turn is not None and turn.appraisal is not None:
                emotion = turn.appraisal.emotion_after
            ends = None
            if turn is not None and turn.ends_dialogue:
                ends = turn.end_reason or "goodbye"
            views.append(
                TurnView(
                    role="user",
                    text=_cut(msg.content),
                    emotion=emotion,
                    tier=tier_of(emotion) if emotion is not None else "B",
                    ends=ends,
                )
            )
            n_user += 1
        else:
            split = split_think(msg.content)
            has_think = "<think>" in msg.content or "</think>" in msg.content
            next_turn = (
                episode.user_turns[n_assistant + 1] if n_assistant + 1 < len(episode.user_turns) else None
            )
            appraisal = next_turn.appraisal if next_turn is not None else None
            unappraised = None
            if appraisal is None:
                if episode.status != "finished":
                    unappraised = "the dialogue failed here"
                else:
                    unappraised = f"the dialogue ended ({episode.end_reason or 'turn limit'})"
            views.append(
                TurnView(
                    role="assistant",
                    text=_cut(split.visible),
                    thought=_cut(split.thought) if has_think else None,
                    well_formed=split.well_formed,
                    think_mode=think_mode,
                    appraisal=appraisal,
                    reasoning=_reasoning(appraisal) if appraisal is not None else (),
                    unappraised=unappraised,
                )
            )
            n_assistant += 1
    return views


def dialogue_lines(episode: Episode, *, width: int = 200) -> list[str]:
    """The dialogue as plain text lines (terminal summary, Markdown): each reply followed by the simulated
    user's emotion change; the system prompt is left out and each message is cut to ``width`` characters."""
    lines = []
    for t in dialogue_view(episode):
        if t.role == "system":
            continue
        text = " ".join(t.text.split())
        text = text if len(text) <= width else text[: width - 1] + "…"
        who = "user" if t.role == "user" else "assistant"
        lines.append(f"{who}: {text}")
        if t.appraisal is not None:
            a = t.appraisal
            lines.append(f"    (emotion {a.emotion_before} -> {a.emotion_after}, {a.change:+d})")
    return lines


def _judged(runs: Sequence[RunData]) -> list[JudgeSummary]:
    """Judge summaries with at least one judged dialogue (a judge run where every call failed has no
    numbers to draw)."""
    return [r.judge for r in runs if r.judge is not None and r.judge.n_judged > 0]


def _sampling_text(sampling: Any) -> str:
    if not isinstance(sampling, dict):
        return ""
    keys = ("temperature", "top_p", "max_tokens", "seed")
    if sampling.get("model_default"):  # temperature and top_p were not sent: the model's own applied
        return ", ".join(
            ["model-default sampling"]
            + [f"{k} {sampling[k]}" for k in keys[2:] if sampling.get(k) is not None]
        )
    return ", ".join(f"{k} {sampling[k]}" for k in keys if sampling.get(k) is not None)


def _model_text(spec: Any, sampling: Any) -> str:
    """``model (kind at url; temperature 0.7, max_tokens 512)`` from a recorded ModelSpec."""
    if not isinstance(spec, dict) or not spec.get("model"):
        return ""
    where = str(spec.get("kind") or "")
    if spec.get("base_url"):
        where += f" at {spec['base_url']}"
    details = "; ".join(x for x in (where, _sampling_text(sampling or spec.get("sampling"))) if x)
    return f"{spec['model']} ({details})" if details else str(spec["model"])


def run_setup(manifest: RunManifest) -> dict[str, str]:
    """What was evaluated against what, for the report's header: the agent and the simulator with their
    sampling, read from the run's manifest (empty for published result files, which do not say)."""
    out: dict[str, str] = {}
    agent = _model_text(manifest.agent_spec, manifest.agent_sampling)
    if agent:
        out["agent"] = agent
    sim_spec, sim = manifest.simulator_spec or {}, manifest.simulator or {}
    if isinstance(sim_spec.get("model"), dict):
        # the sampling the simulator really ran with (its describe()), else what the spec said
        out["simulator"] = "llm: " + _model_text(
            sim_spec["model"], sim.get("sampling") or sim_spec.get("sampling")
        )
    elif manifest.simulator_kind:
        version = f" ({sim['version']})" if sim.get("version") else ""
        out["simulator"] = f"{manifest.simulator_kind}{version}"
    if sim.get("prompts"):
        out["simulator prompts"] = _prompts_text(sim)
    prompt_file = (manifest.agent_prompt or {}).get("system_prompt_file")
    if isinstance(prompt_file, dict):
        out["agent prompt"] = f"{prompt_file.get('file')} (sha256 {str(prompt_file.get('sha256'))[:12]}…)"
    elif (manifest.agent_prompt or {}).get("name"):
        out["agent prompt"] = str(manifest.agent_prompt["name"])  # type: ignore[index]
    if manifest.dialogue:
        out["dialogue"] = manifest.dialogue
    return out


def _prompts_text(simulator: dict[str, Any]) -> str:
    """The simulator's prompt set and, for one that sends published text, the files with their sha256."""
    files = simulator.get("published_files")
    if not isinstance(files, dict) or not files:
        return f"{simulator['prompts']} (rlver's own prompts)"
    listed = ", ".join(f"{name} sha256 {str(digest)[:12]}…" for name, digest in files.items())
    return f"{simulator['prompts']}: {listed}"


def _comparisons(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    if len(runs) < 2:
        return []
    base = runs[0]
    out = []
    for run in runs[1:]:
        cmp: PairedComparison = paired_comparison(run.episodes, base.episodes)
        if cmp.n_pairs:  # no shared finished dialogue: nothing to compare (and no numbers to show)
            out.append({"name": run.name, "cmp": cmp})
    return out


def _profile_rows(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    order: list[tuple[str, int]] = []
    maps: list[dict[tuple[str, int], Episode]] = []
    for run in runs:
        m: dict[tuple[str, int], Episode] = {}
        for ep in run.episodes:
            key = (ep.profile_id, ep.sample_index)
            m[key] = ep
            if key not in order:
                order.append(key)
        maps.append(m)
    seen: set[tuple[str, int]] = set()
    rows = []
    for key in order:
        if key in seen:
            continue
        seen.add(key)
        cells: list[dict[str, Any] | None] = []
        for i, m in enumerate(maps):
            found = m.get(key)
            if found is None:
                cells.append(None)
                continue
            cells.append(
                {
                    "anchor": _anchor(i, found),
                    "final": found.final_emotion if found.status == "finished" else "failed",
                    "tier": tier_of(found.final_emotion) if found.status == "finished" else "F",
                    "turns": found.assistant_turns,
                    "ended": found.end_reason or ("error" if found.status != "finished" else ""),
                }
            )
        deltas: list[int] = []
        base = maps[0].get(key)
        for m in maps[1:]:
            other = m.get(key)
            if base is not None and other is not None and base.status == other.status == "finished":
                deltas.append(other.final_emotion - base.final_emotion)
        pid, sample = key
        label = pid if len(pid) <= 28 else pid[:27] + "…"
        if sample:
            label += f" #{sample}"
        rows.append({"profile_id": pid, "label": label, "cells": cells, "deltas": deltas})
    return rows


def _breakdowns(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    keys: list[str] = []
    for run in runs:
        for key in run.metrics.breakdowns:
            if key not in keys:
                keys.append(key)
    out = []
    for key in keys:
        rows = []
        for run in runs:
            for value, g in run.metrics.breakdowns.get(key, {}).items():
                rows.append({"run": run.name, "value": value, "g": g})
        out.append({"key": key, "rows": rows})
    return out


def judge_by_key(run: RunData) -> dict[tuple[str, int], Judgement]:
    return {(j.profile_id, j.sample_index): j.judgement for j in run.judged if j.judgement is not None}


def build_figures(runs: Sequence[RunData]) -> tuple[list[Figure], list[Figure]]:
    from rlver.eval import plots

    # Runs where no dialogue finished have nothing to draw; a chart of zeros would look like a result.
    named = [(r.name, r.metrics) for r in runs if r.metrics.n > 0]
    figures = []
    if named:
        figures += [
            Figure(
                "trajectory",
                "Emotion trajectory: mean emotion per turn with interquartile band",
                plots.trajectory_svg(named),
            ),
            Figure("final_histogram", "Histogram of final emotions", plots.histogram_svg(named)),
        ]
    if any(m.success or m.failure for _, m in named):
        figures.append(Figure("outcomes", "Success and failure rates per run", plots.outcome_bars_svg(named)))
    judges = _judged(runs)
    judge_figures = []
    if judges:
        judge_figures = [
            Figure(
                "capabilities_radar", "Radar chart of the five judged capabilities", plots.radar_svg(judges)
            ),
            Figure(
                "social_coordinate", "Runs on the social cognition coordinate", plots.coordinate_svg(judges)
            ),
        ]
    return figures, judge_figures


FigureSet = tuple[list[Figure], list[Figure]]


@dataclass(frozen=True)
class RunView:
    """One run's header as both renderers show it."""

    name: str
    path: str
    counts: str
    truncation: str
    #: What was evaluated against what (:func:`run_setup`).
    setup: dict[str, str]
    manifest_json: str


@dataclass(frozen=True)
class ReportView:
    """Everything a report shows, derived once from the runs; :func:`render_html` and
    :func:`render_markdown` only lay it out, so the page and its Markdown twin cannot disagree."""

    title: str
    runs: Sequence[RunData]
    run_views: list[RunView]
    metric_rows: list[dict[str, Any]]
    comparisons: list[dict[str, Any]]
    figures: list[Figure]
    judge_figures: list[Figure]
    judges: list[JudgeSummary]
    breakdowns: list[dict[str, Any]]
    profile_rows: list[dict[str, Any]]
    preface: Preface | None = None

    @classmethod
    def build(
        cls,
        runs: Sequence[RunData],
        *,
        title: str = "Sentient Benchmark report",
        figures: FigureSet | None = None,
        preface: Preface | None = None,
    ) -> ReportView:
        """Derive the tables (and draw the figures, unless given) of a report on ``runs``."""
        figs, judge_figures = figures if figures is not None else build_figures(runs)
        return cls(
            title=title,
            runs=runs,
            run_views=[_run_view(r) for r in runs],
            metric_rows=metrics_table_rows([(r.name, r.metrics) for r in runs]),
            comparisons=_comparisons(runs),
            figures=figs,
            judge_figures=judge_figures,
            judges=_judged(runs),
            breakdowns=_breakdowns(runs),
            profile_rows=_profile_rows(runs),
            preface=preface,
        )


def _run_view(run: RunData) -> RunView:
    manifest_json = json.dumps(redacted(run.manifest.to_json()), ensure_ascii=False, indent=2, default=str)
    return RunView(
        name=run.name,
        path=str(run.path),
        counts=run.metrics.counts(),
        truncation=run.metrics.truncation(),
        setup=run_setup(run.manifest),
        manifest_json=manifest_json,
    )


def dialogue_item(
    run_index: int, ep: Episode, judged: dict[tuple[str, int], Judgement], think: bool | None
) -> dict[str, Any]:
    """One dialogue as the template draws it (header, judge ratings, turns with appraisals)."""
    return {
        "anchor": _anchor(run_index, ep),
        "profile_id": ep.profile_id,
        "sample_index": ep.sample_index,
        "final": ep.final_emotion,
        "tier": tier_of(ep.final_emotion),
        "turns": ep.assistant_turns,
        "ended": ep.end_reason or "",
        "status": ep.status,
        "error": (ep.error or "")[:500],
        "error_kind": ep.error_kind or "error",
        "topic": str(ep.meta.get("topic", "") or ""),
        "judge": judged.get((ep.profile_id, ep.sample_index)),
        "turns_view": dialogue_view(ep, think=think),
    }


def preface_view(runs: Sequence[RunData], preface: Preface | None) -> dict[str, Any] | None:
    if preface is None:
        return None
    featured = []
    for f in preface.featured:
        run = runs[f.run]
        item = dialogue_item(f.run, f.episode, judge_by_key(run), run.manifest.think)
        item["anchor"] = "featured-" + item["anchor"]  # the full list below keeps the plain anchor
        featured.append({"caption": f.caption, "d": item})
    return {"paragraphs": list(preface.paragraphs), "figures": list(preface.figures), "featured": featured}
