"""``rlver calibrate``: how closely a simulator agrees with the published one, on released transcripts.

Two checks on released SAGE result files (format: :mod:`rlver.transcripts.published`):

* **Teacher-forced agreement.** For every appraised turn the simulator gets the record's profile, the
  recorded dialogue up to that turn (visible text only), the recorded emotion before and the recorded
  agent reply (:meth:`~rlver.simulator.base.SimulatedUser.restore`). Its change (after − before) is
  compared with the recorded one: per-turn Spearman, sign agreement, MAE, and the Spearman of the
  files' mean changes (a file is one model, so this is the model ranking).
  With the offline user's learned appraisal, files named (by sha256) in its provenance are in-sample
  and are summarised apart from the files the fit never saw (:func:`split_groups`).
* **Replay trajectories** (``--simulator replay`` only). The oracle
  :class:`~rlver.simulator.replay.ReplaySimulator` plays back the recorded judgements while rlver's
  :class:`~rlver.env.dialogue.DialogueEnv` runs free on the recorded agent replies under the evaluation
  protocol; each dialogue's turns, emotions and end must come out as recorded.

Predictions are appended to ``predictions.jsonl`` one line per turn as they finish, so a killed run
(an LLM simulator costs money) resumes where it stopped: turns already on file are skipped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlver.env.dialogue import EnvConfig
from rlver.errors import ConfigError, RlverError
from rlver.fidelity.calibrate_summary import fitted_files, summarise
from rlver.fidelity.released import FileData, load_files, visible_dialogue
from rlver.fidelity.replay_check import TrajectoryCheck, replay_trajectory
from rlver.io import (
    append_jsonl,
    append_jsonl_many,
    atomic_write_json,
    atomic_write_text,
    iter_jsonl,
)
from rlver.profiles.schema import Profile
from rlver.records import Episode, Message
from rlver.seeding import hashed_seed
from rlver.simulator.base import UserSimulator
from rlver.simulator.offline.user import OfflineUser

PREDICTIONS = "predictions.jsonl"
CALIBRATION = "calibration.json"
REPORT = "calibration.html"
MANIFEST = "calibrate_manifest.json"
#: Predictions per append when per-turn durability is off (fast simulators).
FLUSH_EVERY = 500


class CalibrationIncomplete(RlverError):
    """Some turns got no prediction (their simulator calls failed); the others are on file."""

    exit_code = 1

    def __init__(self, failed: Sequence[str]) -> None:
        shown = "\n  ".join(failed[:10])
        more = f"\n  ... and {len(failed) - 10} more" if len(failed) > 10 else ""
        super().__init__(
            f"{len(failed)} turn(s) got no prediction (rerun the same command to retry only them):\n  {shown}{more}"
        )
        self.failed = list(failed)


# --------------------------------------------------------------------------------------------------
# records → profiles, recordings, turns


@dataclass(frozen=True)
class Turn:
    """One appraised turn to predict: context, emotion before, reply, and the recorded change."""

    file: str
    dialogue_id: str
    turn: int  # 1-based appraisal index
    history: tuple[Message, ...]
    reply: str
    emotion_before: int
    recorded_change: int
    #: The recorded changes of the earlier appraised turns of this dialogue (the simulator's own trajectory).
    previous_changes: tuple[int, ...] = ()


def appraised_turns(file: str, episode: Episode) -> list[Turn]:
    dialogue = visible_dialogue(episode)
    turns: list[Turn] = []
    user_index = 0
    k = 0
    for i, m in enumerate(dialogue):
        if m.role != "user":
            continue
        turn = episode.user_turns[user_index] if user_index < len(episode.user_turns) else None
        user_index += 1
        if turn is None or turn.appraisal is None or i == 0 or dialogue[i - 1].role != "assistant":
            continue
        k += 1
        a = turn.appraisal
        turns.append(
            Turn(
                file=file,
                dialogue_id=episode.episode_id,
                turn=k,
                history=tuple(dialogue[: i - 1]),
                reply=dialogue[i - 1].content,
                emotion_before=a.emotion_before,
                recorded_change=a.emotion_after - a.emotion_before,
                previous_changes=tuple(t.recorded_change for t in turns),
            )
        )
    return turns


# --------------------------------------------------------------------------------------------------
# running


def _key(file: str, dialogue_id: str, turn: int) -> tuple[str, str, int]:
    return (file, dialogue_id, turn)


def load_done(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Predictions already on file (resume), keyed by (file, dialogue_id, turn)."""
    done: dict[tuple[str, str, int], dict[str, Any]] = {}
    if path.exists():
        for _, rec in iter_jsonl(path):
            if isinstance(rec, dict) and {"file", "dialogue_id", "turn"} <= rec.keys():
                done[_key(rec["file"], str(rec["dialogue_id"]), int(rec["turn"]))] = rec
    return done


async def predict_turn(simulator: UserSimulator, profile: Profile, turn: Turn, seed: int) -> tuple[int, int]:
    """Teacher-forced prediction of one turn: ``(predicted change, simulator tokens)``."""
    user = simulator.start(profile, start_emotion=turn.emotion_before, seed=seed)
    if isinstance(user, OfflineUser):
        user.restore(turn.history, turn.emotion_before, changes=turn.previous_changes)
    else:
        user.restore(turn.history, turn.emotion_before)
    # The judgement only: an LLM user skips writing its answer, which calibration never reads.
    result = await user.appraise(turn.reply)
    after = result.appraisal.emotion_after if result.appraisal is not None else turn.emotion_before
    return after - turn.emotion_before, result.tokens


