"""One ``error:`` line for a disk that refuses a write: read-only, full, or over quota.

Why here and not in each command: any command that writes (``eval --out``, ``report --out``, ``data
download --dest``, ``train --out``) meets the same errors, from ``mkdir``, ``open``, a ``write`` deep
inside, or a library's own writer (safetensors reports ``(os error 28)`` in its message, not as an
``OSError``), and the fix does not depend on where it was raised: another path, or free space. Before
this the CLI printed a 70–100-line traceback for each. What was written before the error stays: runs
append each finished dialogue durably and ``--resume`` repairs a torn last line
(``rlver.transcripts.native``), so a full disk names ``--resume`` where the command has it.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Sequence
from pathlib import Path

from rlver.errors import EXIT_BAD_INPUT, EXIT_FAILED

#: Commands whose runs continue with ``--resume`` after the disk is freed.
RESUMABLE = ("eval", "train")

#: The errno a Rust writer (safetensors) puts in its message: ``I/O error: ... (os error 28)``.
_OS_ERROR_TEXT = re.compile(r"\(os error (\d+)\)")

_DISK_ERRNOS = (errno.EROFS, errno.ENOSPC, errno.EDQUOT)

#: The temporary name :func:`rlver.io.atomic_write_bytes` writes first (``.NAME.RANDOM.tmp``): the
#: user named ``NAME``, so the message does too.
_ATOMIC_TMP = re.compile(r"^\.(.+)\.[^.]+\.tmp$")


def _users_name(filename: str) -> str:
    """``filename``, with an atomic write's temporary name replaced by the file it was writing."""
    path = Path(filename)
    found = _ATOMIC_TMP.match(path.name)
    return str(path.with_name(found.group(1))) if found else filename


def _disk_errno(exc: BaseException) -> tuple[int, str | None] | None:
    """The errno and path of a disk error in ``exc`` or its causes, ``None`` for anything else."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _DISK_ERRNOS:
            return current.errno, current.filename
        found = _OS_ERROR_TEXT.search(str(current)) if not isinstance(current, OSError) else None
        if found and int(found.group(1)) in _DISK_ERRNOS:
            return int(found.group(1)), None
        current = current.__cause__ or current.__context__
    return None


def disk_error_line(exc: BaseException, argv: Sequence[str]) -> tuple[str, int] | None:
    """``(message, exit code)`` for a read-only or full disk, ``None`` for any other error (left to the
    caller). ``argv``: the command line after ``rlver``, to name the command's own fix."""
    found = _disk_errno(exc)
    if found is None:
        return None
    number, filename = found
    where = f"{_users_name(str(filename))}: " if filename else ""
    if number == errno.EROFS:
        return f"{where}read-only file system; give a path on a writable disk", EXIT_BAD_INPUT
    command = next((a for a in argv if not a.startswith("-")), "")
    what = "no space left on the device" if number == errno.ENOSPC else "disk quota exceeded"
    again = (
        f"free space, then run the same rlver {command} command with --resume: what finished is kept"
        if command in RESUMABLE
        else f"free space, then run rlver {command or 'it'} again"
    )
    return f"{where}{what}; {again}", EXIT_FAILED
