"""Ctrl-C and SIGTERM that stop work between steps, keep what finished, and end in one line.

Why this exists: Python delivers a signal to the main thread only. A local model generates in a worker
thread (``asyncio.to_thread``), so a plain ``KeyboardInterrupt`` left that thread decoding to its token
limit while the event loop waited for it on the way out (minutes for SmolLM2 on a CPU), a second
Ctrl-C broke into that wait with a traceback, and a third killed the interpreter mid-torch (SIGABRT).

Here the first signal does two things: it sets :data:`stop_requested`, which every decode loop checks
between steps (:func:`raise_if_stopping`), and it raises ``KeyboardInterrupt`` in the main thread as
the default handler does, so the command's own ``except KeyboardInterrupt`` saves and reports what
finished. Later signals only say that the stop is under way. A watchdog ends the process with the same
exit code if stopping ever takes longer than :data:`GRACE_S` (a step that never returns), so no number of
signals turns into a traceback or a hang.

Work that must not be cut in half (a training step's update, which leaves weights of no step when
broken into) runs inside :func:`finish_first`: a first signal there is noted, not raised; the work
finishes, and ``KeyboardInterrupt`` is raised when the block ends. A part of such a block that may be
cut (the held-out evaluation after a step's update: the step is whole without it) runs inside
:func:`interruptible`, where a signal stops it at once, watchdog armed, as outside the block. Saving
what finished (a checkpoint of a large model takes longer than :data:`GRACE_S`) runs inside
:func:`winding_down`, which holds the watchdog off.

:func:`signalled_during` names what the process was doing (``heartbeat.activity.phase``) when the
first signal came, so a command's message names that, not whatever ran last.

Exit codes follow the shell: 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from rlver.errors import RlverError
from rlver.heartbeat import activity

#: Set by the first SIGINT/SIGTERM; decode loops and long waits poll it.
stop_requested = threading.Event()

#: Seconds the work may take to wind down after the first signal before the process is ended.
GRACE_S = 30.0

_exit_code = 130

#: How many :func:`finish_first` blocks are open, and whether a signal arrived inside one.
_finish_depth = 0
_stop_after_block = threading.Event()
#: How many :func:`winding_down` blocks are open (the watchdog waits while any is).
_winding = 0
#: How many :func:`interruptible` blocks are open (a signal inside one is raised at once).
_cuttable = 0
#: ``activity.phase`` when the first signal arrived ("" before any).
_phase_at_signal = ""


class StopGeneration(KeyboardInterrupt):
    """Raised inside a worker thread's decode loop once a stop was requested.

    A ``KeyboardInterrupt`` so that nothing that catches ``Exception`` (a chunk whose failure is
    recorded per dialogue) mistakes a user's Ctrl-C for a failed dialogue that ``--resume`` must redo.
    """


class Interrupted(RlverError):
    """A command stopped by Ctrl-C or SIGTERM: the message says what was kept and how to go on.

    Raised in place of ``KeyboardInterrupt`` so the root ``main()`` prints it as one ``error:`` line;
    its exit code is the signal's (130 or 143), read when it is raised.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code()


def raise_if_stopping() -> None:
    """Called between decode steps: end the generation now if the user asked to stop."""
    if stop_requested.is_set():
        raise StopGeneration("stop requested")


def exit_code() -> int:
    """130 after SIGINT (or none), 143 after SIGTERM: what the command exits with when interrupted."""
    return _exit_code


def _watchdog() -> None:
    while not _finished.wait(GRACE_S):
        if _winding:  # saving what finished: a deliberate wind-down, not a hang
            continue
        sys.stderr.write(f"error: interrupted: stopping took over {GRACE_S:.0f} s; exiting now\n")
        sys.stderr.flush()
        os._exit(_exit_code)


def _begin_stop() -> None:
    stop_requested.set()
    threading.Thread(target=_watchdog, name="rlver-interrupt-watchdog", daemon=True).start()


_finished = threading.Event()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _exit_code, _phase_at_signal
    if stop_requested.is_set() or _stop_after_block.is_set():
        sys.stderr.write("stopping: saving what finished (the current step ends first)...\n")
        sys.stderr.flush()
        return
    _exit_code = 128 + signum
    _phase_at_signal = activity.phase
    if _finish_depth and not _cuttable:
        # inside work that must finish: say so, let it finish, raise when the block ends
        _stop_after_block.set()
        sys.stderr.write("stopping: the step in flight finishes first, then it is saved...\n")
        sys.stderr.flush()
        return
    _begin_stop()
    raise KeyboardInterrupt


def signalled_during() -> str:
    """What the process was doing (``heartbeat.activity.phase``) when the first signal arrived; "" if
    none has."""
    return _phase_at_signal


def stop_pending() -> bool:
    """True once a signal arrived, raised or noted inside a :func:`finish_first` block."""
    return stop_requested.is_set() or _stop_after_block.is_set()


@contextlib.contextmanager
def finish_first() -> Iterator[None]:
    """Run the block to its end whatever signal arrives; a noted one is raised when it ends.

    Decode loops inside keep going (:data:`stop_requested` stays clear), so an evaluation inside the
    block gives the numbers an uninterrupted run logs. A signal before the block is entered was
    raised already; one inside is raised as ``KeyboardInterrupt`` at the block's end.
    """
    global _finish_depth
    _finish_depth += 1
    try:
        yield
    finally:
        _finish_depth -= 1
    if _finish_depth == 0 and _stop_after_block.is_set():
        _stop_after_block.clear()  # noted once, raised once: stop_requested carries it from here
        _begin_stop()
        raise KeyboardInterrupt


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Inside a :func:`finish_first` block, a part a signal may cut short (the held-out evaluation after
    a step's update): a signal inside raises ``KeyboardInterrupt`` at once and arms the watchdog, as
    outside the block; one noted earlier in the block skips the part (raised on entry)."""
    global _cuttable
    if _stop_after_block.is_set():
        _stop_after_block.clear()  # noted in the work before: raised here instead of at the block's end
        _begin_stop()
        raise KeyboardInterrupt
    _cuttable += 1
    try:
        yield
    finally:
        _cuttable -= 1


@contextlib.contextmanager
def winding_down() -> Iterator[None]:
    """Hold the watchdog off while what finished is saved (a large checkpoint takes minutes)."""
    global _winding
    _winding += 1
    try:
        yield
    finally:
        _winding -= 1


@contextlib.contextmanager
def graceful_stop() -> Iterator[None]:
    """Install the handlers for the duration of a command (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _exit_code, _phase_at_signal
    stop_requested.clear()  # a process that runs several commands (tests) starts each one afresh
    _stop_after_block.clear()
    _phase_at_signal = ""
    _finished.clear()
    _exit_code = 130
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, _on_signal)
    try:
        yield
    finally:
        _finished.set()
        if stop_requested.is_set():
            # The process is on its way out: a later signal must not break into the exit with the
            # default handler (a traceback, or death by the signal instead of the exit code).
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
        else:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
