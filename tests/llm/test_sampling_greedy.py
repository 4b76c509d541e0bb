"""What temperature 0 means is defined once (issue 44): ``rlver.llm.sampling.is_greedy`` and
``scoring_temperature`` — greedy decoding, its tokens scored at temperature 1.

The trainer (``temperature or 1.0``), the update's scoring (``train/batch``), the answer cache, the
sentient simulator's cache switch and verl's ``do_sample`` each used to decide it; a scan holds that no
other module compares a temperature with 0 again, and the sampler and the scorer agree on a greedy
token's log-prob.
"""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from rlver.llm.sampling import is_greedy, sample_tokens, scoring_temperature
from rlver.train.batch import _token_stats

SRC = Path(__file__).resolve().parents[2] / "src" / "rlver"
HOME = "llm/sampling.py"
#: Modules still deciding on their own (none: the local sampler and its decode engine read ``is_greedy``).
LEFT: set[str] = set()


def _mentions_temperature(node: ast.AST) -> bool:
    return "temperature" in ast.unparse(node)


def _is_number(node: ast.AST, *values: float) -> bool:
    """A number literal (one of ``values`` when given)."""
    value = node.value if isinstance(node, ast.Constant) else None
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (not values or value in values)


def temperature_decisions(root: Path = SRC) -> set[str]:
    """Modules with ``<temperature> <op> 0`` or ``<temperature> or <number>``."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and len(node.comparators) == 1:
                left, right = node.left, node.comparators[0]
                if (_mentions_temperature(left) and _is_number(right, 0)) or (
                    _mentions_temperature(right) and _is_number(left, 0)
                ):
                    found.add(str(path.relative_to(root)))
            elif (
                isinstance(node, ast.BoolOp)
                and isinstance(node.op, ast.Or)
                and _mentions_temperature(node.values[0])
                and _is_number(node.values[-1])
            ):
                found.add(str(path.relative_to(root)))
    return found


def test_only_the_home_decides() -> None:
    assert temperature_decisions() - LEFT == {HOME}


def test_the_scan_sees_each_shape(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("t = cfg.temperature or 1.0\n")
    (tmp_path / "b.py").write_text("greedy = s.temperature == 0.0\n")
    (tmp_path / "c.py").write_text("sample = 0 < temperature\n")
    (tmp_path / "d.py").write_text("n = cfg.top_p or 1.0\n")
    assert temperature_decisions(tmp_path) == {"a.py", "b.py", "c.py"}


def test_the_definition() -> None:
    assert is_greedy(0.0) and is_greedy(0) and not is_greedy(0.7)
    assert (scoring_temperature(0.0), scoring_temperature(0.7), scoring_temperature(1.0)) == (1.0, 0.7, 1.0)


def test_sampler_and_scorer_agree_on_a_greedy_token() -> None:
    """A greedy token's log-prob as the sampler reports it is what the update scores at temperature 0."""
    torch.manual_seed(0)
    logits = torch.randn(3, 11) * 3
    ids, logp = sample_tokens(logits, None, 0.0)
    scored, _ = _token_stats(logits[None], ids[None], 0.0, False, False)
    torch.testing.assert_close(scored[0], logp)
    ids7, logp7 = sample_tokens(logits, torch.full((3,), 0.5), 0.7)
    scored7, _ = _token_stats(logits[None], ids7[None], 0.7, False, False)
    torch.testing.assert_close(scored7[0], logp7)
