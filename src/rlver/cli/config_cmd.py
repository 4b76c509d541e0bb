"""`rlver config show`: print a resolved configuration (file + ``--set`` overrides) with secrets masked.

The eval and train config models belong to their own packages (``rlver.eval.config.EvalConfig``,
``rlver.train.config.TrainConfig``); they are imported inside the command so ``rlver --help`` stays fast.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import BaseModel

from rlver.config import load_config, redacted
from rlver.errors import ConfigError

app = typer.Typer(no_args_is_help=True, help="Inspect configuration files.")

#: Values that look like credentials whatever their key is called (OpenAI/HF/GitHub/Slack-style tokens).
_SECRET_VALUE = re.compile(r"^(?:sk|pk|rk|hf|ghp|gho|github_pat|xox[abp])[-_][A-Za-z0-9_\-]{16,}$")
#: ``scheme://user:password@host`` — keep the user, mask the password.
_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.\-]*://[^/:@\s]+:)[^/@\s]+(@)", re.IGNORECASE)

_TRAIN_ONLY_KEYS = {"model", "algorithm", "optim", "rollout", "run"}
_EVAL_ONLY_KEYS = {"agent", "agent_tiny", "profiles", "limit", "n_per_profile", "env", "out", "report"}


def mask_secret_values(obj: Any) -> Any:
    """Mask credential-looking *values* (``sk-...`` tokens, passwords in URLs) anywhere in a dump."""
    if isinstance(obj, dict):
        return {k: mask_secret_values(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [mask_secret_values(v) for v in obj]
    if isinstance(obj, str):
        if _SECRET_VALUE.match(obj.strip()):
            return "***"
        return _URL_PASSWORD.sub(r"\1***\2", obj)
    return obj


def render_config(
    model: type[BaseModel] | BaseModel, path: str | Path | None = None, overrides: list[str] | None = None
) -> str:
    """Load ``model`` from ``path`` + ``overrides`` (or take a built instance) and dump it as redacted YAML."""
    config = model if isinstance(model, BaseModel) else load_config(model, path, overrides or [])
    data = mask_secret_values(redacted(config.model_dump(mode="json")))
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


def _guess_kind(path: str | None) -> str:
    """``train`` when the file (or preset name) looks like a training config, else ``eval``."""
    if path is None:
        return "eval"
    p = Path(path)
    if not p.exists():
        return "train"  # not a file: only training has named presets
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError, yaml.YAMLError):  # ValueError: bad UTF-8, huge ints
        return "eval"  # load_config reports the problem with the file's name
    keys = set(data) if isinstance(data, dict) else set()
    if keys & _TRAIN_ONLY_KEYS and not keys & _EVAL_ONLY_KEYS:
        return "train"
    return "eval"


def _load(kind: str, path: str | None, overrides: list[str]) -> BaseModel:
    if kind == "train":
        try:
            from rlver.train.config import load_train_config
        except ImportError as exc:
            raise ConfigError(f"training configs are not available in this install ({exc})") from None
        return load_train_config(path, overrides)
    try:
        from rlver.eval.config import EvalConfig
    except ImportError as exc:
        raise ConfigError(f"evaluation configs are not available in this install ({exc})") from None
    return load_config(EvalConfig, path, overrides)


@app.command("show")
def show_cmd(
    file: str | None = typer.Argument(None, help="A YAML config file (or a training preset name)."),
    overrides: list[str] = typer.Option(
        [], "--set", help="Override a key: --set agent.model=gpt-4o (repeatable)."
    ),
    kind: str | None = typer.Option(
        None, "--kind", help="eval or train (default: guessed from the file's top-level keys)."
    ),
) -> None:
    """Print the resolved configuration as YAML, with secrets shown as ***."""
    chosen = kind or _guess_kind(file)
    if chosen not in ("eval", "train"):
        raise ConfigError(f"--kind {chosen!r}: expected eval or train")
    config = _load(chosen, file, overrides)
    typer.echo(f"# {chosen} config" + (f" from {file}" if file else " (defaults)"))
    typer.echo(render_config(config), nl=False)
