"""Crash-safe file writing and tolerant JSONL reading.

Every file rlver writes that a user would hate to lose (transcripts, checkpoints, metrics, downloads)
goes through these helpers: whole files are written to a temporary sibling, fsynced and renamed; JSONL
records are appended as one ``write`` of one complete line followed by fsync, so a crash leaves at most
one partial trailing line, which :func:`read_jsonl` reports and skips.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlver.errors import InputError, Problem


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def dumps_strict(obj: Any, *, indent: int | None = None) -> str:
    """``json.dumps`` that refuses NaN and infinities.

    Python writes them as ``NaN``/``Infinity``, which is not JSON: ``jq``, browsers and most other
    languages reject the whole file. A missing number is ``None`` (``null``); producing NaN is a bug
    this makes loud instead of silently corrupting a results file.
    """
    return json.dumps(obj, ensure_ascii=False, indent=indent, allow_nan=False)


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as strict JSON (no NaN: see :func:`dumps_strict`), atomically."""
    atomic_write_text(path, dumps_strict(obj, indent=2) + "\n")


def append_jsonl(path: str | os.PathLike[str], record: Any) -> None:
    """Append one record as one line, durably.

    The line is written with a single ``os.write`` on an ``O_APPEND`` descriptor and fsynced, so
    concurrent appends from one process never interleave and a crash loses at most this line.
    If the file's last line is incomplete (an earlier crash), a newline is written first so the new
    record starts on its own line.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    line = dumps_strict(record) + "\n"
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            with open(target, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    line = "\n" + line
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def iter_jsonl(
    path: str | os.PathLike[str], *, skip_bad_trailing_line: bool = True
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for every non-empty line.

    A malformed *last* line (what a crash mid-write leaves) is skipped with a warning when
    ``skip_bad_trailing_line``; a malformed line anywhere else raises :class:`InputError` naming it.
    Invalid UTF-8 is reported the same way instead of surfacing as a ``UnicodeDecodeError``.
    """
    p = Path(path)
    raw = p.read_bytes()
    lines = raw.split(b"\n")
    last_content = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, bline in enumerate(lines):
        if not bline.strip():
            continue
        lineno = i + 1
        try:
            text = bline.decode("utf-8")
            obj = json.loads(text)
        # ValueError also covers integers longer than Python's 4300-digit limit; RecursionError is
        # what ``json`` raises for absurdly deep nesting. Both are bad input, never a traceback.
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, RecursionError):
                exc = ValueError("nested too deeply")
            if skip_bad_trailing_line and i == last_content:
                import warnings

                warnings.warn(f"{p}:{lineno}: skipped incomplete trailing line ({exc})", stacklevel=2)
                return
            raise InputError(Problem(str(p), lineno, None, f"not valid JSON: {exc}")) from None
        yield lineno, obj
