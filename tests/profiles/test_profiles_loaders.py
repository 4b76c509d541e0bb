"""Profile loaders: native JSONL/YAML, the published format, tolerant hidden-need parsing, all-or-nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlver.errors import InputError
from rlver.profiles.loaders import (
    detect_profile_format,
    dump_profiles_jsonl,
    load_profiles,
    published_need_type,
    split_hidden_need,
)

NATIVE = {
    "id": "t-1",
    "language": "en",
    "persona": "Ana, 30, nurse",
    "background": "Lost a patient last week.",
    "goal": "Talk about the shift.",
    "hidden_need": "To be heard.",
    "traits": ["tired"],
    "style": "passive",
    "opening": "Long night.",
}


def published_row(
    i: int, scene_tail: str = "\n####隐藏主题:\n***你希望对方用心倾听你的情绪宣泄", **extra: object
) -> dict:
    row = {
        "id": f"p-{i}",
        "player": "* 姓名：小王\n* 年龄：30岁",
        "scene": "## 背景\n事情是这样的。\n### 根据隐藏主题的反应\n- **贴合隐藏主题的回复**：倾听"
        + scene_tail,
        "main_cha": "被动型",
        "cha_group": ["内向", "谨慎", "焦虑"],
        "task": "你希望对方用心倾听你的情绪宣泄",
    }
    row.update(extra)
    return row


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)
    )
    return path


@pytest.mark.parametrize(
    "tail",
    [
        "\n####隐藏主题:\n***你希望被倾听",
        "\n#### 隐藏主题：\n你希望被倾听",
        "\n## 隐藏的主题 : 你希望被倾听",
        "\n**隐藏主题：** 你希望被倾听 ",
        "\n####隐藏主题\n***你希望被倾听***",
        "\nHidden need: 你希望被倾听",
    ],
)
def test_hidden_need_heading_variants(tail: str) -> None:
    split = split_hidden_need("背景故事。\n### 根据隐藏主题，角色的反应\n- 贴合隐藏主题：好" + tail)
    assert split is not None
    background, need = split
    assert need == "你希望被倾听"
    assert background.endswith("贴合隐藏主题：好")
    assert "隐藏主题:" not in background and "隐藏主题：\n" not in background


def test_last_heading_wins_and_mentions_are_not_headings() -> None:
    scene = (
        "**隐藏主题：**\n早先的提纲\n根据隐藏主题，角色会……\n隐藏主题是一个概念\n####隐藏主题:\n***真正的需求"
    )
    background, need = split_hidden_need(scene)  # type: ignore[misc]
    assert need == "真正的需求"
    assert "早先的提纲" in background


def test_no_heading_returns_none() -> None:
    assert split_hidden_need("只是一个故事，提到了隐藏主题是什么。") is None


def test_published_need_types() -> None:
    assert published_need_type("你希望对方用心倾听你的情绪宣泄") == "being heard"
    assert published_need_type("你想获得能真实帮助你解决当下困境的建议") == "advice"
    assert published_need_type("something else") == ""


def test_load_native_jsonl(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [NATIVE, {**NATIVE, "id": "t-2", "opening": None}])
    profiles = load_profiles(path)
    assert [p.id for p in profiles] == ["t-1", "t-2"]
    assert profiles[0].source == str(path)
    assert profiles[1].opening is None


def test_load_published_maps_fields(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "pub.jsonl", [published_row(1, first_talk="最近很烦。"), published_row(2)])
    a, b = load_profiles(path, source="sage")
    assert a.language == "zh" and a.style == "passive" and a.traits == ["内向", "谨慎", "焦虑"]
    assert a.persona.startswith("* 姓名") and a.goal == "你希望对方用心倾听你的情绪宣泄"
    assert a.hidden_need == "你希望对方用心倾听你的情绪宣泄" and a.need_type == "being heard"
    assert "####" not in a.background and a.background.endswith("倾听")
    assert a.opening == "最近很烦。" and b.opening is None and a.source == "sage"


def test_unknown_published_style_is_kept(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "pub.jsonl", [published_row(1, main_cha="讽刺型")])
    assert load_profiles(path)[0].style == "讽刺型"


def test_every_bad_row_reported_with_line_and_field(tmp_path: Path) -> None:
    rows = [
        NATIVE,
        {**NATIVE, "id": "t-2", "goal": "   "},  # line 2: blank goal
        "{not json",  # line 3
        {**NATIVE, "id": "t-4", "language": "fr", "colour": "red"},  # line 4: two problems
        "[1, 2]",  # line 5: not an object
        {**NATIVE},  # line 6: duplicate of line 1
        {k: v for k, v in NATIVE.items() if k != "persona"} | {"id": "t-7"},  # line 7: missing persona
        {**NATIVE, "id": "t-8"},  # fine
    ]
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(InputError) as info:
        load_profiles(path)
    text = str(info.value)
    expected = [
        f"{path}:2: goal: ",
        f"{path}:3: not valid JSON",
        f"{path}:4: language: ",
        f"{path}:4: colour: unknown field",
        f"{path}:5: expected an object",
        f"{path}:6: id: duplicate id 't-1' (first on line 1)",
        f"{path}:7: persona: missing",
    ]
    for piece in expected:
        assert piece in text, piece
    assert len(info.value.problems) == 7
    assert "nothing was loaded" in text


def test_published_problems_name_published_fields(tmp_path: Path) -> None:
    rows = [
        published_row(1),
        published_row(2, scene_tail="\n没有标题"),
        {k: v for k, v in published_row(3).items() if k != "task"},
        published_row(4, cha_group="内向、谨慎"),  # a string of traits is accepted
        published_row(5, player="  "),
    ]
    path = write_jsonl(tmp_path / "pub.jsonl", rows)
    with pytest.raises(InputError) as info:
        load_profiles(path)
    text = str(info.value)
    assert f"{path}:2: scene: no hidden-need heading" in text
    assert f"{path}:3: task: missing" in text
    assert f"{path}:5: player: must not be blank" in text
    assert f"{path}:4:" not in text
    assert len(info.value.problems) == 3


def test_yaml_list_and_line_numbers(tmp_path: Path) -> None:
    good = tmp_path / "p.yaml"
    good.write_text(
        "- id: y-1\n  persona: Bo\n  background: Moved city.\n  goal: Chat.\n  hidden_need: Company.\n"
        "- id: y-2\n  language: zh\n  persona: 小李\n  background: 搬家了。\n  goal: 聊天\n  hidden_need: 陪伴\n"
    )
    assert [p.language for p in load_profiles(good)] == ["en", "zh"]
    wrapped = tmp_path / "w.yml"
    wrapped.write_text(
        "profiles:\n  - id: y-1\n    persona: Bo\n    background: B\n    goal: G\n    hidden_need: H\n"
    )
    assert load_profiles(wrapped)[0].id == "y-1"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "- id: y-1\n  persona: Bo\n  background: Moved city.\n  goal: Chat.\n  hidden_need: Company.\n"
        "- id: y-2\n  persona: Bo\n  background: B\n  goal: G\n  difficulty: extreme\n"
    )
    with pytest.raises(InputError) as info:
        load_profiles(bad)
    text = str(info.value)
    assert f"{bad}:6: hidden_need: missing" in text and f"{bad}:6: difficulty:" in text


def test_yaml_not_a_list(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\n")
    with pytest.raises(InputError, match="expected a list of profiles"):
        load_profiles(bad)


def test_missing_empty_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_profiles(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match="contains no profiles"):
        load_profiles(tmp_path / "empty.jsonl")
    with pytest.raises(InputError, match="is a folder"):
        load_profiles(tmp_path)


def test_mixed_formats_are_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mixed.jsonl", [NATIVE, published_row(2)])
    with pytest.raises(InputError, match=r":2: published-format row in a native file"):
        load_profiles(path)
    assert detect_profile_format([published_row(1), NATIVE]) == "published"


def test_dump_roundtrip(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "pub.jsonl", [published_row(1, first_talk="你好")])
    profiles = load_profiles(src)
    out = tmp_path / "native.jsonl"
    out.write_text(dump_profiles_jsonl(profiles), encoding="utf-8")
    assert load_profiles(out) == profiles


def test_byte_order_mark_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(NATIVE).encode() + b"\r\n")
    assert load_profiles(path)[0].id == "t-1"
    yml = tmp_path / "bom.yaml"
    yml.write_bytes(b"\xef\xbb\xbf- {id: a, persona: P, background: B, goal: G, hidden_need: H}\r\n")
    assert load_profiles(yml)[0].id == "a"
