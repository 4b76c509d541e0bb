"""``python -m rlver`` and the ``rlver`` console script.

Why the entry point is here and not :func:`rlver.cli.main`: importing :mod:`rlver.cli` builds the whole
app (every command module, typer, rich), a second or two on a loaded machine, before the CLI's own
Ctrl-C handling (:func:`rlver.interrupt.graceful_stop`) is in place; a Ctrl-C in that window printed
Python's ``KeyboardInterrupt`` traceback (58 lines). Here the import runs under a handler that ends
the command with one line and the interrupted exit code: nothing had started, so nothing is lost.
"""

from __future__ import annotations

import sys

#: The exit code after Ctrl-C (as :func:`rlver.interrupt.exit_code` gives once the CLI runs).
INTERRUPTED = 130


def main() -> None:
    """Import the CLI, then run it; a Ctrl-C during the import stops with one line."""
    try:
        from rlver.cli import main as run_cli
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted while starting, before any work: nothing to keep\n")
        raise SystemExit(INTERRUPTED) from None
    run_cli()


if __name__ == "__main__":
    main()
