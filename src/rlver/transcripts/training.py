"""What a training run folder holds for its readers: step-tagged dialogues and per-step metrics.

``rlver train`` writes its rollouts to the run folder's ``transcript.jsonl`` (the same records as
``rlver eval``: a manifest with ``kind: train``, then one episode a line) and its per-step numbers to
``metrics.jsonl``. A training transcript holds the same user many times (every epoch, every group
member), so each of its episodes carries ``meta.step`` (the RL step that sampled it) and ``meta.row``
(its place in that step's rollout): readers tell early from late by the step, and tell two dialogues
apart by ``(profile, sample, step, row)`` (:func:`episode_key`), never collapsing a user's step-30
dialogue into its step-1 one.

This module sits below both ``rlver.train`` (the writer, ``rlver.train.transcript_writer``) and
``rlver.eval`` (the report), which must not import each other, so the file name, the reader and the
resume cut have one home both can reach.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlver.io import filter_jsonl, iter_jsonl
from rlver.manifest import MANIFEST
from rlver.records import Episode

#: The per-step metrics of a training run (one JSON line per step, written by the trainer's logger).
METRICS_FILE = "metrics.jsonl"
#: ``Episode.meta`` keys of a training dialogue: the RL step that sampled it, its row in that step.
STEP_KEY = "step"
ROW_KEY = "row"

EpisodeKey = tuple[str, int, int | None, int | None]


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def episode_step(episode: Episode) -> int | None:
    """The training step a dialogue was sampled at; None for dialogues that are not training rollouts."""
    return _int_or_none(episode.meta.get(STEP_KEY))


def episode_key(episode: Episode) -> EpisodeKey:
    """What makes a dialogue one of its kind in a transcript: the profile and sample, plus the step
    and row of a training dialogue (``None, None`` elsewhere, so eval keys are what they were)."""
    return (
        episode.profile_id,
        episode.sample_index,
        episode_step(episode),
        _int_or_none(episode.meta.get(ROW_KEY)),
    )


def at_step(episode: Episode, step: int, row: int) -> Episode:
    """A copy of ``episode`` tagged with its training step and row (the trainer's own object is left
    as it is: it goes on to be trained on). ``episode_id`` gets ``@step`` so ``rlver inspect
    --dialogue`` can name it."""
    return episode.model_copy(
        update={
            "meta": {**episode.meta, STEP_KEY: step, ROW_KEY: row},
            "episode_id": f"{episode.episode_id}@{step}" if episode.episode_id else "",
        }
    )


def keep_through_step(path: str | os.PathLike[str], step: int) -> int:
    """Cut a training transcript back to its manifest and the dialogues of steps ``<= step``.

    ``--resume`` continues from a checkpoint at ``step``; dialogues a crashed run wrote after it are
    sampled again, so they are dropped here (a torn last line too) and the resumed run's transcript
    equals an uninterrupted one's. The file is rewritten atomically; returns how many records went.
    """

    def keep(record: Any) -> bool:
        if not isinstance(record, dict) or record.get("type") == MANIFEST:
            return True
        meta = record.get("meta")
        tagged = _int_or_none(meta.get(STEP_KEY)) if isinstance(meta, dict) else None
        return tagged is None or tagged <= step

    return filter_jsonl(path, keep)


def read_metrics(out_dir: Path) -> list[dict[str, Any]]:
    """The per-step metrics rows of a training run folder (``[]`` when there are none yet)."""
    path = out_dir / METRICS_FILE
    return [rec for _, rec in iter_jsonl(path)] if path.exists() else []
