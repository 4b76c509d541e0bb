"""`rlver audit`: every emotion number re-derived, for our transcripts and published ones alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rlver.env.dialogue import EnvConfig
from rlver.env.rewards import RewardSpec
from rlver.llm.scripted import ScriptedChatModel
from rlver.manifest import RunManifest
from rlver.rollout.runner import RolloutConfig, rollout
from rlver.transcripts.audit import AuditOptions, audit_episode, audit_file
from rlver.transcripts.native import TranscriptWriter
from rlver.transcripts.published import read_published
from test_rollout import POLICY_TEXT, profiles, scripted_simulator
from test_transcripts_published import published_record


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", "audit", *args], capture_output=True, text=True, timeout=120
    )


def our_transcript(path: Path, change: int = 4, config: RolloutConfig | None = None) -> Path:
    config = config or RolloutConfig(
        env=EnvConfig.evaluation(), reward=RewardSpec(mode="mixed", mixed_weight=0.5)
    )
    simulator = scripted_simulator(change=change)
    writer = TranscriptWriter(
        path, RunManifest.create(simulator=simulator.describe(), rollout=config, env=config.env)
    )
    rollout(ScriptedChatModel([POLICY_TEXT]), simulator, profiles(3), config, on_episode=writer)
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_consistent_transcripts_pass(tmp_path: Path) -> None:
    ours = our_transcript(tmp_path / "ours.jsonl")
    report = audit_file(ours)
    assert report.format == "rlver" and report.ok, [str(f) for f in report.findings]
    assert report.dialogues == 3 and report.appraisals == 27  # 9 appraisals each (eval protocol)
    pub = write_jsonl(tmp_path / "pub.jsonl", [published_record()])
    assert audit_file(pub).ok
    done = cli(str(ours), str(pub))
    assert done.returncode == 0, done.stderr
    assert "3 dialogues, 27 appraisals checked: OK" in done.stdout


def test_injected_inconsistency_in_our_transcript(tmp_path: Path) -> None:
    path = our_transcript(tmp_path / "ours.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    ep = json.loads(lines[2])
    ep["user_turns"][3]["appraisal"]["emotion_after"] += 5  # turn 3: 52 recorded instead of 52-5
    lines[2] = json.dumps(ep)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = audit_file(path)
    messages = [str(f) for f in report.findings]
    dialogue = ep["episode_id"]
    assert any(f"{dialogue}: turn 3: emotion 57 recorded, but 48 +4 gives 52" in m for m in messages), (
        messages
    )
    # The next turn no longer follows on from it; after that the walk is back in step.
    assert any(f"{dialogue}: turn 4: emotion before is 52, expected 57" in m for m in messages), messages
    # ...and the episode's own summary numbers no longer match its appraisals.
    rest = sorted(m.split(": dialogue: ")[1].split(" ")[0] for m in messages if ": dialogue: " in m)
    assert rest == ["emotions", "reward"] and len(messages) == 4, messages
    done = cli(str(path))
    assert done.returncode == 1
    assert "turn 3: emotion 57 recorded" in done.stdout and "inconsistenc" in done.stderr


def test_reward_is_checked_against_the_manifest(tmp_path: Path) -> None:
    path = our_transcript(tmp_path / "ours.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    ep = json.loads(lines[1])
    ep["reward"] = 0.99
    lines[1] = json.dumps(ep)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    [finding] = audit_file(path).findings
    assert "reward 0.99 recorded, the mixed reward is" in finding.message


def test_injected_inconsistencies_in_published_files(tmp_path: Path) -> None:
    wrong_value = published_record(id="wrong-value")
    wrong_value["history"][4]["emotion-point"] = 49  # 35 + 10 = 45
    too_big = published_record(id="too-big")
    too_big["history"][4]["planning"]["change"] = 15
    too_big["history"][4]["emotion-point"] = 50
    too_big["history"][6]["emotion-point"] = 55
    too_big["emo_point"] = 55
    went_on = published_record(id="went-on")  # fell below 10 but the dialogue continued
    went_on["history"][2]["planning"]["change"] = -10
    went_on["history"][2]["emotion-point"] = 5
    went_on["history"] = [
        *went_on["history"][:3],
        {"role": "assistant", "content": "…"},
        {"role": "user", "content": "…", "emotion-point": 15, "planning": {"change": 10}},
    ]
    went_on["emo_point"] = 15
    wrong_final = published_record(id="wrong-final", emo_point=70)
    path = write_jsonl(
        tmp_path / "pub.jsonl", [published_record(), wrong_value, too_big, went_on, wrong_final]
    )
    messages = [str(f) for f in audit_file(path).findings]
    assert f"{path}: wrong-value: turn 2: emotion 49 recorded, but 35 +10 gives 45" in messages
    assert any("too-big: turn 2: change +15 exceeds ±10" in m for m in messages)
    assert any("too-big: turn 2: emotion 50 recorded, but 35 +10 gives 45" in m for m in messages)
    assert any(
        "went-on: turn 2: appraised, but the dialogue had to end at turn 1 (emotion 5)" in m for m in messages
    )
    assert f"{path}: wrong-final: dialogue: final emotion 70 recorded, the appraisals give 50" in messages
    assert not any(m.startswith(f"{path}: 3f1c-demo") for m in messages)
    done = cli(str(path), "--json")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data[0]["format"] == "published" and len(data[0]["findings"]) == len(messages)


def test_protocol_limits(tmp_path: Path) -> None:
    rec = published_record()
    hist = rec["history"][:2]
    value = 40
    for _ in range(10):  # ten appraisals: one more than the published protocol allows
        value += 1
        hist += [
            {"role": "user", "content": "…", "emotion-point": value, "planning": {"change": 1}},
            {"role": "assistant", "content": "…"},
        ]
    rec["history"] = hist
    rec["emo_point"] = value
    [ep] = read_published(write_jsonl(tmp_path / "p.jsonl", [rec]))
    findings, n = audit_episode(ep, AuditOptions())
    assert n == 10
    assert {f.message for f in findings} == {
        "10 appraisals, the protocol allows at most 9",
        "11 assistant replies, the limit is 10",
    }
    assert audit_episode(ep, AuditOptions(check_turns=False))[0] == []


def test_training_transcripts_use_their_manifest_settings(tmp_path: Path) -> None:
    config = RolloutConfig(env=EnvConfig.training())
    path = our_transcript(tmp_path / "train.jsonl", change=-8, config=config)
    report = audit_file(path)
    assert report.ok, [str(f) for f in report.findings]  # start 30, every reply appraised, stops < 10
    assert report.appraisals == 3 * 3  # 30 -> 22 -> 14 -> 6: ends at emotion_low
    assert not audit_file(path, overrides={"start_emotion": 40}).ok


def test_unreadable_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "episode", "final_emotion": "x"}\n{"also": "bad"}\n', encoding="utf-8")
    done = cli(str(bad))
    assert done.returncode == 2
    assert f"{bad}:1" in done.stderr and "Traceback" not in done.stderr


def test_offline_simulator_runs_are_always_consistent_in_both_formats(tmp_path: Path) -> None:
    """Real simulator, bundled en + zh profiles, eval protocol: every number must re-derive."""
    from rlver.profiles.sets import load_profile_set
    from rlver.simulator.offline.user import OfflineSimulator
    from rlver.transcripts.published import write_published

    replies = [
        "That sounds exhausting. What has been the hardest part for you?",
        "You did what you could with what you knew then; it makes sense that it still hurts.",
        "ok",
        "Have you tried just not worrying about it?",
    ]
    policy = ScriptedChatModel(replies)
    chosen = load_profile_set("en-test")[:4] + load_profile_set("zh-test")[:4]
    simulator = OfflineSimulator(seed=1)
    config = RolloutConfig(env=EnvConfig.evaluation(), n_per_profile=2)
    path = tmp_path / "offline.jsonl"
    writer = TranscriptWriter(path, RunManifest.create(simulator=simulator.describe(), rollout=config))
    episodes = rollout(policy, simulator, chosen, config, on_episode=writer)
    assert len(episodes) == 2 * len(chosen) and all(e.status == "finished" for e in episodes)
    report = audit_file(path)
    assert report.ok, [str(f) for f in report.findings]
    assert report.appraisals == sum(len(e.emotions) for e in episodes) > 0
    pub = tmp_path / "offline_result.jsonl"
    write_published(pub, [e for e in episodes if e.sample_index == 0])
    assert audit_file(pub).ok


def test_detect_format_reads_only_up_to_the_first_record(tmp_path: Path) -> None:
    """The format is decided by the first non-empty line; the rest of the file is never read.

    A FIFO whose writer stays open proves it: reading the whole file would block until the writer closes.
    """
    import os
    import threading

    from rlver.transcripts.files import detect_format

    fifo = tmp_path / "live.jsonl"
    os.mkfifo(fifo)
    first = "\n  \n" + json.dumps(published_record(), ensure_ascii=False) + "\n"

    def writer() -> None:
        with open(fifo, "w", encoding="utf-8") as fh:
            fh.write(first)
            fh.flush()
            done.wait(10)  # keep the write end open: a reader of the whole file would hang

    done = threading.Event()
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(detect_format(fifo)), daemon=True)
    reader.start()
    reader.join(5)
    answered_while_open = list(result)
    done.set()
    thread.join(5)
    assert answered_while_open == ["published"]
    # same answers as before on ordinary files
    assert detect_format(our_transcript(tmp_path / "ours.jsonl")) == "rlver"
    assert detect_format(write_jsonl(tmp_path / "pub.jsonl", [published_record()])) == "published"
    (tmp_path / "arr.json").write_text(json.dumps([published_record()]), encoding="utf-8")
    assert detect_format(tmp_path / "arr.json") == "published"
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    assert detect_format(tmp_path / "empty.jsonl") == "rlver"
