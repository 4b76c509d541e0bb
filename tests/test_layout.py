"""Each test file is named after the module (or package) it tests, so a reader finds a module's tests
by its name: ``tests/<area>/test_<module>[_<aspect>].py``, where ``<module>`` is a module or package of
``rlver`` or ``rlver_sentient``. The few files that test the repository as a whole (its layers, docs,
house rules, benchmarks and install) are named in :data:`HOUSE`, each with what it checks. A name that
tells when or why a test was written (a round, a newcomer, a fix) says nothing about what it tests.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: test files about the repository as a whole, not one module: file stem → what it checks
HOUSE: dict[str, str] = {
    "test_additions_drill": "docs/architecture.md's additions table, row by row, in a copy of the tree",
    "test_architecture": "the layers and import arrows of the whole package",
    "test_bench": "the scripts under bench/ run",
    "test_bench_prefix": "bench/simulator_prefix.py meets its target",
    "test_bench_real_model": "the real-model benchmark scripts' own logic",
    "test_docs_shape": "the README and docs pages' size and links",
    "test_fuzz_inputs": "every loader, config and flag against generated bad input",
    "test_glossary": "no config key, flag or manifest field reuses a glossary word",
    "test_gpu_bench": "bench/gpu_bench.py on a machine without a GPU",
    "test_layout": "this file: test files named after what they test",
    "test_light_install": "the wheel installed alone in a fresh venv",
    "test_mutant_labels": "bench/mutants.py's labels name the mutants they were written for",
    "test_no_issue_numbers": "no issue numbers in src or the reference docs",
    "test_repeated_text": "no text written twice in src",
    "test_repo_setup": "the set-up files a newcomer meets first",
    "test_slow_marks": "every test over the CPU threshold is marked slow",
}

#: words that date a test instead of naming its subject
HISTORY = re.compile(r"round\d*|newcomer|fixes|issue\d*|first_hour|review|regression")


def module_names(src: Path) -> set[str]:
    """Every module and package name under ``src/rlver`` and ``src/rlver_sentient``."""
    names = {"rlver", "rlver_sentient"}
    for package in ("rlver", "rlver_sentient"):
        for path in (src / package).rglob("*"):
            if path.suffix == ".py" and path.stem not in ("__init__", "__main__"):
                names.add(path.stem)
            elif path.is_dir() and path.name != "__pycache__":
                names.add(path.name)
    return names


def misnamed(stems: list[str], modules: set[str], house: dict[str, str]) -> list[str]:
    """The test-file stems that name no module (and are not house tests), or name their history."""
    bad = []
    for stem in stems:
        if stem in house:
            continue
        subject = stem.removeprefix("test_")
        named = any(subject == m or subject.startswith(m + "_") for m in modules)
        if HISTORY.search(subject) or not named:
            bad.append(stem)
    return bad


def test_every_test_file_is_named_after_what_it_tests() -> None:
    stems = sorted(path.stem for path in (ROOT / "tests").rglob("test_*.py"))
    bad = misnamed(stems, module_names(ROOT / "src"), HOUSE)
    assert not bad, (
        f"test files named after no module of rlver (rename, or add to HOUSE with a reason): {bad}"
    )


def test_house_names_are_real_files() -> None:
    stems = {path.stem for path in (ROOT / "tests").rglob("test_*.py")}
    assert set(HOUSE) <= stems, sorted(set(HOUSE) - stems)


def test_the_check_sees_a_misnamed_file() -> None:
    modules = {"optim", "eval_cmd", "simulator"}
    stems = [
        "test_optim_schedule",
        "test_eval_cmd",
        "test_simulator_offline",
        "test_first_hour",
        "test_optim_round3",
        "test_misc",
    ]
    assert misnamed(stems, modules, {}) == ["test_first_hour", "test_optim_round3", "test_misc"]


def test_test_file_names_are_unique() -> None:
    """pytest imports test files by their base name (no ``__init__.py`` in tests/): two files of one
    name in two folders would collide."""
    stems = [path.stem for path in (ROOT / "tests").rglob("test_*.py")]
    assert len(stems) == len(set(stems)), sorted({s for s in stems if stems.count(s) > 1})
