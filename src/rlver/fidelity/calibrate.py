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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlver.env.dialogue import DialogueEnv, EnvConfig
from rlver.env.thinking import split_think
from rlver.errors import ConfigError, InputError, Problem, RlverError
from rlver.io import (
    append_jsonl,
    append_jsonl_many,
    atomic_write_json,
    atomic_write_text,
    file_sha256,
    iter_jsonl,
)
from rlver.profiles.loaders import published_need_type, split_hidden_need
from rlver.profiles.schema import PUBLISHED_STYLES, Profile
from rlver.protocol import EVALUATION
from rlver.records import Episode, Message, fell_to_failure, reached_success
from rlver.seeding import hashed_seed
from rlver.simulator.base import UserSimulator, user_end_reason
from rlver.simulator.emotion import tier_of
from rlver.simulator.offline.user import OfflineUser
from rlver.simulator.replay import Recording, ReplaySimulator, says_goodbye
from rlver.stats import agreement, spearman
from rlver.transcripts.published import read_published

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


def profile_of(episode: Episode) -> Profile:
    """The profile a released record was played with (its own fields; the opening is its first line)."""
    pub = episode.meta.get("published", {}) if isinstance(episode.meta, dict) else {}
    scene = str(pub.get("scene") or "")
    split = split_hidden_need(scene)
    background, hidden = split if split is not None else (scene, "")
    task = str(pub.get("task") or "")
    style = str(pub.get("character") or "").strip()
    opening = episode.user_turns[0].text if episode.user_turns else None
    return Profile(
        id=episode.profile_id,
        language="zh",
        persona=str(pub.get("player") or "-") or "-",
        background=background or "-",
        goal=task or hidden or "-",
        hidden_need=hidden or task or "-",
        style=PUBLISHED_STYLES.get(style, style or "passive"),
        topic=str(pub.get("topic") or ""),
        need_type=published_need_type(hidden),
        opening=opening or None,
        source="sage-released",
    )


def visible_dialogue(episode: Episode) -> list[Message]:
    """The recorded dialogue as the user saw it: user lines, and agent replies without thoughts."""
    out: list[Message] = []
    for m in episode.messages:
        if m.role == "assistant":
            out.append(Message(role="assistant", content=split_think(m.content).visible))
        elif m.role == "user":
            out.append(m)
    return out


def recording_of(episode: Episode) -> Recording:
    replies = tuple(m.content for m in visible_dialogue(episode) if m.role == "assistant")
    return Recording(episode.profile_id, replies, tuple(episode.user_turns))


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


def recorded_end(episode: Episode, max_assistant_turns: int = EVALUATION.max_assistant_turns) -> str:
    """The end a released dialogue had, from its shape (the files do not store it); the turn limit
    defaults to the benchmark's (:data:`rlver.protocol.EVALUATION`), which the released files ran."""
    roles = [m.role for m in episode.messages if m.role in ("user", "assistant")]
    final = episode.emotions[-1] if episode.emotions else episode.start_emotion
    if roles and roles[-1] == "assistant":
        return "turn_limit" if roles.count("assistant") >= max_assistant_turns else "unknown"
    if reached_success(final):
        return "emotion_high"
    if fell_to_failure(final):
        return "emotion_low"
    if episode.user_turns and says_goodbye(episode.user_turns[-1].text):
        return user_end_reason(tier_of(final))
    return "unknown"


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


@dataclass
class FileData:
    path: str
    episodes: list[Episode]
    profiles: dict[str, Profile] = field(default_factory=dict)
    #: sha256 of the whole file: how a learned simulator's provenance names the files it was fitted on.
    sha256: str = ""


