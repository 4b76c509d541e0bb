"""`rlver data download sage-released`: SAGE's nine released result files from a real HTTP server on
127.0.0.1 (copies of the files at their repository paths), checked, stored atomically, a corrupted
copy refused; ``--from`` a folder of copies; docs/reproduce.md's table is the pinned one."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rlver.profiles.download import sha256_of
from rlver.profiles.sage_released import SAGE_RELEASED

REPO = Path(__file__).resolve().parents[2]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture()
def mirror(tmp_path: Path, shared_data_dir: Path) -> Iterator[tuple[Path, str]]:
    """A static server over copies of the nine files at their paths in Tencent/digitalhuman."""
    root = tmp_path / "www"
    for spec in SAGE_RELEASED.values():
        target = root / spec.paths[0]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shared_data_dir / spec.filename, target)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _rlver(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLVER_DATA_DIR": str(tmp_path / "home"), "RLVER_SHARED_DATA": "", "COLUMNS": "300"}
    env.pop("RLVER_DATA_BASE_URL", None)
    argv = [sys.executable, "-m", "rlver", "data", "download", "sage-released", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def test_the_nine_files_are_fetched_checked_and_stored(mirror: tuple[Path, str], tmp_path: Path) -> None:
    root, url = mirror
    dest = tmp_path / "data"
    done = _rlver(tmp_path, "--base-url", url, "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    stored = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert stored == sorted(f"sage_released/{name}" for name in SAGE_RELEASED)  # no temp files left
    for spec in SAGE_RELEASED.values():
        assert sha256_of((dest / spec.filename).read_bytes()) == spec.sha256

    # a corrupted copy on the server: refused in one line, not kept, the others untouched
    shutil.rmtree(dest)
    bad = next(iter(SAGE_RELEASED.values()))
    served = root / bad.paths[0]
    served.write_bytes(served.read_bytes().replace(b'"', b"'", 1))
    refused = _rlver(tmp_path, "--base-url", url, "--dest", str(dest))
    assert refused.returncode == 1, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(f"error: {url}/{bad.paths[0]}: checksum mismatch (expected sha256 {bad.sha256}")
    assert "the file was not kept" in line
    assert not (dest / bad.filename).exists()
    assert not [p for p in dest.rglob("*") if p.is_file() and p.name.startswith(".")]


def test_from_a_folder_of_copies_in_the_repository_layout(mirror: tuple[Path, str], tmp_path: Path) -> None:
    root, _ = mirror
    done = _rlver(tmp_path, "--from", str(root / "SAGE" / "dataset"), "--dest", str(tmp_path / "d"))
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "d" / "sage_released").glob("*/*_result.jsonl"))) == 9
    gone = next(iter(SAGE_RELEASED.values()))
    (root / gone.paths[0]).unlink()
    missing = _rlver(tmp_path, "--from", str(root), "--dest", str(tmp_path / "e"))
    assert missing.returncode == 2
    assert f"1 of the 9 files of sage-released cannot be taken: {gone.filename}" in missing.stderr
    assert not (tmp_path / "e").exists()  # all or nothing


def test_reproduce_md_lists_the_pinned_files() -> None:
    """The page and the download set name the same files, paths and checksums."""
    text = (REPO / "docs" / "reproduce.md").read_text(encoding="utf-8")
    row = re.compile(r"^\| `([^`]+)` \| `([^`]+)` \| `([0-9a-f]{64})` \|")
    rows = {m.group(1): (m.group(2), m.group(3)) for m in map(row.match, text.splitlines()) if m}
    pinned = {n: (s.paths[0].removeprefix("SAGE/dataset/"), s.sha256) for n, s in SAGE_RELEASED.items()}
    assert rows == pinned
