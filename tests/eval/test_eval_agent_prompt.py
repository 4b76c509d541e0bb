"""``rlver eval`` uses the neutral, published-equivalent agent prompt unless told otherwise (real CLI)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlver.env.thinking import AGENT_PROMPTS
from rlver.eval.config import EvalConfig


def _eval(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, "-m", "rlver", "eval", "--agent-tiny", "--simulator", "offline",
        "--profiles", "en-test", "--limit", "1", "--agent-max-tokens", "8",
        "--set", "env.rules.max_assistant_turns=1", "--no-report", "--out", str(out), *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _run(out: Path, *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    proc = _eval(out, *extra)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in (out / "transcript.jsonl").read_text(encoding="utf-8").splitlines()]
    manifest = next(r for r in records if r.get("type") != "episode")
    episode = next(r for r in records if r.get("type") == "episode")
    return manifest, episode


def test_config_default_is_neutral() -> None:
    assert EvalConfig(agent_tiny=True).env.agent_prompt == "neutral"


@pytest.mark.slow  # over 20 s: left out of CI's second, bare-copy pass
def test_default_neutral_then_coaching_then_file(tmp_path: Path) -> None:
    manifest, episode = _run(tmp_path / "neutral")
    system = episode["messages"][0]
    assert system["role"] == "system" and system["content"] == AGENT_PROMPTS["neutral"]["en"]
    record = manifest["agent_prompt"]
    assert record["name"] == "neutral"
    assert record["sha256"]["en"] == hashlib.sha256(system["content"].encode()).hexdigest()
    assert manifest["simulator"]["name"] == "offline"

    manifest, episode = _run(tmp_path / "coaching", "--agent-prompt", "coaching")
    assert episode["messages"][0]["content"] == AGENT_PROMPTS["coaching"]["en"]
    assert manifest["agent_prompt"]["name"] == "coaching"

    prompt = tmp_path / "mine.txt"
    prompt.write_text("Be kind and brief.", encoding="utf-8")
    manifest, episode = _run(tmp_path / "file", "--agent-prompt", str(prompt))
    assert episode["messages"][0]["content"] == "Be kind and brief."
    assert manifest["agent_prompt"]["name"] == "custom"
    assert manifest["agent_prompt"]["text"] == {"any": "Be kind and brief."}


def test_missing_prompt_file_is_exit_2(tmp_path: Path) -> None:
    proc = _eval(tmp_path / "x", "--agent-prompt", str(tmp_path / "nope.txt"))
    assert proc.returncode == 2
    assert "nope.txt" in proc.stderr and "Traceback" not in proc.stderr
