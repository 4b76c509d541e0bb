"""Would more released judgements lift the learned appraisal? A learning curve, and a "more files" check.

Issue 14's per-turn target (Spearman >= 0.70 on released files the fit never saw) is missed, and four
rounds of feature and model variants moved the figure by less than 0.01 (docs/simulator.md). This script
asks the other question: is the fit short of *data*? It fits the shipped model family (the settings of
``rlver simulator fit``) on growing shares of the fitting files' dialogues and scores each fit on turns it
never saw. The share is drawn per dialogue (sha256 of file and profile id), so a smaller share is a subset
of a larger one and the draw is the same on every run.

Two test sets:

* ``--heldout DIR``: released files the fit never saw (e.g. Tencent's ``SAGE/dataset`` minus the shared
  nine); only the folders of simulators present in ``--data`` are scored. It also runs the "more files"
  check: for each agent model of the held-out files, a fit on ``--data`` without that model against a fit
  on ``--data`` plus the *other* held-out models' files, both scored on that model's held-out turns.
* without it: agent models held out within ``--data`` (six folds, as the fit's own validation).

Scores are the fitted model's unrounded scores (the ranking the per-turn Spearman compares), without the
offline user's vetoes: this measures the model family, not the user around it.

Usage: python bench/learned_appraisal_learning_curve.py [--data ../shared/data/sage_released]
       [--heldout DIR] [--shares 0.25,0.5,0.75,1] [--json OUT]
(about 2 minutes on 2 CPU cores with ``--heldout`` on ten files, 4 minutes without).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlver.errors import InputError, Problem, RlverError
from rlver.fidelity.appraisal_fit import (
    DEFAULT_SETTINGS,
    Turn,
    find_result_files,
    fit,
    index_keys,
    model_group,
    read_turns,
)
from rlver.stats import sign_agreement, spearman


def in_share(turn: Turn, share: float) -> bool:
    """Whether ``turn``'s dialogue is in the first ``share`` of the fixed per-dialogue draw."""
    digest = hashlib.sha256(f"{turn.file}\0{turn.dialogue}".encode()).hexdigest()
    return int(digest, 16) % 10_000 < share * 10_000


def score(train: Sequence[Turn], test: Sequence[Turn], keys: list[str]) -> dict[str, Any]:
    """Per-turn Spearman (unrounded scores) and sign agreement (rounded changes) of a fit on ``train``."""
    fitted = fit(train, keys, DEFAULT_SETTINGS)
    recorded = [t.change for t in test]
    changes = fitted.predict_changes(test)
    return {
        "train_turns": len(train),
        "test_turns": len(test),
        "spearman": spearman(list(fitted.predict_scores(test)), recorded),
        "sign_agreement": sign_agreement(changes, recorded),
    }


def curve_on_heldout(
    data: list[Turn], heldout: list[Turn], keys: list[str], shares: list[float]
) -> list[dict]:
    return [{"share": s, **score([t for t in data if in_share(t, s)], heldout, keys)} for s in shares]


def curve_by_model(data: list[Turn], keys: list[str], shares: list[float]) -> list[dict]:
    """Each share, scored with each agent model held out in turn (predictions pooled over the folds)."""
    groups = sorted({model_group(t.model) for t in data})
    out = []
    for s in shares:
        scores = np.zeros(len(data))
        for g in groups:
            test = [i for i, t in enumerate(data) if model_group(t.model) == g]
            train = [t for t in data if model_group(t.model) != g and in_share(t, s)]
            scores[test] = fit(train, keys, DEFAULT_SETTINGS).predict_scores([data[i] for i in test])
        rho = spearman(list(scores), [t.change for t in data])
        out.append({"share": s, "train_turns": sum(in_share(t, s) for t in data), "spearman": rho})
    return out


def more_files(data: list[Turn], heldout: list[Turn], keys: list[str]) -> dict[str, Any]:
    """Per held-out agent model: fit without it on ``data`` alone vs ``data`` + the other held-out models."""
    rows, only, more, recorded = [], [], [], []
    for g in sorted({model_group(t.model) for t in heldout}):
        test = [t for t in heldout if model_group(t.model) == g]
        base = [t for t in data if model_group(t.model) != g]
        grown = base + [t for t in heldout if model_group(t.model) != g]
        a, b = (fit(x, keys, DEFAULT_SETTINGS).predict_scores(test) for x in (base, grown))
        rec = [t.change for t in test]
        rows.append(
            {
                "model": g,
                "test_turns": len(test),
                "fit_turns": [len(base), len(grown)],
                "spearman": [spearman(list(a), rec), spearman(list(b), rec)],
            }
        )
        only += list(a)
        more += list(b)
        recorded += rec
    return {"per_model": rows, "pooled": [spearman(only, recorded), spearman(more, recorded)]}


def parse_shares(text: str) -> list[float]:
    """``--shares``: comma-separated shares of the fitting dialogues, each in (0, 1]."""
    try:
        shares = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not shares or any(not 0 < s <= 1 for s in shares):
        raise argparse.ArgumentTypeError(f"each share must be in (0, 1], got {text!r}")
    return shares


def _turns(folder: Path) -> list[Turn]:
    if not folder.is_dir():
        raise InputError(Problem(str(folder), None, None, "expected a folder of *_result.jsonl files"))
    return read_turns(find_result_files(folder), folder, DEFAULT_SETTINGS)


def main() -> None:
    parser = argparse.ArgumentParser()
    default = Path(os.environ.get("RLVER_SHARED_DATA", "../shared/data")) / "sage_released"
    parser.add_argument("--data", type=Path, default=default, help="The fitting files (the shared nine).")
    parser.add_argument("--heldout", type=Path, default=None, help="Released files the fit never saw.")
    parser.add_argument("--shares", type=parse_shares, default=[0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--json", type=Path, default=None, help="Write the figures here as JSON.")
    args = parser.parse_args()
    shares: list[float] = args.shares
    try:
        data = _turns(args.data)
        heldout = _turns(args.heldout) if args.heldout else []
    except RlverError as exc:
        raise SystemExit(f"learned_appraisal_learning_curve: {exc}") from None
    fitted_sims = {t.simulator for t in data}
    heldout = [t for t in heldout if t.simulator in fitted_sims]
    if args.heldout and not heldout:
        raise SystemExit(
            f"learned_appraisal_learning_curve: no file under {args.heldout} has a simulator "
            f"folder of --data ({sorted(fitted_sims)})"
        )
    keys = index_keys(data + heldout)
    result: dict[str, Any] = {"data_turns": len(data), "heldout_turns": len(heldout)}
    if heldout:
        result["curve"] = curve_on_heldout(data, heldout, keys, shares)
        result["more_files"] = more_files(data, heldout, keys)
    else:
        result["curve"] = curve_by_model(data, keys, shares)
    test = "held-out files" if heldout else "agent models held out"
    for row in result["curve"]:
        print(
            f"share {row['share']:.2f}: {row['train_turns']} fitting turns -> per-turn Spearman "
            f"{row['spearman']:.4f} on {test}",
            flush=True,
        )
    if heldout:
        for row in result["more_files"]["per_model"]:
            a, b = row["spearman"]
            print(
                f"{row['model']}: {row['test_turns']} turns, fit on the data {a:.4f}, "
                f"plus the other held-out models {b:.4f}"
            )
        a, b = result["more_files"]["pooled"]
        print(f"pooled: fit on the data {a:.4f}, plus the other held-out models {b:.4f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
