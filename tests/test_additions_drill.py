"""docs/architecture.md, "Adding things": every row of the additions table, added to a copy of the tree.

For each row the drill writes the module an author would write (``tests/data/additions/``) and the one
line in its registry, then counts the files that differ from the original tree: the count must be the
table's "files" column, and the registry's file may differ by that one line only. With all the rows
added together, in the copy:

* ruff (check and format), mypy and the fast suite (``-m "not slow and not timing and not realmodel"``,
  as CI's second pass runs it) pass: an addition stays local, no test pins the list of names;
* each addition runs end to end: one ``rlver train`` of two steps with the new algorithm (its own
  setting), rollout backend (its own copy of the weights, released, resumed and synced), reward mode
  and simulator kind (its own option); one ``rlver eval`` whose LLM user is the new model kind
  speaking the new protocol; the new command.

So neither the table nor the code can change alone: a reader the registry forgot fails the suite in
the copy, and a row whose count grows fails here.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from helpers import run_rlver

REPO = Path(__file__).resolve().parents[1]
ADDITIONS = Path(__file__).resolve().parent / "data" / "additions"
#: what the copy holds: the checkout's tracked kinds of files, without environments or caches
COPIED = (
    "src",
    "tests",
    "bench",
    "docs",
    ".ci",
    "pyproject.toml",
    "README.md",
    "Makefile",
    "LICENSE",
    ".gitignore",
)
COPIED_FILES = ("constraints.txt", "constraints-verl.txt", "constraints-floor.txt")


@dataclass(frozen=True)
class Addition:
    """One row of the table: the new module (from ``tests/data/additions``), the registry it joins
    (file and the name it is assigned to) and the one line added there."""

    row: str  # the row's first cell in docs/architecture.md
    template: str
    module: str
    registry_file: str
    registry: str
    line: str


ROWS = [
    Addition(
        "a simulator kind", "simulator_kind.py.txt", "src/rlver/simulator/stern.py",
        "src/rlver/simulator/spec.py", "KINDS",
        '        SimulatorKind("stern", "hard to please", "rlver.simulator.stern:build", "rlver.simulator.stern:Spec"),',
    ),
    Addition(
        "a prompt set", "protocol.py.txt", "src/rlver/simulator/llm/protocols/brief.py",
        "src/rlver/simulator/llm/protocols/base.py", "PROTOCOLS",
        '        _protocol("brief", "rlver-v1 with a word limit", "brief", "BriefProtocol"),',
    ),
    Addition(
        "a reward mode", "reward_mode.py.txt", "src/rlver/env/half.py",
        "src/rlver/env/rewards.py", "REWARD_MODES",
        '        _mode("half", "half the final reward", "half_rewards", module="rlver.env.half"),',
    ),
    Addition(
        "an RL algorithm", "algorithm.py.txt", "src/rlver/train/algorithms/loo.py",
        "src/rlver/train/algorithms/__init__.py", "ALGORITHMS",
        '        lazy("loo", "a leave-one-out baseline of settable weight", "loo", "LOO"),',
    ),
    Addition(
        "a loss aggregation", "aggregation.py.txt", "src/rlver/train/algorithms/sum_grpo.py",
        "src/rlver/train/algorithms/__init__.py", "ALGORITHMS",
        '        lazy("sum_grpo", "GRPO with Dr. GRPO\'s aggregation, by its hook", "sum_grpo", "SumGRPO"),',
    ),
    Addition(
        "a model kind", "model_kind.py.txt", "src/rlver/llm/calm.py",
        "src/rlver/llm/spec.py", "KINDS",
        '        Entry("calm", "answers every call calmly", "rlver.llm.calm:build"),',
    ),
    Addition(
        "a rollout backend", "rollout_backend.py.txt", "src/rlver/train/backends/toy.py",
        "src/rlver/train/backends/__init__.py", "BACKENDS",
        '        Entry("toy", "hf on its own copy of the weights", "rlver.train.backends.toy:ToyBackend"),',
    ),
    Addition(
        "a CLI command", "command.py.txt", "src/rlver/cli/greet.py",
        "src/rlver/cli/__init__.py", "COMMANDS",
        '        _module("greet", "greet whoever runs it", "greet"),',
    ),
]  # fmt: skip


def documented_counts() -> dict[str, int]:
    """The "files" column of each row of the additions table (its first number)."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Adding things", 1)[1].split("\n## ", 1)[0]
    counts: dict[str, int] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].startswith(("a ", "an ")):
            counts[cells[1]] = int(re.match(r"\d+", cells[2]).group())  # type: ignore[union-attr]
    return counts


