"""The published source files whose text rlver sends byte for byte: fetched, pinned, verified, read.

A score from a new run sits beside the leaderboard only if the judge was asked the leaderboard's
questions. Those questions are text in SAGE's and RLVER's source files (prompt templates, the agent's
system prompt, the training prompts). That text is someone else's: rlver never writes it into its own
source. The files are fetched like the profiles (``rlver data download sage-test`` / ``rlver-train``),
each from its repository at a pinned commit, checked against a pinned sha256, written atomically, and
found where the profiles are (the data dir, then ``$RLVER_SHARED_DATA``) under ``published_code/``.
They are read as text and parsed (:mod:`rlver.simulator.llm.published_text`), never imported or
executed.
"""

from __future__ import annotations

from pathlib import Path

from rlver.errors import InputError, Problem, did_you_mean
from rlver.io import atomic_write_bytes, default_data_dir
from rlver.profiles.download import (
    DATA_FILES,
    SAGE_ROOT,
    DataFile,
    UnknownDataSet,
    candidate_dirs,
    download,
    offline_fixes,
    sha256_of,
)
from rlver.profiles.sage_released import RELEASED_SETS

#: SAGE's benchmark code (Tencent/digitalhuman) and RLVER's training code (zzjweb/digitalhuman), each
#: at the commit whose files the sha256 below pins.
RLVER_ROOT = "https://raw.githubusercontent.com/zzjweb/digitalhuman/789ccd6f5258f58fcacaa7af6d8e97941c393929"
_RLVER_DIR = "RLVER/code/verl/workers/rollout/vllm_rollout"
#: Where the files sit under a data folder (the same layout as the team's shared data folder).
FOLDER = "published_code"


def _code(name: str, path: str, sha256: str, root: str, description: str) -> DataFile:
    return DataFile(
        name=name,
        filename=f"{FOLDER}/{name}",
        sha256=sha256,
        rows=0,
        paths=(path,),
        description=description,
        root=root,
    )


#: Each published file by its name under ``published_code/``.
PUBLISHED_CODE: dict[str, DataFile] = {
    f.name: f
    for f in (
        _code(
            "sage/simulator_response.py",
            "SAGE/simulator_response.py",
            "027a3eca735e6af658996fcb366d15bf43608d0c2012ff186f3dcf0669c91c4a",
            SAGE_ROOT,
            "SAGE's simulator: the appraisal and reply prompt templates and their parsing",
        ),
        _code(
            "sage/npc_response.py",
            "SAGE/npc_response.py",
            "a2345b4728a4387388b2f1252feccdb8896c2fd9615859c961ca90d9c0014b17",
            SAGE_ROOT,
            "SAGE's agent call: the benchmark's agent system prompt",
        ),
        _code(
            "sage/test_npc.py",
            "SAGE/test_npc.py",
            "5df3c1b9dbd1d7eb4318773e447699572431f451525367aa9a801debf5d716c5",
            SAGE_ROOT,
            "SAGE's dialogue loop: turn limit, goodbye words, emotion ends",
        ),
        _code(
            "rlver/hard_player_simulator_dsv3.py",
            f"{_RLVER_DIR}/hard_player_simulator_dsv3.py",
            "978a4e689964469b686ad153c6e1eff4b870f9408da40c85ec9357eb815774b1",
            RLVER_ROOT,
            "RLVER's training simulator: its appraisal and reply prompt templates",
        ),
        _code(
            "rlver/system_prompt.py",
            f"{_RLVER_DIR}/system_prompt.py",
            "fba61c09c63880eef115d1335765c2a4e7669e7268b0cd61516309c5cb8fd6d6",
            RLVER_ROOT,
            "RLVER's training system prompts (think and no-think)",
        ),
        _code(
            "rlver/system_prompt.cpython-312.pyc",
            f"{_RLVER_DIR}/__pycache__/system_prompt.cpython-312.pyc",
            "4e629f0d85e6e6812169f7ea938d24bebefb600809c91e559f6fd63acb587053",
            RLVER_ROOT,
            "the bytecode the released training ran: evidence for which training prompt was used",
        ),
    )
}

#: The code that comes with each profile data set (``rlver data download NAME`` fetches both).
CODE_OF_SET: dict[str, tuple[str, ...]] = {
    "sage-test": ("sage/simulator_response.py", "sage/npc_response.py", "sage/test_npc.py"),
    "rlver-train": (
        "rlver/hard_player_simulator_dsv3.py",
        "rlver/system_prompt.py",
        "rlver/system_prompt.cpython-312.pyc",
    ),
}


def check_set(name: str) -> str:
    """``name`` if ``rlver data download`` takes it (a profile set, then a set of released results); a
    misspelt one is refused with the names (exit 2)."""
    names = (*DATA_FILES, *RELEASED_SETS)
    if name not in names:
        raise UnknownDataSet(
            f"unknown data set {name!r}; choose one of: {', '.join(names)}{did_you_mean(name, names)}"
        )
    return name


def set_files(name: str) -> list[DataFile]:
    """Every file of the data set ``name``: its profile file, then the published code it comes with
    (a set of released results: its files)."""
    if name in RELEASED_SETS:
        return list(RELEASED_SETS[name])
    return [DATA_FILES[name], *(PUBLISHED_CODE[code] for code in CODE_OF_SET.get(name, ()))]


