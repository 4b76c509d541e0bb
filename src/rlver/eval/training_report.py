"""``rlver report`` on a training run folder: its curves, its reward-hacking watch, and dialogues of an
early and a late step side by side.

A training run's ``transcript.jsonl`` (``kind: train``, each dialogue tagged with its step; see
:mod:`rlver.transcripts.training`) holds thousands of dialogues of a policy that changed while it wrote
them: one table or histogram over all of them would mix the model at step 1 with the model at step
1000. So the report shows the run as two runs — its first written step and its last — through the
standard sections (metrics, trajectories, per-profile table, every dialogue of those two steps), under
a preface drawn from ``metrics.jsonl``: the reward curve with the held-out scores, the ``hack/*`` rates
per step, and the first dialogue of each of the two steps, side by side.

The reward curve is the demo's (``rlver demo`` draws it with :func:`reward_curve_figure` too): one home
for how a training run's reward is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlver.eval.metrics import compute_metrics
from rlver.eval.report_parts import Featured, Figure, Preface, first_shared_pair
from rlver.eval.runs import RunData
from rlver.transcripts.training import episode_step, read_metrics

TRAIN_KIND = "train"


def is_training(run: RunData) -> bool:
    """Whether ``run`` is a training run's transcript (its manifest says ``kind: train``)."""
    return run.manifest.kind == TRAIN_KIND


def held_out_points(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``{"step", "score"}`` of every held-out evaluation logged in a run's metrics rows."""
    return [{"step": r["step"], "score": r["eval/score"]} for r in rows if r.get("eval/score") is not None]


def reward_curve_figure(
    rows: Sequence[dict[str, Any]], evals: Sequence[dict[str, Any]], protocol: str | None = None
) -> Figure:
    """The reward curve of a run's metrics rows (those with a training reward) with ``evals`` on top."""
    from rlver.eval import plots  # pygal: imported when a figure is drawn

    history = [r for r in rows if r.get("rollout/reward_mean") is not None]
    return Figure(
        "reward_curve",
        "Reward curve: training reward and held-out score per step",
        plots.reward_curve_svg(history, evals, protocol),
    )


def hack_figure(rows: Sequence[dict[str, Any]]) -> Figure | None:
    """The ``hack/*`` rates per step, or None for a run that logged none."""
    from rlver.eval import plots

    svg = plots.hack_rates_svg(rows)
    return None if svg is None else Figure("hack_rates", "Reward-hacking watch: hack/* rates per step", svg)


def step_run(run: RunData, step: int) -> RunData:
    """The dialogues of one training step as a run of their own (named ``RUN · step N``)."""
    episodes = [ep for ep in run.episodes if episode_step(ep) == step]
    return RunData(
        name=f"{run.name} · step {step}",
        path=run.path,
        format=run.format,
        manifest=run.manifest,
        episodes=episodes,
        metrics=compute_metrics(episodes),
    )


def _steps(run: RunData) -> list[int]:
    return sorted({s for ep in run.episodes if (s := episode_step(ep)) is not None})


def training_report(runs: Sequence[RunData]) -> tuple[list[RunData], Preface | None]:
    """The runs a report shows, and its preface, when training runs are among them.

    One training run: its first and last written steps as two runs, with the training preface.
    Several runs (a comparison): each training run stands for its last written step, no preface.
    Anything else comes back as it is.
    """
    if not any(is_training(r) for r in runs):
        return list(runs), None
    if len(runs) > 1:
        return [step_run(r, _steps(r)[-1]) if is_training(r) and _steps(r) else r for r in runs], None
    run = runs[0]
    steps = _steps(run)
    if not steps:
        return list(runs), _preface(run, [])
    parts = [step_run(run, s) for s in dict.fromkeys((steps[0], steps[-1]))]
    return parts, _preface(run, parts)


def _preface(run: RunData, parts: list[RunData]) -> Preface:
    rows = read_metrics(run.run_dir)
    held_out = run.manifest.model_extra.get("held_out") if run.manifest.model_extra else None
    protocol = held_out.get("dialogue") if isinstance(held_out, dict) else None
    figures = []
    if rows:
        figures.append(reward_curve_figure(rows, held_out_points(rows), protocol))
        hack = hack_figure(rows)
        figures += [hack] if hack is not None else []
    return Preface(
        paragraphs=_paragraphs(run, rows, parts, protocol),
        figures=tuple(figures),
        featured=_featured(parts),
    )


def _featured(parts: list[RunData]) -> tuple[Featured, ...]:
    """The first dialogue of the early step and of the late step (the same user when both have one)."""
    if not parts or not parts[0].episodes or not parts[-1].episodes:
        return ()
    if len(parts) == 1:
        return (Featured(f"A dialogue of step {_steps(parts[0])[0]}", 0, parts[0].episodes[0]),)
    early, late = first_shared_pair(parts[0].episodes, parts[1].episodes)
    return (
        Featured(f"Early: step {episode_step(early)}", 0, early),
        Featured(f"Late: step {episode_step(late)}", 1, late),
    )


def _paragraphs(
    run: RunData, rows: list[dict[str, Any]], parts: list[RunData], protocol: str | None
) -> tuple[str, ...]:
    m = run.manifest
    logged = [r["step"] for r in rows if "rollout/reward_mean" in r]
    extra = m.model_extra or {}
    every = extra.get("transcript_every")
    what = (
        f"Training run {run.name}: {extra.get('algorithm') or 'RL'}, {len(logged)} step(s) logged of "
        f"{m.steps or '?'}, {len(run.episodes)} training dialogues in its transcript"
        + (f" (every {every}th step)" if isinstance(every, int) and every > 1 else "")
        + (f", on the {m.dialogue}" if m.dialogue else "")
        + "."
    )
    paragraphs = [what]
    if rows:
        paragraphs.append(
            "The curve: each step's mean training reward (x 100, so it reads as a final emotion) and the "
            f"held-out score{f' ({protocol})' if protocol else ''} at the steps that evaluated. The hack/* "
            "rates are the shares of each step's replies that trip the offline user's vetoes: a reward "
            "that rises with them is the simulated user being gamed, not a better listener."
        )
        paragraphs.append(_hack_text(rows))
    else:
        paragraphs.append(f"No metrics.jsonl in {run.run_dir}: no curves to draw.")
    if len(parts) == 2:
        paragraphs.append(
            f"Below, side by side: the first dialogue of {parts[0].name} and of {parts[1].name} (the "
            "same user where both steps met one; the first, not the best). The sections after them "
            "compare those two steps; every dialogue of both is listed at the end."
        )
    return tuple(paragraphs)


def _hack_text(rows: list[dict[str, Any]]) -> str:
    """The watched rates at the first and the last step that logged them, in words."""
    from rlver.rollout.hackwatch import WATCHED

    hacked = [r for r in rows if any(k in r for k in WATCHED)]
    if not hacked:
        return "This run logged no hack/* rates."

    def rates(row: dict[str, Any]) -> str:
        return ", ".join(
            f"{k.removeprefix('hack/').removesuffix('_rate').replace('_', ' ')} {100 * row[k]:.0f}%"
            for k in WATCHED
            if isinstance(row.get(k), int | float)
        )

    first, last = hacked[0], hacked[-1]
    return f"hack/* at step {first['step']}: {rates(first)}; at step {last['step']}: {rates(last)}."
