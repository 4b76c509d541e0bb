"""``rlver demo``: the whole loop, offline, in a few minutes on a laptop CPU.

Builds the tiny model, evaluates it on held-out bundled profiles against the offline simulated user,
trains it with GRPO (the ``tiny-offline`` preset) for a fixed number of steps, evaluates again, and writes a
report: the reward curve and the before/after benchmark numbers, plus both evaluations' transcripts
(open them with ``rlver report``). The tiny model does not become a good listener in three minutes —
the point is to see every part of the machinery work and the reward move.

The default is a fixed step count, not a time budget: with the same seed, on CPU in float32, two runs
print the same numbers, so the README's headline can be checked. ``minutes`` (``--minutes``) trains for
a time budget instead; how many steps fit then depends on the machine and its load.
"""

from __future__ import annotations

import base64
import html
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlver.io import atomic_write_bytes, atomic_write_json, atomic_write_text
from rlver.records import Episode


@dataclass
class DemoResult:
    out_dir: Path
    report_md: Path
    report_html: Path
    before: dict[str, Any]
    after: dict[str, Any]
    steps: int
    wall_s: float
    peak_rss_mb: float
    compare_html: Path | None = None  # the standard `rlver report` of the two evaluations


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports KiB, macOS bytes)."""
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 / 1024 if sys.platform == "darwin" else peak / 1024


def _write_transcript(path: Path, episodes: list[Episode], manifest: dict[str, Any]) -> None:
    from rlver.transcripts.native import TranscriptWriter, build_manifest

    if path.exists():
        path.unlink()
    writer = TranscriptWriter(path, build_manifest(**manifest))
    for ep in episodes:
        writer.append(ep)


def _headline(episodes: list[Episode]) -> dict[str, Any]:
    from rlver.eval.metrics import compute_metrics

    m = compute_metrics(episodes)
    return {
        "score": None if m.score is None else round(m.score, 2),
        "success": m.success,
        "failure": m.failure,
        "mean_turns": round(m.mean_turns, 2),
        "n": m.n,
        "mean_reply_tokens": round(m.mean_policy_tokens / max(m.mean_turns, 1e-9), 1),
    }


def reward_curve_png(history: list[dict[str, Any]], evals: list[dict[str, Any]]) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    steps = [h["step"] for h in history]
    ax.plot(
        steps,
        [100 * h["rollout/reward_mean"] for h in history],
        color="#4c78a8",
        alpha=0.5,
        label="training dialogues",
    )
    if len(history) >= 5:
        k = 5
        smooth = [
            sum(100 * h["rollout/reward_mean"] for h in history[max(0, i - k + 1) : i + 1]) / min(k, i + 1)
            for i in range(len(history))
        ]
        ax.plot(steps, smooth, color="#4c78a8", label="training (5-step mean)")
    if evals:
        ax.plot(
            [e["step"] for e in evals],
            [e["score"] for e in evals],
            "o-",
            color="#e45756",
            label="held-out score",
        )
    ax.set_xlabel("RL step")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_ylabel("final emotion (reward x 100)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _example(episodes: list[Episode]) -> str:
    ep = episodes[0]
    lines = []
    for m in ep.messages[1:5]:
        lines.append(f"{m.role}: {m.content[:200]}")
    return "\n".join(lines)


#: Steps of the default demo: what fits in about three minutes on a 2-core CPU (docs/training.md).
DEMO_STEPS = 100


def run_demo(
    out_dir: Path,
    *,
    steps: int = DEMO_STEPS,
    minutes: float | None = None,
    seed: int = 0,
    progress: bool = True,
) -> DemoResult:
    """Run the demo for ``steps`` GRPO steps, or for a time budget of ``minutes`` when given."""
    import torch

    from rlver.train.config import load_train_config
    from rlver.train.logger import read_metrics
    from rlver.train.trainer import Trainer

    started = time.perf_counter()
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2)))
    out_dir.mkdir(parents=True, exist_ok=True)
    run_dir = out_dir / "run"
    if run_dir.exists():  # a demo always starts from scratch
        import shutil

        shutil.rmtree(run_dir)
    config = load_train_config(
        "tiny-offline",
        [
            f"run.steps={100000 if minutes is not None else steps}",
            f"run.seed={seed}",
            f"run.progress={str(progress).lower()}",
            "run.checkpoint_every=0",
            "eval.at_start=false",
        ],
    )
    trainer = Trainer(config, run_dir)
    manifest = {"model": "tiny", "simulator": trainer.simulator.describe(), "profiles": config.eval.profiles}

    before_eps = trainer.evaluate_episodes()
    _write_transcript(
        out_dir / "before" / "transcript.jsonl",
        before_eps,
        {**manifest, "stage": "before", "run_name": "before training"},
    )
    setup_and_before = time.perf_counter() - started
    trainer.eval_history.append({"step": 0, **_eval_score(before_eps)})
    budget = None
    if minutes is not None:  # keep time for the final evaluation
        budget = max(10.0, minutes * 60.0 - setup_and_before - 20.0)
    trainer.train(time_budget_s=budget)
    after_eps = trainer.evaluate_episodes()
    _write_transcript(
        out_dir / "after" / "transcript.jsonl",
        after_eps,
        {**manifest, "stage": "after", "steps": trainer.step, "run_name": f"after {trainer.step} steps"},
    )
    compare_html = _compare_report(out_dir)

    before, after = _headline(before_eps), _headline(after_eps)
    history = read_metrics(run_dir)
    evals = [*trainer.eval_history, {"step": trainer.step, **_eval_score(after_eps)}]
    png = reward_curve_png([h for h in history if "rollout/reward_mean" in h], evals)
    atomic_write_bytes(out_dir / "reward_curve.png", png)
    wall = time.perf_counter() - started
    rss = peak_rss_mb()
    summary = {
        "before": before,
        "after": after,
        "steps": trainer.step,
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(rss, 1),
        "offline_user": offline_user_statement(trainer.simulator.describe(), _languages(config)),
    }
    atomic_write_json(out_dir / "summary.json", summary)
    md, page = _render(summary, png, before_eps, after_eps)
    atomic_write_text(out_dir / "report.md", md)
    atomic_write_text(out_dir / "report.html", page)
    return DemoResult(
        out_dir,
        out_dir / "report.md",
        out_dir / "report.html",
        before,
        after,
        trainer.step,
        wall,
        rss,
        compare_html,
    )


def _languages(config: Any) -> set[str]:
    """Languages of the demo's evaluation profiles (the statement above depends on them)."""
    from rlver.profiles.sets import load_profile_set

    try:
        return {p.language for p in load_profile_set(config.eval.profiles)}
    except Exception:  # a profile set that cannot be read here is reported elsewhere
        return set()


