"""Does the transfer appraisal's reply features help the Chinese learned appraisal? A measurement.

Fits the shipped char-n-gram family (``rlver.fidelity.appraisal_fit`` settings) twice on the released files,
once as shipped and once with the transfer appraisal's reply features (``XL_NAMES`` before ``emotion``)
appended to its dense block, and prints both models' held-out-agent-model figures.

Usage: python bench/transfer_appraisal_combined.py [--data ../shared/data/sage_released]
(about 6 minutes on 2 CPU cores: two six-fold cross-validations of the n-gram model).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlver.fidelity.appraisal_fit import DEFAULT_SETTINGS, cross_validate, find_result_files, read_turns
from rlver.simulator.offline.crosslingual import XL_NAMES

sys.path.insert(0, str(Path(__file__).parent))
from transfer_appraisal_fit import read_xl_turns


def main() -> None:
    parser = argparse.ArgumentParser()
    default = Path(os.environ.get("RLVER_SHARED_DATA", "../shared/data")) / "sage_released"
    parser.add_argument("--data", type=Path, default=default)
    args = parser.parse_args()
    settings = {**DEFAULT_SETTINGS, "profile_folds": 5}
    turns = read_turns(find_result_files(args.data), args.data, settings)
    _, xl_turns = read_xl_turns(args.data)
    if len(turns) != len(xl_turns) or any(t.reply != x.reply for t, x in zip(turns, xl_turns, strict=False)):
        raise SystemExit(f"error: {args.data}: {len(turns)} n-gram turns but {len(xl_turns)} transfer turns")
    n_text = XL_NAMES.index("emotion")
    for label in ("char n-grams (shipped)", "char n-grams + transfer reply features"):
        if label.endswith("features"):
            for t, x in zip(turns, xl_turns, strict=True):
                t.dense = [*t.dense, *x.dense[:n_text]]
        a = cross_validate(turns, settings)["leave_model_out"]["overall"]
        print(
            f"{label}: {a['turns']} turns, per-turn Spearman {a['spearman']}, sign {a['sign_agreement']}, "
            f"model ranking {a['model_ranking_spearman']} (agent models held out)",
            flush=True,
        )


if __name__ == "__main__":
    main()
