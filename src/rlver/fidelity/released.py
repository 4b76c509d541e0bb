"""Released SAGE result files as the fidelity checks read them: checked and loaded once
(:func:`load_files`), each dialogue's profile rebuilt from the record (:func:`profile_of`) and its
dialogue as the user saw it (:func:`visible_dialogue`, visible text only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlver.env.thinking import split_think
from rlver.errors import ConfigError, InputError, Problem
from rlver.io import (
    file_sha256,
)
from rlver.profiles.loaders import published_need_type, split_hidden_need
from rlver.profiles.schema import PUBLISHED_STYLES, Profile
from rlver.records import Episode, Message
from rlver.transcripts.published import read_published


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
