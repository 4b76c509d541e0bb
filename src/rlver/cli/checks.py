"""The checks of flag values that several commands share, each in one place.

Why a module of its own: an output path, an endpoint URL, a key's variable and the run folder are
taken by several commands (``eval``, ``train``, ``chat``, ``judge``, ``probe``, ...), and a check
written into one of them did not protect the others (``--out ''`` wrote into the current folder,
``--agent-base-url notaurl`` spent five retries a dialogue, ``--agent-key-env NOT_SET`` ran without
a key). Each check here refuses with one ``ConfigError`` line (exit 2) that names the flag, before any
model is loaded or any folder made.

The first three are typer *parsers* (``typer.Option(..., parser=output_path("--out"))``): typer calls
them while it reads the command line, with the text typed (or a default that is not None), so the
command body never sees a bad value. A ``ConfigError`` raised there reaches ``rlver.cli.main`` as is.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from rlver.config import MAX_COUNT
from rlver.errors import ConfigError
from rlver.redaction import mask_secret_tokens, mask_secret_values


def output_path(flag: str, what: str = "folder") -> Callable[[str | Path], Path]:
    """A parser for a flag naming where to write: an empty (or blank) path is refused.

    ``Path("")`` is ``Path(".")``: an empty ``--out`` (an unset shell variable, ``--out "$RUN"``)
    silently meant the current folder, where the run's files then mixed with whatever was there.
    """

    def parse(value: str | Path) -> Path:
        if isinstance(value, str) and not value.strip():
            raise ConfigError(
                f"{flag} is empty: give the {what} to write to (an empty path would mean the current folder)"
            )
        return Path(value)

    return parse


def transcript_file(flag: str) -> Callable[[str | Path], Path]:
    """A parser for a flag naming where a dialogue's transcript goes (``chat --save``), checked before
    the dialogue starts: a dialogue just played must never be lost to a path that cannot be written.

    A folder means ``FOLDER/transcript.jsonl``, the file ``rlver inspect`` / ``audit`` read in a folder.
    Refused: an empty path, a path whose nearest existing parent is a file or not writable, and a path
    that exists but is not a file.
    """
    empty = output_path(flag, "file")

    def parse(value: str | Path) -> Path:
        from rlver.transcripts.files import TRANSCRIPT_NAME

        path = empty(value)
        if path.is_dir():
            path = path / TRANSCRIPT_NAME
        if path.exists() and not path.is_file():
            raise ConfigError(f"{flag} {path}: exists and is not a file; give a transcript file or a folder")
        parent = next(p for p in path.parents if p.exists())
        if not parent.is_dir():
            raise ConfigError(f"{flag} {path}: {parent} is a file, so nothing can be written below it")
        if not os.access(parent, os.W_OK):
            raise ConfigError(f"{flag} {path}: {parent} is not writable")
        return path

    return parse


def base_url(flag: str) -> Callable[[str], str]:
    """A parser for an endpoint flag: ``http(s)://host...`` only (the rule is
    :func:`rlver.llm.spec.check_base_url`, which config files go through too)."""

    def parse(value: str) -> str:
        from rlver.llm.spec import check_base_url

        try:
            return check_base_url(value) or value
        except ValueError as exc:
            shown = mask_secret_tokens(str(mask_secret_values(value)))
            raise ConfigError(f"{flag} {shown!r}: {exc}") from None

    return parse


def key_env(flag: str) -> Callable[[str], str]:
    """A parser for a flag naming the environment variable that holds a key.

    A named variable that is unset or empty is refused: the run used to go ahead with no key and
    fail every request with HTTP 401 (or, for a local server, hide the typo until a real endpoint).
    ``''`` (no key, for a local server that needs none) passes; leaving the flag out keeps each
    command's default, unchecked, since a local endpoint legitimately has no key. A value that is not
    a variable's name (a key pasted in its place) is left to :func:`rlver.llm.spec.check_key_env_name`,
    whose message never repeats it. No message here prints a key: only the variable's name.
    """

    def parse(value: str) -> str:
        from rlver.llm.spec import check_key_env_name

        try:
            check_key_env_name(value)
        except ValueError:
            return value  # refused later, naming the setting, without echoing what may be a key
        if value and not os.environ.get(value):
            name = mask_secret_tokens(value)
            raise ConfigError(
                f"{flag} {name}: the environment variable {name} is not set or is empty; put the key in "
                f"it (export {name}=...), or give {flag} '' for an endpoint that needs no key"
            )
        return value

    return parse


def endpoint_given(model_flag: str, model: str | None, url_flag: str, url: str | None) -> None:
    """Refuse a model named without the endpoint that serves it (exit 2, before any work): rlver has
    no default endpoint (:func:`rlver.llm.spec.no_endpoint`, the rule's one wording, which a config's
    model spec is checked against too). ``url`` is the flag's value or the config's."""
    if model and not url:
        from rlver.llm.spec import no_endpoint

        raise ConfigError(no_endpoint(f"{model_flag} {model!r}", url_flag))


def nothing_to_resume(out: Path) -> None:
    """Say, in one plain line, that ``--resume`` found no run in ``out`` and a new one starts.

    ``rlver eval --resume`` and ``rlver train --resume`` follow one rule: with nothing to resume they
    start a new run (so a script can always pass ``--resume``), and say so rather than silently.
    """
    typer.echo(f"nothing to resume in {out}: starting a new run", err=True)


def run_kind(folder: Path) -> str | None:
    """What kind of rlver run ``folder`` holds: ``train`` for a training run (``checkpoints/``, its
    ``config.yaml``, or a transcript whose manifest says ``train``), else its transcript's kind
    (``eval``, ``demo``, ``chat``; ``run`` when the manifest does not say); None for neither."""
    from rlver.errors import InputError
    from rlver.manifest import RunManifest

    if (folder / "checkpoints").is_dir() or (folder / "config.yaml").is_file():
        return "train"
    if not (folder / "transcript.jsonl").is_file():
        return None
    try:
        return RunManifest.read(folder).kind or "run"
    except InputError:
        return "run"


def refuse_other_run(out: Path, command: str) -> None:
    """Refuse an ``--out`` folder that holds the other kind of run: ``train`` into an ``rlver eval``
    folder, ``eval`` into a training run folder.

    Each kind's files were written beside the other's (a ``metrics.jsonl`` and a ``metrics.json``,
    ``config.yaml`` and ``config.json``, one ``transcript.jsonl`` for both): the command ended with
    exit 0, and neither run could be read on its own after that.
    """
    kind = run_kind(out) if out.is_dir() else None
    if kind is None:
        return
    if command == "train" and kind != "train":
        what = f"an rlver {kind} run" if kind != "run" else "a transcript"
        raise ConfigError(
            f"--out {out} holds {what} (transcript.jsonl), not a training run; give a new --out"
        )
    if command != "train" and kind == "train":
        raise ConfigError(
            f"--out {out} holds a training run (checkpoints/, config.yaml); give a new --out "
            f"(to evaluate that run's policy: --agent-local {out})"
        )


def field_max(model: Any, name: str) -> Any:
    """The upper bound (``le``) a config field declares: a flag that sets it takes the same range
    (``--max-assistant-turns 1000`` became a traceback from ``DialogueRules`` in ``rlver chat``)."""
    return next(m.le for m in model.model_fields[name].metadata if getattr(m, "le", None) is not None)


def _max_turns() -> int:
    from rlver.rules import DialogueRules

    return int(field_max(DialogueRules, "max_assistant_turns"))


def max_assistant_turns_option(help_text: str) -> Any:
    """``--max-assistant-turns N``: the turn limit spelled as every config spells it
    (``rules.max_assistant_turns``, through ``--set`` in ``eval`` and ``train``), in its range."""
    return typer.Option(None, "--max-assistant-turns", min=1, max=_max_turns(), help=help_text)


#: ``--max-turns``, the earlier spelling in ``chat`` and ``audit``: still read, left out of the help.
OLD_MAX_TURNS: Any = typer.Option(None, "--max-turns", min=1, max=_max_turns(), hidden=True)


def steps_option(help_text: str) -> Any:
    """``--steps N`` of ``train`` and ``demo``: ``run.steps``'s range (1 .. ``MAX_COUNT``), named as the
    flag (the training config itself is not imported here: ``rlver --help`` stays fast)."""
    return typer.Option(None, "--steps", min=1, max=MAX_COUNT, help=help_text)


def turn_limit(value: int | None, old: int | None) -> int | None:
    """The turn limit from ``--max-assistant-turns`` or its old spelling; both, differing, is refused."""
    if value is not None and old is not None and value != old:
        raise ConfigError(f"--max-assistant-turns {value} and --max-turns {old} disagree: give one")
    return value if value is not None else old


def finite(flag: str, *, positive: bool = False) -> Callable[[float | None], float | None]:
    """A typer *callback* for a float flag: inf and NaN refused (a ``min`` alone lets inf through,
    and a flag with no bound takes both), and with ``positive`` anything not above 0."""

    def check(value: float | None) -> float | None:
        if value is None:
            return value
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(f"{flag}: expected a finite number, got {value}")
        if positive and value <= 0:
            raise ConfigError(f"{flag}: expected a number > 0, got {value}")
        return value

    return check


def temperature_option(default: float, help_text: str) -> Any:
    """``--temperature`` of a command that samples a model (chat, judge, profiles generate): a finite
    number from 0, refused while the command line is read."""
    return typer.Option(default, "--temperature", min=0.0, callback=finite("--temperature"), help=help_text)


def seed_option(default: int | None, help_text: str) -> Any:
    """``--seed``: an integer from 0 to :data:`rlver.seeding.MAX_SEED` (what numpy's seeding takes),
    refused while the command line is read, as every seed setting of a config is."""
    from rlver.seeding import MAX_SEED

    return typer.Option(default, "--seed", min=0, max=MAX_SEED, help=help_text)
