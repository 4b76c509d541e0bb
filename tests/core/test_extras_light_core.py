"""The light core: ``pip install rlver`` without the ``[train]`` extra benchmarks an endpoint, and every
command that needs the extra refuses in one line naming the pip command.

Here the light install is imitated in this venv by an import hook that refuses torch, transformers,
tokenizers, peft and tensorboard (``without_train_extra.py``), so every import path a core command
takes is exercised; ``make light-test`` (tests/test_light_install.py) checks the same in a real venv
built with ``pip install -c constraints.txt -e .``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlver.extras import (
    EXTRA_MODULES,
    EXTRA_PURPOSE,
    MissingExtraError,
    install_command,
    missing_modules,
    require_extra,
)
from rlver.testing.openai_server import FakeChatServer
from rlver.testing.responders import policy_and_simulator
from test_calibrate import write_synthetic

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("without_train_extra.py")
BLOCKED = frozenset(EXTRA_MODULES["train"])  # what RUNNER refuses
#: Modules that are the local-model stack themselves: they may (and do) import torch at the top.
TRAIN_ONLY = ("rlver.train", "rlver.demo", "rlver.integrations", "rlver.llm.precision")


def light(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``rlver ARGS`` with the [train] extra's modules refused; a traceback fails the test."""
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), *sys.path])}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, str(RUNNER), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
        input=stdin,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_train_extra_is_what_pyproject_declares_and_the_core_holds_none_of_it() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11 (the core itself keeps 3.10)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}

    train = names(project["optional-dependencies"]["train"])
    assert train == set(EXTRA_MODULES["train"])  # each distribution's import name is its own name
    assert not names(project["dependencies"]) & (train | {"mutmut", "gguf", "sentence-transformers"})
    assert "rlver[train,gguf,wandb,test]" in project["optional-dependencies"]["dev"]


def test_the_refusal_is_one_line_naming_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra("train", "rlver train")  # this venv has the extra: no refusal
    monkeypatch.setitem(EXTRA_MODULES, "train", ("torch", "no_such_module_rlver"))
    with pytest.raises(MissingExtraError) as caught:
        require_extra("train", "rlver train")
    message = str(caught.value)
    assert "\n" not in message and caught.value.exit_code == 2
    assert message.startswith("rlver train needs the [train] extra")
    assert "(no no_such_module_rlver)" in message and install_command("train") in message


def test_every_core_module_imports_without_the_train_extra(tmp_path: Path) -> None:
    """A module-level torch import in any module outside the training stack fails here."""
    assert ok(light("--import-all", *TRAIN_ONLY, cwd=tmp_path)).strip() == "imported"


@pytest.mark.slow  # several rlver processes, ~3 s each
def test_an_endpoint_benchmark_and_its_readers_run_without_the_train_extra(tmp_path: Path) -> None:
    with FakeChatServer(policy_and_simulator) as server:
        ok(
            light(
                "eval", "--agent-base-url", server.url, "--agent-model", "policy", "--agent-key-env", "",
                "--profiles", "en-test", "--limit", "2", "--out", "run",
                "--set", "env.rules.max_assistant_turns=3",
                cwd=tmp_path,
            )
        )  # fmt: skip
    assert (tmp_path / "run" / "report.html").is_file() and (tmp_path / "run" / "report.md").is_file()
    assert "Sentient Benchmark" in ok(light("score", "run", cwd=tmp_path))
    ok(light("report", "run", "--out", "again.html", cwd=tmp_path))
    assert (tmp_path / "again.html").is_file()
    assert "2 dialogues" in ok(light("inspect", "run", cwd=tmp_path))
    assert "OK" in ok(light("audit", "run/transcript.jsonl", cwd=tmp_path))
    assert "agent prompt" in ok(light("explain", "run", cwd=tmp_path))


@pytest.mark.slow  # several rlver processes, ~3 s each
def test_calibrate_chat_probe_and_the_listings_run_without_the_train_extra(tmp_path: Path) -> None:
    released = write_synthetic(tmp_path / "m_result.jsonl")
    for simulator in ("replay", "offline"):
        ok(
            light(
                "calibrate",
                str(released),
                "--simulator",
                simulator,
                "--out",
                f"cal-{simulator}",
                cwd=tmp_path,
            )
        )
        assert (tmp_path / f"cal-{simulator}" / "calibration.json").is_file()
    chat = ok(light("chat", cwd=tmp_path, stdin="That sounds hard. What happened?\n/quit\n"))
    assert "Dialogue over (ended by you)" in chat
    ok(light("probe", "--limit", "1", "--profiles", "en-test", cwd=tmp_path))
    for listing in (("profiles", "list"), ("data", "list"), ("config", "show"), ("models", "list")):
        ok(light(*listing, cwd=tmp_path))


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (("train", "--config", "tiny-offline", "--out", "out"), "rlver train"),
        (
            ("train", "--trainer", "verl", "--config", "tiny-offline", "--dry-run", "--out", "out"),
            "rlver train",
        ),
        (("export", "run", "out"), "rlver export"),
        (("demo", "--out", "out"), "rlver demo"),
        (("models", "fetch", "smollm2-135m-instruct"), "rlver models fetch [gguf]"),
        (("eval", "--agent-local", "tiny", "--profiles", "en-test", "--out", "out"), "--agent-local"),
        (("eval", "--agent-tiny", "--profiles", "en-test", "--out", "out"), "--agent-tiny"),
        (("chat", "--play-user", "--local", "tiny"), "--local"),
    ],
    ids=["train", "train-verl", "export", "demo", "models-fetch", "eval-local", "eval-tiny", "chat-local"],
)
def test_a_command_that_needs_the_extra_refuses_before_any_work(
    tmp_path: Path, argv: tuple[str, ...], what: str
) -> None:
    proc = light(*argv, cwd=tmp_path, stdin="")
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    what, _, extra = what.partition(" [")  # models fetch needs [gguf], which holds [train]
    extra = extra.rstrip("]") or "train"
    assert line == (
        f"error: {what} needs the [{extra}] extra ({EXTRA_PURPOSE[extra]}), which is not installed here "
        f"(no {', '.join(m for m in EXTRA_MODULES[extra] if m in BLOCKED or m in missing_modules(extra))}): "
        f"{install_command(extra)}"
    )
    assert not (tmp_path / "out").exists()  # refused before any folder was made
