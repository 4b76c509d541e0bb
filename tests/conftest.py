"""Shared fixtures: the real profile data (skipped when absent) and a real local OpenAI server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlver.testing.openai_server import FakeChatServer

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RLVER_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder with the published profile files; tests using it skip cleanly when it is absent."""
    if not (SHARED_DATA / "sage_test_profiles.jsonl").exists():
        pytest.skip(f"published profile data not found at {SHARED_DATA}")
    return SHARED_DATA


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