def check_result_file(path: str) -> None:
    """Refuse, with one line naming the file, what calibrate cannot read: a missing path, a folder, an
    empty file, and a transcript written by ``rlver eval`` (our format has no recorded appraisals to
    agree with; ``rlver score`` reads it)."""
    from rlver.transcripts.files import detect_format

    p = Path(path)
    if not p.exists():
        raise InputError(Problem(path, None, None, "no such file"))
    if p.is_dir():
        raise InputError(
            Problem(
                path, None, None, f"a folder; give the released result files in it ({p / '*_result.jsonl'})"
            )
        )
    if p.stat().st_size == 0:
        raise InputError(Problem(path, None, None, "empty file: no dialogues to calibrate against"))
    if detect_format(p, strict=True) == "rlver":
        raise InputError(
            Problem(
                path,
                None,
                None,
                "this is an rlver transcript (written by `rlver eval`); calibrate reads released SAGE "
                "result files (*_result.jsonl), whose recorded appraisals it agrees with; "
                "`rlver score` reads this file",
            )
        )


def load_files(paths: Sequence[str], *, limit: int | None = None) -> list[FileData]:
    files: list[FileData] = []
    seen: set[str] = set()
    for path in paths:
        if path in seen:
            continue
        seen.add(path)
        check_result_file(path)
        episodes = read_published(path)
        if limit is not None:
            episodes = episodes[:limit]
        ids = [e.episode_id for e in episodes]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"{path}: a dialogue id occurs twice; calibrate needs one dialogue per profile")
        profiles = {e.profile_id: profile_of(e) for e in episodes}
        files.append(FileData(path, episodes, profiles, file_sha256(path)))
    if not files:
        raise ConfigError("calibrate: no result files given")
    return files


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


@dataclass
class TrajectoryCheck:
    dialogue_id: str
    identical: bool
    problems: list[str]


async def replay_trajectory(fd: FileData, episode: Episode, config: EnvConfig) -> TrajectoryCheck:
    """Run the environment free on the recorded agent replies with the replay user; compare."""
    sim = ReplaySimulator({episode.profile_id: recording_of(episode)})
    env = DialogueEnv(sim, config)
    problems: list[str] = []
    await env.reset(fd.profiles[episode.profile_id])
    # each reply as the recorded user saw it: a released file keeps a reply's thoughts beside its
    # content, which is all SAGE's simulator was shown (rlver reads the two into one message)
    replies = [m.content for m in visible_dialogue(episode) if m.role == "assistant"]
    used = 0
    try:
        for raw in replies:
            if env.done:
                break
            await env.step(raw)
            used += 1
    except Exception as exc:  # the oracle refuses: the env asked for a turn that was never recorded
        problems.append(f"replay stopped at agent reply {used + 1}: {exc}")
    if not env.done and not problems:
        problems.append(f"the environment wanted more than the {len(replies)} recorded agent replies")
    if used != len(replies):
        problems.append(f"the environment used {used} of {len(replies)} recorded agent replies")
    got = env.episode
    if got.emotions != episode.emotions:
        problems.append(f"emotions {got.emotions} != recorded {episode.emotions}")
    if got.final_emotion != episode.final_emotion:
        problems.append(f"final emotion {got.final_emotion} != recorded emo_point {episode.final_emotion}")
    want = recorded_end(episode, config.rules.max_assistant_turns)
    have = got.end_reason
    if have != want:
        problems.append(f"end {have!r} != recorded {want!r}")
    return TrajectoryCheck(episode.episode_id, not problems, problems)


# --------------------------------------------------------------------------------------------------
# summary and outputs


def fitted_files(simulator_info: dict[str, Any]) -> frozenset[str]:
    """The sha256 of every released file a learned simulator was fitted on (its provenance); empty if none."""
    learned = simulator_info.get("learned")
    if not isinstance(learned, dict):
        return frozenset()
    return frozenset(
        str(d["sha256"]) for d in learned.get("data", []) if isinstance(d, dict) and "sha256" in d
    )


def _model_ranking(rows: Sequence[dict[str, Any]]) -> float | None:
    """Spearman of the files' mean recorded and predicted changes (one file is one agent model)."""
    ranked = [r for r in rows if r["mean_recorded_change"] is not None]
    if len(ranked) < 3:
        return None
    return spearman([r["mean_recorded_change"] for r in ranked], [r["mean_predicted_change"] for r in ranked])


