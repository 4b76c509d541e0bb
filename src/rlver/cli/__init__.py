"""The ``rlver`` command.

**One registration style.** Every command module exposes ``register(app: typer.Typer) -> None`` and is
listed once in :data:`COMMANDS`; :func:`build_app` calls each ``register`` in that order. A module with
single commands adds them with ``app.command("name")(function)``; a module with a command group (``rlver
data download``) builds its group with :func:`~rlver.cli.plain_help.plain_typer` inside ``register``
and adds it with ``app.add_typer(group, name=...)``. Nothing is registered at import time (no
``@app.command`` decorators, no module-level ``Typer``), so importing a module never changes the app.
Adding a command is one new module with a ``register`` function and one line in :data:`COMMANDS`
(tests/cli/test_cli_root.py checks both halves).

Command functions import heavy libraries (torch, transformers) inside their bodies, so ``rlver --help``
stays fast. Errors derived from :class:`rlver.errors.RlverError` are printed as plain messages with
their exit code; anything else is a bug and shows a traceback.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TextIO

import typer

from rlver import __version__
from rlver.cli import (
    audit,
    calibrate,
    chat,
    config_cmd,
    data,
    demo_cmd,
    eval_cmd,
    inspect_cmd,
    models,
    probe,
    profiles,
    simulator_cmd,
    train_cmd,
)
from rlver.cli.plain_help import plain_typer
from rlver.errors import RlverError

#: Every module that adds commands to ``rlver``, in registration order. ``rlver --help`` lists the
#: single commands first and the command groups after them, each in this order.
COMMANDS: tuple[ModuleType, ...] = (
    audit,
    calibrate,
    chat,
    eval_cmd,
    inspect_cmd,
    probe,
    train_cmd,
    demo_cmd,
    data,
    profiles,
    config_cmd,
    models,
    simulator_cmd,
)


def build_app(modules: Sequence[ModuleType] | None = None) -> typer.Typer:
    """The root app with the commands of ``modules`` (default :data:`COMMANDS`) registered in order."""
    root = plain_typer(
        name="rlver",
        help="Reinforcement learning with verifiable emotion rewards: train and benchmark chat models "
        "against simulated users.\n\nAny command takes --verbose to show the progress bars and notices "
        "of transformers and huggingface_hub, which are hidden otherwise.",
        no_args_is_help=True,
    )
    root.callback()(_root)
    for module in COMMANDS if modules is None else modules:
        module.register(root)
    return root


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"rlver {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
) -> None:
    """rlver: RL with verifiable emotion rewards."""


app = build_app()

#: Filesystem errors that name the path they are about: a file given where a folder is expected, a
#: folder where a file is, a missing parent, no permission. Whatever command meets one, the user's fix
#: is the same (give another path), so they are one line rather than a traceback.
_PATH_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Show a warning as one ``warning:`` line: no source path, no source line (they are for us)."""
    text = str(message).strip().splitlines()
    print(f"warning: {text[0] if text else category.__name__}", file=file or sys.stderr)


def _quiet_third_party(argv: list[str]) -> list[str]:
    """Take ``--verbose`` out of ``argv`` (any command accepts it) and, without it, switch off the
    progress bars and notices of transformers / huggingface_hub, which otherwise interleave with ours
    ("Loading weights", "Writing model shards"). Environment variables, because those libraries read
    them when first imported, and the commands import them lazily."""
    cut = argv.index("--") if "--" in argv else len(argv)
    verbose = "--verbose" in argv[:cut]
    if verbose:
        argv = [a for i, a in enumerate(argv) if a != "--verbose" or i >= cut]
    else:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    return argv


def _path_error_line(exc: OSError) -> str:
    """``PATH: what is wrong`` for a filesystem error, with the second path of a rename left out."""
    what = exc.strerror or type(exc).__name__
    hint = {
        FileExistsError: "it exists and is not a folder; give another path",
        IsADirectoryError: "it is a folder; give a file",
        NotADirectoryError: "a part of it is a file, not a folder",
    }.get(type(exc), "")
    return f"{exc.filename}: {what.lower()}" + (f" ({hint})" if hint else "")


def main() -> None:
    """Console-script entry point: run the app, turning RlverError into a clean message."""
    warnings.showwarning = _one_line_warning
    args: Any = _quiet_third_party(sys.argv[1:])
    try:
        # With standalone_mode=False click *returns* the code of a typer.Exit instead of raising it.
        rc = app(args=args, standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except RlverError as exc:
        from rich.console import Console
        from rich.markup import escape

        # The message is plain text (it may name `rlver[embed]` or quote model output): escape it so
        # rich does not read brackets as markup.
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False
        )
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
    except _PATH_ERRORS as exc:
        if exc.filename is None:
            raise
        print(f"error: {_path_error_line(exc)}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # usage errors: bad option values, unknown commands, no arguments
        if isinstance(exc, _click_exception_types()):
            exc.show()  # type: ignore[attr-defined]
            sys.exit(getattr(exc, "exit_code", 2))
        raise


def _click_exception_types() -> tuple[type[Exception], ...]:
    """Click's usage-error base class, and the copy of it that typer >= 0.20 vendors as
    ``typer._click`` (its errors are *not* ``click.ClickException``s; missing it made every bad flag
    a traceback)."""
    import importlib

    found: list[type[Exception]] = []
    for module in ("click.exceptions", "typer._click.exceptions"):
        try:
            found.append(importlib.import_module(module).ClickException)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


if __name__ == "__main__":  # pragma: no cover
    main()
