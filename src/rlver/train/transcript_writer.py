"""A training run's dialogues, kept: ``transcript.jsonl`` in the run folder and sample replies in the logs.

Why: a reward curve says *that* the policy changed, only its dialogues say *what* it learned (a kinder
reply, or a phrase the simulated user over-rewards). So each step's rollouts (every ``run.transcript_every``
steps) are appended to the run folder's ``transcript.jsonl`` in the very record format ``rlver eval``
writes — a manifest with ``kind: train``, then one episode a line, each tagged with ``meta.step`` and
``meta.row`` (:mod:`rlver.transcripts.training`) — so ``rlver inspect/audit/score/report RUN`` read a
training run like an evaluation.

Crash safety: one step's records go in one ``write`` + fsync (:func:`rlver.io.append_jsonl_many`), so
a crash leaves whole steps plus at most one torn line; ``--resume`` cuts the file back to the
checkpoint's step (:func:`~rlver.transcripts.training.keep_through_step`), dropping the torn line and
the steps that will be sampled again, so a resumed run's transcript equals an uninterrupted one's.

Nothing here touches a random generator, the episodes the update trains on, or their order: the
records are copies, and the sample rows are the first dialogues of the step, not a random pick.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlver.env.thinking import split_think
from rlver.io import append_jsonl_many
from rlver.manifest import RunManifest
from rlver.records import Episode
from rlver.redaction import mask_secret_values, redacted
from rlver.rules import protocol_label
from rlver.train.config import TrainConfig
from rlver.train.published_run import published_run
from rlver.transcripts.files import TRANSCRIPT_NAME
from rlver.transcripts.native import episode_record
from rlver.transcripts.training import at_step, keep_through_step

#: Rows of the sample-reply table, and the characters of a reply shown in it.
REPLY_ROWS = 4
REPLY_CHARS = 300
REPLY_COLUMNS = ("profile", "reply", "reward")
REPLY_TAG = "samples/replies"


def training_manifest(
    cfg: TrainConfig,
    out: Path,
    *,
    agent: dict[str, Any],
    sampling: dict[str, Any],
    simulator: dict[str, Any],
    reply_cut: bool = True,
) -> RunManifest:
    """Line 1 of a training transcript: the policy, the simulated user, the training dialogue's rules
    and reward, the reply layout (``reply_cut``: whether the simulator's view of a reply is cut at
    ``max_reply_chars``), how the run differs from the published preset (``published_run``), and
    (``held_out``) how the held-out score in metrics.jsonl was measured."""
    held_out_env = cfg.env_config(evaluation=True)
    held_out_simulator = cfg.eval_simulator()  # its protocol is named (the LLM user has one)
    e = cfg.eval
    return RunManifest.create(
        kind="train",
        run_name=out.resolve().name,
        agent={**agent, "model": cfg.model.path},
        agent_spec={"kind": "local", "model": cfg.model.path},
        agent_sampling=sampling,
        simulator=simulator,
        simulator_spec=mask_secret_values(redacted(cfg.simulator.model_dump(mode="json"))),
        env=cfg.env_config(),
        reward=cfg.rollout.reward,
        dialogue=protocol_label(cfg.env_config().rules, "training"),
        profiles=cfg.rollout.profiles,
        n_per_profile=cfg.rollout.n_per_profile,
        seed=cfg.run.seed,
        steps=cfg.run.steps,
        algorithm=cfg.algorithm.name,
        # truncated importance sampling: which weights multiplied the policy loss (null: none)
        rollout_is={"level": cfg.algorithm.rollout_is, "threshold": cfg.algorithm.rollout_is_threshold},
        transcript_every=cfg.run.transcript_every,
        reply_layout=cfg.env_config().reply_layout(cut=reply_cut),
        published_run=published_run(cfg),
        held_out={
            "profiles": e.profiles,
            "dialogue": protocol_label(held_out_env.rules, e.dialogue),
            "simulator": held_out_simulator.kind,
            "simulator_prompts": getattr(getattr(held_out_simulator, "prompts", None), "name", None),
            "agent_prompt": held_out_env.agent_prompt if held_out_env.system_prompt is None else "custom",
            "think": held_out_env.think,
            "limit": e.limit,
            "samples_per_profile": e.samples_per_profile,
            "temperature": e.temperature,
            "seed": e.seed,
            "every": e.every,
            "at_start": e.at_start,
        },
        requests=_simulator_requests(cfg),
    )


def _simulator_requests(cfg: TrainConfig) -> dict[str, Any]:
    """What the simulator's request bodies carried of the sampling fields (``"server default"`` for a
    field left out, as the published ``call_api`` sends none), as ``rlver eval``'s manifest records
    them; the policy is local and sends no request."""
    sampling = getattr(cfg.simulator, "sampling", None)
    model = getattr(cfg.simulator, "model", None)
    if sampling is None or getattr(model, "kind", None) != "openai":
        return {}
    return {"simulator": sampling.sent()}


class TrainingTranscript:
    """Appends each due step's dialogues to ``out/transcript.jsonl``; cut back on resume.

    ``resume_step``: the checkpoint's step when resuming (records of later steps are dropped), None
    for a new run (a transcript left by an earlier, checkpoint-less attempt is removed, as the
    trainer's metrics logger does with metrics.jsonl).
    """

    def __init__(self, out: Path, manifest: RunManifest, *, every: int, resume_step: int | None) -> None:
        self.path = out / TRANSCRIPT_NAME
        self.manifest = manifest
        self.every = every
        if resume_step is None:
            self.path.unlink(missing_ok=True)
        elif self.path.exists():
            keep_through_step(self.path, resume_step)

    def due(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def record(self, step: int, episodes: list[Episode]) -> None:
        """Append ``step``'s dialogues (failed ones too: their errors are worth reading) in one write."""
        if not self.due(step):
            return
        records = [episode_record(at_step(ep, step, row)) for row, ep in enumerate(episodes)]
        if not self.path.exists() or self.path.stat().st_size == 0:
            records.insert(0, self.manifest.to_json())  # a new file, or one a resume left empty
        append_jsonl_many(self.path, records)


def reply_rows(episodes: list[Episode], limit: int = REPLY_ROWS) -> list[tuple[str, str, float]]:
    """``(profile, first reply as the user saw it, reward)`` of the step's first finished dialogues,
    one per user: a fixed choice (no random pick), so the logs are the same on every re-run."""
    rows: list[tuple[str, str, float]] = []
    seen: set[str] = set()
    for ep in episodes:
        reply = next((m.content for m in ep.messages if m.role == "assistant"), None)
        if ep.status != "finished" or reply is None or ep.profile_id in seen:
            continue
        seen.add(ep.profile_id)
        text = split_think(reply).visible.strip()
        text = text if len(text) <= REPLY_CHARS else text[: REPLY_CHARS - 1] + "…"
        rows.append((ep.profile_id, text, float(ep.reward or 0.0)))
        if len(rows) == limit:
            break
    return rows
