"""Why a user ended its dialogue has one home, ``rlver.simulator.base``: ``satisfied`` at tier S (the
one tier the published prompts tell a pleased user to say goodbye at), ``left`` at any other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rlver.simulator.base import user_end_reason

SRC = Path(__file__).resolve().parents[2] / "src" / "rlver"
HOME = Path("simulator/base.py")


@pytest.mark.parametrize(
    ("tier", "reason"), [("S", "satisfied"), ("A", "left"), ("C", "left"), ("F", "left")]
)
def test_only_tier_s_is_satisfied(tier: str, reason: str) -> None:
    assert user_end_reason(tier) == reason  # type: ignore[arg-type]


def end_reason_writers(root: Path = SRC) -> list[str]:
    """``path:line`` of every ``"satisfied"`` literal and every ``end_reason=`` argument under
    ``root/simulator`` or a ``"satisfied"`` anywhere, outside the home."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel == HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            literal = isinstance(node, ast.Constant) and node.value == "satisfied"
            keyword = (
                isinstance(node, ast.keyword) and node.arg == "end_reason" and rel.parts[0] == "simulator"
            )
            if literal or keyword:
                found.append(f"src/rlver/{rel}:{getattr(node, 'lineno', '?')}")
    return found


def test_no_simulated_user_writes_its_own_end_reason() -> None:
    found = end_reason_writers()
    assert not found, (
        "end reasons written outside simulator/base.py (use SimulatedUser.user_turn):\n" + "\n".join(found)
    )


def test_the_scan_sees_a_second_home(tmp_path: Path) -> None:
    (tmp_path / "simulator").mkdir()
    (tmp_path / "simulator" / "base.py").write_text('R = "satisfied"\n', encoding="utf-8")
    (tmp_path / "simulator" / "kind.py").write_text(
        "t = UserTurn(text='x', end_reason=None)\n", encoding="utf-8"
    )
    (tmp_path / "eval.py").write_text('ok = reason == "satisfied"\n', encoding="utf-8")
    assert end_reason_writers(tmp_path) == ["src/rlver/eval.py:1", "src/rlver/simulator/kind.py:1"]
