"""First-hour cases a new user met that were silent or misleading: each now says what is wrong and
where, or the docs name only what exists.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer

from rlver.config import apply_overrides, load_config
from rlver.errors import ConfigError
from rlver.train.config import TrainConfig

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("run: {steps: 2, steps: 3}\n", ":1: duplicate key run.steps (first on line 1)"),
        (
            "run:\n  steps: 2\nalgorithm:\n  name: ppo\nrun:\n  seed: 1\n",
            ":5: duplicate key run (first on line 1)",
        ),
        (
            "optim:\n  actor_lr: 1.0e-6\n  critic_lr: 5.0e-6\n  actor_lr: 1.0e-5\n",
            ":4: duplicate key optim.actor_lr",
        ),
    ],
    ids=["flow", "top-level", "block"],
)
def test_a_duplicate_yaml_key_is_refused_with_file_and_line(tmp_path: Path, text: str, where: str) -> None:
    """YAML keeps the last of two equal keys without a word: `steps: 2, steps: 3` ran 3 steps."""
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(TrainConfig, path)
    assert str(caught.value).startswith(f"{path}{where}")


def test_a_merge_key_overridden_on_purpose_is_not_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {steps: 2}\nrun:\n  <<: *b\n  steps: 3\n")
    with pytest.raises(ConfigError, match="base"):  # only the unknown top-level key is refused
        load_config(TrainConfig, path)


def test_the_set_syntax_example_names_a_real_key() -> None:
    """The error for a malformed --set gave `train.lr=1e-6`, a key that does not exist."""
    with pytest.raises(ConfigError) as caught:
        apply_overrides({}, ["steps"])
    example = re.search(r"e\.g\. (\S+)", str(caught.value))
    assert example is not None
    load_config(TrainConfig, None, [example.group(1)])  # the example itself loads


def _commands(group: Any, prefix: str = "rlver") -> set[str]:
    """Every command path under ``group`` (typer >= 0.20 vendors click: groups are told by ``commands``)."""
    names: set[str] = set()
    for name, command in group.commands.items():
        names.add(f"{prefix} {name}")
        if hasattr(command, "commands"):
            names |= _commands(command, f"{prefix} {name}")
    return names


def test_every_command_config_md_names_exists() -> None:
    """config.md pointed to `rlver simulator kinds`, which does not exist."""
    from rlver.cli import app

    commands = _commands(typer.main.get_command(app))
    groups = {c.rsplit(" ", 1)[0] for c in commands if c.count(" ") > 1}
    assert "rlver data" in groups and "rlver data download" in commands
    text = (REPO / "docs" / "config.md").read_text()
    named = {m.group(1) for m in re.finditer(r"`+(rlver(?: [a-z][a-z-]*)+)", text)}
    assert named
    for name in named:
        words = name.split()
        command = " ".join(words[:3]) if " ".join(words[:2]) in groups else " ".join(words[:2])
        assert command in commands, name


def test_the_kinds_a_config_takes_are_the_simulator_flags_choices() -> None:
    """`--simulator` lists offline, llm; config.md said offline, llm or replay (replay is calibrate's)."""
    from rlver.simulator.spec import SimulatorSpec

    buildable = set(SimulatorSpec.from_blocks().names())
    builtin = {"offline", "llm"}  # a kind added beside them (the additions drill's) is buildable too
    assert builtin <= buildable and "replay" not in buildable
    description = SimulatorSpec.model_fields["kind"].description or ""
    listed = set(re.findall(r"``(\w+)``", description.split(";")[0]))
    assert listed == builtin


def test_multinode_md_gives_the_batch_size_the_launcher_writes(tmp_path: Path) -> None:
    """multinode.md said `data.train_batch_size = 32 / n`; the launcher writes 32 with n = 4."""
    from rlver.integrations.verl.config import verl_overrides
    from rlver.integrations.verl.launch import load_verl_config

    cfg = load_verl_config("grpo-think", [])
    assert cfg.rollout.n_per_profile == 4
    overrides = verl_overrides(
        cfg,
        model_path=cfg.model.path,
        train_files=tmp_path / "train.parquet",
        val_files=tmp_path / "val.parquet",
        agent_loop_yaml=tmp_path / "agent_loops.yaml",
        n_train_profiles=500,
    )
    written = dict(o.split("=", 1) for o in overrides)["data.train_batch_size"]
    doc = (REPO / "docs" / "multinode.md").read_text()
    [row] = [line for line in doc.splitlines() if line.startswith("| batch 32 |")]
    assert f"`data.train_batch_size = {written}`" in row


def test_a_check_of_several_settings_blames_the_set_that_gave_one(tmp_path: Path) -> None:
    """GRPO with `--set rollout.n_per_profile=1` was blamed on the preset file."""
    from rlver.train.config import resolve_config_path

    preset = resolve_config_path("tiny-offline")
    with pytest.raises(ConfigError) as caught:
        load_config(TrainConfig, preset, ["rollout.n_per_profile=1"])
    assert str(caught.value).startswith("--set rollout.n_per_profile: algorithm.name=grpo needs")
    own = tmp_path / "mine.yaml"
    own.write_text("algorithm:\n  name: grpo\nrollout:\n  n_per_profile: 1\n")
    with pytest.raises(ConfigError) as caught:
        load_config(TrainConfig, own, ["run.steps=2"])  # a --set the check does not name
    assert str(caught.value).startswith(f"{own}")


def test_score_of_an_edited_transcript_points_to_audit(tmp_path: Path) -> None:
    """`rlver score` printed an edited transcript's score without a word; the audit would catch it."""
    import json
    import os
    import subprocess
    import sys

    from rlver.testing.openai_server import FakeChatServer
    from rlver.testing.responders import policy_and_simulator

    env = {**os.environ, "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_API_KEY", None)

    def rlver(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "rlver", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)

    with FakeChatServer(policy_and_simulator) as server:
        agent = ["--agent-base-url", server.url, "--agent-model", "policy"]
        sim = ["--simulator", "llm", "--sim-base-url", server.url, "--sim-model", "judge-sim"]
        done = rlver(
            "eval", *agent, *sim, "--profiles", "en-test", "--limit", "2", "--out", "run", "--no-report"
        )
    assert done.returncode == 0, done.stderr[-2000:]
    clean = rlver("score", "run")
    assert clean.returncode == 0 and "warning" not in clean.stderr, clean.stderr

    transcript = tmp_path / "run" / "transcript.jsonl"
    lines = transcript.read_text().splitlines()
    record = json.loads(lines[1])
    record["final_emotion"] = 100.0
    lines[1] = json.dumps(record)
    transcript.write_text("\n".join(lines) + "\n")
    edited = rlver("score", "run")
    assert edited.returncode == 0, edited.stderr
    [warning] = [line for line in edited.stderr.splitlines() if line.startswith("warning:")]
    assert "1 dialogue(s) whose emotion arithmetic does not add up" in warning
    assert "rlver audit run/transcript.jsonl shows where" in warning


def test_make_test_checks_the_python_floor_before_building_a_venv(tmp_path: Path) -> None:
    """README said Python >= 3.10 for `make test`, which builds a verifiers venv that needs 3.11."""
    import shutil
    import subprocess
    import sys

    if shutil.which("make") is None:
        pytest.skip("no make here")
    readme = (REPO / "README.md").read_text()
    assert "`make demo` needs Python ≥ 3.10, `make test` Python ≥ 3.11" in readme
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "test"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert dry.stdout.lstrip().startswith("v=$("), dry.stdout[:300]  # the check, before any venv
    ok = subprocess.run(
        ["make", "-s", "python-check", f"PYTHON={sys.executable}"], cwd=REPO, capture_output=True
    )
    assert ok.returncode == (0 if sys.version_info >= (3, 11) else 2)
    old = tmp_path / "python3"  # an interpreter that answers as 3.10 does
    old.write_text("#!/bin/sh\necho 3.10\n")
    old.chmod(0o755)
    refused = subprocess.run(
        ["make", "-s", "python-check", f"PYTHON={old}"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: make test needs Python >= 3.11"), refused.stderr


def test_an_eval_whose_replies_are_mostly_vetoed_says_which_veto(tmp_path: Path) -> None:
    """English replies to Chinese users: every reply vetoed for the wrong language, and the run said
    only its score (3.0, all failures). Now one line names the veto and the count; a run whose replies
    are judged on their content prints no such line."""
    import os
    import subprocess
    import sys

    from rlver.testing.openai_server import FakeChatServer
    from rlver.testing.responders import policy_and_simulator

    env = {**os.environ, "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_API_KEY", None)
    with FakeChatServer(policy_and_simulator) as server:
        agent = ["--agent-base-url", server.url, "--agent-model", "policy", "--limit", "2", "--no-report"]

        def run(profiles: str) -> str:
            argv = [sys.executable, "-m", "rlver", "eval", *agent, "--profiles", profiles, "--out", profiles]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
            assert done.returncode == 0, done.stderr[-2000:]
            return done.stdout + done.stderr

        zh = run("zh-test")
        vetoed = [line for line in zh.splitlines() if line.startswith("most replies were vetoed")]
        judged = run("en-test")
    assert len(vetoed) == 1, zh
    assert re.match(r"most replies were vetoed: (\d+)/\1 \(wrong_language \1\)", vetoed[0])
    assert "vetoed" not in judged
