"""Shared fixtures: the real profile data (skipped when absent) and a real local OpenAI server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlver.testing.openai_server import FakeChatServer

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The published data, when a developer or CI has it: ``$RLVER_SHARED_DATA``, else ``../shared/data``
#: beside the checkout. Only the ``shared_data`` fixture hands it to tests; every other test runs as on
#: a fresh clone with nothing beside it.
SHARED_DATA = Path(os.environ.get("RLVER_SHARED_DATA") or REPO_ROOT.parent / "shared" / "data")


@pytest.fixture(scope="session")
def _empty_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rlver-data")


@pytest.fixture(autouse=True)
def _isolated_data(monkeypatch: pytest.MonkeyPatch, _empty_data_dir: Path) -> None:
    """No test finds published data by accident: the data dir is empty and no shared folder is set.

    Without this a test could pass here (where ``~/.cache/rlver/data`` or ``$RLVER_SHARED_DATA`` holds
    the files) and fail on a fresh clone; tests that need the data ask for ``shared_data``.
    """
    monkeypatch.setenv("RLVER_DATA_DIR", str(_empty_data_dir))
    monkeypatch.delenv("RLVER_SHARED_DATA", raising=False)


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The folder with the published data (for module- or session-scoped fixtures); skips when absent."""
    if not (SHARED_DATA / "sage_test_profiles.jsonl").exists():
        pytest.skip(f"published data not found at {SHARED_DATA} (set RLVER_SHARED_DATA to run this test)")
    return SHARED_DATA


@pytest.fixture()
def shared_data(shared_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder with the published data; tests using it skip cleanly when it is absent.

    It is also put on rlver's search path (``$RLVER_SHARED_DATA``), so named sets such as ``sage``
    resolve in the test and in any ``rlver`` subprocess it starts.
    """
    monkeypatch.setenv("RLVER_SHARED_DATA", str(shared_data_dir))
    return shared_data_dir


@pytest.fixture()
def fake_server() -> Iterator[FakeChatServer]:
    """A real OpenAI-compatible HTTP server on 127.0.0.1 (echoes by default; set .responder)."""
    with FakeChatServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing may download weights or data at test time."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
