"""Per-step metrics to ``metrics.jsonl`` (one durable line per step) and to TensorBoard.

On resume the JSONL file is cut back to the checkpoint's step, so a run that crashed after logging
step 7 but before checkpointing it does not end up with two step-7 lines; TensorBoard gets
``purge_step`` for the same reason.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rlver.io import append_jsonl, atomic_write_text, iter_jsonl

METRICS_FILE = "metrics.jsonl"


class MetricsLogger:
    def __init__(self, out_dir: Path, *, tensorboard: bool = True, resume_step: int | None = None) -> None:
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

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        # JSON has no NaN/Infinity (rlver's writer refuses them): a non-finite value is logged as null.
        record = {
            "step": step,
            **{k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in metrics.items()},
        }
        append_jsonl(self.path, record)
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def read_metrics(out_dir: Path) -> list[dict[str, Any]]:
    path = out_dir / METRICS_FILE
    return [rec for _, rec in iter_jsonl(path)] if path.exists() else []
