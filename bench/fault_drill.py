"""The fault drill: one evaluation and one training step per fault kind, as a reliability table.

``python bench/fault_drill.py`` prints the table in ``docs/reliability.md``: for every kind of
:data:`~rlver.testing.faults.FAULT_KINDS`, a real local server (``FakeChatServer``) follows a
:class:`~rlver.testing.faults.FaultPlan` while an evaluation (6 profiles x 3 turns) and a training step
of the tiny GRPO policy (4 profiles x 2 samples x 2 turns) run against it. About a minute on two CPU
cores. ``tests/test_faults.py`` asserts the same steps with the configs built here.

It lives in ``bench/``, not in ``rlver.testing``, because it builds evaluation and training runs: the
testing harness sits below ``train`` and ``eval`` in the import layers and must not import them.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rlver.eval.config import EvalConfig
from rlver.eval.runner import run_eval_async
from rlver.testing.faults import (
    EXPECTED_ERROR_KIND,
    FAULT_KINDS,
    POLICY_MODEL,
    SIMULATOR_MODEL,
    FaultPlan,
    fixed_responder,
    model_spec_dict,
    write_fault_profiles,
)
from rlver.testing.openai_server import FakeChatServer
from rlver.train.config import TrainConfig


def eval_config(
    server_url: str, profiles: Path, out: Path, *, turns: int = 3, report: bool = False
) -> EvalConfig:
    """An EvalConfig: the agent and the LLM simulator both on the local server."""
    return EvalConfig.model_validate(
        {
            "agent": model_spec_dict(server_url, POLICY_MODEL),
            "simulator": {
                "kind": "llm",
                "model": model_spec_dict(server_url, SIMULATOR_MODEL),
                "cache": None,
            },
            "profiles": str(profiles),
            "env": {"rules": {"max_assistant_turns": turns}},  # the benchmark's rules, shortened
            "out": str(out),
            "report": report,
        }
    )


def train_config(server_url: str, profiles: Path, *, turns: int = 2) -> TrainConfig:
    """A TrainConfig: the tiny local policy (GRPO) against the LLM simulator on the local server.

    ``batch_size`` = the 4 profiles (x 2 dialogues each), so every step runs every profile (victims and others).
    """
    return TrainConfig.model_validate(
        {
            "model": {"path": "tiny", "device": "cpu", "max_length": 1024, "generation_batch_size": 16},
            "algorithm": {"name": "grpo"},
            "update": {"micro_batch_tokens": 8192},
            "optim": {"actor_lr": 1e-3},
            "rollout": {
                "profiles": str(profiles),
                "batch_size": 4,
                "n_per_profile": 2,
                "rules": {"max_assistant_turns": turns},
                "max_new_tokens": 8,
                "simulator_concurrency": 16,
            },
            "simulator": {
                "kind": "llm",
                "model": model_spec_dict(server_url, SIMULATOR_MODEL),
                "cache": None,
            },
            "eval": {"profiles": str(profiles), "limit": 1},
            "run": {"steps": 1000, "checkpoint_every": 0, "tensorboard": False, "progress": False},
        }
    )


@dataclass
class Row:
    """One line of the reliability table."""

    kind: str
    run: str  # "eval" or "train step"
    requests: int
    injected_victim: int
    injected_transient: int
    dialogues: int
    finished: int
    failed: int
    failed_by_kind: dict[str, int]
    wall_s: float

    @property
    def injected(self) -> int:
        return self.injected_victim + self.injected_transient

    @property
    def survived(self) -> bool:
        expected = EXPECTED_ERROR_KIND[self.kind]
        return self.failed > 0 and set(self.failed_by_kind) == {expected}


def table_markdown(rows: list[Row]) -> str:
    head = (
        "| fault | run | requests | faults injected | transient, recovered | victim dialogues failed "
        "(recorded kind) | other dialogues finished | run finished | wall s |\n"
        "| --- | --- | ---: | ---: | ---: | --- | ---: | --- | ---: |\n"
    )
    lines = []
    for r in rows:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r.failed_by_kind.items())) or "-"
        # transient faults hit only non-victim dialogues: they recovered iff all of those finished
        recovered = r.injected_transient if r.finished == r.dialogues - r.failed else 0
        lines.append(
            f"| {r.kind} | {r.run} | {r.requests} | {r.injected} | {recovered} of {r.injected_transient} | "
            f"{r.failed} ({kinds}) | {r.finished} of {r.dialogues - r.failed} | "
            f"{'yes' if r.survived else 'NO'} | {r.wall_s:.1f} |"
        )
    return head + "\n".join(lines) + "\n"


def eval_rows(server: FakeChatServer, root: Path) -> list[Row]:
    """One evaluation of 6 profiles (2 victims) x 3 turns per fault kind."""
    rows = []
    profiles = write_fault_profiles(root / "profiles.jsonl")
    for kind in FAULT_KINDS:
        plan = FaultPlan(kind).install(server)
        t0 = time.perf_counter()
        result = asyncio.run(run_eval_async(eval_config(server.url, profiles, root / f"eval-{kind}")))
        m = result.metrics
        rows.append(
            Row(kind, "eval", plan.requests, plan.injected_victim, plan.injected_transient,
                m.n + m.n_failed_runs, m.n, m.n_failed_runs, m.failed_run_kinds,
                time.perf_counter() - t0)
        )  # fmt: skip
    return rows


def train_rows(server: FakeChatServer, root: Path) -> list[Row]:
    """One training step per fault kind: 4 profiles (2 victims) x 2 samples, so every step runs every profile."""
    import torch  # here, not at the top: the tests import this module for its configs only

    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    server.fault_for = None  # no faults while the trainer starts
    server.responder = fixed_responder
    profiles = write_fault_profiles(root / "train-profiles.jsonl", n=4, victims=(0, 2))
    trainer = Trainer(train_config(server.url, profiles), root / "train")
    rows = []
    try:
        for kind in FAULT_KINDS:
            plan = FaultPlan(kind).install(server)
            t0 = time.perf_counter()
            metrics = trainer.train_step()
            rows.append(
                Row(kind, "train step", plan.requests, plan.injected_victim, plan.injected_transient,
                    metrics["rollout/dialogues"], metrics["rollout/dialogues"] - metrics["rollout/failed"],
                    metrics["rollout/failed"], metrics["rollout/failed_by_kind"], time.perf_counter() - t0)
            )  # fmt: skip
    finally:
        trainer.logger.close()
    return rows


def main() -> None:
    """Print the reliability table: one evaluation and one training step per fault kind."""
    with tempfile.TemporaryDirectory() as tmp, FakeChatServer(fixed_responder) as server:
        root = Path(tmp)
        rows = eval_rows(server, root) + train_rows(server, root)
    print(table_markdown(rows))


if __name__ == "__main__":
    main()
