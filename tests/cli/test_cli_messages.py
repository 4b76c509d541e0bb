"""What the command line says when things go wrong or are left out (issue 16, defect 11): markup is
rendered, `config show` without a file shows the defaults, a failed `train` leaves no empty run
folder and no aiohttp noise, and Ctrl-C on `train` says what was saved and how to resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import TINY_TRAIN_SETS, popen_with_ctrl_c, train_argv
from rlver.testing.openai_server import FakeChatServer
from test_generate import STORIES, ScriptedResponder, story_answer


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}


def rlver(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", *map(str, args)],
        capture_output=True, text=True, env=_env(), cwd=cwd, timeout=timeout,
    )  # fmt: skip


def test_profiles_generate_renders_its_marks(tmp_path: Path) -> None:
    answers = ["this is not a profile", *[json.dumps(story_answer(s)) for s in STORIES[:2]]]
    with FakeChatServer(ScriptedResponder(answers)) as server:
        proc = rlver(
            "profiles", "generate", "--n", "2", "--out", tmp_path / "p.jsonl", "--model", "fake",
            "--base-url", server.url, "--key-env", "", "--concurrency", "1",
            cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "- attempt" in proc.stderr and "+ " in proc.stderr
    assert "[yellow]" not in proc.stderr and "[green]" not in proc.stderr and "[/]" not in proc.stderr


def test_config_show_without_a_file_shows_the_defaults(tmp_path: Path) -> None:
    proc = rlver("config", "show", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no agent" not in proc.stderr
    assert "# eval config (defaults)" in proc.stdout and "agent_tiny: true" in proc.stdout
    assert "--set agent.model=" in proc.stdout and "--kind train" in proc.stdout


def test_failed_train_leaves_no_run_folder_and_no_open_session(tmp_path: Path) -> None:
    sets = [*TINY_TRAIN_SETS, "simulator.kind=llm", "simulator.model.kind=openai", "simulator.model.model=x",
            "simulator.model.base_url=http://127.0.0.1:9/v1", "simulator.model.max_attempts=1"]  # fmt: skip
    proc = rlver(*train_argv("run", *sets, steps=1), cwd=tmp_path)
    assert proc.returncode == 1
    assert "every dialogue failed" in proc.stderr
    assert "Unclosed client session" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()
    assert "removed the run folder run" in proc.stderr


@pytest.mark.slow  # 6 s CPU, 20 s on the shared 2-core box (issue 26)
def test_ctrl_c_on_train_says_what_was_saved(tmp_path: Path) -> None:
    proc = popen_with_ctrl_c(
        [sys.executable, "-m", "rlver", *train_argv("run", *TINY_TRAIN_SETS, "run.checkpoint_every=1", steps=500)],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not (tmp_path / "run" / "checkpoints" / "latest").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    # the signal lands in a step (abandoned, or finished first once its update began) or, on a loaded
    # machine, between steps, right after a checkpoint (trainer.Trainer.train's "interrupted after")
    during = "interrupted: step" in err and ("abandoned" in err or "finished first" in err)
    # (its checkpoint already written, or the signal came before the save and the trainer wrote it)
    between = "interrupted: interrupted after step" in err and (
        "was saved already" in err or "; saved step" in err
    )
    assert during or between, err
    assert "run/checkpoints/step_" in err
    assert "continue with: rlver train --resume --out run" in err
    assert "Traceback" not in err


def test_train_help_names_every_preset() -> None:
    """`rlver train --config`'s help lists the bundled presets (it had left out smollm2-offline,
    which the README tells a user to run)."""
    import inspect

    from rlver.cli.train_cmd import train_command
    from rlver.train.config import preset_names

    help_text = inspect.signature(train_command).parameters["config"].default.help
    assert all(name in help_text for name in preset_names()), help_text
