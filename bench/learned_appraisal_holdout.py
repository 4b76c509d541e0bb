"""The offline user, vetoes included, on released files whose agent model the fit never saw.

Issue 14 measures the learned offline user "by `rlver calibrate --simulator offline` on released files
the fit never saw". The shared data has no such files (the shipped artefact is fitted on all nine), so
this script makes them: for each agent model it refits the appraisal on the other models' files
(``fit_artefact``, no inner validation), puts that artefact in an offline simulator, and teacher-forces
every appraised turn of the held-out files through it exactly as ``rlver calibrate`` does
(``predict_turn``: recorded context, emotion and trajectory). Unlike the fit's own validation figures,
which score the fitted model alone, these include everything the offline user does in front of it: the
hard vetoes, the n-gram ceiling, the integer clamp.

Usage: python bench/learned_appraisal_holdout.py [--data ../shared/data/sage_released] [--json OUT]
(about 5 minutes on 2 CPU cores: six refits and 7,218 teacher-forced turns).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rlver.errors import InputError, Problem, RlverError
from rlver.fidelity.appraisal_fit import dump_artefact, find_result_files, fit_artefact, model_group
from rlver.fidelity.calibrate import appraised_turns, predict_turn
from rlver.fidelity.released import load_files
from rlver.simulator.offline.learned import AppraisalModel
from rlver.simulator.offline.user import OfflineSimulator
from rlver.stats import agreement, spearman


def _fold_model(files: list[Path], root: Path, held_out: str, workdir: Path) -> AppraisalModel:
    """The appraisal refitted without ``held_out``'s files (symlinked into a folder of the rest)."""
    train = workdir / f"train-{held_out}"
    for f in files:
        if model_group(f.name.removesuffix("_result.jsonl")) != held_out:
            link = train / f.relative_to(root)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(f.resolve())
    artefact = json.loads(dump_artefact(fit_artefact(train, validate=False)))
    return AppraisalModel(artefact)


async def _predict(sim: OfflineSimulator, paths: list[str]) -> list[dict[str, Any]]:
    rows = []
    for fd in load_files(paths):
        for ep in fd.episodes:
            for turn in appraised_turns(fd.path, ep):
                predicted, _ = await predict_turn(sim, fd.profiles[ep.profile_id], turn, seed=0)
                rows.append(
                    {
                        "file": fd.path,
                        "simulator": Path(fd.path).parent.name,
                        "recorded": turn.recorded_change,
                        "predicted": predicted,
                    }
                )
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled per-turn agreement, per simulator model, and the model ranking over the files."""
    out: dict[str, Any] = {
        "overall": agreement([r["recorded"] for r in rows], [r["predicted"] for r in rows])
    }
    for sim in sorted({r["simulator"] for r in rows}):
        part = [r for r in rows if r["simulator"] == sim]
        out[sim] = agreement([r["recorded"] for r in part], [r["predicted"] for r in part])
    files = sorted({r["file"] for r in rows})
    mean = {
        f: [
            sum(r[k] for r in rows if r["file"] == f) / sum(1 for r in rows if r["file"] == f)
            for k in ("recorded", "predicted")
        ]
        for f in files
    }
    out["model_ranking_spearman"] = (
        spearman([mean[f][0] for f in files], [mean[f][1] for f in files]) if len(files) > 2 else None
    )
    out["per_file"] = {
        Path(f).parent.name + "/" + Path(f).name: [round(v, 3) for v in mean[f]] for f in files
    }
    return out


def _held_out_groups(data: Path) -> tuple[list[Path], list[str]]:
    """The result files under ``data`` and their agent models; each model is held out in turn."""
    if not data.is_dir():
        raise InputError(Problem(str(data), None, None, "expected a folder of *_result.jsonl files"))
    files = find_result_files(data)
    groups = sorted({model_group(f.name.removesuffix("_result.jsonl")) for f in files})
    if len(groups) < 2:
        raise InputError(
            Problem(
                str(data),
                None,
                None,
                f"holding a model out needs files of 2 or more agent models, found {groups}",
            )
        )
    return files, groups


def main() -> None:
    parser = argparse.ArgumentParser()
    default = Path(os.environ.get("RLVER_SHARED_DATA", "../shared/data")) / "sage_released"
    parser.add_argument("--data", type=Path, default=default)
    parser.add_argument("--json", type=Path, default=None, help="Write the summary here as JSON.")
    args = parser.parse_args()
    try:
        files, groups = _held_out_groups(args.data)
    except RlverError as exc:
        raise SystemExit(f"learned_appraisal_holdout: {exc}") from None
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for group in groups:
            model = _fold_model(files, args.data, group, Path(tmp))
            held = [str(f) for f in files if model_group(f.name.removesuffix("_result.jsonl")) == group]
            rows += asyncio.run(_predict(OfflineSimulator(learned_model=model), held))
            print(f"held out {group}: {len(held)} files, {len(rows)} turns so far", flush=True)
    summary = summarise(rows)
    for key in ("overall", *sorted(k for k in summary if k.endswith("-simulator"))):
        a = summary[key]
        print(
            f"{key}: {a['turns']} turns, per-turn Spearman {a['spearman']:.3f}, sign {a['sign_agreement']:.3f}"
        )
    ranking = summary["model_ranking_spearman"]
    shown = "n/a (fewer than 3 files)" if ranking is None else f"{ranking:.3f}"
    print(f"model ranking Spearman over {len(summary['per_file'])} files: {shown}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