def _group(
    label: str, rows: Sequence[dict[str, Any]], by_file: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    preds = [p for r in rows for p in by_file[r["path"]]]
    stats = agreement([int(p["recorded_change"]) for p in preds], [int(p["predicted_change"]) for p in preds])
    return {"label": label, "files": len(rows), **stats, "model_ranking_spearman": _model_ranking(rows)}


def split_groups(
    rows: Sequence[dict[str, Any]], by_file: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Agreement per simulator folder and, for a learned simulator, on the files its fit never saw.

    A released file's folder names the LLM that played the user, and one simulator's judgements are
    only comparable with its own. Files whose sha256 is in the fit's provenance are in-sample: their
    figures say how well the fit memorised, not how it generalises, so they are reported apart.
    """
    folders = sorted({Path(r["path"]).resolve().parent.name for r in rows})
    learned = any(r["in_fit"] is not None for r in rows)
    if not learned and len(folders) <= 1:
        return []  # one group, the overall row itself
    splits = (
        [
            ("files the fit never saw", [r for r in rows if not r["in_fit"]]),
            ("files the fit was fitted on (in-sample)", [r for r in rows if r["in_fit"]]),
        ]
        if learned
        else [("all files", list(rows))]
    )
    groups: list[dict[str, Any]] = []
    for name, part in splits:
        if not part:
            continue
        groups.append(_group(name, part, by_file))
        if len(folders) > 1:
            for folder in folders:
                sub = [r for r in part if Path(r["path"]).resolve().parent.name == folder]
                if sub:
                    groups.append(_group(f"{name} / {folder}", sub, by_file))
    return groups


def summarise(
    files: Sequence[FileData],
    predictions: Sequence[dict[str, Any]],
    trajectories: dict[str, list[TrajectoryCheck]] | None,
    fitted: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Per-file and overall agreement; ``fitted``: the sha256 of the files a learned simulator was fitted on."""
    by_file: dict[str, list[dict[str, Any]]] = {fd.path: [] for fd in files}
    for p in predictions:
        by_file.setdefault(p["file"], []).append(p)
    rows: list[dict[str, Any]] = []
    for fd in files:
        preds = by_file[fd.path]
        rec = [int(p["recorded_change"]) for p in preds]
        pre = [int(p["predicted_change"]) for p in preds]
        stats = agreement(rec, pre)
        row: dict[str, Any] = {
            "path": fd.path,
            "sha256": fd.sha256,
            "in_fit": (fd.sha256 in fitted) if fitted else None,
            "dialogues": len(fd.episodes),
            "turns": stats["turns"],
            "mean_recorded_change": round(float(np.mean(rec)), 6) if rec else None,
            "mean_predicted_change": round(float(np.mean(pre)), 6) if pre else None,
            "spearman": stats["spearman"],
            "sign_agreement": stats["sign_agreement"],
            "mae": stats["mae"],
            "trajectories_identical": None,
            "tokens": sum(int(p.get("tokens", 0) or 0) for p in preds),
        }
        if trajectories is not None:
            checks = trajectories.get(fd.path, [])
            row["trajectories_identical"] = all(c.identical for c in checks)
            row["trajectory_mismatches"] = [
                {"dialogue_id": c.dialogue_id, "problems": c.problems} for c in checks if not c.identical
            ]
        rows.append(row)
    overall = agreement(
        [int(p["recorded_change"]) for p in predictions], [int(p["predicted_change"]) for p in predictions]
    )
    return {
        "overall": overall,
        "files": rows,
        "model_ranking_spearman": _model_ranking(rows),
        "groups": split_groups(rows, by_file),
    }


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


def replay_simulator_for(fd: FileData) -> UserSimulator:
    return ReplaySimulator({ep.profile_id: recording_of(ep) for ep in fd.episodes})
