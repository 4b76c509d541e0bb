"""Personas shared by two profile sets (``rlver profiles overlap``), and the training setting that
leaves the benchmark's personas out (``rollout.exclude_personas_of``, off by default)."""

from __future__ import annotations

from pathlib import Path

from helpers import run_rlver
from rlver.profiles.overlap import persona_overlap, training_profiles, without_personas_of
from rlver.profiles.sets import load_profile_set
from rlver.train.config import load_train_config
from rlver.train.published_run import published_run


def test_exact_and_near_personas_are_told_apart() -> None:
    base = load_profile_set("zh-test")[:6]
    spaced = base[0].model_copy(
        update={"id": "spaced", "persona": "  " + base[0].persona.replace("\n", "\n  ")}
    )
    edited = base[1].model_copy(update={"id": "edited", "persona": base[1].persona + "喜欢喝茶。"})
    other = load_profile_set("zh-train")[:3]
    found = persona_overlap([spaced, edited, *other], base)
    assert found.exact == [("spaced", base[0].id)]
    assert [(a, b) for a, b, _ in found.near] == [("edited", base[1].id)]
    assert "character 3-gram Jaccard >= 0.6" in found.measure()
    assert without_personas_of([spaced, edited, *other], base) == [edited, *other]


def test_the_benchmark_shares_54_personas_with_the_training_set(shared_data: Path, tmp_path: Path) -> None:
    done = run_rlver("profiles", "overlap", "sage", "rlver-train", "--show", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first, exact = done.stdout.splitlines()[:2]
    assert first.startswith(
        "54 of 100 profiles of sage have a persona of rlver-train (500 profiles) word for word; 0 more nearly"
    )
    assert exact.startswith("  exact  ")
    # leaving them out of training: no training profile keeps a benchmark persona
    kept = training_profiles("rlver-train", "sage")
    assert 0 < len(kept) < 500 and persona_overlap(load_profile_set("sage"), kept).exact == []
    assert len(training_profiles("rlver-train")) == 500  # off by default: every profile


def test_the_setting_is_off_by_default_and_named_when_on() -> None:
    assert load_train_config("grpo-think").rollout.exclude_personas_of is None
    differences = published_run(load_train_config("grpo-think", ["rollout.exclude_personas_of=sage"]))[
        "differences"
    ]
    assert differences["rollout.exclude_personas_of"] == {"run": "sage", "published": None}
