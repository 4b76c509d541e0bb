"""The summary of a calibration's predictions: agreement per turn and per file (the model ranking),
with the files a learned simulator was fitted on kept apart from those it never saw
(:func:`split_groups`), as ``calibration.json`` states it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlver.fidelity.released import FileData
from rlver.fidelity.replay_check import TrajectoryCheck
from rlver.stats import agreement, spearman


def fitted_files(simulator_info: dict[str, Any]) -> frozenset[str]:
    """The sha256 of every released file a learned simulator was fitted on (its provenance); empty if none."""
    learned = simulator_info.get("learned")
    if not isinstance(learned, dict):
        return frozenset()
    return frozenset(
        str(d["sha256"]) for d in learned.get("data", []) if isinstance(d, dict) and "sha256" in d
    )


def _model_ranking(rows: Sequence[dict[str, Any]]) -> float | None:
    """Spearman of the files' mean recorded and predicted changes (one file is one agent model)."""
    ranked = [r for r in rows if r["mean_recorded_change"] is not None]
    if len(ranked) < 3:
        return None
    return spearman([r["mean_recorded_change"] for r in ranked], [r["mean_predicted_change"] for r in ranked])


def _group(
    label: str, rows: Sequence[dict[str, Any]], by_file: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    preds = [p for r in rows for p in by_file[r["path"]]]
    stats = agreement([int(p["recorded_change"]) for p in preds], [int(p["predicted_change"]) for p in preds])
    return {"label": label, "files": len(rows), **stats, "model_ranking_spearman": _model_ranking(rows)}


def split_groups(
    rows: Sequence[dict[str, Any]], by_file: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Agreement per simulator folder and, for a learned simulator, on the files its fit never saw.

    A released file's folder names the LLM that played the user, and one simulator's judgements are
    only comparable with its own. Files whose sha256 is in the fit's provenance are in-sample: their
    figures say how well the fit memorised, not how it generalises, so they are reported apart.
    """
    folders = sorted({Path(r["path"]).resolve().parent.name for r in rows})
    learned = any(r["in_fit"] is not None for r in rows)
    if not learned and len(folders) <= 1:
        return []  # one group, the overall row itself
    splits = (
        [
            ("files the fit never saw", [r for r in rows if not r["in_fit"]]),
            ("files the fit was fitted on (in-sample)", [r for r in rows if r["in_fit"]]),
        ]
        if learned
        else [("all files", list(rows))]
    )
    groups: list[dict[str, Any]] = []
    for name, part in splits:
        if not part:
            continue
        groups.append(_group(name, part, by_file))
        if len(folders) > 1:
            for folder in folders:
                sub = [r for r in part if Path(r["path"]).resolve().parent.name == folder]
                if sub:
                    groups.append(_group(f"{name} / {folder}", sub, by_file))
    return groups


def summarise(
    files: Sequence[FileData],
    predictions: Sequence[dict[str, Any]],
    trajectories: dict[str, list[TrajectoryCheck]] | None,
    fitted: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Per-file and overall agreement; ``fitted``: the sha256 of the files a learned simulator was fitted on."""
    by_file: dict[str, list[dict[str, Any]]] = {fd.path: [] for fd in files}
    for p in predictions:
        by_file.setdefault(p["file"], []).append(p)
    rows: list[dict[str, Any]] = []
    for fd in files:
        preds = by_file[fd.path]
        rec = [int(p["recorded_change"]) for p in preds]
        pre = [int(p["predicted_change"]) for p in preds]
        stats = agreement(rec, pre)
        row: dict[str, Any] = {
            "path": fd.path,
            "sha256": fd.sha256,
            "in_fit": (fd.sha256 in fitted) if fitted else None,
            "dialogues": len(fd.episodes),
            "turns": stats["turns"],
            "mean_recorded_change": round(float(np.mean(rec)), 6) if rec else None,
            "mean_predicted_change": round(float(np.mean(pre)), 6) if pre else None,
            "spearman": stats["spearman"],
            "sign_agreement": stats["sign_agreement"],
            "mae": stats["mae"],
            "trajectories_identical": None,
            "tokens": sum(int(p.get("tokens", 0) or 0) for p in preds),
        }
        if trajectories is not None:
            checks = trajectories.get(fd.path, [])
            row["trajectories_identical"] = all(c.identical for c in checks)
            row["trajectory_mismatches"] = [
                {"dialogue_id": c.dialogue_id, "problems": c.problems} for c in checks if not c.identical
            ]
        rows.append(row)
    overall = agreement(
        [int(p["recorded_change"]) for p in predictions], [int(p["predicted_change"]) for p in predictions]
    )
    return {
        "overall": overall,
        "files": rows,
        "model_ranking_spearman": _model_ranking(rows),
        "groups": split_groups(rows, by_file),
    }