def missing_from_set(name: str) -> list[DataFile]:
    """The files of the set ``name`` with no copy on the search path (the data dir, then
    ``$RLVER_SHARED_DATA``)."""
    return [f for f in set_files(name) if not any((d / f.filename).is_file() for d in candidate_dirs())]


def missing_error(name: str, missing: list[DataFile]) -> InputError:
    """One error naming *every* file of the set ``name`` that is not here (exit 2): a user copying files
    by hand was told of one at a time, four rounds for ``sage-test``."""
    looked = ", ".join(str(d) for d in candidate_dirs())
    files = ", ".join(f.filename for f in missing)
    return InputError(
        Problem(
            name,
            None,
            None,
            f"{len(missing)} of its {len(set_files(name))} files are not here: {files} (looked in "
            f"{looked}); run `rlver data download {name}`, or {offline_fixes(name)}",
        )
    )


def find_published(name: str) -> Path | None:
    """The first copy of the published file ``name`` on the data search path, or ``None``."""
    spec = PUBLISHED_CODE[name]
    for folder in candidate_dirs():
        candidate = folder / spec.filename
        if candidate.is_file():
            return candidate
    return None


def read_published(name: str) -> bytes:
    """The verified bytes of the published file ``name``, or an InputError (exit 2) naming the fix.

    Checked on every read, not only at download: a copy edited by hand would send other prompts while
    the manifest named the published ones.
    """
    spec = PUBLISHED_CODE[name]
    fetch = next(s for s, names in CODE_OF_SET.items() if name in names)
    found = find_published(name)
    if found is None:
        raise missing_error(fetch, missing_from_set(fetch))
    data = found.read_bytes()
    digest = sha256_of(data)
    if digest != spec.sha256:
        raise InputError(
            Problem(
                str(found),
                None,
                None,
                f"sha256 {digest} is not the published file's {spec.sha256}; "
                f"run `rlver data download {fetch} --force`",
            )
        )
    return data


def published_digests(names: tuple[str, ...]) -> dict[str, str]:
    """``{name: sha256}`` of the files a run reads (recorded in manifests)."""
    return {name: PUBLISHED_CODE[name].sha256 for name in names}


def download_set(
    name: str,
    dest: str | Path | None = None,
    *,
    base_url: str | None = None,
    force: bool = False,
    timeout_s: float = 60.0,
) -> list[Path]:
    """Download a data set (a profile file and the published code that goes with it, or a set of
    released results); return every path.

    Each file is verified before it is written (atomically), so an interrupted download leaves either
    no file or a whole, verified one.
    """
    return [
        download(spec, dest, base_url=base_url, timeout_s=timeout_s, force=force, set_name=name)
        for spec in set_files(check_set(name))
    ]


def _copies_in(folder: Path, spec: DataFile) -> list[Path]:
    """Where a copy of ``spec`` may sit in ``folder``: as rlver stores it (a mirror of a data folder),
    at each of its paths in the repository (a clone or a copy of the released tree), under any folder
    of those paths (``--from SAGE/dataset``, ``--from DATA/sage_released``), or by its bare name beside
    the others (files saved one by one from a browser): the longest match first."""
    whole = (spec.filename, *spec.paths)
    tails = sorted(
        {"/".join(Path(p).parts[i:]) for p in whole for i in range(1, len(Path(p).parts))},
        key=lambda t: (-t.count("/"), t),
    )
    names = [*whole, *tails]
    return [folder / n for n in dict.fromkeys(names) if (folder / n).is_file()]


def copy_set(name: str, source: str | Path, dest: str | Path | None = None) -> list[Path]:
    """The data set ``name`` from copies in the folder ``source`` (``rlver data download NAME --from
    DIR``): each file found (:func:`_copies_in`), checked against its sha256, and stored under its
    published name in ``dest`` (default: the data dir), written atomically.

    All or nothing: every file missing or not matching its checksum is named in one error (exit 2),
    and nothing is stored then, so a second try follows a complete list rather than the next file.
    """
    check_set(name)  # a misspelt set: refused with the names
    folder = Path(source).expanduser()
    if not folder.is_dir():
        raise InputError(Problem(str(folder), None, None, "--from: not a folder"))
    found: list[tuple[DataFile, bytes]] = []
    problems: list[str] = []
    for spec in set_files(name):
        copies = _copies_in(folder, spec)
        body = next((b for b in (c.read_bytes() for c in copies) if sha256_of(b) == spec.sha256), None)
        if body is not None:
            found.append((spec, body))
        elif copies:
            problems.append(f"{copies[0]} is not the published file (sha256 is not {spec.sha256[:12]}...)")
        else:
            problems.append(f"{spec.filename} (released as {spec.paths[0]}) is missing")
    if problems:
        raise InputError(
            Problem(
                str(folder),
                None,
                None,
                f"--from: {len(problems)} of the {len(set_files(name))} files of {name} cannot be taken: "
                + "; ".join(problems)
                + "; nothing was stored",
            )
        )
    target = Path(dest).expanduser() if dest is not None else default_data_dir()
    for spec, body in found:
        atomic_write_bytes(target / spec.filename, body)
    return [target / spec.filename for spec, _ in found]


__all__ = [
    "CODE_OF_SET",
    "DATA_FILES",
    "PUBLISHED_CODE",
    "copy_set",
    "download_set",
    "find_published",
    "missing_error",
    "missing_from_set",
    "published_digests",
    "read_published",
]
