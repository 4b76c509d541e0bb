"""Fit and measure the transfer appraisal (rlver.simulator.offline.crosslingual) on the released SAGE judgements.

For every appraised turn of the released ``*_result.jsonl`` files it computes the cross-lingual features
(the Chinese versions) from what the simulator saw at that turn, then fits a ridge regression with the
learned appraisal's own solver and validation (``rlver.fidelity.appraisal_fit``: agent models held out,
profiles held out; per-turn Spearman, sign agreement, model-ranking Spearman), so its figures stand
beside the char-n-gram model's. With ``--out`` it writes the artefact the English offline user loads
(``src/rlver/simulator/offline/data/appraisal_xl.json``).

Usage: python bench/transfer_appraisal_fit.py [--data ../shared/data/sage_released] [--out PATH]
(about 1 minute on 2 CPU cores: eleven dense refits on ~7,200 turns).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlver.errors import RlverError
from rlver.fidelity.appraisal_fit import (
    Turn,
    appraised_replies,
    cross_validate,
    find_result_files,
    fit,
    index_keys,
    published_profile_parts,
    released_turn,
)
from rlver.io import file_sha256
from rlver.records import Episode
from rlver.simulator.offline.crosslingual import (
    XL_FEATURES_VERSION,
    XL_NAMES,
    XLProfile,
    content_tokens,
    structure_faults,
    xl_features,
)
from rlver.transcripts.published import read_published

#: Ridge on the standardised dense block (the same solver as the learned appraisal, no n-grams).
SETTINGS: dict[str, Any] = {
    "min_df": 1,
    "l2": 3.0,
    "cg_steps": 200,
    "profile_folds": 5,
    "joint_holdout": False,
}


def xl_profile(ep: Episode) -> XLProfile:
    """The transfer appraisal's view of a released record's profile (scene split at the hidden need)."""
    return XLProfile.of("zh", *published_profile_parts(ep))


def episode_xl_turns(ep: Episode, rel: str, path: Path) -> list[Turn]:
    """The appraised turns of one released dialogue with their transfer features (no n-gram keys)."""
    profile = xl_profile(ep)
    out: list[Turn] = []
    for r in appraised_replies(ep, lambda reply: content_tokens(reply, "zh")):
        dense = xl_features(
            r.reply,
            profile,
            last_user=r.last_user,
            previous=r.previous,
            emotion=r.emotion,
            turn=r.turn,
            changes=r.changes,
        )
        out.append(released_turn(r, ep, rel, path, set(), dense))
    return out


def read_xl_turns(data: Path) -> tuple[list[Path], list[Turn]]:
    files = find_result_files(data)
    turns: list[Turn] = []
    for path in files:
        rel = str(path.relative_to(data)) if path.is_relative_to(data) else path.name
        for ep in read_published(path):
            turns.extend(episode_xl_turns(ep, rel, path))
    return files, turns


def fit_transfer(data: Path, validate: bool = True) -> dict[str, Any]:
    """The artefact (a JSON-able dict): weights fitted on every released turn, with held-out figures."""
    files, turns = read_xl_turns(data)
    validation = cross_validate(turns, SETTINGS) if validate else {}
    final = fit(turns, index_keys(turns), SETTINGS)

    def rnd(values: Any) -> list[float]:
        return [float(f"{v:.6g}") for v in values]

    return {
        "features_version": XL_FEATURES_VERSION,
        "fitted_on": "zh",
        "target": "emotion change after - before of the released SAGE simulator, per appraised turn",
        "data": [{"file": str(p.relative_to(data)), "sha256": file_sha256(p)} for p in files],
        "turns": len(turns),
        "settings": SETTINGS,
        "names": list(XL_NAMES),
        "weights": rnd(final.dense_weights),
        "mean": rnd(final.mean),
        "scale": rnd(final.scale),
        "low": rnd(np.min([t.dense for t in turns], axis=0)),
        "high": rnd(np.max([t.dense for t in turns], axis=0)),
        "intercept": rnd([final.intercept])[0],
        "calibration": {"slope": rnd([final.slope])[0], "offset": rnd([final.offset])[0]},
        "validation": {k: {s: _slim(v) for s, v in part.items()} for k, part in validation.items()},
    }


def ablations(data: Path) -> dict[str, dict[str, Any]]:
    """Held-out-agent-model figures of the reply features alone and of the user's state alone.

    The state (emotion, turn, style, the user's own earlier changes) carries most of the Chinese
    agreement; only the reply features tell two replies in the same state apart, so their own figure is
    the one that speaks for English replies.
    """
    _, turns = read_xl_turns(data)
    n_text = XL_NAMES.index("emotion")
    full = [list(t.dense) for t in turns]
    out: dict[str, dict[str, Any]] = {}
    for label, part in (("reply features only", slice(0, n_text)), ("user state only", slice(n_text, None))):
        for t, x in zip(turns, full, strict=True):
            t.dense = x[part]
        out[label] = _slim(cross_validate(turns, SETTINGS)["leave_model_out"]["overall"])
    return out


def structure_check(data: Path) -> dict[str, tuple[int, float]]:
    """How often each penalty the English user adds by hand fires on the released Chinese replies, and
    the mean change SAGE recorded for those turns: (count, mean change) per fault, and for all turns.

    The penalties are set by us because the released replies (written by capable models) almost never
    show these faults; this says how rare they are and which way SAGE went when one did occur.
    """
    seen: dict[str, list[int]] = {"all turns": []}
    for turn in read_xl_turns(data)[1]:
        faults = dict(structure_faults(turn.reply, "zh"))
        if faults.get("out_of_order", 0) <= -3:
            faults["out_of_order, two or more faults"] = 1.0
        for name in ["all turns", *faults]:
            seen.setdefault(name, []).append(turn.change)
    return {k: (len(v), round(float(np.mean(v)), 2)) for k, v in seen.items()}


def _slim(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k != "per_file"}


def main() -> None:
    parser = argparse.ArgumentParser()
    default = Path(os.environ.get("RLVER_SHARED_DATA", "../shared/data")) / "sage_released"
    parser.add_argument("--data", type=Path, default=default)
    parser.add_argument("--out", type=Path, default=None, help="Write the artefact here.")
    parser.add_argument(
        "--ablate",
        action="store_true",
        help="Also measure the reply features alone and the user state alone.",
    )
    parser.add_argument(
        "--structure",
        action="store_true",
        help="Only count the hand-set penalties on the released replies (with their mean recorded change).",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    if args.structure:
        for name, (count, mean) in structure_check(args.data).items():
            print(f"{name}: {count} turns, mean recorded change {mean:+.2f}")
        return
    try:
        artefact = fit_transfer(args.data)
    except RlverError as exc:
        raise SystemExit(f"transfer_appraisal_fit: {exc}") from None
    for scheme, part in artefact["validation"].items():
        for sim, a in part.items():
            print(
                f"{scheme} / {sim}: {a['turns']} turns, per-turn Spearman {a['spearman']}, "
                f"sign {a['sign_agreement']}, model ranking {a['model_ranking_spearman']} ({a['files']} files)"
            )
    ranked = sorted(zip(XL_NAMES, artefact["weights"], strict=True), key=lambda kv: -abs(kv[1]))
    print("weights (per standard deviation):", ", ".join(f"{n} {w:+.2f}" for n, w in ranked))
    if args.ablate:
        for label, a in ablations(args.data).items():
            print(
                f"{label} (agent models held out): per-turn Spearman {a['spearman']}, sign {a['sign_agreement']}, "
                f"model ranking {a['model_ranking_spearman']}"
            )
    print(f"{artefact['turns']} turns, {time.perf_counter() - started:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(artefact, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
