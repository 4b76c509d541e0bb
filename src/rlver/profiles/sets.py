"""Named profile sets: the bundled ones (ours, en + zh) and the published ones (downloaded).

``load_profile_set("en-test")`` reads package data through :mod:`importlib.resources`, so it works from
a wheel as well as from a checkout. ``load_profile_set("sage")`` finds the downloaded benchmark file (see
:func:`rlver.profiles.download.find_data_file`). Anything else is taken as a path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from rlver.errors import InputError, Problem
from rlver.profiles.download import find_data_file
from rlver.profiles.loaders import load_profiles
from rlver.profiles.published_code import missing_error, missing_from_set
from rlver.profiles.schema import Profile

#: Bundled set name → the files (in ``rlver/profiles/bundled``) it is made of.
BUNDLED_SETS: dict[str, tuple[str, ...]] = {
    "en-train": ("en_train.jsonl",),
    "en-test": ("en_test.jsonl",),
    "zh-train": ("zh_train.jsonl",),
    "zh-test": ("zh_test.jsonl",),
    "bundled-train": ("en_train.jsonl", "zh_train.jsonl"),
    "bundled-test": ("en_test.jsonl", "zh_test.jsonl"),
    "bundled": ("en_train.jsonl", "en_test.jsonl", "zh_train.jsonl", "zh_test.jsonl"),
}

#: Published set name (and aliases) → data-file name in :data:`DATA_FILES`.
PUBLISHED_SETS: dict[str, str] = {
    "sage": "sage-test",
    "sage-test": "sage-test",
    "rlver-train": "rlver-train",
}

#: The sets ``rlver profiles list`` shows by default: each file once.
PRIMARY_SETS = ("en-train", "en-test", "zh-train", "zh-test", "sage", "rlver-train")


def known_set_names() -> list[str]:
    return [*BUNDLED_SETS, *PUBLISHED_SETS]


def _load_bundled_file(filename: str, set_name: str) -> list[Profile]:
    resource = resources.files("rlver.profiles").joinpath("bundled", filename)
    with resources.as_file(resource) as path:
        if not Path(path).exists():
            raise InputError(
                Problem(f"rlver/profiles/bundled/{filename}", None, None, "missing from the package")
            )
        return load_profiles(path, source=f"bundled:{set_name}")


def load_bundled(name: str) -> list[Profile]:
    """Load a bundled set by name (see :data:`BUNDLED_SETS`)."""
    files = BUNDLED_SETS[name]
    out: list[Profile] = []
    for filename in files:
        part = filename.removesuffix(".jsonl").replace("_", "-")
        out.extend(_load_bundled_file(filename, part))
    return out


def published_set_path(name: str) -> Path:
    """The local copy of a published set, or an InputError saying how to get it."""
    data_name = PUBLISHED_SETS[name]
    found = find_data_file(data_name)
    if found is None:  # every file of the set that is missing, named at once
        raise missing_error(data_name, missing_from_set(data_name))
    return found


def load_profile_set(name_or_path: str | Path) -> list[Profile]:
    """Profiles of a named set (``en-train``, ``bundled-test``, ``sage``, ``rlver-train``, ...) or a file."""
    key = str(name_or_path)
    if key in BUNDLED_SETS:
        return load_bundled(key)
    if key in PUBLISHED_SETS:
        return load_profiles(published_set_path(key), source=PUBLISHED_SETS[key])
    path = Path(key).expanduser()
    if path.exists():
        return load_profiles(path)
    raise InputError(
        Problem(
            key,
            None,
            None,
            "neither a file nor a known profile set; sets: " + ", ".join(known_set_names()),
        )
    )


def profile_ids_sha256(profiles: Sequence[Profile]) -> str:
    """The SHA-256 of a profile set's ids in order, one a line: what a set *is*, whatever its file is
    called or where it lies (``rlver explain`` tells the published set given by path from another set)."""
    return hashlib.sha256("\n".join(p.id for p in profiles).encode("utf-8")).hexdigest()


def find_profile(profile_id: str, sets: list[str] | None = None) -> Profile:
    """Look up one profile by id (or unique id prefix) in the given sets (default: all available)."""
    names = sets or [s for s in PRIMARY_SETS if s in BUNDLED_SETS or find_data_file(PUBLISHED_SETS[s])]
    matches: list[Profile] = []
    for name in names:
        for profile in load_profile_set(name):
            if profile.id == profile_id:
                return profile
            if profile.id.startswith(profile_id):
                matches.append(profile)
    if len(matches) == 1:
        return matches[0]
    where = ", ".join(names)
    if matches:
        ids = ", ".join(m.id for m in matches[:5])
        raise InputError(Problem(profile_id, None, "id", f"ambiguous prefix in {where}: {ids}"))
    raise InputError(Problem(profile_id, None, "id", f"no profile with this id in {where}"))


__all__ = [
    "BUNDLED_SETS",
    "PUBLISHED_SETS",
    "find_profile",
    "known_set_names",
    "load_bundled",
    "load_profile_set",
    "profile_ids_sha256",
    "published_set_path",
]
