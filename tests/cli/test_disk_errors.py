"""The disk says no, or the user presses Ctrl-C while the command is still starting: one line, the
right exit code, nothing lost (first-hour cases, through the real ``rlver`` command in subprocesses).

Tests run as root, for whom a chmod'ed folder is still writable: a read-only or full disk is a real
tmpfs mounted here (read-only, or a few pages large), and the tests skip, saying why, where mounting
is not allowed. A full disk during ``rlver eval`` must name ``--resume``, and ``--resume`` on the freed
disk (the same tmpfs, remounted larger) must finish the run with every dialogue once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlver.testing.openai_server import FakeChatServer
from rlver.testing.responders import policy_and_simulator


def _mount(target: Path, options: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not root'}): disk cases need one")


@pytest.fixture()
def mounts() -> Iterator[list[Path]]:
    made: list[Path] = []
    yield made
    for target in reversed(made):
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


@pytest.fixture()
def read_only(tmp_path: Path, mounts: list[Path]) -> Path:
    target = tmp_path / "read-only"
    _mount(target, "ro,size=64k")
    mounts.append(target)
    return target


def rlver(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=cwd,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def one_error_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == code and len(errors) == 1, (proc.returncode, proc.stderr[-2000:])
    return errors[0]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with FakeChatServer(policy_and_simulator) as server:
        yield server.url


def _eval_args(endpoint: str, out: Path) -> list[str]:
    return [
        "eval",
        "--agent-base-url",
        endpoint,
        "--agent-model",
        "policy",
        "--simulator",
        "llm",
        "--sim-base-url",
        endpoint,
        "--sim-model",
        "judge-sim",
        "--profiles",
        "en-test",
        "--out",
        str(out),
    ]


def test_eval_into_a_read_only_folder(tmp_path: Path, read_only: Path, endpoint: str) -> None:
    line = one_error_line(rlver(*_eval_args(endpoint, read_only / "run"), cwd=tmp_path), 2)
    assert line == f"error: {read_only / 'run'}: read-only file system; give a path on a writable disk"


def test_a_full_disk_during_eval_names_resume_and_resume_finishes(
    tmp_path: Path, mounts: list[Path], endpoint: str
) -> None:
    disk = tmp_path / "small-disk"
    _mount(disk, "size=16k")  # 4 pages: the manifest and a dialogue or two fit, 8 dialogues do not
    mounts.append(disk)
    out = disk / "run"
    line = one_error_line(rlver(*_eval_args(endpoint, out), "--no-report", cwd=tmp_path), 1)
    assert "no space left on the device" in line and "rlver eval command with --resume" in line

    subprocess.run(["mount", "-o", "remount,size=8m", str(disk)], check=True)  # the user frees space
    resumed = rlver(*_eval_args(endpoint, out), "--no-report", "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    records = [json.loads(x) for x in (out / "transcript.jsonl").read_text().splitlines()[1:]]
    ids = [r["profile_id"] for r in records]
    assert len(ids) == 8 and len(set(ids)) == 8  # every en-test profile once: nothing lost, nothing twice


def test_report_and_data_download_into_read_only_folders(
    tmp_path: Path, read_only: Path, endpoint: str, shared_data_dir: Path
) -> None:
    run = tmp_path / "run"
    assert rlver(*_eval_args(endpoint, run), "--limit", "1", "--no-report", cwd=tmp_path).returncode == 0
    line = one_error_line(rlver("report", run, "--out", read_only / "report.html", cwd=tmp_path), 2)
    assert line.startswith(f"error: {read_only / 'report.html'}: read-only file system")

    download = ("data", "download", "sage-test", "--from", shared_data_dir, "--dest", read_only / "data")
    line = one_error_line(rlver(*download, cwd=tmp_path), 2)
    assert "read-only file system" in line and str(read_only) in line


# A real SIGINT delivered while the CLI's modules import (a deterministic stand-in for a Ctrl-C 1.5 s
# into `rlver eval`): an import hook sends it when the first command module is imported.
_INTERRUPT_DURING_IMPORT = textwrap.dedent(
    """
    import importlib.abc, os, signal, sys

    class Interrupt(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "rlver.cli.eval_cmd":
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, Interrupt())
    sys.argv = ["rlver", "eval", "--profiles", "en-test"]
    from rlver.__main__ import main
    main()
    """
)


def test_ctrl_c_while_the_cli_imports_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_DURING_IMPORT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 128 + signal.SIGINT, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "error: interrupted while starting, before any work: nothing to keep"
    ]


def test_the_console_script_is_the_guarded_entry_point() -> None:
    """``rlver`` (the installed script) must start at the guarded import, as ``python -m rlver`` does."""
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '\nrlver = "rlver.__main__:main"\n' in pyproject
