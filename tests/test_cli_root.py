import subprocess
import sys
from pathlib import Path

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


def test_error_messages_are_printed_literally_not_as_markup() -> None:
    """An error naming `[bold]...` (user input, model output) is shown as typed, not styled away."""
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "profiles", "show", "[bold]nope[/bold]"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "[bold]nope[/bold]" in proc.stderr


def test_missing_local_model_folder_is_named(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "eval", "--agent-local", "/nonexistent/model-folder",
         "--profiles", "en-test", "--simulator", "offline", "--no-report", "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "no model folder at '/nonexistent/model-folder'" in proc.stderr
    assert "Traceback" not in proc.stderr
