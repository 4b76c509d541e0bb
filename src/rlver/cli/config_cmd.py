"""`rlver config show`: print a resolved configuration (file + ``--set`` overrides) with secrets masked.

The eval and train config models belong to their own packages (``rlver.eval.config.EvalConfig``,
``rlver.train.config.TrainConfig``); they are imported inside the command so ``rlver --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import BaseModel

from rlver.cli.plain_help import add_group
from rlver.config import load_config
from rlver.errors import ConfigError
from rlver.redaction import mask_secret_values, redacted

_TRAIN_ONLY_KEYS = {"model", "algorithm", "update", "optim", "rollout", "run"}
_EVAL_ONLY_KEYS = {"agent", "agent_tiny", "profiles", "limit", "n_per_profile", "env", "out", "report"}


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
    header = f"# {chosen} config" + (f" from {file}" if file else " (defaults)")
    if (
        file is None
        and chosen == "eval"
        and not any(o.split("=")[0].strip().startswith("agent") for o in overrides)
    ):
        # An eval config is invalid without an agent; show the defaults with the tiny one and say so.
        overrides = [*overrides, "agent_tiny=true"]
        header += (
            "\n# an evaluation needs an agent: shown with agent_tiny: true; pass a config file, or e.g."
            "\n#   --set agent.kind=openai --set agent.model=NAME --set agent.base_url=URL"
            "\n# training defaults: rlver config show --kind train (or a preset: rlver config show tiny-offline)"
        )
    config = _load(chosen, file, overrides)
    typer.echo(header)
    typer.echo(render_config(config), nl=False)
    rollout = getattr(config, "rollout", None)
    if rollout is not None:
        typer.echo(_prompt_note(rollout))


def _prompt_note(rollout: Any) -> str:
    """A comment naming the policy's prompt and its SHA-256 per language, as a run's manifest does."""
    import hashlib

    from rlver.env.thinking import PUBLISHED_AGENT_PROMPT_FILES, system_prompt
    from rlver.profiles.published_code import PUBLISHED_CODE

    settings = rollout.prompt_settings()
    mode = "think" if rollout.think else "no think"
    fetched = PUBLISHED_AGENT_PROMPT_FILES.get(settings.get("agent_prompt", ""))
    if fetched is not None:  # the published text: named by its file's pinned sha256 (read at run time)
        pinned = PUBLISHED_CODE[fetched].sha256[:16]
        return (
            f"# policy prompt: {rollout.agent_prompt} ({mode}); from the fetched {fetched}, sha256 {pinned}"
        )
    if "system_prompt" in settings:
        texts = {"file": settings["system_prompt"]}
    else:
        texts = {lang: system_prompt(rollout.think, lang, settings["agent_prompt"]) for lang in ("en", "zh")}
    digests = ", ".join(f"{k} {hashlib.sha256(v.encode()).hexdigest()[:16]}" for k, v in texts.items())
    return f"# policy prompt: {rollout.agent_prompt} ({mode}); sha256 {digests}"


def register(app: typer.Typer) -> None:
    """Add the ``config`` command group to the root app."""
    add_group(app, "config", "Inspect configuration files.", {"show": show_cmd})
