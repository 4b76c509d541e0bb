"""bench/simulator_prefix.py runs and the sage layout meets its prefix-sharing target (>= 80 %)."""

from __future__ import annotations

from pathlib import Path

from test_bench import run_bench


def test_sage_prompts_share_most_input_as_a_prefix(tmp_path: Path) -> None:
    data = run_bench(tmp_path, "simulator_prefix.py", "--dialogues 2 --turns 9")
    sage, v1 = data["protocols"]["sage"], data["protocols"]["rlver-v1"]
    # bundled profiles carry their opening line: 2 calls (appraisal, reply) per appraised turn
    assert sage["calls"] == v1["calls"] == 2 * 9 * 2
    assert sage["within_dialogue"] >= 0.80
    assert sage["within_dialogue_blocks16"] <= sage["within_dialogue"] <= sage["across_dialogues"]
    assert sage["within_dialogue"] > v1["within_dialogue"]
