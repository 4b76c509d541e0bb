"""The bundled profiles (our own writing): sizes, variety, richness and a clean train/test split."""

from __future__ import annotations

from collections import Counter

import pytest

from rlver.errors import InputError
from rlver.profiles.sets import BUNDLED_SETS, load_profile_set

MIN_SIZES = {"en-train": 18, "en-test": 6, "zh-train": 6, "zh-test": 2}


@pytest.mark.parametrize(("name", "minimum"), MIN_SIZES.items())
def test_bundled_sets_meet_their_sizes(name: str, minimum: int) -> None:
    profiles = load_profile_set(name)
    assert len(profiles) >= minimum
    lang = name.split("-")[0]
    assert {p.language for p in profiles} == {lang}
    assert all(p.source == f"bundled:{name}" for p in profiles)


def test_totals_and_unions() -> None:
    everything = load_profile_set("bundled")
    assert sum(1 for p in everything if p.language == "en") >= 24
    assert sum(1 for p in everything if p.language == "zh") >= 8
    assert len({p.id for p in everything}) == len(everything)
    test_ids = {p.id for p in load_profile_set("bundled-test")}
    train_ids = {p.id for p in load_profile_set("bundled-train")}
    assert test_ids and train_ids and not test_ids & train_ids
    assert test_ids | train_ids == {p.id for p in everything}


def test_variety_of_needs_styles_difficulty_and_topics() -> None:
    profiles = load_profile_set("bundled")
    needs = Counter(p.need_type for p in profiles)
    assert {"validation", "advice", "being heard"} <= set(needs)
    assert all(needs[n] >= 4 for n in ("validation", "advice", "being heard"))
    styles = Counter(p.style for p in profiles)
    assert {"negative", "passive", "avoidant"} <= set(styles) and len(styles) >= 4
    assert {p.difficulty for p in profiles} == {"easy", "normal", "hard"}
    assert len({p.topic for p in profiles}) >= 20
    for name in ("en-test", "zh-test"):
        assert len({p.need_type for p in load_profile_set(name)}) >= 3


def test_each_profile_is_rich() -> None:
    en_sections = (
        "Cause:",
        "Timeline:",
        "Main conflict:",
        "What they have tried:",
        "high",
        "low",
        "meet the hidden need",
        "miss the hidden need",
    )
    zh_sections = (
        "起因",
        "经过",
        "主要冲突",
        "试过的办法",
        "情绪高时",
        "情绪低时",
        "贴合隐藏需求",
        "偏离隐藏需求",
    )
    for p in load_profile_set("bundled"):
        for section in en_sections if p.language == "en" else zh_sections:
            assert section in p.background, (p.id, section)
        assert len(p.background) > (900 if p.language == "en" else 300), p.id
        assert p.opening and p.goal and p.hidden_need and len(p.traits) >= 3, p.id
        assert p.difficulty is not None and p.topic and p.need_type, p.id
        assert "Age:" in p.persona or "年龄" in p.persona, p.id


def test_unknown_set_names_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"neither a file nor a known profile set.*en-train"):
        load_profile_set("no-such-set")
    assert set(MIN_SIZES) <= set(BUNDLED_SETS)


def test_sage_missing_says_how_to_download(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlver.profiles import download

    monkeypatch.setattr(download, "candidate_dirs", lambda: [tmp_path])
    with pytest.raises(InputError, match="rlver data download sage-test"):
        load_profile_set("sage")
