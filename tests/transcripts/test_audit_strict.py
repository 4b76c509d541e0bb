"""`rlver audit` is as strict as `rlver score` about its input (issue 16.8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_audit import cli, our_transcript, write_jsonl
from test_transcripts_published import published_record


def _clean(stderr: str) -> str:
    return " ".join(stderr.split())


def test_empty_file_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    done = cli(str(empty))
    assert done.returncode == 2, done.stdout
    assert f"{empty}: no dialogues" in _clean(done.stderr)
    assert "OK" not in done.stdout


@pytest.mark.parametrize("kind", ["published", "rlver"])
def test_corrupt_last_line_exits_2_without_raw_warnings(tmp_path: Path, kind: str) -> None:
    if kind == "published":
        path = write_jsonl(tmp_path / "pub.jsonl", [published_record(), published_record(id="b")])
    else:
        path = our_transcript(tmp_path / "ours.jsonl")
    n_lines = len(path.read_text(encoding="utf-8").splitlines())
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"broken\n')
    done = cli(str(path))
    assert done.returncode == 2, done.stdout
    assert f"{path}:{n_lines + 1}: not valid JSON" in _clean(done.stderr)
    assert "UserWarning" not in done.stderr and "Traceback" not in done.stderr
    assert "OK" not in done.stdout


def test_duplicated_dialogues_exit_2(tmp_path: Path) -> None:
    rec = published_record(id="twice")
    path = write_jsonl(tmp_path / "dup.jsonl", [rec, published_record(id="once"), rec])
    done = cli(str(path))
    assert done.returncode == 2, done.stdout
    assert f"{path}: id: duplicated dialogue(s): twice (2 times)" in _clean(done.stderr)


def test_our_transcript_with_a_finished_dialogue_twice_exits_2(tmp_path: Path) -> None:
    path = our_transcript(tmp_path / "ours.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([*lines, lines[1]]) + "\n", encoding="utf-8")
    done = cli(str(path))
    assert done.returncode == 2
    assert "duplicated dialogue(s)" in done.stderr


def test_failed_then_finished_dialogue_is_a_resume_not_a_duplicate(tmp_path: Path) -> None:
    path = our_transcript(tmp_path / "ours.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    failed = json.loads(lines[1])
    failed.update(status="failed", error_kind="connection", user_turns=failed["user_turns"][:1])
    failed.update(assistant_turns=0, emotions=[], final_emotion=failed["start_emotion"], reward=None)
    path.write_text("\n".join([lines[0], json.dumps(failed), *lines[1:]]) + "\n", encoding="utf-8")
    done = cli(str(path))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--max-change", "-3"),
        ("--max-change", "0"),
        ("--start", "-5"),
        ("--start", "101"),
        ("--max-turns", "0"),  # the older spelling, still read
        ("--max-assistant-turns", "0"),
    ],
)
def test_nonsense_options_are_refused(tmp_path: Path, option: str, value: str) -> None:
    path = write_jsonl(tmp_path / "pub.jsonl", [published_record()])
    done = cli(option, value, str(path))
    assert done.returncode == 2
    assert option in done.stderr and "Traceback" not in done.stderr


def test_the_turn_limit_has_one_spelling_in_the_help(tmp_path: Path) -> None:
    """``--max-assistant-turns`` as configs spell the rule; ``--max-turns`` is read but not offered,
    and the two disagreeing is refused rather than one silently winning."""
    shown = cli("--help")
    assert "--max-assistant-turns" in shown.stdout and "--max-turns" not in shown.stdout
    path = write_jsonl(tmp_path / "pub.jsonl", [published_record()])
    both = cli("--max-assistant-turns", "3", "--max-turns", "4", str(path))
    assert both.returncode == 2 and "disagree" in both.stderr
    assert (
        cli("--max-turns", "10", str(path)).returncode
        == cli("--max-assistant-turns", "10", str(path)).returncode
    )
