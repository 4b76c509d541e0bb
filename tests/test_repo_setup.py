"""The set-up files a newcomer meets first (issue 16, defects 11-12): `make test` installs no system
packages, the browser set-up that CI runs brings a CJK font, constraints.txt names no missing file,
and the demo's default output folder is git-ignored."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _dry_run(target: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    proc = subprocess.run(
        ["make", "-n", target, "VENV=/nonexistent-venv"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_make_test_installs_no_system_packages() -> None:
    commands = _dry_run("test")
    assert "apt-get" not in commands and "sudo" not in commands
    assert "make browser" in commands  # says how to get the browser when it is missing


def test_make_browser_installs_chromium_and_a_cjk_font() -> None:
    commands = _dry_run("browser")
    assert re.search(r"apt-get install .*chromium", commands)
    assert "fonts-noto-cjk" in commands


def test_constraints_name_only_files_that_exist() -> None:
    text = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    for name in re.findall(r"[\w.-]+\.txt", text):
        assert (ROOT / name).exists(), f"constraints.txt names {name}, which does not exist"


def test_demo_output_folder_is_ignored() -> None:
    lines = {ln.strip() for ln in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()}
    assert lines & {"rlver-demo/", "/rlver-demo/", "rlver-demo"}
    if (ROOT / ".git").exists() and shutil.which("git"):
        proc = subprocess.run(["git", "check-ignore", "-q", "rlver-demo/report.html"], cwd=ROOT, timeout=30)
        assert proc.returncode == 0
