"""The published result format: tolerant reading, mapping onto our records, and round trips.

The records below have the structure of the public SAGE result files (our own example text).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rlver.env.dialogue import EnvConfig
from rlver.errors import InputError
from rlver.llm.scripted import ScriptedChatModel
from rlver.profiles.schema import Profile
from rlver.rollout.runner import RolloutConfig, rollout
from rlver.transcripts.published import episode_to_record, read_published, write_published
from test_rollout import POLICY_TEXT, profiles, scripted_simulator


def published_record(**over: Any) -> dict[str, Any]:
    """A finished dialogue in the published layout: 40 -> 35 -> 45 -> 50, then the turn limit."""
    rec: dict[str, Any] = {
        "id": "3f1c-demo",
        "emo_point": 50,
        "emo_state": "Emotion-B",
        "target": "eq",
        "player": "* 姓名：小林\n* 年龄：29岁",
        "scene": "工作压力大。\n####隐藏主题:\n***希望被理解",
        "character": "被动型",
        "topic": "工作压力",
        "task": "希望被理解",
        "history": [
            {"role": "user", "content": "最近加班好多，好累。", "emotion-point": 40},
            {"role": "assistant", "content": "听起来你真的很辛苦。"},
            {
                "role": "user",
                "content": "嗯。。也就那样吧",
                "thinking": "回复态度偏负面",
                "emotion-point": "35",  # numbers as strings happen
                "planning": {
                    "activity": "有点失望",
                    "TargetCompletion": "部分贴合",
                    "content": "表达同情",
                    "analyse": "太笼统了",
                    "change": "-5",
                },
            },
            {"role": "assistant", "content": "加班到这么晚，连休息都顾不上吧？", "think": "她想被理解"},
            {
                "role": "user",
                "content": "对啊，周末也在改方案",
                "thinking": "稍微打开了一点",
                "emotion-point": 45,
                "planning": {
                    "activity": "被懂了",
                    "reason": "贴合",
                    "content": "具体地共情",
                    "analyse": "舒服",
                    "change": 10,
                },
            },
            {"role": "assistant", "content": "那你一定很想有人看到你的付出。"},
            {
                "role": "user",
                "content": "是啊",
                "emotion-point": 50.0,
                "planning": {
                    "activity": "a",
                    "TargetCompletion": "b",
                    "content": "c",
                    "analyse": "d",
                    "change": 5,
                },
                "unexpected": "kept out of the way",
            },
            {"role": "assistant", "content": "谢谢你愿意说这些。"},
        ],
    }
    rec.update(over)
    return rec


def test_read_maps_planning_onto_appraisals(tmp_path: Path) -> None:
    path = tmp_path / "model_result.jsonl"
    path.write_text(json.dumps(published_record(), ensure_ascii=False) + "\n", encoding="utf-8")
    [ep] = read_published(path)
    assert ep.profile_id == "3f1c-demo" and ep.final_emotion == 50 and ep.start_emotion == 40
    assert ep.emotions == [35, 45, 50]
    assert ep.assistant_turns == 4 and len(ep.user_turns) == 4
    a = ep.user_turns[1].appraisal
    assert a is not None
    assert (a.understanding, a.goal_fit, a.inner_reaction, a.feeling) == (
        "表达同情",
        "部分贴合",
        "有点失望",
        "太笼统了",
    )
    assert (a.raw_change, a.change, a.emotion_before, a.emotion_after, a.tier) == (-5, -5, 40, 35, "C")
    assert ep.user_turns[2].appraisal is not None and ep.user_turns[2].appraisal.goal_fit == "贴合"
    assert ep.user_turns[2].extra["goal_fit_key"] == "reason"
    assert ep.user_turns[1].extra["thinking"] == "回复态度偏负面"
    assert ep.messages[3].content == "<think>她想被理解</think>\n加班到这么晚，连休息都顾不上吧？"
    assert ep.meta["published"]["topic"] == "工作压力"


def test_json_array_files_and_missing_fields(tmp_path: Path) -> None:
    rec = published_record()
    del rec["emo_state"], rec["player"]
    del rec["history"][4]["planning"]["change"]  # inferred from the emotion points
    del rec["history"][6]["emotion-point"]  # inferred from the change
    path = tmp_path / "results.json"
    path.write_text(json.dumps([rec], ensure_ascii=False, indent=1), encoding="utf-8")
    [ep] = read_published(path)
    assert ep.emotions == [35, 45, 50]
    assert ep.user_turns[2].extra["change_inferred"] and ep.user_turns[3].extra["emotion_inferred"]


def test_unreadable_values_are_reported_with_line_and_field(tmp_path: Path) -> None:
    good = published_record()
    bad = published_record(id="second")
    bad["history"][2]["emotion-point"] = "quite sad"
    path = tmp_path / "r.jsonl"
    path.write_text(
        json.dumps(good) + "\n" + json.dumps(bad) + "\n" + json.dumps({"id": "x"}) + "\n", encoding="utf-8"
    )
    with pytest.raises(InputError) as info:
        read_published(path)
    text = str(info.value)
    assert f"{path}:2: history[2].emotion-point: expected an integer, got 'quite sad'" in text
    assert f"{path}:3: history: expected a list of messages" in text

    arr = tmp_path / "r.json"
    arr.write_text(json.dumps([good, bad]), encoding="utf-8")
    with pytest.raises(InputError, match=r"\[1\]\.history\[2\]\.emotion-point"):
        read_published(arr)


def test_published_round_trip_keeps_the_record(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    original = published_record()
    src.write_text(json.dumps(original, ensure_ascii=False) + "\n", encoding="utf-8")
    episodes = read_published(src)
    out = tmp_path / "out.jsonl"
    write_published(out, episodes)
    [back] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    for key in ("id", "emo_point", "emo_state", "player", "scene", "character", "topic", "task", "target"):
        assert back[key] == original[key], key
    assert [m["content"] for m in back["history"]] == [m["content"] for m in original["history"]]
    assert back["history"][3]["think"] == "她想被理解"
    assert back["history"][2]["emotion-point"] == 35 and back["history"][2]["planning"]["change"] == -5
    assert back["history"][4]["planning"]["reason"] == "贴合"
    assert back["history"][2]["thinking"] == "回复态度偏负面"
    assert read_published(out) == episodes


def test_our_episode_to_published_and_back() -> None:
    eps = rollout(
        ScriptedChatModel(["<think>she is tired</think>" + POLICY_TEXT]),
        scripted_simulator(change=3),
        profiles(1),
        RolloutConfig(env=EnvConfig.evaluation(max_assistant_turns=3, think=True)),
    )
    ep = eps[0]
    profile = Profile(
        id="p000",
        language="zh",
        persona="人设",
        background="背景",
        goal="目标",
        hidden_need="被理解",
        style="passive",
    )
    rec = episode_to_record(ep, profile)
    assert list(rec)[:5] == ["id", "emo_point", "emo_state", "player", "scene"]
    assert rec["emo_point"] == 46 and rec["emo_state"] == "Emotion-B"
    assert rec["character"] == "被动型" and rec["task"] == "目标" and "被理解" in rec["scene"]
    hist = rec["history"]
    assert [m["role"] for m in hist] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert hist[0]["emotion-point"] == 40 and "planning" not in hist[0]
    assert hist[1] == {"role": "assistant", "content": POLICY_TEXT, "think": "she is tired"}
    assert hist[2]["emotion-point"] == 43 and hist[2]["planning"]["change"] == 3
    assert set(hist[2]["planning"]) == {"content", "TargetCompletion", "activity", "analyse", "change"}
    assert "emotion-point" not in hist[-1]
