"""Transcripts: manifest + one line per dialogue, torn-line tolerance, resume, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlver import __version__
from rlver.env.dialogue import EnvConfig
from rlver.errors import InputError
from rlver.llm.base import SamplingParams
from rlver.llm.scripted import ScriptedChatModel
from rlver.manifest import RunManifest
from rlver.records import Episode
from rlver.rollout.runner import RolloutConfig, rollout
from rlver.transcripts.native import (
    TranscriptWriter,
    finished_keys,
    finished_profile_ids,
    read_transcript,
)
from test_rollout import POLICY_TEXT, profiles, scripted_simulator


def run_into(
    path: Path, n: int = 3, fail_ids: frozenset[str] = frozenset()
) -> tuple[TranscriptWriter, list[Episode]]:
    config = RolloutConfig(env=EnvConfig.training(max_assistant_turns=2))
    sampling = SamplingParams(temperature=0.8, max_tokens=100)
    policy = ScriptedChatModel(["<think>plan</think>" + POLICY_TEXT], name="policy-x")
    simulator = scripted_simulator(fail_ids=set(fail_ids))
    manifest = RunManifest.create(
        policy=policy.describe(),
        simulator=simulator.describe(),
        sampling=sampling,
        rollout=config,
        seed=11,
        client={"api_key": "sk-should-never-appear", "api_key_env": "MY_KEY"},
    )
    writer = TranscriptWriter(path, manifest)
    episodes = rollout(policy, simulator, profiles(n), config, sampling, seed=11, on_episode=writer)
    return writer, episodes


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "run" / "transcript.jsonl"
    writer, episodes = run_into(path)
    assert writer.written == 3
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    head = json.loads(lines[0])
    assert head["type"] == "manifest" and head["rlver_version"] == __version__ and head["created"]
    assert head["sampling"]["temperature"] == 0.8 and head["seed"] == 11
    assert head["rollout"]["env"]["rules"]["max_assistant_turns"] == 2
    assert head["simulator"]["name"] == "sentient"
    assert "sk-should-never-appear" not in path.read_text(encoding="utf-8")
    assert head["client"] == {"api_key_env": "MY_KEY"}

    t = read_transcript(path)
    assert t.manifest["seed"] == 11
    by_id = {e.profile_id: e for e in t.episodes}
    for ep in episodes:
        assert by_id[ep.profile_id] == ep  # everything survives, think blocks and appraisals included
    assert by_id["p000"].messages[2].content.startswith("<think>plan</think>")


def test_corrupted_trailing_line_is_skipped_with_a_warning_and_resume_repairs_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    run_into(path)
    with open(path, "ab") as fh:
        fh.write(b'{"type": "episode", "profile_id": "p9", "messa')  # a crash mid-append
    with pytest.warns(UserWarning, match="incomplete trailing line"):
        t = read_transcript(path)
    assert len(t.episodes) == 3

    # Resuming cuts the torn line off, keeps the original manifest, and appends after it.
    with pytest.warns(UserWarning, match="removed an incomplete last line"):
        writer = TranscriptWriter(path, RunManifest.create(note="second session"))
    assert "note" not in writer.manifest.to_json() and writer.resumed_manifest is not None
    writer.append(t.episodes[0].model_copy(update={"profile_id": "p-new"}))
    t2 = read_transcript(path)
    assert [e.profile_id for e in t2.episodes][-1] == "p-new" and len(t2.episodes) == 4


def test_a_bad_line_in_the_middle_is_an_error_not_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    run_into(path, n=2)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(2, "{not json")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"{path}:3: not valid JSON"):
        read_transcript(path)


def test_field_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    run_into(path, n=2)
    lines = path.read_text(encoding="utf-8").splitlines()
    ep = json.loads(lines[2])
    ep["final_emotion"] = "very happy"
    ep["user_turns"][0]["text"] = None
    lines[2] = json.dumps(ep)
    lines.append(json.dumps({"type": "banana"}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_transcript(path)
    message = str(info.value)
    assert f"{path}:3: final_emotion:" in message
    assert f"{path}:3: user_turns[0].text:" in message
    assert f"{path}:4: type: expected 'manifest' or 'episode', got 'banana'" in message


def test_finished_keys_for_resume(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    _, episodes = run_into(path, n=3, fail_ids=frozenset({"1"}))
    assert {e.status for e in episodes} == {"finished", "failed"}
    assert finished_keys(path) == {("p000", 0), ("p002", 0)}  # the failed one will be re-run
    assert finished_profile_ids(path) == {"p000", "p002"}
    assert finished_keys(tmp_path / "missing.jsonl") == set()


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_transcript(tmp_path / "nope.jsonl")


# -- one torn-tail repair (rlver.io) and one format detection (rlver.transcripts.files) ------------


def test_repair_torn_tail_cuts_only_an_unreadable_last_line(tmp_path: Path) -> None:
    from rlver.io import repair_torn_tail

    path = tmp_path / "x.jsonl"
    assert repair_torn_tail(path) is False  # no file: nothing to do, nothing created
    assert not path.exists()
    path.write_bytes(b'{"a": 1}\n{"a": 2}')  # complete, only the newline is missing: kept
    assert repair_torn_tail(path) is False
    assert path.read_bytes() == b'{"a": 1}\n{"a": 2}'
    for torn in (b'{"a": 2, "b', b'{"a": 2, "b\n\n', b'{"a": \xc3'):
        path.write_bytes(b'{"a": 1}\n' + torn)
        with pytest.warns(UserWarning, match="removed an incomplete last line"):
            assert repair_torn_tail(path) is True
        assert path.read_bytes() == b'{"a": 1}\n'
    path.write_bytes(b'{"a": 1')  # the whole file is one torn line
    with pytest.warns(UserWarning, match="incomplete trailing line"):
        assert repair_torn_tail(path) is True
    assert path.read_bytes() == b""


def test_detect_format_strict_names_the_file_and_line(tmp_path: Path) -> None:
    from rlver.transcripts.files import detect_format, read_episodes

    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n \n", encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('\n{"type": "manif\n{"type": "episode"}\n', encoding="utf-8")
    assert detect_format(empty) == "rlver" and detect_format(bad) == "rlver"  # lenient: the reader reports
    with pytest.raises(InputError, match=r"empty\.jsonl: the file is empty"):
        detect_format(empty, strict=True)
    with pytest.raises(InputError, match=r"bad\.jsonl:2: not valid JSON"):
        read_episodes(bad)
    with pytest.raises(InputError, match="file not found"):
        detect_format(tmp_path / "missing.jsonl")
