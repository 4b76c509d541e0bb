"""`rlver calibrate`: teacher-forced agreement and replay trajectories on released result files.

A small synthetic result file written here covers every way a published dialogue ends (turn limit,
emotion below 10, the cap at 100, goodbye) so CI without the shared data still tests the code; the
released files themselves are checked through the ``shared_data`` fixture.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlver.fidelity.calibrate import appraised_turns, calibrate
from rlver.fidelity.released import profile_of
from rlver.fidelity.replay_check import recorded_end, replay_simulator_for
from rlver.records import Message
from rlver.simulator.factory import kind_names
from rlver.simulator.offline.user import OfflineSimulator
from rlver.testing.openai_server import FakeChatServer
from rlver.transcripts.published import read_published
from svg_check import inline_figures, read_figure

SCENE = "他最近和家人吵架了。\n####隐藏主题:\n希望被理解"
CHANGE_OF = {"GOOD": 5, "BAD": -5, "MEH": 0, "GREAT": 10, "AWFUL": -10}


def _record(pid: str, changes: list[int], *, final_reply: bool, goodbye: bool = False) -> dict[str, Any]:
    """A published record whose agent replies carry a marker of the recorded change."""
    marker = {v: k for k, v in CHANGE_OF.items()}
    history: list[dict[str, Any]] = [{"role": "user", "content": "我最近很烦。", "emotion-point": 40}]
    emotion = 40
    for i, change in enumerate(changes):
        reply: dict[str, Any] = {"role": "assistant", "content": f"回复{i} {marker[change]} 我在听。"}
        if i == 0:
            reply["think"] = "先共情。"
        history.append(reply)
        emotion = min(100, emotion + change)
        last = i == len(changes) - 1
        text = "好的，再见。" if goodbye and last else f"嗯，第{i}句。"
        history.append(
            {
                "role": "user",
                "content": text,
                "thinking": "想一想",
                "emotion-point": emotion,
                "planning": {
                    "content": "c",
                    "TargetCompletion": "t",
                    "activity": "a",
                    "analyse": "f",
                    "change": change,
                },
            }
        )
    if final_reply:
        history.append({"role": "assistant", "content": f"最后 {marker[5]} 的回复"})
    return {
        "id": pid,
        "emo_point": emotion,
        "emo_state": "Emotion-B",
        "player": "张三，35岁，工程师",
        "scene": SCENE,
        "character": "被动型",
        "topic": "家庭",
        "task": "希望被理解",
        "history": history,
    }


def write_synthetic(path: Path) -> Path:
    records = [
        _record("limit", [5, -5, 5, -5, 5, -5, 0, 5, -5], final_reply=True),  # 10 replies, 9 appraised
        _record("low", [-10, -10, -10, -10], final_reply=False),  # 40 → 0
        _record("high", [5, 10, 10, 10, 10, 10, 10], final_reply=False),  # 95 + 10 capped at 100
        _record("bye", [5, 5], final_reply=False, goodbye=True),
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def _strict_json(path: Path) -> Any:
    def no_nan(token: str) -> Any:
        raise AssertionError(f"{path}: non-standard JSON number {token}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=no_nan)


def cli(*args: str, cache_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if cache_dir is not None:  # never the user's cache
        env["RLVER_CACHE_DIR"] = str(cache_dir)
    return subprocess.run(
        [sys.executable, "-m", "rlver", "calibrate", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


# -- units ------------------------------------------------------------------------------------------


def test_turns_and_ends_read_from_a_synthetic_file(tmp_path: Path) -> None:
    path = write_synthetic(tmp_path / "m_result.jsonl")
    episodes = {e.episode_id: e for e in read_published(path)}
    turns = appraised_turns(str(path), episodes["high"])
    assert [t.turn for t in turns] == list(range(1, 8))
    assert turns[-1].emotion_before == 95 and turns[-1].recorded_change == 5  # after − before, capped
    assert turns[0].history == (Message(role="user", content="我最近很烦。"),)
    assert turns[0].previous_changes == () and turns[3].previous_changes == tuple(
        t.recorded_change for t in turns[:3]
    )
    assert "<think>" not in turns[1].history[1].content  # the user sees visible text only
    assert {k: recorded_end(e) for k, e in episodes.items()} == {
        "limit": "turn_limit",
        "low": "emotion_low",
        "high": "emotion_high",
        "bye": "left",  # a goodbye below S: the user left (simulator/base.user_end_reason)
    }
    profile = profile_of(episodes["limit"])
    assert profile.hidden_need == "希望被理解" and "隐藏主题" not in profile.background
    assert profile.opening == "我最近很烦。" and profile.style == "passive"


# -- replay -----------------------------------------------------------------------------------------


def test_replay_reproduces_every_appraisal_and_trajectory(tmp_path: Path) -> None:
    path = write_synthetic(tmp_path / "m_result.jsonl")
    out = tmp_path / "out"
    proc = cli(str(path), "--simulator", "replay", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = _strict_json(out / "calibration.json")
    assert set(result) >= {"overall", "files", "model_ranking_spearman"}
    assert result["overall"] == {"turns": 22, "spearman": 1.0, "sign_agreement": 1.0, "mae": 0.0}
    (row,) = result["files"]
    assert row["path"] == str(path) and row["dialogues"] == 4 and row["trajectories_identical"] is True
    assert result["model_ranking_spearman"] is None  # one file: no ranking
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(lines) == 22
    assert set(lines[0]) >= {
        "file",
        "dialogue_id",
        "turn",
        "emotion_before",
        "recorded_change",
        "predicted_change",
    }
    assert all(x["predicted_change"] == x["recorded_change"] for x in lines)
    html = (out / "calibration.html").read_text()
    scatter, ranking = (read_figure(svg) for svg in inline_figures(html))
    # every prediction equals its recorded change: each point lies on the diagonal drawn beside them
    (diagonal,) = scatter.named("predicted = recorded").lines
    (x0, y0), (x1, y1) = diagonal
    turns = scatter.series[0]
    assert scatter.legend[0].startswith("turns (area = count") and turns.dots
    for x, y in turns.dots:
        assert y == pytest.approx(y0 + (x - x0) * (y1 - y0) / (x1 - x0), abs=0.01)
    assert ranking.title == "Model ranking (Spearman –)"  # one file: no ranking, its point drawn and named
    assert len(ranking.series[0].dots) == 1 and ranking.series[0].values == ["m"]
    assert "model-ranking Spearman" in proc.stdout


def test_replay_reports_a_trajectory_the_protocol_cannot_reproduce(tmp_path: Path) -> None:
    """A recorded dialogue that went on after the emotion fell below 10 is not what our env does."""
    path = tmp_path / "m_result.jsonl"
    rec = _record("odd", [-10, -10, -10, -10, 5], final_reply=False)
    path.write_text(json.dumps(rec, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    proc = cli(str(path), "--simulator", "replay", "--out", str(out))
    assert proc.returncode == 1
    assert "odd" in proc.stderr and "used 4 of 5" in proc.stderr
    result = _strict_json(out / "calibration.json")
    assert result["files"][0]["trajectories_identical"] is False
    # teacher forcing still reproduces each recorded appraisal
    assert result["overall"]["mae"] == 0.0


def test_bad_simulator_name_is_exit_code_2(tmp_path: Path) -> None:
    path = write_synthetic(tmp_path / "m_result.jsonl")
    proc = cli(str(path), "--simulator", "magic", "--out", str(tmp_path / "o"))
    known = ", ".join(kind_names(from_spec=False))  # calibrate offers every kind, replay too
    assert proc.returncode == 2 and f"unknown simulator kind 'magic'; known: {known}" in proc.stderr


# -- offline ----------------------------------------------------------------------------------------


def test_offline_restore_rebuilds_the_users_memory(tmp_path: Path) -> None:
    path = write_synthetic(tmp_path / "m_result.jsonl")
    episode = next(e for e in read_published(path) if e.episode_id == "limit")
    profile = profile_of(episode)
    sim = OfflineSimulator(seed=1)
    turns = appraised_turns(str(path), episode)

    async def restored() -> list[int]:
        changes = []
        for t in turns:
            user = sim.start(profile, start_emotion=t.emotion_before, seed=3)
            user.restore(t.history, t.emotion_before)
            assert user.history == list(t.history) and user.emotion.value == t.emotion_before
            got = await user.respond(t.reply)
            assert got.appraisal is not None
            changes.append(got.appraisal.raw_change)
        return changes

    r = asyncio.run(restored())
    assert len(r) == len(turns)
    # repeating an earlier reply is penalised only because restore rebuilt the earlier replies
    user = sim.start(profile, start_emotion=40, seed=3)
    user.restore(turns[3].history, 40)
    repeat = asyncio.run(user.respond(turns[3].history[1].content))
    fresh = sim.start(profile, start_emotion=40, seed=3)
    fresh.restore(turns[0].history, 40)
    first = asyncio.run(fresh.respond(turns[3].history[1].content))
    assert repeat.appraisal is not None and first.appraisal is not None
    assert repeat.appraisal.raw_change < first.appraisal.raw_change


def test_learned_provenance_is_shown_and_stored(tmp_path: Path) -> None:
    from rlver.fidelity.calibrate_report import provenance_rows

    path = write_synthetic(tmp_path / "m_result.jsonl")
    out = tmp_path / "out"
    sim = OfflineSimulator(seed=0)
    asyncio.run(calibrate([str(path)], lambda _fd: sim, sim.describe(), out))
    stored = json.loads((out / "calibration.json").read_text())["simulator"]["learned"]
    assert len(stored["data"]) == 9 and stored["artefact_sha256"]
    rows = dict(provenance_rows(sim.describe()))
    assert rows["artefact"].endswith(stored["artefact_sha256"])
    assert any(k.startswith("held out: leave_model_out") for k in rows)
    page = (out / "calibration.html").read_text()
    assert "Learned appraisal: provenance" in page and stored["data"][0]["sha256"] in page
    assert provenance_rows(OfflineSimulator(learned=False).describe()) == []


def test_files_the_learned_fit_saw_are_reported_apart(tmp_path: Path) -> None:
    """A file named (by sha256) in the learned appraisal's provenance is in-sample; the others are not,
    and each group's figures are those of its own turns, per simulator folder as well."""
    import hashlib

    from rlver.stats import agreement

    seen = write_synthetic(_mkdir(tmp_path / "sim-a") / "m1_result.jsonl")
    unseen = _mkdir(tmp_path / "sim-b") / "m2_result.jsonl"
    unseen.write_text(seen.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    sim = OfflineSimulator(seed=0)
    info = sim.describe()
    info["learned"] = {
        **info["learned"],
        "data": [{"file": "x", "sha256": hashlib.sha256(seen.read_bytes()).hexdigest()}],
    }
    out = tmp_path / "out"
    summary = asyncio.run(calibrate([str(seen), str(unseen)], lambda _fd: sim, info, out))
    assert [r["in_fit"] for r in summary["files"]] == [True, False]
    groups = {g["label"]: g for g in summary["groups"]}
    assert set(groups) == {
        "files the fit never saw",
        "files the fit never saw / sim-b",
        "files the fit was fitted on (in-sample)",
        "files the fit was fitted on (in-sample) / sim-a",
    }
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    mine = [p for p in preds if p["file"] == str(unseen)]
    expected = agreement([p["recorded_change"] for p in mine], [p["predicted_change"] for p in mine])
    never = groups["files the fit never saw"]
    assert never["turns"] == expected["turns"] == 9 and never["spearman"] == expected["spearman"]
    assert groups["files the fit was fitted on (in-sample)"]["turns"] == 22
    page = (out / "calibration.html").read_text()
    assert "files the fit never saw / sim-b" in page and "<th>in fit</th>" in page
    # No learned provenance and one folder: no groups (the overall row says it all), in_fit unknown.
    plain = asyncio.run(
        calibrate([str(seen)], replay_simulator_for, {"name": "replay"}, tmp_path / "o2", replay=True)
    )
    assert plain["groups"] == [] and plain["files"][0]["in_fit"] is None


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_offline_calibration_runs_and_resumes(tmp_path: Path) -> None:
    path = write_synthetic(tmp_path / "m_result.jsonl")
    out = tmp_path / "out"
    sim = OfflineSimulator(seed=0)
    info = sim.describe()
    first = asyncio.run(calibrate([str(path)], lambda _fd: sim, info, out))
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert first["overall"]["turns"] == len(lines) == 22
    assert first["files"][0]["trajectories_identical"] is None
    # a killed run: the last 5 predictions never made it; a rerun completes them, the rest is kept
    (out / "predictions.jsonl").write_text("\n".join(lines[:17]) + "\n")
    again = asyncio.run(calibrate([str(path)], lambda _fd: sim, info, out))
    assert (out / "predictions.jsonl").read_text().splitlines()[:17] == lines[:17]
    assert again["overall"] == first["overall"]
    # another simulator's folder is not resumed into
    from rlver.errors import ConfigError

    with pytest.raises(ConfigError, match="another --out"):
        asyncio.run(calibrate([str(path)], replay_simulator_for, {"name": "replay"}, out))


# -- llm over real HTTP -----------------------------------------------------------------------------


def scripted_simulator(request: dict[str, Any]) -> str:
    """The simulator's *text* (a test double): the change follows the last marker in the prompt,
    which is the reply being judged (it comes after the history)."""
    text = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
    markers = re.findall(r"\b(GOOD|BAD|MEH|GREAT|AWFUL)\b", text)
    change = CHANGE_OF[markers[-1]] if markers else 0
    return json.dumps(
        {
            "understanding": "u",
            "goal_fit": "g",
            "inner_reaction": "i",
            "feeling": "f",
            "change": change,
            # the sage protocol's reply step plans before it answers
            "stance": "neutral",
            "aim": "a",
            "tone": "t",
            "draft": "嗯……",
            "rewrite": "更短",
            "reply": "嗯。",
            "end_dialogue": False,
        },
        ensure_ascii=False,
    )


def test_llm_calibration_is_concurrent_resumable_and_counts_tokens(tmp_path: Path) -> None:
    path = write_synthetic(tmp_path / "m_result.jsonl")
    out = tmp_path / "out"
    with FakeChatServer(scripted_simulator) as server:
        args = [str(path), "--simulator", "llm", "--sim-base-url", server.url, "--sim-model", "sim"]
        args += ["--sim-key-env", "", "--sim-temperature", "0.5", "--concurrency", "4", "--out", str(out)]
        proc = cli(*args, cache_dir=tmp_path / "cache")
        assert proc.returncode == 0, proc.stderr
        served = server.served
        lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
        assert len(lines) == 22 and all(x["tokens"] > 0 for x in lines)
        # one call per turn: the appraisal only (the user's answer is never written, nor paid for)
        assert served == 22
        result = _strict_json(out / "calibration.json")
        assert result["overall"]["spearman"] == 1.0 and result["overall"]["sign_agreement"] == 1.0
        assert result["files"][0]["tokens"] == sum(x["tokens"] for x in lines)
        # resume: drop 4 turns; only they are asked again
        (out / "predictions.jsonl").write_text(
            "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines[:18])
        )
        assert cli(*args, cache_dir=tmp_path / "cache").returncode == 0
        asked_again = server.served - served
        assert 0 < asked_again <= served * 4 // 22 + 4
        # complete: nothing is asked
        before = server.served
        assert cli(*args, cache_dir=tmp_path / "cache").returncode == 0
        assert server.served == before


# -- released files ---------------------------------------------------------------------------------


def test_replay_reproduces_the_released_files(shared_data: Path, tmp_path: Path) -> None:
    files = sorted(str(p) for p in (shared_data / "sage_released").glob("*/*_result.jsonl"))
    if not files:
        pytest.skip("no released result files in the shared data")
    out = tmp_path / "out"
    proc = cli(*files, "--simulator", "replay", "--limit", "25", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = _strict_json(out / "calibration.json")
    assert result["overall"]["mae"] == 0.0 and result["overall"]["sign_agreement"] == 1.0
    assert all(r["trajectories_identical"] is True for r in result["files"])
    assert result["model_ranking_spearman"] == 1.0


def test_the_shipped_fit_names_the_shared_released_files(shared_data: Path, tmp_path: Path) -> None:
    """The artefact's provenance sha256 are the shared files' own: calibrate marks them in-sample."""
    files = sorted(str(p) for p in (shared_data / "sage_released").glob("*/*_result.jsonl"))
    if not files:
        pytest.skip("no released result files in the shared data")
    sim = OfflineSimulator(seed=0)
    summary = asyncio.run(calibrate(files, lambda _fd: sim, sim.describe(), tmp_path / "out", limit=2))
    assert [r["in_fit"] for r in summary["files"]] == [True] * len(files)
    assert summary["groups"][0]["label"] == "files the fit was fitted on (in-sample)"


def test_failed_llm_turns_are_reported_and_retried_on_rerun(tmp_path: Path) -> None:
    """A simulator that answers nonsense for some replies: those turns fail (exit 1, named), the rest
    are kept, and a rerun against a healthy simulator asks only for the failed ones."""
    path = write_synthetic(tmp_path / "m_result.jsonl")
    out = tmp_path / "out"

    def flaky(request: dict[str, Any]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
        return "not json at all" if "AWFUL" in text else scripted_simulator(request)

    with FakeChatServer(flaky) as server:
        args = [str(path), "--simulator", "llm", "--sim-base-url", server.url, "--sim-model", "sim"]
        args += ["--sim-key-env", "", "--sim-temperature", "0.5", "--out", str(out)]
        proc = cli(*args, cache_dir=tmp_path / "cache")
        assert proc.returncode == 1
        assert "got no prediction" in proc.stderr and "low turn" in proc.stderr
        kept = (out / "predictions.jsonl").read_text().splitlines()
        assert 0 < len(kept) < 22
        server.responder = scripted_simulator
        proc = cli(*args, cache_dir=tmp_path / "cache")
        assert proc.returncode == 0, proc.stderr
        assert len((out / "predictions.jsonl").read_text().splitlines()) == 22


def test_sim_option_turns_on_a_sage_prompt_option_and_is_recorded(tmp_path: Path) -> None:
    """`rlver calibrate --sim-option NAME` is how each prompt option is measured (docs/protocol.md)."""
    path = write_synthetic(tmp_path / "m_result.jsonl")
    with FakeChatServer(scripted_simulator) as server:
        args = [str(path), "--simulator", "llm", "--sim-base-url", server.url, "--sim-model", "sim"]
        args += [
            "--sim-key-env",
            "",
            "--limit",
            "1",
            "--sim-option",
            "change_example",
            "--out",
            str(tmp_path / "o"),
        ]
        proc = cli(*args, cache_dir=tmp_path / "cache")
        assert proc.returncode == 0, proc.stderr
        systems = {r["messages"][0]["content"] for r in server.requests}
    # calibration makes the appraisal call only, so the option is one that call shows
    assert systems and all('"change": 0}' in s for s in systems)
    result = _strict_json(tmp_path / "o" / "calibration.json")
    assert result["simulator"]["change_example"] is True and result["simulator"]["show_traits"] is False
    bad = cli(
        str(path),
        "--simulator",
        "llm",
        "--sim-model",
        "m",
        "--sim-base-url",
        "http://127.0.0.1:9/v1",
        "--sim-option",
        "bands",
        "--out",
        str(tmp_path / "b"),
    )
    assert bad.returncode == 2 and "tier_bands" in bad.stderr and "Traceback" not in bad.stderr
    offline = cli(
        str(path), "--simulator", "offline", "--sim-option", "tier_bands", "--out", str(tmp_path / "c")
    )
    assert offline.returncode == 2 and "--simulator llm" in offline.stderr


def test_set_reaches_the_kind_and_replay_takes_none(tmp_path: Path) -> None:
    """``--set simulator.KEY=VALUE`` gives calibrate a kind's own options (eval's syntax); replay, built
    from the files, reads none, so a --set there exits 2 rather than being ignored."""
    path = write_synthetic(tmp_path / "m_result.jsonl")
    bad = cli(
        str(path), "--simulator", "offline", "--set", "simulator.learned=maybe", "--out", str(tmp_path / "a")
    )
    assert bad.returncode == 2 and "learned: Input should be a valid boolean" in bad.stderr
    replay = cli(
        str(path), "--simulator", "replay", "--set", "simulator.learned=false", "--out", str(tmp_path / "b")
    )
    assert replay.returncode == 2 and "simulator kind replay" in replay.stderr