def with_line(text: str, registry: str, line: str) -> str:
    """``text`` with ``line`` added as the last entry of the registry assigned to ``registry``."""
    start = re.search(rf"^{registry}\b[^=\n]*= Registry\(", text, re.MULTILINE)
    assert start, f"no '{registry} ... = Registry(' in the registry's file"
    closing = text.index("\n    ],\n)\n", start.end())
    return f"{text[:closing]}\n{line}{text[closing:]}"


def copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache", ".pytest_cache")
    dest.mkdir()
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=ignore)
        else:
            shutil.copy2(source, dest / name)
    for name in COPIED_FILES:
        if (REPO / name).exists():
            shutil.copy2(REPO / name, dest / name)


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def add(tree: Path, addition: Addition) -> None:
    """The author's two edits: the new module, and the registry's one line."""
    (tree / addition.module).write_text((ADDITIONS / addition.template).read_text(encoding="utf-8"))
    registry = tree / addition.registry_file
    text = registry.read_text(encoding="utf-8")
    registry.write_text(with_line(text, addition.registry, addition.line), encoding="utf-8")


def in_copy(tree: Path, *argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m ARGV`` in the copy, importing rlver from it, with no data beside it (as CI's bare
    copy runs)."""
    # RLVER_TEST_DURATIONS too: the copy's suite must not add its tests' costs to this suite's records
    drop = (
        "PYTHONPATH",
        "RLVER_SHARED_DATA",
        "RLVER_DATA_DIR",
        "RLVER_REQUIRE_REAL_MODEL",
        "RLVER_TEST_DURATIONS",
    )
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {"PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, cwd=tree, env=env, timeout=timeout
    )


def test_every_row_of_the_table_is_drilled_and_the_table_is_what_it_counts() -> None:
    assert sorted(a.row for a in ROWS) == sorted(documented_counts())
    for addition in ROWS:
        assert (ADDITIONS / addition.template).is_file(), addition.template
        text = (REPO / addition.registry_file).read_text(encoding="utf-8")
        added = with_line(text, addition.registry, addition.line)
        assert added.count(addition.line) == text.count(addition.line) + 1, addition.row


@pytest.mark.slow
@pytest.mark.timeout(3600)  # the fast suite runs inside it (CI's bare-copy pass; .ci/run)
def test_each_addition_is_its_module_and_one_line_and_all_of_them_pass_the_suite(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    copy_tree(tree)
    counts = documented_counts()
    for addition in ROWS:
        before = files(tree)
        add(tree, addition)
        after = files(tree)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert changed == sorted([addition.module, addition.registry_file]), addition.row
        assert len(changed) == counts[addition.row], f"{addition.row}: the table says {counts[addition.row]}"
        old = before[addition.registry_file].decode().splitlines()
        new = after[addition.registry_file].decode().splitlines()
        assert sorted(set(new) - set(old)) == [addition.line] and len(new) == len(old) + 1, addition.row

    # docs/config.md is generated from the models (``make config-docs``), not written: an addition's
    # own settings join it when the author regenerates it, as here, and the suite checks it is current
    docs = in_copy(tree, "rlver.cli.config_reference", "docs/config.md", timeout=300)
    assert docs.returncode == 0, docs.stderr[-3000:]
    for tool in (
        ("ruff", "check", "src", "tests", "bench"),
        ("ruff", "format", "--check", "src", "tests", "bench"),
    ):
        done = in_copy(tree, *tool, timeout=300)
        assert done.returncode == 0, (
            f"{' '.join(tool)} in the copy:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
        )
    typed = in_copy(tree, "mypy", "--cache-dir", str(tmp_path / "mypy-cache"), timeout=900)
    assert typed.returncode == 0, f"mypy in the copy:\n{typed.stdout[-4000:]}"
    suite = in_copy(
        tree, "pytest", "-q", "-n", "2", "--dist", "worksteal", "-p", "no:cacheprovider", "--timeout", "900",
        "-m", "not slow and not timing and not realmodel", timeout=3600,
    )  # fmt: skip
    failed = [line for line in suite.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert suite.returncode == 0, "the fast suite in the copy:\n" + "\n".join([*failed, suite.stdout[-3000:]])
    assert re.search(r"\b\d+ passed", suite.stdout) and " failed" not in suite.stdout

    train_with_the_additions(tree, tmp_path)
    evaluate_with_the_additions(tree, tmp_path)
    greet = run_rlver("greet", "--name", "drill", cwd=tmp_path, env={"PYTHONPATH": str(tree / "src")})
    assert greet.returncode == 0 and greet.stdout == "greetings, drill\n", greet.stderr


STEPS = [
    "rollout.batch_size=2", "rollout.n_per_profile=2", "rollout.rules.max_assistant_turns=2",
    "rollout.max_new_tokens=6", "eval.every=0", "eval.at_start=false", "run.steps=2",
    "run.progress=false", "run.tensorboard=false",
    "algorithm.name=loo", "algorithm.baseline_weight=0.5",
    "rollout.backend=toy", "rollout.backend_settings.max_batch_size=3",
    "rollout.reward.mode=half", "simulator.kind=stern", "simulator.sternness=2",
]  # fmt: skip


def train_with_the_additions(tree: Path, tmp_path: Path) -> None:
    """Two steps: the second rollout samples from the toy engine's copy, released, resumed and synced."""
    sets = [arg for key in STEPS for arg in ("--set", key)]
    env = {"PYTHONPATH": str(tree / "src")}
    proc = run_rlver(
        "train", "--config", "tiny-offline", "--out", "run", *sets, cwd=tmp_path, env=env, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rollout log-prob gap" not in proc.stderr
    run = tmp_path / "run"
    config = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    assert config["algorithm"]["name"] == "loo" and config["algorithm"]["baseline_weight"] == 0.5
    assert config["algorithm"]["loss_agg_mode"] == "seq-mean-token-mean"  # its aggregation, one default
    assert config["rollout"]["backend_settings"] == {"max_batch_size": 3}
    assert config["rollout"]["reward"]["mode"] == "half" and config["simulator"]["sternness"] == 2
    manifest = json.loads((run / "transcript.jsonl").read_text(encoding="utf-8").splitlines()[0])
    agent = manifest["agent"]
    assert agent["rollout_backend"] == "toy" and agent["about"] == "hf on its own copy of the weights"
    assert agent["name"] == "toy" and agent["max_batch_size"] == 3  # its own setting reached the engine
    assert agent["sampler"]["weights"] == "its own copy"
    assert manifest["simulator"]["kind"] == "stern" and manifest["simulator"]["sternness"] == 2
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    for step in steps:
        assert step["rollout/logprob_diff_max"] < 1e-5  # the synced copy scores as the trainer does
        assert step["rollout/reward_mean"] == pytest.approx(step["rollout/emotion_final_mean"] / 200)


def evaluate_with_the_additions(tree: Path, tmp_path: Path) -> None:
    """The LLM user of an evaluation: the new model kind, speaking the new protocol."""
    config = {
        "agent_tiny": True, "profiles": "en-test", "limit": 2, "report": False,
        "env": {"max_assistant_turns": 2}, "sampling": {"max_tokens": 6},
        "simulator": {
            "kind": "llm", "cache": None, "prompts": {"name": "brief", "max_words": 7},
            "model": {"kind": "calm", "model": "calm-user", "api_key_env": None},
        },
    }  # fmt: skip
    (tmp_path / "eval.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {"PYTHONPATH": str(tree / "src")}
    proc = run_rlver("eval", "--config", "eval.yaml", "--out", "eval", cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (tmp_path / "eval" / "transcript.jsonl").read_text(encoding="utf-8").splitlines()
    manifest, episodes = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    simulator = manifest["simulator"]
    assert simulator["prompts"] == "brief" and simulator["prompt_version"] == "brief-v1"
    assert simulator["model"]["class"] == "calm"
    assert len(episodes) == 2
    for episode in episodes:  # every appraisal is the calm model's +4
        emotions = episode["emotions"]
        assert all(b - a == 4 for a, b in itertools.pairwise(emotions)), emotions
