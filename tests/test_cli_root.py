import subprocess
import sys

from rlver import __version__


def test_help_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rlver", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("data", "profiles", "config"):
        assert command in out


def test_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rlver", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert __version__ in out