def _plan(
    files: Sequence[FileData], done: dict[tuple[str, str, int], dict[str, Any]]
) -> tuple[list[tuple[FileData, Turn]], list[tuple[str, str, int]]]:
    """The turns still to predict, and every turn's key in file/dialogue/turn order."""
    todo: list[tuple[FileData, Turn]] = []
    order: list[tuple[str, str, int]] = []
    for fd in files:
        for ep in fd.episodes:
            for t in appraised_turns(fd.path, ep):
                order.append(_key(t.file, t.dialogue_id, t.turn))
                if order[-1] not in done:
                    todo.append((fd, t))
    return todo, order


async def run_predictions(
    files: Sequence[FileData],
    simulator_for: Callable[[FileData], UserSimulator],
    out: Path,
    *,
    concurrency: int = 8,
    seed: int = 0,
    on_turn: Callable[[int, int], None] | None = None,
    durable_each: bool = True,
) -> list[dict[str, Any]]:
    """Predict every appraised turn (skipping those already in ``out/predictions.jsonl``).

    With ``durable_each`` each finished turn is appended and fsynced at once (an LLM turn costs
    money: a crash loses at most the turns in flight). Without it (offline and replay simulators,
    where one fsync costs more than a prediction) turns are appended in chunks of
    :data:`FLUSH_EVERY`. Either way the returned list is in file/dialogue/turn order whatever the
    completion order was.
    """
    path = out / PREDICTIONS
    done = load_done(path)
    todo, order = _plan(files, done)
    total = len(order)
    finished = total - len(todo)
    if on_turn:
        on_turn(finished, total)
    gate = asyncio.Semaphore(max(1, concurrency))
    sims = {fd.path: simulator_for(fd) for fd in files}
    failed: list[str] = []
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        if pending:
            append_jsonl_many(path, pending)
            pending.clear()

    async def one(fd: FileData, t: Turn) -> None:
        nonlocal finished
        async with gate:
            try:
                predicted, tokens = await predict_turn(
                    sims[fd.path],
                    fd.profiles[t.dialogue_id],
                    t,
                    hashed_seed(seed, t.file, t.dialogue_id, t.turn),
                )
            except RlverError as exc:  # a simulator or LLM call failed for good: keep going, retry on resume
                failed.append(f"{t.file}: {t.dialogue_id} turn {t.turn}: {exc}")
                return
        rec = {
            "file": t.file,
            "dialogue_id": t.dialogue_id,
            "turn": t.turn,
            "emotion_before": t.emotion_before,
            "recorded_change": t.recorded_change,
            "predicted_change": predicted,
            "tokens": tokens,
        }
        if durable_each:
            append_jsonl(path, rec)
        else:
            pending.append(rec)
            if len(pending) >= FLUSH_EVERY:
                flush()
        done[_key(t.file, t.dialogue_id, t.turn)] = rec
        finished += 1
        if on_turn:
            on_turn(finished, total)

    try:
        await asyncio.gather(*(one(fd, t) for fd, t in todo))
    finally:
        flush()
        for sim in {id(s): s for s in sims.values()}.values():
            close = getattr(sim, "aclose", None)
            if close is not None:
                await close()
    if failed:
        raise CalibrationIncomplete(failed)
    return [done[k] for k in order]


# --------------------------------------------------------------------------------------------------
# summary and outputs


def check_manifest(out: Path, simulator: dict[str, Any], paths: Sequence[str]) -> None:
    """Refuse to resume into a folder made with another simulator (the predictions would mix)."""
    path = out / MANIFEST
    manifest = {"simulator": simulator, "files": list(paths)}
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("simulator") != simulator:
            raise ConfigError(
                f"{path}: made with simulator {old.get('simulator')!r}, not {simulator!r}; use another --out"
            )
    atomic_write_json(path, manifest)


async def calibrate(
    paths: Sequence[str],
    simulator_for: Callable[[FileData], UserSimulator],
    simulator_info: dict[str, Any],
    out: Path,
    *,
    replay: bool = False,
    concurrency: int = 8,
    seed: int = 0,
    limit: int | None = None,
    on_turn: Callable[[int, int], None] | None = None,
    durable_each: bool = True,
) -> dict[str, Any]:
    """Run teacher-forced agreement (and, with ``replay``, the trajectory check); write the outputs."""
    files = load_files(paths, limit=limit)
    out.mkdir(parents=True, exist_ok=True)
    check_manifest(out, simulator_info, [fd.path for fd in files])
    predictions = await run_predictions(
        files,
        simulator_for,
        out,
        concurrency=concurrency,
        seed=seed,
        on_turn=on_turn,
        durable_each=durable_each,
    )
    trajectories: dict[str, list[TrajectoryCheck]] | None = None
    if replay:
        config = EnvConfig.evaluation()
        trajectories = {
            fd.path: [await replay_trajectory(fd, ep, config) for ep in fd.episodes] for fd in files
        }
    summary = summarise(files, predictions, trajectories, fitted_files(simulator_info))
    summary["simulator"] = simulator_info
    atomic_write_json(out / CALIBRATION, summary)
    from rlver.fidelity.calibrate_report import render_html

    atomic_write_text(out / REPORT, render_html(summary, predictions, simulator_info))
    return summary
