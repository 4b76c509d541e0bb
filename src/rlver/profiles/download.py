"""Fetch the published profile files from Tencent's public ``digitalhuman`` repository.

The files are not shipped with rlver (they are someone else's data); ``rlver data download`` fetches them
from the repository's raw URLs, checks each against a pinned sha256 and writes it atomically under its
published name. A file that fails the check is never kept. Several source paths are tried in order
because the upstream repository has moved its RLVER folder once (``RLVER/data`` → ``RLVER/code/data``);
the checksum guarantees that whichever answers is the right file.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from rlver.errors import DownloadError, did_you_mean
from rlver.io import atomic_write_bytes, default_data_dir

#: Raw-file root of https://github.com/Tencent/digitalhuman (branch ``main``).
DEFAULT_BASE_URL = "https://raw.githubusercontent.com/Tencent/digitalhuman/main"
BASE_URL_ENV = "RLVER_DATA_BASE_URL"
#: SAGE's repository at the commit whose files (code and released results) the pinned sha256 are of.
SAGE_ROOT = "https://raw.githubusercontent.com/Tencent/digitalhuman/6dcfa78b6556e7398a82809e383bd60a67fe19eb"
#: A folder holding already-verified copies of the published files (e.g. a shared team folder).
SHARED_DATA_ENV = "RLVER_SHARED_DATA"
_MAX_BYTES = 64 * 1024 * 1024  # the published files are 0.6 and 3 MB; refuse anything absurd


def offline_fixes(name: str = "NAME") -> str:
    """What a user without network can do for the data set ``name``: named by every error that means
    "the files are not here" (a download that cannot reach its server, a run that cannot find them)."""
    return (
        f"offline: copy the files into a folder and run `rlver data download {name} --from FOLDER` (the "
        "repository's layout, the files side by side, or rlver's own), point `--base-url` at a mirror "
        f"of the raw files, or set {SHARED_DATA_ENV} to a folder that holds them as rlver stores them"
    )


@dataclass(frozen=True)
class DataFile:
    """One published file: the name rlver stores it under, its checksum, and where upstream keeps it."""

    name: str
    filename: str
    sha256: str
    rows: int
    paths: tuple[str, ...]  # repository paths, tried in order
    description: str
    #: the raw-file root of the file's repository at a pinned commit (``None``: Tencent's ``main``)
    root: str | None = None


class UnknownDataSet(DownloadError):
    """A name that is not a published file: a typo, refused with the names (exit 2, bad input; the
    other download errors are exit 1, a network or a mirror that failed)."""

    exit_code = 2


DATA_FILES: dict[str, DataFile] = {
    "sage-test": DataFile(
        name="sage-test",
        filename="sage_test_profiles.jsonl",
        sha256="99a2ed2ce2da3702a12c4abb4ccac85703bd1ad2a984012bf81b292458c3ee8b",
        rows=100,
        paths=(
            "SAGE/profile/simulator_profile_withfirsttalk.jsonl",
            "RLVER/data/test_profile.jsonl",
            "RLVER/code/data/test_profile.jsonl",
        ),
        description="the Sentient Benchmark's 100 test profiles with opening lines",
    ),
    "rlver-train": DataFile(
        name="rlver-train",
        filename="rlver_train_profiles.jsonl",
        sha256="82e09e73a89bf6e167fe8e56823aaa5e62b0bd55c1d08ef9618011aeb7fa53a3",
        rows=500,
        paths=(
            "RLVER/code/data/train_profile.jsonl",
            "RLVER/data/train_profile.jsonl",
        ),
        description="the 500 published RL training profiles",
    ),
}


def data_file(name: str) -> DataFile:
    """The published file named ``name``; a misspelt name is refused with the names (exit 2)."""
    if name not in DATA_FILES:
        known = ", ".join(DATA_FILES)
        raise UnknownDataSet(
            f"unknown data set {name!r}; choose one of: {known}{did_you_mean(name, DATA_FILES)}"
        )
    return DATA_FILES[name]


def candidate_dirs() -> list[Path]:
    """Where the published files are looked for, in order: the data dir, then ``$RLVER_SHARED_DATA``.

    The data dir is where ``rlver data download`` writes (:func:`default_data_dir`). Nothing is looked
    for relative to the working directory or to where rlver is installed: a run must not depend on
    which folder happens to sit next to a checkout (a fresh clone and an installed wheel behave alike).
    """
    dirs = [default_data_dir()]
    shared = os.environ.get(SHARED_DATA_ENV)
    if shared:
        dirs.append(Path(shared).expanduser())
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def find_data_file(name: str) -> Path | None:
    """The first existing copy of a published file (by data-set name), or ``None``."""
    spec = DATA_FILES[name]
    for d in candidate_dirs():
        candidate = d / spec.filename
        if candidate.is_file():
            return candidate
    return None


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fetch(url: str, timeout_s: float) -> bytes | None:
    """The body at ``url``; ``None`` on 404 (try the next path); raises DownloadError otherwise."""
    import httpx

    try:
        with (
            httpx.Client(timeout=timeout_s, follow_redirects=True) as client,
            client.stream("GET", url) as resp,
        ):
            if resp.status_code == 404:
                return None
            if resp.status_code != 200:
                raise DownloadError(f"{url}: HTTP {resp.status_code}")
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > _MAX_BYTES:
                    raise DownloadError(f"{url}: larger than {_MAX_BYTES // 2**20} MiB; refusing")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.HTTPError as exc:
        raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc


def download(
    name: str | DataFile,
    dest: str | Path | None = None,
    *,
    base_url: str | None = None,
    timeout_s: float = 60.0,
    force: bool = False,
    set_name: str | None = None,
) -> Path:
    """Download one published file (``sage-test`` or ``rlver-train``), verify it, store it; return its path.

    Only the profile file: :func:`download_set` also fetches the published code that goes with it.

    An existing file with the right checksum is kept (no network). ``base_url`` (or
    ``$RLVER_DATA_BASE_URL``) replaces the GitHub raw root, e.g. for a mirror or a test server.
    ``name`` may also be a :class:`DataFile` describing some other checksummed file; ``set_name``
    is then the data set it belongs to, for the errors' advice.
    """
    spec = name if isinstance(name, DataFile) else data_file(name)
    fixes = offline_fixes(set_name or spec.name)
    folder = Path(dest).expanduser() if dest is not None else default_data_dir()
    target = folder / spec.filename
    if not force and target.is_file() and sha256_of(target.read_bytes()) == spec.sha256:
        return target
    root = (base_url or os.environ.get(BASE_URL_ENV) or spec.root or DEFAULT_BASE_URL).rstrip("/")
    tried: list[str] = []
    for repo_path in spec.paths:
        url = f"{root}/{repo_path}"
        tried.append(url)
        try:
            body = _fetch(url, timeout_s)
        except ConnectionError as exc:
            raise DownloadError(f"could not reach {url} ({exc}); {fixes}") from None
        if body is None:
            continue
        digest = sha256_of(body)
        if digest != spec.sha256:
            raise DownloadError(
                f"{url}: checksum mismatch (expected sha256 {spec.sha256}, got {digest}); "
                f"the file was not kept"
            )
        atomic_write_bytes(target, body)
        return target
    raise DownloadError(f"not found at any known location (HTTP 404): {', '.join(tried)}; {fixes}")
