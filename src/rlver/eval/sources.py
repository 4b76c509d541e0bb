"""Find and read what ``rlver score`` / ``report`` / ``judge`` are pointed at.

A *run* is either a run directory written by ``rlver eval`` (``transcript.jsonl`` + ``metrics.json``
and maybe ``judge.json``) or a single transcript file. Transcript files come in two formats, told
apart by their first record: ours (a manifest header, then one :class:`~rlver.records.Episode` a line)
and the published SAGE result format (one dialogue a line with ``id, emo_point, history, ...``). The
readers themselves live in :mod:`rlver.rollout.transcripts` and :mod:`rlver.rollout.published`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from rlver.errors import InputError, Problem
from rlver.eval.judge import JudgedDialogue, JudgeSummary, read_judged, read_summary
from rlver.eval.metrics import Metrics, compute_metrics
from rlver.records import Episode

TRANSCRIPT_NAME = "transcript.jsonl"
METRICS_NAME = "metrics.json"
JUDGE_JSONL = "judge.jsonl"
JUDGE_SUMMARY = "judge.json"

Format = Literal["rlver", "published"]


@dataclass
class RunData:
    """One run, loaded: its episodes, manifest and metrics (recomputed from the transcript)."""

    name: str
    path: Path
    format: Format
    manifest: dict[str, Any]
    episodes: list[Episode]
    metrics: Metrics
    judge: JudgeSummary | None = None
    judged: list[JudgedDialogue] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        return self.path if self.path.is_dir() else self.path.parent


def _first_record(path: Path) -> Any:
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            if raw.lstrip().startswith(b"["):
                return []  # a JSON array file: only the published format is written that way
            try:
                return json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError) as exc:  # also 4300+-digit ints, absurd nesting
                why = "nested too deeply" if isinstance(exc, RecursionError) else exc
                raise InputError(Problem(str(path), lineno, None, f"not valid JSON: {why}")) from None
    raise InputError(Problem(str(path), None, None, "the file is empty: no dialogues to score"))


def detect_format(path: Path) -> Format:
    """``published`` when the first record looks like a SAGE result line, else ``rlver``."""
    from rlver.rollout.published import format_of_first_record

    return cast(Format, format_of_first_record(_first_record(path)))


def dedupe_episodes(episodes: list[Episode]) -> list[Episode]:
    """One episode per (profile, sample): a finished one beats a failed one, a later one an earlier one.

    A resumed run re-runs dialogues that failed, so its transcript may hold a failed line and a
    finished line for the same dialogue; only the latter counts.
    """
    chosen: dict[tuple[str, int], Episode] = {}
    for ep in episodes:
        key = (ep.profile_id, ep.sample_index)
        old = chosen.get(key)
        if old is None or ep.status == "finished" or old.status != "finished":
            chosen[key] = ep
    return list(chosen.values())


def transcript_path(path: Path) -> Path:
    """The transcript of a run directory, or the file itself."""
    if path.is_dir():
        candidate = path / TRANSCRIPT_NAME
        if not candidate.exists():
            raise InputError(
                Problem(
                    str(path),
                    None,
                    None,
                    f"no {TRANSCRIPT_NAME} here; is this an `rlver eval` output folder?",
                )
            )
        return candidate
    if not path.exists():
        raise InputError(Problem(str(path), None, None, "no such file or directory"))
    return path


def read_episodes(path: Path) -> tuple[Format, dict[str, Any], list[Episode]]:
    """Read a transcript in either format: ``(format, manifest, episodes)``."""
    file = transcript_path(path)
    fmt = detect_format(file)
    if fmt == "published":
        from rlver.rollout.published import read_published

        return fmt, {"source": "published", "file": file.name}, list(read_published(file))
    from rlver.rollout.transcripts import read_transcript

    transcript = read_transcript(file)
    return fmt, dict(transcript.manifest or {}), dedupe_episodes(list(transcript.episodes))


def run_name(path: Path, manifest: dict[str, Any]) -> str:
    name = manifest.get("run_name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    if path.is_dir():
        return path.resolve().name
    stem = path.stem
    return stem.removesuffix("_result") if stem.endswith("_result") else stem


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
        metrics=compute_metrics(episodes),
        judge=judge,
        judged=judged,
    )


def unique_names(runs: list[RunData]) -> None:
    """Make run names unique (two runs called ``eval`` become ``eval``, ``eval (2)``)."""
    seen: dict[str, int] = {}
    for run in runs:
        count = seen.get(run.name, 0) + 1
        seen[run.name] = count
        if count > 1:
            run.name = f"{run.name} ({count})"
