"""A run, loaded for scoring and reporting: its episodes, metrics and judge results together.

Reading the transcript (either format, a folder or a file) is :mod:`rlver.transcripts.files`; the
judge's files are named and read by :mod:`rlver.eval.judge`. This module only puts them side by side,
so neither of those needs the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlver.eval.judge import (
    JUDGE_JSONL,
    JUDGE_SUMMARY,
    JudgedDialogue,
    JudgeSummary,
    read_judged,
    read_summary,
)
from rlver.eval.metrics import Metrics, compute_metrics
from rlver.manifest import RunManifest
from rlver.records import Episode
from rlver.transcripts.files import Format, read_episodes, run_name


@dataclass
class RunData:
    """One run, loaded: its episodes, manifest and metrics (recomputed from the transcript)."""

    name: str
    path: Path
    format: Format
    manifest: RunManifest
    episodes: list[Episode]
    metrics: Metrics
    judge: JudgeSummary | None = None
    judged: list[JudgedDialogue] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        return self.path if self.path.is_dir() else self.path.parent


def load_run(path: str | Path) -> RunData:
    """Load a run directory or transcript file, with its judge results when present."""
    p = Path(path)
    fmt, manifest, episodes = read_episodes(p)
    run_dir = p if p.is_dir() else p.parent
    judge = read_summary(run_dir / JUDGE_SUMMARY) if p.is_dir() else None
    judged = read_judged(run_dir / JUDGE_JSONL) if p.is_dir() else []
    return RunData(
        name=run_name(p, manifest),
        path=p,
        format=fmt,
        manifest=manifest,
        episodes=episodes,
        metrics=compute_metrics(episodes, expected=manifest.expected_dialogues),
        judge=judge,
        judged=judged,
    )


def unique_names(runs: list[RunData]) -> None:
    """Make run names unique. Runs that share a name are told apart by where they live: two
    ``claude3.7`` files from the folders ``sim-a`` and ``sim-b`` read ``sim-a/claude3.7`` and
    ``sim-b/claude3.7`` (the shortest unique folder suffix). Only the same path given twice is
    numbered (``eval``, ``eval (2)``)."""
    from rlver.io import unique_suffixes

    by_name: dict[str, list[RunData]] = {}
    for run in runs:
        by_name.setdefault(run.name, []).append(run)
    for name, same in by_name.items():
        if len(same) < 2:
            continue
        folders = [r.path.parent for r in same]
        if len({f.resolve() for f in folders}) > 1:
            for run, where in zip(same, unique_suffixes(folders), strict=True):
                run.name = f"{where}/{name}"
    seen: dict[str, int] = {}
    for run in runs:
        count = seen.get(run.name, 0) + 1
        seen[run.name] = count
        if count > 1:
            run.name = f"{run.name} ({count})"