def _compare_report(out_dir: Path) -> Path:
    """The standard benchmark report (``rlver report before after``): metrics, paired comparison,
    per-profile table and every dialogue turn by turn with the simulated user's appraisals."""
    from rlver.eval.report import write_report
    from rlver.eval.runs import load_run

    runs = [load_run(out_dir / "before"), load_run(out_dir / "after")]
    html_path, _ = write_report(runs, out_dir / "compare.html", title="rlver demo: before and after training")
    return html_path


def offline_user_statement(simulator: dict[str, Any], languages: set[str]) -> str:
    """Which offline user the demo trains against and how well it agrees with the published simulator."""
    learned = simulator.get("learned") or {}
    lmo = (learned.get("validation") or {}).get("leave_model_out", {}).get("overall", {})
    parts = []
    if "zh" in languages and learned:
        parts.append(
            "Chinese profiles: the learned appraisal (fitted on released SAGE judgements; on agent models "
            f"it never saw: per-turn Spearman {lmo.get('spearman')}, sign agreement "
            f"{lmo.get('sign_agreement')}, model-ranking Spearman {lmo.get('model_ranking_spearman')})"
        )
    if "en" in languages or not parts:
        parts.append(
            "English profiles: the lexicon appraisal, a transparent rule set whose agreement with SAGE "
            "is unmeasured (there are no released English judgements; on the Chinese ones the lexicon "
            "scores about 0 per-turn Spearman): a smoke test of the training loop, not a proxy"
        )
    return "Offline user: " + "; ".join(parts) + "."


def _eval_score(episodes: list[Episode]) -> dict[str, float]:
    from rlver.train.trainer import summarise_eval

    return summarise_eval(episodes)


_ROWS = (
    ("score", "Score (mean final emotion, 0-100)"),
    ("success", "Success (final emotion 100)"),
    ("failure", "Failure (final emotion < 10)"),
    ("mean_turns", "Assistant turns per dialogue"),
    ("mean_reply_tokens", "Tokens per reply"),
    ("n", "Dialogues"),
)


def _render(
    summary: dict[str, Any], png: bytes, before_eps: list[Episode], after_eps: list[Episode]
) -> tuple[str, str]:
    b, a = summary["before"], summary["after"]
    md = [
        "# rlver demo: the tiny model trained against the offline simulated user",
        "",
        f"{summary['steps']} GRPO steps, {summary['wall_s']:.0f} s, peak memory {summary['peak_rss_mb']:.0f} MB.",
        "",
        "![reward curve](reward_curve.png)",
        "",
        "| held-out users | before | after |",
        "| --- | ---: | ---: |",
        *[f"| {label} | {b[k]} | {a[k]} |" for k, label in _ROWS],
        "",
        summary.get("offline_user", ""),
        "",
        "The offline user is a transparent proxy (no LLM), not the Sentient Benchmark: these numbers only",
        "show that the training loop works. Every dialogue before and after, turn by turn with the",
        "simulated user's appraisals: [compare.html](compare.html) (`rlver report before after`;",
        "`rlver inspect after` reads them in the terminal).",
        "",
        "## One dialogue before training",
        "",
        "```",
        _example(before_eps),
        "```",
        "",
        "## The same user after training",
        "",
        "```",
        _example(after_eps),
        "```",
        "",
    ]
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td><td>{html.escape(str(b[k]))}</td><td>{html.escape(str(a[k]))}</td></tr>"
        for k, label in _ROWS
    )
    img = base64.b64encode(png).decode("ascii")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>rlver demo</title>
<style>body{{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3rem .6rem}}td+td{{text-align:right}}
pre{{background:#f6f6f6;padding:.6rem;white-space:pre-wrap}}</style></head><body>
<h1>rlver demo</h1>
<p>The tiny model trained with GRPO against the offline simulated user: {summary["steps"]} steps,
{summary["wall_s"]:.0f} s, peak memory {summary["peak_rss_mb"]:.0f} MB.</p>
<img alt="reward curve: training reward and held-out score per step" src="data:image/png;base64,{img}">
<table><tr><th>held-out users</th><th>before</th><th>after</th></tr>{rows}</table>
<p>{html.escape(summary.get("offline_user", ""))}</p>
<p>The offline user is a transparent proxy (no LLM), not the Sentient Benchmark: these numbers only show
that the training loop works.</p>
<p><a href="compare.html">The full before/after report</a>: paired comparison, per-user table and every
dialogue turn by turn with the simulated user's appraisals.</p>
<h2>One dialogue before training</h2><pre>{html.escape(_example(before_eps))}</pre>
<h2>The same user after training</h2><pre>{html.escape(_example(after_eps))}</pre>
</body></html>
"""
    return "\n".join(md), page
