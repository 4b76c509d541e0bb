"""`rlver explain` rows that used to say false things or hide a setting: the guard on malformed answers,
the agent prompt's language, the simulator's prompt language, an undated judge name, the training
simulator, and the think instruction a held-out agent was given.

Manifests are written by rlver's own code (``RunManifest.create``), as in ``test_explain.py``.
"""

from __future__ import annotations

from pathlib import Path

from rlver.eval.explain import explain
from rlver.simulator.llm.protocols.base import PARSE_GUARD
from test_explain import _as_published, _llm_user, _write_run


def _rows(tmp_path: Path, name: str, **changes: object) -> dict[str, list[str]]:
    found = explain(_write_run(tmp_path / name, _as_published(**changes)))
    rows: dict[str, list[str]] = {}
    for d in [*found.differences, *found.unknown]:
        rows.setdefault(d.row, []).append(f"{d.setting}: {d.run} (published: {d.published})")
    return rows


def test_the_default_guard_on_malformed_answers_is_the_published_loop(tmp_path: Path) -> None:
    """The default bound is a guard only: not a difference. A smaller one is named; 0 is SAGE's loop."""
    for name, attempts, named in (("guard", PARSE_GUARD, False), ("none", 0, False), ("two", 2, True)):
        rows = _rows(tmp_path, name, simulator={**_llm_user(), "parse_attempts": attempts})
        assert ("retries" in rows) == named, (attempts, rows)
    rows = _rows(tmp_path, "two-again", simulator={**_llm_user(), "parse_attempts": 2})
    assert rows["retries"] == [
        "simulator answer that does not parse: sent at most 2 times, then the turn fails "
        "(simulator.protocol.parse_attempts) (published: sent again until one parses)"
    ]
