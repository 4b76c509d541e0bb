"""Slow tests are marked by a measured threshold (``durations.SLOW_CPU_SECONDS``), checked on every
``make pytest``: the suite's run writes each test's CPU seconds (``$RLVER_TEST_DURATIONS``), and this
file, run after it with ``$RLVER_SLOW_MARKS_FROM`` naming the same folder, fails on a test over the
threshold that is not marked ``slow``, naming it and its figures. The rule and the recorder are checked
here on any run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from durations import (
    CHECK_TOLERANCE,
    FAST_SUITE_CPU_BUDGET,
    SLOW_CPU_SECONDS,
    fast_suite_cpu,
    read_records,
    unmarked_slow,
)

TESTS = Path(__file__).resolve().parent


def test_every_test_over_the_threshold_in_this_suites_run_is_marked_slow() -> None:
    folder = os.environ.get("RLVER_SLOW_MARKS_FROM")
    if not folder:
        pytest.skip("run by `make pytest` after the suite, with RLVER_SLOW_MARKS_FROM set to its records")
    records = read_records(Path(folder))
    assert records, f"no test records under {folder}: the suite ran without RLVER_TEST_DURATIONS"
    over = unmarked_slow(records)
    assert not over, (
        f"over {SLOW_CPU_SECONDS * CHECK_TOLERANCE:g} CPU seconds and not marked slow (mark them @pytest.mark.slow or make "
        f"them cheaper): {over}"
    )


def test_the_fast_suite_stays_within_its_cpu_budget_in_this_suites_run() -> None:
    folder = os.environ.get("RLVER_SLOW_MARKS_FROM")
    if not folder:
        pytest.skip("run by `make pytest` after the suite, with RLVER_SLOW_MARKS_FROM set to its records")
    records = read_records(Path(folder))
    spent = fast_suite_cpu(records)
    assert spent <= FAST_SUITE_CPU_BUDGET, (
        f"the fast suite (tests not marked slow) cost {spent:.0f} CPU s, over its budget of "
        f"{FAST_SUITE_CPU_BUDGET:.0f} (tests/durations.py): mark the costliest new tests slow or make them cheaper"
    )


def test_the_fast_suite_cost_counts_only_unmarked_tests() -> None:
    records = [
        {"test": "a::quick", "cpu_s": 2.0, "wall_s": 2.0, "slow": False},
        {"test": "a::other", "cpu_s": 3.5, "wall_s": 9.0, "slow": False},
        {"test": "a::heavy", "cpu_s": 90.0, "wall_s": 60.0, "slow": True},
        {"test": "a::other", "cpu_s": 3.0, "wall_s": 4.0, "slow": False},  # the same test run again
    ]
    assert fast_suite_cpu(records) == 5.5


def test_the_rule_names_an_unmarked_test_over_the_threshold_only() -> None:
    records = [
        {"test": "a::heavy", "cpu_s": SLOW_CPU_SECONDS + 5, "wall_s": 30.0, "slow": False},
        {"test": "a::heavy_marked", "cpu_s": 90.0, "wall_s": 60.0, "slow": True},
        {
            "test": "a::light",
            "cpu_s": SLOW_CPU_SECONDS - 1,
            "wall_s": 40.0,
            "slow": False,
        },  # waited, not burnt
    ]
    assert unmarked_slow(records, SLOW_CPU_SECONDS) == [
        f"a::heavy ({SLOW_CPU_SECONDS + 5:.1f} CPU s, 30.0 s wall)"
    ]
    # the check's default leaves a margin above the threshold for load and fixture placement
    assert unmarked_slow(records) == []
    over = [{"test": "a::far", "cpu_s": SLOW_CPU_SECONDS * CHECK_TOLERANCE + 1, "wall_s": 1.0, "slow": False}]
    assert unmarked_slow(over) == [f"a::far ({SLOW_CPU_SECONDS * CHECK_TOLERANCE + 1:.1f} CPU s, 1.0 s wall)"]


def test_the_recorder_measures_the_cpu_a_test_and_its_subprocess_burn(tmp_path: Path) -> None:
    """A real pytest run with the plugin: a test that burns CPU in itself and in a child process it
    waits for, another that only sleeps; each is recorded with its mark."""
    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys, time\n"
        "import pytest\n"
        "def _burn(s):\n"
        "    end = time.process_time() + s\n"
        "    while time.process_time() < end:\n"
        "        pass\n"
        "@pytest.mark.slow\n"
        "def test_burns():\n"
        "    _burn(0.4)\n"
        "    subprocess.run([sys.executable, '-c', 'import time\\nend = time.process_time() + 0.4\\n"
        "while time.process_time() < end: pass'], check=True)\n"
        "def test_sleeps():\n"
        "    time.sleep(0.5)\n",
        encoding="utf-8",
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n", encoding="utf-8")
    out = tmp_path / "records"
    out.mkdir()
    env = {
        **os.environ,
        "RLVER_TEST_DURATIONS": str(out),
        "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "durations", "-p", "no:cacheprovider", "test_burn.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    by_test = {r["test"]: r for r in read_records(out)}
    burns, sleeps = by_test["test_burn.py::test_burns"], by_test["test_burn.py::test_sleeps"]
    assert burns["slow"] and not sleeps["slow"]
    assert burns["cpu_s"] >= 0.75  # its own 0.4 s and its child's 0.4 s
    assert sleeps["cpu_s"] < 0.3 <= sleeps["wall_s"]
