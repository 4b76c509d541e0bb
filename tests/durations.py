"""What each test costs, written where ``$RLVER_TEST_DURATIONS`` names (``make pytest`` sets it), and
the rule ``tests/test_slow_marks.py`` checks on it: a test that costs more than
:data:`SLOW_CPU_SECONDS` is marked ``slow``.

Why CPU seconds, not wall seconds: on the shared 2-core box a test's wall time doubles when a
neighbour runs, so a wall-clock threshold would fail by the neighbour's fault. The CPU time of the
test's process (all its threads) and of the subprocesses it waited for is what the test itself burnt,
nearly whatever else runs. Setup and teardown count (a module's expensive fixture is paid by the test
that builds it). One JSON line per test, one file per process (xdist workers write side by side).

Used as a pytest plugin: ``tests/conftest.py`` imports its hook; ``pytest -p durations`` loads it
elsewhere.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: the folder the records go to (unset: nothing is measured)
DURATIONS_ENV = "RLVER_TEST_DURATIONS"
#: A test over this many CPU seconds belongs to the slow track (``-m slow``), measured on the
#: 2-core dev box: the fast suite's tests that train, build venvs or run subprocess crashes cost
#: 20 to 130 s, its unit tests under 10.
SLOW_CPU_SECONDS = 20.0
#: The check fails only past this multiple of the threshold: a test's CPU seconds move with the load
#: (torch's worker threads spin while they wait) and with which test of a module pays its shared
#: fixture, so a test measured just under the line must not turn CI red on a busier day. Mark at
#: the threshold; the check catches what is clearly over it.
CHECK_TOLERANCE = 1.5
#: The fast suite's CPU budget (every test not marked ``slow``, all processes together), held by
#: ``tests/test_slow_marks.py`` on each ``make pytest``: CPU seconds, not wall time, for the reason
#: above. Set at 1.5 x the figure measured on the 2-core dev box (docs/reliability.md, "What the suite
#: costs"): a neighbour's load moves a run's CPU seconds by up to a third, a suite that grows by half
#: fails and says by how much.
FAST_SUITE_CPU_BUDGET = 1000.0


def cpu_seconds() -> float:
    """CPU seconds of this process (all threads) and of the child processes it has waited for."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    folder = os.environ.get(DURATIONS_ENV)
    if not folder:
        yield
        return
    cpu, wall = cpu_seconds(), time.perf_counter()
    yield
    record = {
        "test": item.nodeid,
        "cpu_s": round(cpu_seconds() - cpu, 3),
        "wall_s": round(time.perf_counter() - wall, 3),
        "slow": item.get_closest_marker("slow") is not None,
    }
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def read_records(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()
    ]


def fast_suite_cpu(records: list[dict[str, Any]]) -> float:
    """CPU seconds of every test not marked ``slow`` in one run's records, each test counted once (its
    costliest record: a suite run inside a test, as the additions drill's, must not count twice)."""
    cost: dict[str, float] = {}
    for r in records:
        if not r["slow"]:
            cost[r["test"]] = max(cost.get(r["test"], 0.0), r["cpu_s"])
    return sum(cost.values())


def unmarked_slow(
    records: list[dict[str, Any]], threshold: float = SLOW_CPU_SECONDS * CHECK_TOLERANCE
) -> list[str]:
    """``test (N CPU s)`` for each test over ``threshold`` (by default the slow threshold with the
    check's tolerance) that is not marked ``slow``, costliest first."""
    over = [r for r in records if not r["slow"] and r["cpu_s"] > threshold]
    return [
        f"{r['test']} ({r['cpu_s']:.1f} CPU s, {r['wall_s']:.1f} s wall)"
        for r in sorted(over, key=lambda r: -r["cpu_s"])
    ]
