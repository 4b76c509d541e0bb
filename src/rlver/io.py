"""Crash-safe file writing and tolerant JSONL reading.

Every file rlver writes that a user would hate to lose (transcripts, checkpoints, metrics, downloads)
goes through these helpers: whole files are written to a temporary sibling, fsynced and renamed; JSONL
records are appended as one ``write`` of one complete line followed by fsync, so a crash leaves at most
one partial trailing line, which :func:`read_jsonl` reports and skips.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from rlver.errors import ConfigError, InputError, Problem

#: Overrides where rlver keeps what it downloads (published profiles, fetched models).
DATA_DIR_ENV = "RLVER_DATA_DIR"


def default_data_dir() -> Path:
    """``$RLVER_DATA_DIR`` if set, else ``$XDG_CACHE_HOME/rlver/data`` (``~/.cache/rlver/data``).

    One place for every download (profiles by ``rlver data download``, models by ``rlver models
    fetch``), so a team can point it at a shared folder once."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return _a_folder(Path(env).expanduser(), f"${DATA_DIR_ENV}")
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return _a_folder(Path(cache) / "rlver" / "data", "the data folder")


def _a_folder(path: Path, source: str) -> Path:
    """``path``, refused (exit 2) when it or a folder above it is a file: every download and fetch
    would fail there, and ``rlver models fetch`` only found out after downloading the wheel."""
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                what = "is a file" if part == path else f"is inside {part}, which is a file"
                raise ConfigError(f"{source}: {path} {what}, not a folder; point it at a folder")
            break
    return path


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of a file's bytes: how provenance names a data file (the learned appraisal's
    artefact records its fitting files this way, and ``rlver calibrate`` matches files by it)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_text_file(path: str | os.PathLike[str]) -> str:
    """A text file a user names for one text field (``--system-prompt @FILE``, ``--agent-prompt FILE``,
    ``rollout.agent_prompt``): UTF-8, not empty, at most :data:`rlver.limits.MAX_TEXT_CHARS`.

    Each refusal is one :class:`InputError` naming the file (and, for bytes that are not UTF-8, the
    line and column where they are): a Latin-1 file was a 52-line traceback. A file far over the
    bound is refused from its size, without reading it.
    """
    from rlver.limits import MAX_TEXT_CHARS, text_too_long

    file = Path(path).expanduser()
    try:
        size = file.stat().st_size
        raw = file.read_bytes() if size <= 4 * MAX_TEXT_CHARS else b""  # UTF-8: at most 4 bytes a character
    except OSError as exc:
        raise InputError(Problem(str(file), None, None, f"cannot read: {exc.strerror or exc}")) from None
    if size > 4 * MAX_TEXT_CHARS:
        limit = f"a text field holds at most {MAX_TEXT_CHARS:,} characters"
        raise InputError(Problem(str(file), None, None, f"{size:,} bytes; {limit}"))
    try:
        text = raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line, col = before.count(b"\n") + 1, exc.start - (before.rfind(b"\n") + 1) + 1
        not_utf8 = f"not UTF-8 (byte 0x{raw[exc.start]:02x}); save it as UTF-8"
        raise InputError(Problem(str(file), line, None, not_utf8, column=col)) from None
    if not text.strip():
        raise InputError(Problem(str(file), None, None, "empty file: no text to use"))
    too_long = text_too_long(len(text))
    if too_long:
        raise InputError(Problem(str(file), None, None, too_long))
    return text


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


def current_umask() -> int:
    """The process's umask, read without changing it where the OS allows (Linux: /proc).

    ``os.umask`` can only be read by setting it, which races with other threads creating files; the
    fallback sets it back at once.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file (0644 under umask 022)."""
    return 0o666 & ~current_umask()


def dir_mode() -> int:
    """The mode ``mkdir`` would give a new folder (0755 under umask 022)."""
    return 0o777 & ~current_umask()


def make_temp_dir(parent: Path, prefix: str) -> Path:
    """``tempfile.mkdtemp`` beside a target, but with the umask's mode instead of 0700.

    The folder is renamed into place afterwards (checkpoints, the built base model); ``mkdtemp``'s
    owner-only mode would then make the final folder unreadable to teammates and to a model server
    running as another user.
    """
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(tmp, dir_mode())
    return tmp


