"""Shared fixtures: the real profile data (skipped when absent) and a real local OpenAI server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from durations import pytest_runtest_protocol  # noqa: F401  (each test's CPU seconds, when asked: durations.py)
from rlver.io import default_data_dir
from rlver.testing.openai_server import FakeChatServer

REPO_ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# tests/ mirrors src/rlver/ (tests/simulator/, tests/train/, ...). Tests share helpers by module name
# (``from helpers import ...``, ``from test_rollout import scripted_simulator``): every test folder
# goes on the path before collection, so a test imports a helper whichever folder holds it.
for _folder in [TESTS, *sorted(p for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py")))]:
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
# The published data's path (helpers.SHARED_DATA): only the ``shared_data`` fixture hands it to tests.
from helpers import SHARED_DATA  # noqa: E402  (after the folders go on the path)

#: Where ``rlver models fetch`` put the real model, read before any test isolates the data dir.
SMOLLM2_DIR = default_data_dir() / "models" / "smollm2-135m-instruct"
#: Set (by .ci/run) where the real model must be there: its tests then fail instead of skipping.
REQUIRE_REAL_MODEL = os.environ.get("RLVER_REQUIRE_REAL_MODEL") == "1"
#: Whether the real-model track runs, decided once when the suite starts: a model fetched while the
#: suite runs (a second terminal) must not switch the track on halfway, half-written, for later tests.
REAL_MODEL_AT_START = (SMOLLM2_DIR / "rlver-model.json").is_file()


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test ends with the environment it started with.

    A test that runs rlver's entry point in this process (``rlver.cli.main``) lets it switch the
    third-party progress bars off through the environment (``cli._quiet_third_party``: TQDM_DISABLE,
    TRANSFORMERS_VERBOSITY, ...); left behind, those reach a later test's subprocess, whose
    ``--verbose`` then shows no bar. Defined first, so it is set up before, and torn down after, the
    fixtures below that set variables of their own.
    """
    before = dict(os.environ)
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)


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


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The fetched SmolLM2-135M-Instruct folder; skips (fails under RLVER_REQUIRE_REAL_MODEL=1) without it."""
    if not REAL_MODEL_AT_START:
        message = f"SmolLM2 not fetched to {SMOLLM2_DIR}: run `rlver models fetch smollm2-135m-instruct`"
        if REQUIRE_REAL_MODEL:
            pytest.fail(message)
        pytest.skip(message)
    return SMOLLM2_DIR


@pytest.fixture()
def smollm2(smollm2_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The real model, also resolvable by its name (``smollm2-135m-instruct``) in this test and in any
    ``rlver`` it starts: a data dir of the test's own holds a link to the fetched folder."""
    data = tmp_path / "rlver-data"
    (data / "models").mkdir(parents=True)
    (data / "models" / "smollm2-135m-instruct").symlink_to(smollm2_dir)
    monkeypatch.setenv("RLVER_DATA_DIR", str(data))
    return smollm2_dir
