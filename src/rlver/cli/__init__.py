"""The ``rlver`` command.

**One registration style.** Every command module exposes ``register(app: typer.Typer) -> None`` and is
listed once in :data:`COMMANDS`, a :class:`~rlver.registry.Registry` of lazy ``"rlver.cli.<module>:register"``
entries; :func:`build_app` calls each ``register`` in that order. A module with
single commands adds them with ``app.command("name")(function)``; a module with a command group (``rlver
data download``) builds its group with :func:`~rlver.cli.plain_help.plain_typer` inside ``register``
and adds it with ``app.add_typer(group, name=...)``. Nothing is registered at import time (no
``@app.command`` decorators, no module-level ``Typer``), so importing a module never changes the app.
Adding a command is one new module with a ``register`` function and one line in :data:`COMMANDS`
(tests/cli/test_cli_root.py checks both halves). A mistyped command is refused in the registry's one
wording (``rlver: unknown command 'evl'; did you mean 'eval'? ...``, exit 2; see
:class:`~rlver.cli.plain_help.PlainGroup`).

Command functions import heavy libraries (torch, transformers) inside their bodies, so ``rlver --help``
stays fast. Errors derived from :class:`rlver.errors.RlverError` are printed as plain messages with
their exit code; anything else is a bug and shows a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, TextIO

import typer

from rlver import __version__
from rlver.cli.plain_help import plain_typer
from rlver.errors import EXIT_CODES_HELP, RlverError
from rlver.interrupt import exit_code as interrupt_exit_code
from rlver.interrupt import graceful_stop, stop_requested
from rlver.registry import Entry, Registry

#: Adds a module's commands (or its command group) to the root app.
Register = Callable[[typer.Typer], None]


def _module(name: str, description: str, module: str) -> Entry[Register]:
    """The line of one command module: its ``register`` function, imported when the app is built."""
    return Entry(name, description, f"rlver.cli.{module}:register")


#: Every module that adds commands to ``rlver``, in registration order. ``rlver --help`` lists the
#: single commands first and the command groups after them, each in this order.
COMMANDS: Registry[Register] = Registry(
    "command module",
    [
        _module("audit", "check a transcript's emotion arithmetic", "audit"),
        _module("calibrate", "the simulated user against released judgements", "calibrate"),
        _module("chat", "talk to a simulated user, or play the user", "chat"),
        _module("eval", "run the benchmark against simulated users", "eval_cmd"),
        _module("results", "score, report, judge: read finished runs", "results_cmd"),
        _module("explain", "what a run's settings mean", "explain_cmd"),
        _module("inspect", "read a transcript in the terminal", "inspect_cmd"),
        _module("probe", "the reward-hacking battery", "probe"),
        _module("train", "train, export: RL training and its weights", "train_cmd"),
        _module("demo", "train, evaluate, report in one go", "demo_cmd"),
        _module("data", "fetch the published profile files and code", "data"),
        _module("profiles", "list, show and validate user profiles", "profiles"),
        _module("config", "inspect configuration files", "config_cmd"),
        _module("models", "fetch a chat model, list what is here", "models"),
        _module("simulator", "the offline simulated user's learned appraisal", "simulator_cmd"),
    ],
)


def build_app(commands: Registry[Register] | None = None) -> typer.Typer:
    """The root app with the modules of ``commands`` (default :data:`COMMANDS`) registered in order."""
    root = plain_typer(
        name="rlver",
        help="Reinforcement learning with verifiable emotion rewards: train and benchmark chat models "
        "against simulated users.\n\nAny command takes --verbose to show the progress bars and notices "
        f"of transformers and huggingface_hub, which are hidden otherwise.\n\n{EXIT_CODES_HELP}",
        no_args_is_help=True,
    )
    root.callback()(_root)
    for _, register in (COMMANDS if commands is None else commands).items():
        register(root)
    _list_verbose_everywhere(root)
    return root


#: The help of ``--verbose``, which :func:`_quiet_third_party` acts on before the command line is parsed.
VERBOSE_HELP = "Show the progress bars and notices of transformers, huggingface_hub and tqdm."


def _list_verbose_everywhere(group: typer.Typer) -> None:
    """Give every command of ``group`` (and of its groups) a ``--verbose`` option, so that each
    command's --help lists the flag the root help promises.

    The flag does its work before parsing (:func:`_quiet_third_party` takes it out of ``argv`` and
    sets the libraries' switches, which they read once, at import); the option declared here is what
    --help shows and what a caller that skips :func:`main` (typer's CliRunner) may pass. Done here, once,
    rather than in each command's signature, so a new command gets it too.
    """
    for info in group.registered_commands:
        if info.callback is not None:
            info.callback = _with_verbose(info.callback)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _list_verbose_everywhere(sub.typer_instance)


def _with_verbose(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` with a ``--verbose`` option in its signature (typer reads options from it)."""
    signature = inspect.signature(callback, eval_str=True)
    if "verbose" in signature.parameters:
        return callback

    @functools.wraps(callback)
    def command(*args: Any, verbose: bool = False, **kwargs: Any) -> Any:
        return callback(*args, **kwargs)

    flag = inspect.Parameter(
        "verbose",
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(False, "--verbose", help=VERBOSE_HELP),
        annotation=bool,
    )
    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), flag]
    )
    command.__annotations__ = {**getattr(callback, "__annotations__", {}), "verbose": bool}
    return command


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"rlver {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
    verbose: bool = typer.Option(False, "--verbose", help=VERBOSE_HELP),
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
    ("Loading weights", "Writing model shards"), and every plain tqdm bar (``rlver models fetch``'s
    GGUF de-quantiser). Environment variables, because those libraries read them when first imported
    (tqdm reads ``TQDM_DISABLE`` once, at import), and the commands import them lazily."""
    cut = argv.index("--") if "--" in argv else len(argv)
    verbose = "--verbose" in argv[:cut]
    if verbose:
        argv = [a for i, a in enumerate(argv) if a != "--verbose" or i >= cut]
    else:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        os.environ.setdefault("TQDM_DISABLE", "1")
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
    with graceful_stop():
        try:
            _run(args)
        except SystemExit as done:
            if stop_requested.is_set():
                _leave_now(done.code)
            raise


def _leave_now(code: Any) -> None:
    """End a stopped command at once, skipping the interpreter's teardown.

    Why: after Ctrl-C or SIGTERM what finished is already on disk (dialogues are appended durably,
    checkpoints written atomically), but freeing a large run's objects one by one at exit took two
    minutes after the command had said it was stopping. The exit handlers still run (the tiny model's
    temporary folder is removed) and the output is flushed; the watchdog
    (:mod:`rlver.interrupt`) still guards this, as it is still inside ``graceful_stop``.
    """
    import atexit

    atexit._run_exitfuncs()  # what interpreter shutdown would run first, and nothing else
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else interrupt_exit_code())


def _run(args: Any) -> None:
    """The command, with every way it can end turned into an exit code and at most one error line."""
    try:
        # With standalone_mode=False click *returns* the code of a typer.Exit instead of raising it.
        rc = app(args=args, prog_name="rlver", standalone_mode=False)
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
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(interrupt_exit_code())
    except _PATH_ERRORS as exc:
        if exc.filename is None:
            raise
        print(f"error: {_path_error_line(exc)}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # a disk that refuses a write; usage errors: bad option values, unknown commands
        from rlver.cli.disk_errors import disk_error_line

        said = disk_error_line(exc, args)
        if said is not None:
            print(f"error: {said[0]}", file=sys.stderr)
            sys.exit(said[1])
        if not isinstance(exc, _click_exception_types()):
            raise
        if type(exc).__name__ == "NoArgsIsHelpError":  # `rlver`, `rlver data`: the help is the answer
            exc.show()  # type: ignore[attr-defined]
        else:
            print(f"error: {_usage_error_line(exc)}", file=sys.stderr)
        sys.exit(getattr(exc, "exit_code", 2))


def _usage_error_line(exc: Exception) -> str:
    """A parser's error (unknown option, missing argument, bad value) in rlver's one format:
    ``rlver eval: no such option: --foo (see rlver eval --help)``, one line, instead of click's
    ``Usage:`` block with its ``Error:`` line, so every refusal reads (and greps) the same."""
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "rlver"
    format_message = getattr(exc, "format_message", None)
    message = " ".join(str(format_message() if format_message else exc).split()).rstrip(".")
    return f"{command}: {message[:1].lower()}{message[1:]} (see {command} --help)"


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