def share_like_umask(root: Path) -> None:
    """Give every file and folder under ``root`` (itself included) the umask's mode.

    For trees written by libraries we don't control: ``save_pretrained`` writes ``model.safetensors``
    owner-only (0600) while the tokenizer files next to it get 0644, so an exported model or a
    checkpoint could not be served by a vLLM process running as another user. Executable bits are kept.
    """
    fmode, dmode = file_mode(), dir_mode()
    for dirpath, _dirs, files in os.walk(root):
        os.chmod(dirpath, dmode)
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            executable = os.stat(path).st_mode & 0o111
            os.chmod(path, dmode if executable else fmode)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one.

    The file ends with the mode a plain write would give it (the umask's), not ``mkstemp``'s 0600.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _replacing(target) as fh:
        fh.write(data)


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[BinaryIO]:
    """A file to write the new ``target`` into: a temporary sibling with the umask's mode, fsynced and
    renamed over ``target`` when the block ends, removed (the old file untouched) if it raises."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as fh:
            yield fh
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
    """Append one record as one line, durably (see :func:`append_jsonl_many`)."""
    append_jsonl_many(path, [record])


def append_jsonl_many(path: str | os.PathLike[str], records: Sequence[Any]) -> None:
    """Append records as lines with one write and one fsync.

    The lines are written with a single ``os.write`` on an ``O_APPEND`` descriptor and fsynced, so
    concurrent appends from one process never interleave and a crash loses at most this write.
    If the file's last line is incomplete (an earlier crash), a newline is written first so the new
    records start on their own line. Strict JSON (no NaN); the file's mode follows the umask.
    """
    if not records:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(dumps_strict(r) + "\n" for r in records)
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # the umask applies
    try:
        size = os.fstat(fd).st_size
        if size:
            with open(target, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    text = "\n" + text
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def filter_jsonl(path: str | os.PathLike[str], keep: Callable[[Any], bool]) -> int:
    """Rewrite a JSONL file with only the records ``keep`` accepts; return how many lines went.

    For cutting a log back on resume (a training transcript to its checkpoint's step). Streamed line
    by line, so a file of many gigabytes needs no memory, and kept lines are copied byte for byte.
    Written to a temporary sibling, fsynced and renamed: a crash leaves the old file or the new one.
    A torn last line (a crash mid-append) is dropped; a bad line anywhere else raises
    :class:`InputError` naming it, and the file is left as it was.
    """
    target = Path(path)
    dropped = 0
    with _replacing(target) as out, target.open("rb") as src:
        torn: int | None = None  # the line number of an unparsable line, fatal unless it is the last
        for lineno, line in enumerate(src, start=1):
            if not line.strip():
                continue
            if torn is not None:
                raise InputError(Problem(str(target), torn, None, "not valid JSON"))
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                torn, dropped = lineno, dropped + 1
                continue
            if keep(record):
                out.write(line if line.endswith(b"\n") else line + b"\n")
            else:
                dropped += 1
    return dropped


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
                warnings.warn(f"{p}:{lineno}: skipped incomplete trailing line ({exc})", stacklevel=2)
                return
            raise InputError(Problem(str(p), lineno, None, f"not valid JSON: {exc}")) from None
        yield lineno, obj


def repair_torn_tail(path: str | os.PathLike[str]) -> bool:
    """Cut off an incomplete last line (a crash mid-append) so that appends can resume after it.

    Without this, the next append would leave the torn line in the *middle* of the file, where
    :func:`iter_jsonl` reports it as an error rather than skipping it as a crash artefact. The last
    non-empty line counts as torn when it is not valid JSON (as :func:`iter_jsonl` judges it); a
    complete record that only lacks its newline is kept (:func:`append_jsonl_many` adds the newline).
    The file is truncated in place and fsynced. Returns whether anything was cut; a missing file is
    left alone.
    """
    p = Path(path)
    if not p.exists():
        return False
    body = p.read_bytes().rstrip(b"\n")
    if not body.strip():
        return False
    cut = body.rfind(b"\n") + 1  # 0 when the whole file is one torn line
    try:
        json.loads(body[cut:].decode("utf-8"))
        return False
    except (ValueError, RecursionError):  # also invalid UTF-8, 4300+-digit ints, absurd nesting
        pass
    warnings.warn(
        f"{p}: removed an incomplete last line ({len(body) - cut} bytes) before resuming: "
        "the incomplete trailing line an interrupted run leaves",
        stacklevel=2,
    )
    with open(p, "r+b") as fh:
        fh.truncate(cut)
        fh.flush()
        os.fsync(fh.fileno())
    return True


def unique_suffixes(paths: Sequence[str | Path], *, strip: str = "") -> list[str]:
    """Each path named by the shortest trailing part of it that tells it apart from the others.

    ``a/sim-1/gpt-4o_result.jsonl`` and ``a/sim-2/gpt-4o_result.jsonl`` read ``sim-1/gpt-4o`` and
    ``sim-2/gpt-4o`` (with ``strip="_result.jsonl"``), whatever the working directory: paths are
    compared resolved, so ``.`` and ``..`` never show up in a label. One depth serves all paths (the
    smallest at which every label differs), so rows of one table read alike. The same path given twice
    gets the same label twice (callers that need distinct names number them).
    """
    parts = [Path(p).expanduser().resolve().parts for p in paths]
    if not parts:
        return []
    deepest = max(len(p) for p in parts)
    depth = 1
    while depth < deepest and len({p[-depth:] for p in parts}) < len(set(parts)):
        depth += 1
    labels = []
    for p in parts:
        tail = p[-depth:]
        label = str(Path(*tail)) if tail else ""
        labels.append(label.removesuffix(strip) if strip and label.endswith(strip) else label)
    return labels
