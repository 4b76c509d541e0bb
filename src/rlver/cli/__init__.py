"""The ``rlver`` command.

Each command group lives in its own module and imports heavy libraries (torch, transformers) inside the
command functions, so ``rlver --help`` stays fast. Errors derived from :class:`rlver.errors.RlverError`
are printed as plain messages with their exit code; anything else is a bug and shows a traceback.
"""

from __future__ import annotations

import sys

import typer

from rlver import __version__
from rlver.cli import (
    audit,
    calibrate,
    chat,
    config_cmd,
    data,
    eval_cmd,
    inspect_cmd,
    models,
    probe,
    profiles,
    simulator_cmd,
    train_cmd,
)
from rlver.errors import RlverError

app = typer.Typer(
    name="rlver",
    help="Reinforcement learning with verifiable emotion rewards: train and benchmark chat models "
    "against simulated users.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.add_typer(data.app, name="data")
app.add_typer(profiles.app, name="profiles")
app.add_typer(config_cmd.app, name="config")
app.add_typer(models.app, name="models")
for module in (audit, calibrate, chat, eval_cmd, inspect_cmd, probe, train_cmd):
    module.register(app)
simulator_cmd.register(app)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"rlver {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
) -> None:
    """rlver: RL with verifiable emotion rewards."""


def main() -> None:
    """Console-script entry point: run the app, turning RlverError into a clean message."""
    try:
        # With standalone_mode=False click *returns* the code of a typer.Exit instead of raising it.
        rc = app(standalone_mode=False)
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
