"""The real published profile files (../shared/data; skipped when absent) load completely and correctly."""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from pathlib import Path

import pytest

from rlver.profiles.download import DATA_FILES
from rlver.profiles.loaders import load_profiles
from rlver.profiles.sets import load_profile_set


@pytest.fixture(scope="module")
def published(shared_data_dir: Path) -> dict[str, list]:
    return {
        "test": load_profiles(shared_data_dir / "sage_test_profiles.jsonl"),
        "train": load_profiles(shared_data_dir / "rlver_train_profiles.jsonl"),
    }


def test_all_600_rows_load_with_unique_ids(published: dict[str, list]) -> None:
    test, train = published["test"], published["train"]
    assert (len(test), len(train)) == (100, 500)
    ids = [p.id for p in test + train]
    assert len(set(ids)) == 600


def test_every_hidden_need_parsed_and_removed_from_background(published: dict[str, list]) -> None:
    for p in published["test"] + published["train"]:
        assert p.hidden_need.strip(), p.id
        assert not p.hidden_need.startswith("*"), p.id
        assert "####隐藏主题" not in p.background, p.id
        assert p.language == "zh" and len(p.traits) == 3
        # in the published data the explicit goal and the hidden need are the same sentence
        assert p.hidden_need == p.goal.strip(), p.id


def test_styles_and_need_types_match_the_readme(published: dict[str, list]) -> None:
    profiles = published["test"] + published["train"]
    assert Counter(p.style for p in profiles) == {"negative": 224, "passive": 208, "avoidant": 168}
    needs = Counter(p.need_type for p in profiles)
    assert "" not in needs and len(needs) == 8


def test_test_rows_have_openings_train_rows_do_not(published: dict[str, list]) -> None:
    assert all(p.opening and p.opening.strip() for p in published["test"])
    assert all(p.opening is None for p in published["train"])


def test_checksums_match_the_pinned_values(shared_data: Path) -> None:
    for spec in DATA_FILES.values():
        digest = hashlib.sha256((shared_data / spec.filename).read_bytes()).hexdigest()
        assert digest == spec.sha256, spec.filename


def test_sage_set_found_in_data_dir(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(shared_data / "sage_test_profiles.jsonl", tmp_path / "sage_test_profiles.jsonl")
    monkeypatch.setenv("RLVER_DATA_DIR", str(tmp_path))
    profiles = load_profile_set("sage")
    assert len(profiles) == 100 and profiles[0].source == "sage-test"
