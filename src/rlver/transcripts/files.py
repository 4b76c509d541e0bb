"""Find a transcript, tell its format, and read it: the one entry point for "a file of dialogues".

What ``rlver score`` / ``report`` / ``judge`` / ``audit`` / ``inspect`` are pointed at is either a run
folder written by ``rlver eval`` (its ``transcript.jsonl``, beside metrics and judge files that their
writers name) or a single transcript file. Transcript files come in two formats, told apart by their
first record: ours (a manifest header, then one :class:`~rlver.records.Episode` a line, see
:mod:`rlver.transcripts.native`) and the published SAGE result format (one dialogue a line with
``id, emo_point, history, ...``, see :mod:`rlver.transcripts.published`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, cast

from rlver.errors import InputError, Problem
from rlver.manifest import RunManifest
from rlver.records import Episode
from rlver.transcripts.native import read_transcript
from rlver.transcripts.published import format_of_first_record, read_published
from rlver.transcripts.training import EpisodeKey, episode_key

TRANSCRIPT_NAME = "transcript.jsonl"

Format = Literal["rlver", "published"]


def _first_record(path: Path, *, strict: bool) -> Any:
    """The first non-empty line's JSON value (``[]`` for a JSON array file); ``None`` for no record.

    Reads no further than that line: a transcript can be large (or still being written) and the
    full reader reads it again anyway. An unreadable first line raises when ``strict`` and is
    otherwise left to the full reader (``None``), which reports it with its line number.
    """
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            if raw.lstrip().startswith(b"["):
                return []  # a JSON array file: only the published format is written that way
            try:
                return json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError) as exc:  # also 4300+-digit ints, absurd nesting
                if not strict:
                    return None
                why = "nested too deeply" if isinstance(exc, RecursionError) else exc
                raise InputError(Problem(str(path), lineno, None, f"not valid JSON: {why}")) from None
    if strict:
        raise InputError(Problem(str(path), None, None, "the file is empty: no dialogues to score"))
    return None


def detect_format(path: str | os.PathLike[str], *, strict: bool = False) -> Format:
    """``"published"`` when the first record looks like a SAGE result line, else ``"rlver"``.

    Lenient by default (an empty file, or a first line that is not JSON, is ``"rlver"``, so that
    the full reader reports the problem with its line number); ``strict`` raises
    :class:`InputError` for those instead, naming the file and line.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(Problem(str(p), None, None, "file not found"))
    first = _first_record(p, strict=strict)
    return cast(Format, "rlver" if first is None else format_of_first_record(first))


def dedupe_episodes(episodes: list[Episode]) -> list[Episode]:
    """One episode per (profile, sample): a finished one beats a failed one, a later one an earlier one.

    A resumed run re-runs dialogues that failed, so its transcript may hold a failed line and a
    finished line for the same dialogue; only the latter counts. A training transcript's dialogues
    are told apart by their step too (:func:`~rlver.transcripts.training.episode_key`).
    """
    chosen: dict[EpisodeKey, Episode] = {}
    for ep in episodes:
        key = episode_key(ep)
        old = chosen.get(key)
        if old is None or ep.status == "finished" or old.status != "finished":
            chosen[key] = ep
    return list(chosen.values())


def runs_inside(folder: Path) -> list[str]:
    """The sub-folders of ``folder`` that hold a transcript, as ``NAME/``: a demo's folder holds its
    ``before/`` and ``after/`` evaluations and its ``run/`` (training), none at the top."""
    try:
        subs = sorted(p for p in folder.iterdir() if p.is_dir() and (p / TRANSCRIPT_NAME).is_file())
    except OSError:
        return []
    order = {"before": 0, "after": 1, "run": 2}  # the demo's own order: evaluate, evaluate, the training
    return [f"{p.name}/" for p in sorted(subs, key=lambda p: (order.get(p.name, 3), p.name))]


def transcript_path(path: Path) -> Path:
    """The transcript of a run directory, or the file itself."""
    if path.is_dir():
        candidate = path / TRANSCRIPT_NAME
        if not candidate.exists():
            inside = runs_inside(path)
            if inside:  # e.g. `rlver inspect rlver-demo`: point to the runs it holds
                named = ", ".join(inside[:-1]) + f" and {inside[-1]}" if len(inside) > 1 else inside[0]
                example = "after/" if "after/" in inside else inside[0]
                why = (
                    f"no {TRANSCRIPT_NAME} here: its runs are in {named}; give one of them, "
                    f"e.g. {path / example.rstrip('/')}"
                )
            else:
                why = f"no {TRANSCRIPT_NAME} here; is this an `rlver eval` or `rlver train` output folder?"
            raise InputError(Problem(str(path), None, None, why))
        return candidate
    if not path.exists():
        raise InputError(Problem(str(path), None, None, "no such file or directory"))
    return path


def read_episodes(path: Path) -> tuple[Format, RunManifest, list[Episode]]:
    """Read a run folder or transcript in either format: ``(format, manifest, episodes)``.

    Our transcripts are deduplicated (:func:`dedupe_episodes`); a published file gets a small
    stand-in manifest naming its source.
    """
    file = transcript_path(path)
    fmt = detect_format(file, strict=True)
    if fmt == "published":
        return fmt, RunManifest.read({"source": "published", "file": file.name}), list(read_published(file))
    transcript = read_transcript(file)
    return fmt, transcript.run_manifest, dedupe_episodes(list(transcript.episodes))


def run_name(path: Path, manifest: RunManifest) -> str:
    """The name a run is shown under: the manifest's ``run_name``, else its folder or file name."""
    name = manifest.run_name
    if name and name.strip():
        return name.strip()
    if path.is_dir():
        return path.resolve().name
    stem = path.stem
    return stem.removesuffix("_result") if stem.endswith("_result") else stem
