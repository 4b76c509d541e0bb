"""`rlver data download NAME --from FOLDER`: the published files from copies in a folder, for users
without network, in any of the three layouts a user has (the repository's tree, the files side by side,
rlver's own data folder), each checked against its sha256; and every missing file named at once, by
``--from`` and by a run that cannot find the set.

A demo set with files of our own stands in for the published set (its table rows are added for the
test, as a test adds a registry entry); the last test takes the real published files when they are here.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlver.errors import InputError
from rlver.profiles import download as download_module
from rlver.profiles import published_code
from rlver.profiles.download import DataFile
from rlver.profiles.published_code import copy_set, missing_from_set
from rlver.profiles.sets import PUBLISHED_SETS, load_profile_set

PROFILE = b'{"id": "d1", "persona": "p", "background": "b", "goal": "g", "hidden_need": "h"}\n'
CODE_A = b"PROMPT_A = 'the first prompt'\n"
CODE_B = b"PROMPT_B = 'the second prompt'\n"


def _spec(name: str, filename: str, body: bytes, path: str) -> DataFile:
    return DataFile(name, filename, hashlib.sha256(body).hexdigest(), 1, (path,), "a test file")


PROFILES = _spec("demo-set", "demo_profiles.jsonl", PROFILE, "DEMO/profile/demo_released.jsonl")
A = _spec("demo/a.py", "published_code/demo/a.py", CODE_A, "DEMO/a.py")
B = _spec("demo/b.py", "published_code/demo/b.py", CODE_B, "DEMO/deep/b.py")
BODIES = {PROFILES: PROFILE, A: CODE_A, B: CODE_B}


@pytest.fixture()
def demo_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The demo set in the tables every reader takes its files from; an empty data dir."""
    monkeypatch.setitem(download_module.DATA_FILES, "demo-set", PROFILES)
    monkeypatch.setitem(published_code.PUBLISHED_CODE, A.name, A)
    monkeypatch.setitem(published_code.PUBLISHED_CODE, B.name, B)
    monkeypatch.setitem(published_code.CODE_OF_SET, "demo-set", (A.name, B.name))
    monkeypatch.setitem(PUBLISHED_SETS, "demo-set", "demo-set")
    data = tmp_path / "data"
    monkeypatch.setenv("RLVER_DATA_DIR", str(data))
    monkeypatch.delenv("RLVER_SHARED_DATA", raising=False)
    return data


def _lay_out(folder: Path, layout: str, skip: tuple[DataFile, ...] = ()) -> Path:
    for spec, body in BODIES.items():
        if spec in skip:
            continue
        rel = {"released": spec.paths[0], "side-by-side": Path(spec.paths[0]).name, "mirror": spec.filename}
        target = folder / rel[layout]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    return folder


@pytest.mark.parametrize("layout", ["released", "side-by-side", "mirror"])
def test_each_layout_is_taken_checked_and_stored_under_the_published_names(
    demo_set: Path, tmp_path: Path, layout: str
) -> None:
    paths = copy_set("demo-set", _lay_out(tmp_path / "copies", layout))
    assert paths == [demo_set / s.filename for s in BODIES]
    assert {p.read_bytes() for p in paths} == set(BODIES.values())
    assert missing_from_set("demo-set") == []
    assert [p.id for p in load_profile_set("demo-set")] == ["d1"]


def test_every_missing_or_altered_file_is_named_at_once_and_nothing_is_stored(
    demo_set: Path, tmp_path: Path
) -> None:
    copies = _lay_out(tmp_path / "copies", "released", skip=(A, B))
    (copies / "b.py").write_bytes(CODE_B + b"# edited\n")  # there, but not the published bytes
    with pytest.raises(InputError) as refused:
        copy_set("demo-set", copies)
    message = str(refused.value)
    assert "2 of the 3 files of demo-set cannot be taken" in message
    assert "published_code/demo/a.py (released as DEMO/a.py) is missing" in message
    assert f"{copies / 'b.py'} is not the published file" in message
    assert message.endswith("nothing was stored")
    assert not demo_set.exists()


def test_a_run_that_cannot_find_the_set_names_every_missing_file_and_each_way_to_give_them(
    demo_set: Path, tmp_path: Path
) -> None:
    """A user copying files by hand was told of one file at a time: four rounds for sage-test."""
    copy_set("demo-set", _lay_out(tmp_path / "copies", "mirror"))
    (demo_set / A.filename).unlink()
    (demo_set / PROFILES.filename).unlink()
    with pytest.raises(InputError) as refused:
        load_profile_set("demo-set")
    message = str(refused.value)
    assert (
        f"2 of its 3 files are not here: {PROFILES.filename}, {A.filename} (looked in {demo_set})" in message
    )
    for way in ("rlver data download demo-set --from FOLDER", "`--base-url`", "RLVER_SHARED_DATA"):
        assert way in message, message
    with pytest.raises(InputError, match="2 of its 3 files are not here"):
        published_code.read_published(A.name)


def test_the_cli_takes_the_published_files_from_a_folder(tmp_path: Path, shared_data_dir: Path) -> None:
    """The real files, through the command, from the shared data folder (rlver's own layout) and from
    a copy of the repository's tree; a misspelt set, and --from with --base-url, are bad input."""
    released = tmp_path / "released"
    for spec in published_code.set_files("sage-test"):
        target = released / spec.paths[0]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((shared_data_dir / spec.filename).read_bytes())
    env = {**os.environ, "COLUMNS": "300", "RLVER_DATA_DIR": str(tmp_path / "unused")}
    env.pop("RLVER_SHARED_DATA", None)

    def rlver(*argv: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rlver", "data", "download", *map(str, argv)],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip

    for source in (shared_data_dir, released):
        dest = tmp_path / f"data-{source.name}"
        done = rlver("sage-test", "--from", source, "--dest", dest)
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("verified and stored") == 4
        assert (dest / "published_code" / "sage" / "npc_response.py").is_file()
    assert rlver("sage-tset", "--from", released).returncode == 2
    both = rlver("sage-test", "--from", released, "--base-url", "http://127.0.0.1:9")
    assert both.returncode == 2 and "not both" in both.stderr
