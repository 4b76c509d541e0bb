"""Per-step metrics to ``metrics.jsonl`` (one durable line per step), to TensorBoard and, optionally,
to Weights & Biases.

On resume the JSONL file is cut back to the checkpoint's step, so a run that crashed after logging
step 7 but before checkpointing it does not end up with two step-7 lines; TensorBoard gets
``purge_step`` for the same reason. W&B keeps one run per run folder (its id is stored in
``wandb_run_id``) and is resumed with it; W&B ignores steps it has already seen, so steps redone after
a crash keep their first values there.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlver.errors import ConfigError
from rlver.io import append_jsonl, atomic_write_text, iter_jsonl
from rlver.transcripts.training import METRICS_FILE
from rlver.transcripts.training import read_metrics as read_metrics  # its home is below eval's report

WANDB_ID_FILE = "wandb_run_id"


def _numeric(metrics: dict[str, Any]) -> dict[str, float]:
    return {
        k: v
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


def start_wandb(out_dir: Path, settings: Any, config: dict[str, Any], *, resume: bool) -> Any:
    """Open the W&B run for ``out_dir`` (``settings``: :class:`rlver.train.config.WandbSettings`).

    ``config`` must already be redacted: it is uploaded as the run's config. Keys are never passed
    here: wandb reads ``WANDB_API_KEY`` or its own login. The command line and git metadata are
    not collected (they can hold credentials).
    """
    try:
        import wandb
    except ImportError:
        raise ConfigError(
            "run.wandb.enabled: the wandb package is not installed; pip install -e '.[wandb]' in the rlver checkout "
            "(or set run.wandb.enabled=false)"
        ) from None
    id_file = out_dir / WANDB_ID_FILE
    run_id = id_file.read_text(encoding="utf-8").strip() if resume and id_file.exists() else None
    if not run_id:
        import secrets

        run_id = secrets.token_hex(4)  # W&B ids: lower-case letters and digits
        atomic_write_text(id_file, run_id + "\n")
    return wandb.init(
        project=settings.project,
        entity=settings.entity,
        name=settings.name or out_dir.resolve().name,
        mode=settings.mode,
        dir=str(out_dir),
        id=run_id,
        resume="allow",
        config=config,
        reinit="create_new",
        # wandb's metadata records the command line, where a --set may hold a URL with a password,
        # and the git remote URL, which may hold a token; neither is sent.
        settings=wandb.Settings(x_disable_meta=True, disable_git=True, save_code=False),
    )


class MetricsLogger:
    def __init__(
        self,
        out_dir: Path,
        *,
        tensorboard: bool = True,
        resume_step: int | None = None,
        wandb: Any = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        """``wandb``: a :class:`~rlver.train.config.WandbSettings`; used when ``wandb.enabled``, with
        ``config`` (redacted) as the W&B run's config."""
        self.path = out_dir / METRICS_FILE
        if resume_step is not None and self.path.exists():
            kept = [rec for _, rec in iter_jsonl(self.path) if int(rec.get("step", 0)) <= resume_step]
            atomic_write_text(self.path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
        elif resume_step is None and self.path.exists():
            self.path.unlink()
        self._tb: Any = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = resume_step + 1 if resume_step is not None else None
            self._tb = SummaryWriter(log_dir=str(out_dir / "tensorboard"), purge_step=purge)
        self._wandb: Any = None
        if wandb is not None and wandb.enabled:
            self._wandb = start_wandb(out_dir, wandb, config or {}, resume=resume_step is not None)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        # JSON has no NaN/Infinity (rlver's writer refuses them): a non-finite value is logged as null.
        record = {
            "step": step,
            **{k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in metrics.items()},
        }
        append_jsonl(self.path, record)
        if self._tb is not None:
            for key, value in _numeric(metrics).items():
                self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(_numeric(metrics), step=step)

    def log_table(self, step: int, tag: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """A small table at ``step`` — sample replies, as TRL logs its completions: TensorBoard gets it
        as Markdown text (its TEXT tab), W&B as a ``wandb.Table``. metrics.jsonl stays numbers only
        (the dialogues themselves are in the run's transcript)."""
        if self._tb is not None:
            self._tb.add_text(tag, markdown_table(columns, rows), step)
            self._tb.flush()
        if self._wandb is not None:
            import wandb

            self._wandb.log(
                {tag: wandb.Table(columns=list(columns), data=[list(r) for r in rows])}, step=step
            )

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            run, self._wandb = self._wandb, None
            run.finish()


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table whose cells cannot break it: model text may hold pipes and newlines."""

    def cell(value: Any) -> str:
        text = f"{value:.3f}" if isinstance(value, float) else str(value)
        return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, columns)) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)
