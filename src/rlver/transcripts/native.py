"""Transcripts: JSONL, one dialogue per line, written as each dialogue finishes.

Line 1 is the manifest (:class:`rlver.manifest.RunManifest`) — the run's settings (models, sampling,
seeds, simulator, the dialogue's rules, rlver version, time) — so a transcript is self-describing and
a run can be reproduced or audited from the file alone::

    {"type": "manifest", "kind": "eval", "rlver_version": "0.1.0", "created": "...", "agent": {...}, ...}
    {"type": "episode", "profile_id": "...", "messages": [...], "user_turns": [...], ...}

Each line is appended with one ``write`` + fsync (:func:`rlver.io.append_jsonl`), so a crash loses at
most the line being written; :func:`read_transcript` warns about and skips such a torn last line and
reports any other bad line as ``file:line: field: problem``. Re-opening an existing transcript with
:class:`TranscriptWriter` appends to it (resume); :func:`finished_keys` says which dialogues are done.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlver.errors import InputError, Problem
from rlver.io import append_jsonl, iter_jsonl, repair_torn_tail
from rlver.manifest import MANIFEST, RunManifest
from rlver.records import Episode

EPISODE = "episode"


def episode_record(episode: Episode) -> dict[str, Any]:
    """An episode as its transcript line: every writer (eval, demo, chat, train) goes through here, so
    every reader sees one shape."""
    return {"type": EPISODE, **episode.model_dump(mode="json")}


class TranscriptWriter:
    """Appends episodes to a transcript; writes the manifest first when the file is new or empty.

    When the file already has a manifest (a resumed run), that manifest is kept and the new one is
    available as ``resumed_manifest`` so the caller can compare settings.
    """

    def __init__(self, path: str | os.PathLike[str], manifest: RunManifest) -> None:
        self.path = Path(path)
        self.resumed_manifest: RunManifest | None = None
        if self.path.exists():
            repair_torn_tail(self.path)
        if self.path.exists() and self.path.stat().st_size > 0:
            self.manifest = RunManifest.read(read_transcript(self.path).manifest)
            self.resumed_manifest = manifest
        else:
            self.manifest = manifest
            append_jsonl(self.path, manifest.to_json())
        self.written = 0

    def append(self, episode: Episode) -> None:
        """Write one episode as one durable line."""
        append_jsonl(self.path, episode_record(episode))
        self.written += 1

    # Lets the writer be passed straight as ``on_episode=writer``.
    __call__ = append


@dataclass
class Transcript:
    path: Path
    #: Line 1 as written; :attr:`run_manifest` is the typed view every tool reads.
    manifest: dict[str, Any] = field(default_factory=dict)
    episodes: list[Episode] = field(default_factory=list)

    @property
    def run_manifest(self) -> RunManifest:
        """The manifest, typed (older shapes read as today's)."""
        return RunManifest.read(self.manifest)


def _field_path(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def read_transcript(path: str | os.PathLike[str]) -> Transcript:
    """Read one of our transcripts. Raises :class:`InputError` listing every bad line and field."""
    p = Path(path)
    if not p.exists():
        raise InputError(Problem(str(p), None, None, "file not found"))
    out = Transcript(path=p)
    problems: list[Problem] = []
    for lineno, obj in iter_jsonl(p):
        if not isinstance(obj, dict):
            problems.append(
                Problem(str(p), lineno, None, f"expected a JSON object, got {type(obj).__name__}")
            )
            continue
        kind = obj.get("type")
        if kind == MANIFEST:
            if out.manifest or out.episodes:
                problems.append(Problem(str(p), lineno, "type", "a second manifest; it must be line 1 only"))
            else:
                out.manifest = obj
            continue
        if kind != EPISODE:
            hint = (
                " (this looks like a published result file: use rlver.transcripts.published)"
                if ("history" in obj and "emo_point" in obj)
                else ""
            )
            problems.append(
                Problem(str(p), lineno, "type", f"expected 'manifest' or 'episode', got {kind!r}{hint}")
            )
            continue
        body = {k: v for k, v in obj.items() if k != "type"}
        try:
            out.episodes.append(Episode.model_validate(body))
        except ValidationError as exc:
            for err in exc.errors():
                problems.append(Problem(str(p), lineno, _field_path(err["loc"]) or None, err["msg"]))
    if problems:
        raise InputError(problems, summary=f"{p}: {len(problems)} problem(s) in transcript")
    return out


def finished_keys(path: str | os.PathLike[str]) -> set[tuple[str, int]]:
    """``(profile_id, sample_index)`` of every *finished* dialogue (failed ones are re-run on resume)."""
    p = Path(path)
    if not p.exists() or p.stat().st_size == 0:
        return set()
    return {(e.profile_id, e.sample_index) for e in read_transcript(p).episodes if e.status == "finished"}


def finished_profile_ids(path: str | os.PathLike[str]) -> set[str]:
    """Profile ids with at least one finished dialogue in the transcript."""
    return {pid for pid, _ in finished_keys(path)}
