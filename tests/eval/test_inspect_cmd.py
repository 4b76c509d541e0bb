"""`rlver inspect`, run as a user would: a real subprocess on real transcript files (ours and published)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlver.manifest import RunManifest
from rlver.records import Appraisal, Episode, Message, UserTurn
from rlver.simulator.emotion import tier_of
from rlver.transcripts.native import TranscriptWriter
from rlver.transcripts.published import write_published


def inspect(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160"}  # wide enough that table cells are not folded
    return subprocess.run(
        [sys.executable, "-m", "rlver", "inspect", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _appraisal(before: int, raw: int, change: int) -> Appraisal:
    after = max(0, min(100, before + change))
    return Appraisal(
        understanding=f"reads the reply as caring ({before})",
        goal_fit="close to what she wanted",
        inner_reaction="relief",
        feeling="heard",
        raw_change=raw,
        change=change,
        emotion_before=before,
        emotion_after=after,
        tier=tier_of(after),
    )


def _episode(pid: str, *, hostile: bool = False) -> Episode:
    """Two appraised replies and an unappraised last one; the second reply carries a think block."""
    reply2 = "<think>she sounds tired; keep it short</think>Do you want to talk it through?"
    if hostile:  # untrusted text: rich markup and a terminal escape must be shown literally / dropped
        reply2 = "<think>plan</think>[bold red]GOTCHA[/] \x1b[2Jclear screen"
    a1 = _appraisal(40, 4, 4)
    a2 = _appraisal(44, 15, 10)  # clamped from +15
    return Episode(
        profile_id=pid,
        episode_id=f"{pid}#0",
        messages=[
            Message(role="system", content="Be kind."),
            Message(role="user", content="My exam went badly."),
            Message(role="assistant", content="That sounds painful."),
            Message(role="user", content="It was. I studied a lot."),
            Message(role="assistant", content=reply2),
            Message(role="user", content="Maybe, yes."),
            Message(role="assistant", content="Take your time."),
        ],
        user_turns=[
            UserTurn(text="My exam went badly."),
            UserTurn(text="It was. I studied a lot.", appraisal=a1),
            UserTurn(text="Maybe, yes.", appraisal=a2),
        ],
        start_emotion=40,
        final_emotion=54,
        emotions=[44, 54],
        status="finished",
        end_reason="turn_limit",
        meta={"topic": "study"},
    )


@pytest.fixture()
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "transcript.jsonl"
    path.parent.mkdir()
    writer = TranscriptWriter(
        path, RunManifest.create(kind="eval", profiles="unit", seed=7, run_name="unit-run")
    )
    writer.append(_episode("alice-exam"))
    writer.append(_episode("bob-exam", hostile=True))
    failed = Episode(
        profile_id="carol-job",
        messages=[Message(role="user", content="I lost my job.")],
        user_turns=[UserTurn(text="I lost my job.")],
        status="failed",
        error="simulator answered twice with invalid JSON",
        error_kind="parse",
    )
    writer.append(failed)
    return path


def test_summary_lists_manifest_and_every_dialogue(run_file: Path) -> None:
    out = inspect(run_file.parent, "--turns")  # the run folder stands for its transcript
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "rlver transcript" in text and "eval" in text and "unit" in text
    for pid in ("alice-exam", "bob-exam", "carol-job"):
        assert pid in text
    assert "54 (tier B)" in text and "turn_limit" in text
    assert "failed" in text and "parse" in text  # the failed dialogue's status and error kind
    assert "40→44→54" in text  # --turns: the emotion path
    assert "failed runs" in text


def test_dialogue_shows_emotions_reasoning_and_collapsed_think(run_file: Path) -> None:
    out = inspect(run_file, "--dialogue", "alice-exam")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "emotion 40 (tier B) (start)" in text
    assert "40 → 44 (tier B)  (+4)" in text
    assert "44 → 54 (tier B)  (+10) clamped from +15" in text
    assert "reads the reply as caring (40)" in text  # the simulator's reasoning fields
    assert "goal fit: close to what she wanted" in text
    assert "▸ think, 31 chars: she sounds tired; keep it short" in text  # collapsed preview
    assert "Do you want to talk it through?" in text
    assert "last reply not appraised" in text
    assert "40→44→54" in text
    # the order of a dialogue is kept: opening line, reply, appraised user turn, ...
    assert text.index("My exam went badly.") < text.index("That sounds painful.") < text.index("I studied")


def test_think_flag_prints_the_block_in_full(run_file: Path) -> None:
    out = inspect(run_file, "-d", "alice", "--think")  # a unique id prefix selects
    assert out.returncode == 0, out.stderr
    assert "think: she sounds tired; keep it short" in out.stdout
    assert "▸ think" not in out.stdout


def test_untrusted_text_is_shown_literally(run_file: Path) -> None:
    out = inspect(run_file, "-d", "2")  # row number
    assert out.returncode == 0, out.stderr
    assert "[bold red]GOTCHA[/]" in out.stdout  # not interpreted as rich markup
    assert "\x1b" not in out.stdout  # the escape sequence never reaches the terminal
    assert "clear screen" in out.stdout


def test_failed_dialogue_shows_its_error(run_file: Path) -> None:
    out = inspect(run_file, "-d", "carol-job")
    assert out.returncode == 0, out.stderr
    assert "failed (parse): simulator answered twice with invalid JSON" in out.stdout


def test_published_format(run_file: Path, tmp_path: Path) -> None:
    pub = tmp_path / "model_result.jsonl"
    write_published(pub, [_episode("alice-exam"), _episode("dan-move")])
    out = inspect(pub)
    assert out.returncode == 0, out.stderr
    assert "published result file" in out.stdout and "dan-move" in out.stdout
    out = inspect(pub, "-d", "dan-move")
    assert out.returncode == 0, out.stderr
    assert "44 → 54 (tier B)  (+10)" in out.stdout
    assert "▸ think" in out.stdout  # the published `think` field comes back as a think block
    js = inspect(pub, "--json")
    rows = json.loads(js.stdout)["dialogues"]
    assert [r["dialogue"] for r in rows] == ["alice-exam", "dan-move"]
    assert rows[1]["emotions"] == [40, 44, 54]


def test_json_dialogue_is_the_episode(run_file: Path) -> None:
    out = inspect(run_file, "-d", "alice-exam", "--json")
    assert out.returncode == 0, out.stderr
    ep = Episode.model_validate(json.loads(out.stdout))
    assert ep.final_emotion == 54 and ep.user_turns[2].appraisal is not None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("-d", "zzz"), "no dialogue 'zzz'"),
        (("-d", "-exam"), "no dialogue"),
        (("-d", "9"), "no dialogue '9'"),
    ],
)
def test_bad_selection_is_a_clear_error(run_file: Path, args: tuple[str, ...], needle: str) -> None:
    out = inspect(run_file, *args)
    assert out.returncode == 2
    assert needle in out.stderr and "Traceback" not in out.stderr


def test_ambiguous_prefix_and_missing_file(run_file: Path, tmp_path: Path) -> None:
    out = inspect(run_file, "-d", "a")  # only alice-exam starts with "a": selected
    assert out.returncode == 0
    writer = TranscriptWriter(tmp_path / "two.jsonl", RunManifest.create(kind="eval"))
    writer.append(_episode("sam-1"))
    writer.append(_episode("sam-2"))
    out = inspect(tmp_path / "two.jsonl", "-d", "sam")
    assert out.returncode == 2 and "2 dialogues start with 'sam'" in out.stderr
    out = inspect(tmp_path / "absent.jsonl")
    assert out.returncode == 2 and "no such file" in out.stderr and "Traceback" not in out.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    out = inspect(empty)
    assert out.returncode == 2 and "transcript.jsonl" in out.stderr
