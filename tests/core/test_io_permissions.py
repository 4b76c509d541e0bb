"""Files and folders rlver writes end with the umask's mode, so teammates and a model server running
as another user can read them (issue 16, defect 6): ``mkstemp``/``mkdtemp`` alone give 0600/0700."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlver.io import append_jsonl, atomic_write_bytes, atomic_write_json, atomic_write_text, make_temp_dir


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_writes_take_the_umask_mode(tmp_path: Path, umask: int) -> None:
    atomic_write_json(tmp_path / "metrics.json", {"score": 1})
    atomic_write_text(tmp_path / "report.html", "<p>x</p>")
    atomic_write_bytes(tmp_path / "sub" / "config.json", b"{}")
    append_jsonl(tmp_path / "metrics.jsonl", {"step": 1})
    for name in ("metrics.json", "report.html", "sub/config.json", "metrics.jsonl"):
        assert _mode(tmp_path / name) == 0o666 & ~umask, name
    assert _mode(tmp_path / "sub") == 0o777 & ~umask


def test_rewrite_keeps_the_umask_mode(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "config.json"
    atomic_write_text(target, "a")
    atomic_write_text(target, "b")
    assert target.read_text() == "b"
    assert _mode(target) == 0o666 & ~umask


def test_temp_dir_takes_the_umask_mode(tmp_path: Path, umask: int) -> None:
    assert _mode(make_temp_dir(tmp_path, ".x.")) == 0o777 & ~umask


class _Saves:
    """Stands in for a model/tokenizer: writes one file the way ``save_pretrained`` does."""

    def __init__(self, name: str) -> None:
        self.name = name

    def save_pretrained(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / self.name).write_text("{}")


def test_checkpoint_folder_takes_the_umask_mode(tmp_path: Path, umask: int) -> None:
    from rlver.train.checkpoint import save_checkpoint

    state: dict[str, Any] = {"step": 1}
    ckpt = save_checkpoint(
        tmp_path / "checkpoints",
        1,
        policy=_Saves("adapter_config.json"),
        tokenizer=_Saves("tokenizer.json"),
        critic=None,
        trainer_state=state,
        info={"step": 1},
    )
    assert _mode(ckpt) == 0o777 & ~umask
    assert _mode(ckpt / "policy") == 0o777 & ~umask
    for name in ("state.json", "trainer_state.pt", "policy/adapter_config.json"):
        assert _mode(ckpt / name) == 0o666 & ~umask, name
    assert _mode(tmp_path / "checkpoints" / "latest") == 0o666 & ~umask
