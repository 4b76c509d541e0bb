"""`rlver score` reproduces the published leaderboard from files in the published result format.

The files are synthetic but faithful to the released SAGE result files (Tencent/digitalhuman,
SAGE/dataset/*_based_simulator/*_result.jsonl): one dialogue a line with ``id, emo_point, emo_state,
target, player, scene, character, topic, task, history``; user messages carry ``emotion-point`` and,
after the opening line, ``thinking`` and ``planning`` (``content, TargetCompletion, activity, analyse,
change``); the last assistant reply of a dialogue that hit the turn limit is never appraised.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

STATES = ((100, "Emotion-S"), (70, "Emotion-A"), (40, "Emotion-B"), (10, "Emotion-C"))


def emo_state(point: int) -> str:
    return next((name for low, name in STATES if point >= low), "Emotion-F")


def emotion_path(final: int, start: int = 40, max_appraisals: int = 9) -> list[int]:
    """A path start → final moving at most 10 a turn, never ending early by accident."""
    path = [start]
    while path[-1] != final:
        cur = path[-1]
        path.append(cur + max(-10, min(10, final - cur)))
    terminal = final >= 100 or final < 10
    while not terminal and len(path) - 1 < max_appraisals:
        path.append(final)  # zero-change turns until the turn limit
    return path


def published_record(pid: str, final: int) -> dict[str, object]:
    path = emotion_path(final)
    history: list[dict[str, object]] = [{"role": "user", "content": "最近有点烦。", "emotion-point": path[0]}]
    for before, after in itertools.pairwise(path):
        history.append({"role": "assistant", "content": f"听起来不容易，能多说说吗？({before})"})
        history.append(
            {
                "role": "user",
                "content": "再见" if (after >= 100 or after < 10) else "嗯……",
                "thinking": "1. 回复态度偏向：无偏向。",
                "emotion-point": after,
                "planning": {
                    "activity": "心理活动]\n有点被理解。",
                    "TargetCompletion": "人物对话目的是否达到]\n部分达到。",
                    "content": "NPC想要表达的内容]\n关心。",
                    "analyse": "人物对NPC回复的感受]\n一般。",
                    "change": after - before,
                },
            }
        )
    if not (final >= 100 or final < 10):
        history.append({"role": "assistant", "content": "我一直都在。"})  # 10th reply, never appraised
    return {
        "id": pid,
        "emo_point": final,
        "emo_state": emo_state(final),
        "target": "eq",
        "player": "* 姓名：测试\n* 年龄：23岁",
        "scene": "## 剧本背景故事\n……\n####隐藏主题:\n***你希望对方用心倾听你的情绪宣泄",
        "character": "被动型",
        "topic": "测试话题",
        "task": "你希望对方用心倾听你的情绪宣泄",
        "history": history,
    }


def finals_for(score_x100: int, success: int, failure: int, n: int = 100) -> list[int]:
    """n final emotions with exactly ``success`` at 100, ``failure`` below 10, summing to score_x100."""
    finals = [100] * success + [5] * failure
    rest = n - success - failure
    remaining = score_x100 - sum(finals)
    base, extra = divmod(remaining, rest)
    assert base >= 10 and base + 1 <= 99, "unreachable target"
    finals += [base + 1] * extra + [base] * (rest - extra)
    return finals


def write_published(path: Path, finals: list[int]) -> None:
    lines = [
        json.dumps(published_record(f"{i:08d}-0000-4000-8000-{i:012d}", f), ensure_ascii=False)
        for i, f in enumerate(finals)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# The three published leaderboard rows named in the task, as (score×100 before rounding, success, failure).
ROWS = {
    "model-a_result.jsonl": (5475, 19, 24, "54.8"),  # 54.75 rounds half up
    "model-b_result.jsonl": (6815, 35, 13, "68.2"),
    "model-c_result.jsonl": (6265, 23, 15, "62.7"),  # banker's rounding would print 62.6
}


def _rlver(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rlver", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture()
def published_files(tmp_path: Path) -> list[Path]:
    paths = []
    for name, (x100, success, failure, _) in ROWS.items():
        finals = finals_for(x100, success, failure)
        assert sum(finals) == x100
        path = tmp_path / name
        write_published(path, finals)
        paths.append(path)
    return paths


def test_score_reproduces_published_rows_table(published_files: list[Path]) -> None:
    proc = _rlver("score", *map(str, published_files))
    assert proc.returncode == 0, proc.stderr
    for name, (_, success, failure, shown) in ROWS.items():
        run = name.removesuffix("_result.jsonl")
        line = next(ln for ln in proc.stdout.splitlines() if run in ln)
        cells = [c.strip() for c in line.replace("│", "|").split("|") if c.strip()]
        assert cells[:5] == [run, "100", shown, str(success), str(failure)], line
    assert "format: published" in proc.stdout


def test_score_json(published_files: list[Path]) -> None:
    proc = _rlver("score", "--json", *map(str, published_files))
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    for run, (name, (x100, success, failure, shown)) in zip(runs, ROWS.items(), strict=True):
        assert run["format"] == "published"
        assert run["score"] == pytest.approx(x100 / 100)
        assert f"{run['score_rounded']:.1f}" == shown
        assert (run["n"], run["success"], run["failure"]) == (100, success, failure), name
        # every dialogue's emotion trail survived the conversion: the trajectory ends at the score
        assert run["trajectory"][-1] == pytest.approx(x100 / 100)
        assert run["trajectory"][0] == 40


def test_score_accepts_a_json_array_file(tmp_path: Path) -> None:
    records = [published_record(f"id-{i}", f) for i, f in enumerate([100, 5, 60, 61])]
    path = tmp_path / "array_result.json"
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    proc = _rlver("score", "--json", str(path))
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)["runs"][0]
    assert (run["n"], run["success"], run["failure"], run["score_rounded"]) == (4, 1, 1, 56.5)


def test_score_bad_input_is_a_clean_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad_result.jsonl"
    good = json.dumps(published_record("x", 50), ensure_ascii=False)
    broken = json.dumps({"id": "y", "emo_point": "lots", "emo_state": "Emotion-B", "history": []})
    bad.write_text(good + "\n" + broken + "\n", encoding="utf-8")
    proc = _rlver("score", str(bad))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{bad}:2" in proc.stderr and "emo_point" in proc.stderr
    missing = _rlver("score", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
