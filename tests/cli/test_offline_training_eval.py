"""An offline evaluation of a run trained from a published preset, with only the profiles downloaded.

`rlver eval --profiles rlver-train --simulator offline --agent-local RUN --dialogue training` loaded the
agent, then stopped on "3 of its 4 files are not here", naming the simulator's published code an offline
user does not need. The run's agent prompt (``rlver-published``) is the one fetched file it needs: it is
now named alone, before any model loads, with the flag that sends rlver's own prompt instead (an LLM
user may read the set's other files: there every missing one is named, also before any model loads).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlver.env.thinking import absent_prompt_file
from rlver.simulator.llm import published_text

REPO = Path(__file__).resolve().parents[2]


def test_only_the_runs_prompt_file_is_asked_for_before_any_model_loads(
    tmp_path: Path, shared_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(shared_data_dir / "rlver_train_profiles.jsonl", data)
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)  # no model in it: a check after loading would fail otherwise
    shutil.copy(REPO / "src/rlver/train/presets/ppo-think.yaml", run / "config.yaml")
    env = {**os.environ, "RLVER_DATA_DIR": str(data), "RLVER_SHARED_DATA": "", "COLUMNS": "300"}
    argv = [sys.executable, "-m", "rlver", "eval", "--profiles", "rlver-train", "--simulator", "offline"]
    argv += [
        "--agent-local",
        str(run),
        "--dialogue",
        "training",
        "--limit",
        "1",
        "--out",
        str(tmp_path / "o"),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: env.agent_prompt: rlver-published (the prompt of the training run {run})")
    assert "published_code/rlver/system_prompt.py, which is not here" in line
    assert "hard_player_simulator" not in line and ".pyc" not in line
    assert "rlver data download rlver-train" in line and "--agent-prompt neutral" in line
    assert not (tmp_path / "o").exists()  # refused before any work

    # an LLM user may read the set's simulator code too: then every missing file, at once, still first
    llm = ["--simulator", "llm", "--sim-base-url", "http://127.0.0.1:1/v1", "--sim-model", "m"]
    argv = [sys.executable, "-m", "rlver", "eval", "--profiles", "rlver-train", *llm, "--agent-tiny"]
    argv += ["--agent-prompt", "rlver-published", "--limit", "1", "--out", str(tmp_path / "o")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: rlver-train: 3 of its 4 files are not here:"), line
    assert not (tmp_path / "o").exists()

    # with that one file copied in, nothing else of the set is asked for
    monkeypatch.setenv("RLVER_DATA_DIR", str(data))
    monkeypatch.setenv("RLVER_SHARED_DATA", "")
    published_text.clear_cache()
    assert absent_prompt_file("rlver-published") == "rlver/system_prompt.py"
    target = data / "published_code/rlver/system_prompt.py"
    target.parent.mkdir(parents=True)
    shutil.copy(shared_data_dir / "published_code/rlver/system_prompt.py", target)
    assert absent_prompt_file("rlver-published") is None
    assert absent_prompt_file("neutral") is None
    assert all(published_text.training_agent_prompts().values())  # the prompt reads from that file alone
    published_text.clear_cache()
