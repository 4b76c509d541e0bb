"""Every failure is one line (issue 25): each command the issue found giving a traceback, a wrong exit
code or a silent acceptance now exits 2 with one ``error:`` line and no traceback, before any model is
loaded; warnings are one ``warning:`` line with no source path; and every command, given a file where a
folder is expected, a folder where a file is expected, an empty file or a missing path, says so the same
way.

The issue's commands run as a user runs them (a subprocess); the wider matrix runs ``rlver``'s entry
point in this process (the same code path, minus the interpreter start), so that it stays fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from rlver.manifest import RunManifest
from rlver.records import Episode
from rlver.transcripts.native import TranscriptWriter
from test_calibrate import write_synthetic
from test_env_rewards import make_episode


def _env() -> dict[str, str]:
    # os.environ at call time: conftest's autouse fixture points RLVER_DATA_DIR at an empty folder.
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "COLUMNS": "80"}


def rlver(*args: str | Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", *map(str, args)],
        capture_output=True, text=True, env=_env(), cwd=cwd, timeout=timeout,
    )  # fmt: skip


def _episode(profile_id: str) -> Episode:
    return make_episode(40, [45, 50]).model_copy(update={"profile_id": profile_id})


@pytest.fixture()
def box(tmp_path: Path) -> Path:
    """A working folder holding every kind of wrong input the checks below give."""
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "empty.yaml").write_text("# nothing set\n", encoding="utf-8")
    (tmp_path / "adir").mkdir()
    (tmp_path / "emptydir").mkdir()
    run = tmp_path / "run"
    run.mkdir()
    writer = TranscriptWriter(run / "transcript.jsonl", RunManifest.create(kind="eval", run_name="unit"))
    writer.append(_episode("p-1"))
    writer.append(_episode("p-2"))
    (tmp_path / "pub").mkdir()
    write_synthetic(tmp_path / "pub" / "m_result.jsonl")
    done = tmp_path / "trained" / "checkpoints" / "step_000001"
    done.mkdir(parents=True)
    (done / "trainer_state.pt").write_bytes(b"")
    return tmp_path


def assert_one_error_line(proc: subprocess.CompletedProcess[str] | tuple[int, str], *, code: int = 2) -> str:
    """Exit ``code``, no traceback, exactly one line starting with ``error:``; returns that line."""
    rc, text = (proc.returncode, proc.stdout + proc.stderr) if not isinstance(proc, tuple) else proc
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert rc == code, text
    assert len(errors) == 1, text
    return errors[0]


# -- the issue's list, as a user runs it ----------------------------------------------------------------

#: (argv, words the error line must contain). ``{box}`` is the fixture's folder.
ISSUE_CASES: dict[str, tuple[list[str], list[str]]] = {
    "train-preset-without-profiles": (
        ["train", "--config", "grpo-think", "--out", "runs/g4"],
        ["rlver-train"],
    ),
    "train-missing-model-folder": (
        ["train", "--config", "tiny-offline", "--set", "model.path=/models/nope", "--out", "x"],
        ["model.path", "/models/nope"],
    ),
    "train-empty-model-folder": (
        ["train", "--config", "tiny-offline", "--set", "model.path={box}/emptydir", "--out", "x"],
        ["model.path", "empty"],
    ),
    "train-out-is-a-file": (
        ["train", "--config", "tiny-offline", "--out", "empty.jsonl"],
        ["--out", "empty.jsonl"],
    ),
    "train-out-has-checkpoints": (
        ["train", "--config", "tiny-offline", "--out", "trained"],
        ["--resume", "trained"],
    ),
    "train-empty-config": (["train", "--config", "empty.yaml", "--out", "x"], ["empty.yaml", "empty"]),
    "eval-out-is-a-file": (
        ["eval", "--agent-tiny", "--profiles", "bundled-test", "--limit", "1", "--out", "empty.jsonl"],
        ["--out", "empty.jsonl"],
    ),
    "eval-two-agents": (
        ["eval", "--agent-tiny", "--agent-base-url", "http://127.0.0.1:9/v1", "--agent-model", "x"],
        ["--agent-tiny", "--agent-base-url"],
    ),
    "eval-empty-model-folder": (
        ["eval", "--agent-local", "emptydir", "--profiles", "bundled-test", "--limit", "1", "--out", "e"],
        ["--agent-local", "empty"],
    ),
    "calibrate-out-is-a-file": (
        ["calibrate", "--simulator", "replay", "pub/m_result.jsonl", "--out", "empty.jsonl"],
        ["--out", "empty.jsonl"],
    ),
    "calibrate-a-folder": (["calibrate", "--simulator", "replay", "adir"], ["adir", "folder"]),
    "calibrate-an-empty-file": (
        ["calibrate", "--simulator", "replay", "empty.jsonl"],
        ["empty.jsonl", "empty"],
    ),
    "calibrate-an-rlver-transcript": (
        ["calibrate", "run/transcript.jsonl"],
        ["rlver transcript", "rlver score"],
    ),
    "report-out-is-a-folder": (["report", "run", "--out", "adir"], ["--out", "adir", "folder"]),
    "report-out-missing-parent": (
        ["report", "run", "--out", "missing/dir/x.html"],
        ["does not exist"],
    ),
    "score-compare-one-run": (["score", "--compare", "run/transcript.jsonl"], ["--compare", "two"]),
    "chat-start-too-high": (["chat", "--start", "500"], ["--start", "500"]),
    "chat-start-negative": (["chat", "--start", "-5"], ["--start", "-5"]),
}


@pytest.mark.parametrize("case", sorted(ISSUE_CASES))
def test_each_listed_command_is_one_line_and_exit_2(case: str, box: Path) -> None:
    argv, words = ISSUE_CASES[case]
    started = time.monotonic()
    proc = rlver(*(a.replace("{box}", str(box)) for a in argv), cwd=box)
    line = assert_one_error_line(proc)
    for word in words:
        assert word in line, line
    # Nothing was loaded, so nothing was left behind: no run folder, no report's parent folders.
    for left in ("runs", "x", "e", "missing"):
        assert not (box / left).exists(), f"{case} left {left}/ behind"
    assert time.monotonic() - started < 60  # the preset case used to spend ~52 s on hub retries


def test_a_torn_last_line_is_one_warning_line_without_source_paths(box: Path) -> None:
    """score, inspect, report and calibrate read a file whose last line was cut by a crash: each says so
    in one ``warning:`` line (no ``…/native.py:124: UserWarning`` and source line)."""
    torn = box / "torn.jsonl"
    torn.write_text((box / "run" / "transcript.jsonl").read_text(encoding="utf-8") + '{"type": "epi', "utf-8")
    pub = box / "pub2"
    pub.mkdir()
    cut = pub / "m_result.jsonl"
    cut.write_text((box / "pub" / "m_result.jsonl").read_text(encoding="utf-8") + '{"id": "x', "utf-8")
    for argv in (
        ["score", torn],
        ["inspect", torn],
        ["report", torn, "--out", box / "r.html"],
        ["calibrate", "--simulator", "replay", cut, "--out", box / "cal"],
    ):
        proc = rlver(*argv, cwd=box)
        text = proc.stdout + proc.stderr
        assert proc.returncode == 0, text
        warned = [line for line in text.splitlines() if "warning" in line.lower()]
        assert len(warned) == 1 and warned[0].startswith("warning: "), text
        assert "incomplete trailing line" in warned[0]
        assert ".py:" not in text and "UserWarning" not in text, text


def test_help_texts_are_plain_and_whole(tmp_path: Path) -> None:
    """No RST markup, and no help text cut with an ellipsis at 80 columns."""
    for argv in (["--help"], ["calibrate", "--help"], ["eval", "--help"], ["train", "--help"]):
        text = rlver(*argv, cwd=tmp_path).stdout
        lines = [line for line in text.splitlines() if not line.startswith("Usage:")]  # [ARGS]... is notation
        assert "``" not in text, text
        assert not [line for line in lines if line.rstrip().endswith(("…", "..."))], text
        assert all(len(line) <= 80 for line in lines), text
    assert "leaderboard-comparable" in rlver("eval", "--help", cwd=tmp_path).stdout


# -- every command, with the wrong kind of path -----------------------------------------------------------


def run_in_process(
    argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """``rlver ARGV`` through the console entry point, in this process: (exit code, stdout + stderr).
    An exception that escapes ``main`` fails the test (it would be a traceback for a user)."""
    from rlver.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["rlver", *argv])
    for name in (
        "HF_HUB_DISABLE_PROGRESS_BARS",
        "TRANSFORMERS_VERBOSITY",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS",
    ):
        monkeypatch.setenv(name, os.environ.get(name, "1" if name != "TRANSFORMERS_VERBOSITY" else "error"))
    shown = warnings.showwarning
    try:
        with pytest.raises(SystemExit) as exited:
            main()
    finally:
        warnings.showwarning = shown
    out, err = capfd.readouterr()
    code = exited.value.code
    return (code if isinstance(code, int) else 0), out + err


#: Where each command takes a file: ``{}`` is replaced by the wrong input.
FILE_ARGS: dict[str, list[str]] = {
    "audit": ["audit", "{}"],
    "calibrate": ["calibrate", "--simulator", "replay", "{}"],
    "score": ["score", "{}"],
    "report": ["report", "{}", "--out", "r.html"],
    "inspect": ["inspect", "{}"],
    "profiles-validate": ["profiles", "validate", "{}"],
    "profiles-stats": ["profiles", "stats", "{}"],
    "profiles-show": ["profiles", "show", "p-1", "--set", "{}"],
    "profiles-list": ["profiles", "list", "{}"],
    "config-show": ["config", "show", "{}"],
    "train-config": ["train", "--config", "{}", "--out", "x"],
    "eval-config": ["eval", "--agent-tiny", "--config", "{}", "--out", "x"],
    "eval-profiles": ["eval", "--agent-tiny", "--profiles", "{}", "--out", "x"],
    "eval-system-prompt": ["eval", "--agent-tiny", "--system-prompt", "@{}", "--out", "x"],
    "probe-profiles": ["probe", "--profiles", "{}"],
    "chat-profile-file": ["chat", "--profile-file", "{}"],
    "simulator-fit-data": ["simulator", "fit", "--data", "{}", "--out", "fit.json"],
}
#: Where each command takes a folder.
FOLDER_ARGS: dict[str, list[str]] = {
    "judge": ["judge", "{}", "--judge-model", "m"],
    "export": ["export", "{}", "exported"],
    "probe-from-run": ["probe", "--from-run", "{}"],
    "eval-agent-local": ["eval", "--agent-local", "{}", "--profiles", "bundled-test", "--out", "x"],
    "train-model-path": ["train", "--config", "tiny-offline", "--set", "model.path={}", "--out", "x"],
    "train-out": ["train", "--config", "tiny-offline", "--out", "{}"],
    "eval-out": ["eval", "--agent-tiny", "--profiles", "bundled-test", "--out", "{}"],
    "calibrate-out": ["calibrate", "--simulator", "replay", "pub/m_result.jsonl", "--out", "{}"],
    "demo-out": ["demo", "--out", "{}"],
}
#: Where each command writes a file: a folder there is refused.
OUT_FILE_ARGS: dict[str, list[str]] = {
    "report-out": ["report", "run", "--out", "{}"],
    "simulator-fit-out": ["simulator", "fit", "--data", "pub", "--out", "{}"],
}

MATRIX = (
    [(f"{name}:{kind}", argv, arg) for name, argv in FILE_ARGS.items() for kind, arg in
     (("folder-for-a-file", "adir"), ("empty-file", "empty.jsonl"), ("missing", "nope/missing.jsonl"))]
    + [(f"{name}:{kind}", argv, arg) for name, argv in FOLDER_ARGS.items() for kind, arg in
       (("file-for-a-folder", "empty.jsonl"), ("missing-parent", "empty.jsonl/sub"))]
    + [(f"{name}:{kind}", argv, arg) for name, argv in FOLDER_ARGS.items() if not name.endswith("-out")
       for kind, arg in (("empty-folder", "emptydir"), ("missing", "nope/missing"))]
    + [(f"{name}:folder-for-a-file", argv, "adir") for name, argv in OUT_FILE_ARGS.items()]
)  # fmt: skip


@pytest.mark.parametrize(("argv", "arg"), [m[1:] for m in MATRIX], ids=[m[0] for m in MATRIX])
def test_every_command_refuses_the_wrong_kind_of_path_in_one_line(
    argv: list[str], arg: str, box: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    if argv[:2] == ["config", "show"] and arg == "empty.jsonl":
        arg = "empty.yaml"  # an empty YAML file, as the command reads YAML
    result = run_in_process([a.replace("{}", arg) for a in argv], box, monkeypatch, capfd)
    line = assert_one_error_line(result)
    assert arg.split("/")[0] in line, line  # the error names the path given (or its first part)


@pytest.mark.slow  # two evaluations in subprocesses: 17-32 s on the shared 2-core box
def test_third_party_progress_bars_only_with_verbose(tmp_path: Path) -> None:
    """transformers' "Loading weights" bar stays out of rlver's output unless --verbose asks for it."""
    from rlver.models.tiny import ensure_tiny_model

    model = ensure_tiny_model(tmp_path / "tiny")
    argv = [
        "eval",
        "--agent-local",
        model,
        "--profiles",
        "bundled-test",
        "--limit",
        "1",
        "--agent-max-tokens",
        "4",
    ]
    quiet = rlver(*argv, "--out", "a", "--no-report", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "Loading weights" not in quiet.stdout + quiet.stderr
    verbose = rlver(*argv, "--out", "b", "--no-report", "--verbose", cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    assert "Loading weights" in verbose.stderr


def test_an_uncached_hub_id_is_refused_at_once_without_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub id that is not cached fails before loading when the hub cannot be asked: with
    HF_HUB_OFFLINE, or when its host name does not resolve (no network: it used to take ~25-50 s of
    retries and end in a traceback)."""
    import socket

    from rlver.errors import ConfigError
    from rlver.llm.factory import check_model_source

    with pytest.raises(
        ConfigError,
        match=r"model\.path: 'rlver-test/no-such-model' is not in the Hugging Face cache and HF_HUB_OFFLINE",
    ):
        check_model_source("rlver-test/no-such-model")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HF_ENDPOINT"):
        monkeypatch.delenv(proxy, raising=False)

    def no_dns(*_args: object, **_kwargs: object) -> None:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(ConfigError, match=r"huggingface\.co cannot be reached"):
        check_model_source("rlver-test/no-such-model", "--agent-local")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")  # a proxy may resolve names itself
    check_model_source("rlver-test/no-such-model")
    check_model_source("tiny")
