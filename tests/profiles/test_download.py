"""`rlver data download` against a real HTTP server on 127.0.0.1: good, corrupted, moved, offline."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rlver.errors import DownloadError
from rlver.profiles.download import DATA_FILES, DataFile, default_data_dir, download
from rlver.profiles.published_code import CODE_OF_SET, PUBLISHED_CODE

PAYLOAD = b'{"id": "x", "persona": "p", "background": "b", "goal": "g", "hidden_need": "h"}\n'
SPEC = DataFile(
    name="demo",
    filename="demo_profiles.jsonl",
    sha256=hashlib.sha256(PAYLOAD).hexdigest(),
    rows=1,
    paths=("new/place/demo.jsonl", "old/place/demo.jsonl"),
    description="a tiny test file",
)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture()
def serve(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A real static file server on 127.0.0.1 over a temporary folder: yields (root, base_url)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def put(root: Path, rel: str, data: bytes) -> None:
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_good_download_is_verified_and_stored(serve: tuple[Path, str], tmp_path: Path) -> None:
    root, url = serve
    put(root, SPEC.paths[0], PAYLOAD)
    dest = tmp_path / "data"
    path = download(SPEC, dest, base_url=url)
    assert path == dest / "demo_profiles.jsonl" and path.read_bytes() == PAYLOAD
    assert [p.name for p in dest.iterdir()] == ["demo_profiles.jsonl"]  # no temp files left behind


def test_moved_file_found_at_second_path(serve: tuple[Path, str], tmp_path: Path) -> None:
    root, url = serve
    put(root, SPEC.paths[1], PAYLOAD)
    assert download(SPEC, tmp_path, base_url=url).read_bytes() == PAYLOAD


def test_corrupted_file_is_rejected_and_not_kept(serve: tuple[Path, str], tmp_path: Path) -> None:
    root, url = serve
    put(root, SPEC.paths[0], PAYLOAD.replace(b'"g"', b'"G"'))
    dest = tmp_path / "data"
    with pytest.raises(DownloadError, match=r"checksum mismatch.*not kept"):
        download(SPEC, dest, base_url=url)
    assert not dest.exists() or not any(dest.iterdir())


def test_offline_error_says_where_to_copy(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{unused_port()}"
    with pytest.raises(DownloadError) as info:
        download(SPEC, tmp_path, base_url=url, timeout_s=5)
    text = str(info.value)
    assert f"could not reach {url}/new/place/demo.jsonl" in text
    # what a user without network can do: every way to give rlver the files, named
    for way in ("rlver data download demo --from FOLDER", "`--base-url`", "RLVER_SHARED_DATA"):
        assert way in text, text


def test_not_found_anywhere_lists_urls(serve: tuple[Path, str], tmp_path: Path) -> None:
    _, url = serve
    with pytest.raises(DownloadError, match=r"HTTP 404.*new/place/demo.jsonl.*old/place/demo.jsonl"):
        download(SPEC, tmp_path, base_url=url)


def test_verified_existing_copy_needs_no_network(tmp_path: Path) -> None:
    (tmp_path / SPEC.filename).write_bytes(PAYLOAD)
    offline = f"http://127.0.0.1:{unused_port()}"
    assert download(SPEC, tmp_path, base_url=offline).read_bytes() == PAYLOAD
    with pytest.raises(DownloadError, match="could not reach"):
        download(SPEC, tmp_path, base_url=offline, force=True, timeout_s=5)


def test_unknown_name_and_default_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="choose one of: sage-test, rlver-train"):
        download("imagenet")
    monkeypatch.setenv("RLVER_DATA_DIR", str(tmp_path / "d"))
    assert default_data_dir() == tmp_path / "d"
    monkeypatch.delenv("RLVER_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_data_dir() == tmp_path / "cache" / "rlver" / "data"


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", "data", "download", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300", **env},
    )


def test_cli_downloads_real_file_and_rejects_corrupt_one(
    serve: tuple[Path, str], tmp_path: Path, shared_data: Path
) -> None:
    root, url = serve
    spec = DATA_FILES["sage-test"]
    put(root, spec.paths[0], (shared_data / spec.filename).read_bytes())
    for name in CODE_OF_SET["sage-test"]:  # the published code comes with the profiles (issue 41)
        put(root, PUBLISHED_CODE[name].paths[0], (shared_data / "published_code" / name).read_bytes())
    dest = tmp_path / "data"
    ok = _cli("sage-test", "--dest", str(dest), env={"RLVER_DATA_BASE_URL": url})
    assert ok.returncode == 0, ok.stderr
    assert (dest / "sage_test_profiles.jsonl").is_file() and "verified and stored" in ok.stdout
    assert all((dest / "published_code" / name).is_file() for name in CODE_OF_SET["sage-test"])

    shutil.rmtree(dest)
    put(root, spec.paths[0], b"corrupted\n")
    bad = _cli("sage-test", "--dest", str(dest), "--base-url", url, env={})
    assert bad.returncode == 1 and "checksum mismatch" in bad.stderr and "Traceback" not in bad.stderr
    assert not (dest / "sage_test_profiles.jsonl").exists()

    offline = _cli(
        "rlver-train", "--dest", str(dest), env={"RLVER_DATA_BASE_URL": f"http://127.0.0.1:{unused_port()}"}
    )
    assert (
        offline.returncode == 1
        and "could not reach" in offline.stderr
        and "rlver data download rlver-train --from FOLDER" in offline.stderr
    )
