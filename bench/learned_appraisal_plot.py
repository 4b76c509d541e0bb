"""Draw docs/learned_appraisal.png from the shipped learned-appraisal artefact (no refit).

Left: mean emotion change per released result file, recorded by SAGE vs predicted by the offline user
with that file's agent model held out of the fit (leave-model-out). Right: the validation figures of
both hold-out schemes. Usage: python bench/learned_appraisal_plot.py [--out docs/learned_appraisal.png]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from rlver.simulator.offline.learned import load_appraisal_model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("docs/learned_appraisal.png"))
    args = parser.parse_args()
    validation = load_appraisal_model().data["validation"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=110)
    colours = {"deepseek-v3-simulator": "#4c78a8", "gpt-4o-simulator": "#e45756"}
    lmo = validation["leave_model_out"]
    for sim, colour in colours.items():
        rows = lmo.get(sim, {}).get("per_file", [])
        xs = [r["mean_recorded_change"] for r in rows]
        ys = [r["mean_predicted_change"] for r in rows]
        ax.scatter(xs, ys, color=colour, label=sim.replace("-simulator", " as the user"))
        for r, x, y in zip(rows, xs, ys, strict=True):
            name = r["file"].split("/")[-1].removesuffix("_result.jsonl")
            ax.annotate(name, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    lim = [-6, 6]
    ax.plot(lim, lim, color="#999", lw=0.8, ls="--")
    ax.set_xlabel("mean recorded change per turn (SAGE)")
    ax.set_ylabel("mean predicted change (model held out)")
    ax.set_title("per result file, leave-model-out", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    schemes = [("leave_model_out", "models held out"), ("leave_profiles_out", "profiles held out")]
    metrics = [
        ("spearman", "per-turn Spearman"),
        ("sign_agreement", "sign agreement"),
        ("model_ranking_spearman", "model-ranking Spearman"),
    ]
    width = 0.38
    for i, (key, label) in enumerate(schemes):
        vals = [validation[key]["overall"][m] or 0.0 for m, _ in metrics]
        pos = [j + (i - 0.5) * width for j in range(len(metrics))]
        bars = bx.bar(pos, vals, width, label=label)
        bx.bar_label(bars, fmt="%.2f", fontsize=7)
    for j, target in enumerate((0.70, 0.75, 0.90)):
        bx.hlines(target, j - 0.45, j + 0.45, colors="#333", linestyles=":", lw=1)
    bx.set_xticks(range(len(metrics)), [label for _, label in metrics], fontsize=8)
    bx.set_ylim(0, 1.05)
    bx.set_title("agreement with SAGE (dotted: issue targets)", fontsize=10)
    bx.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
