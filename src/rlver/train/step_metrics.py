"""What a step's dialogues came to, for the log and for the run's stop rules: rewards, outcomes and
failures of the rollout (``rollout/*`` metrics), and the held-out evaluation's summary (``eval/*``).

Kept beside the trainer, not in it: these read finished episodes only, never a model.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from rlver.records import Episode
from rlver.rollout.outcomes import outcomes
from rlver.train.learner import TrainError

log = logging.getLogger(__name__)


def failures_by_kind(episodes: list[Episode]) -> dict[str, int]:
    """How many dialogues failed, by ``Episode.error_kind`` (sorted, for a stable log line)."""
    counts: dict[str, int] = {}
    for ep in episodes:
        if ep.status != "finished":
            kind = ep.error_kind or "unknown"
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def warn_failures(step: int, episodes: list[Episode]) -> None:
    """Say why dialogues failed (first error of each kind): a count alone does not tell what to fix."""
    first: dict[str, str] = {}
    for ep in episodes:
        if ep.status != "finished":
            first.setdefault(ep.error_kind or "unknown", (ep.error or "no error recorded")[:300])
    if first:
        failed = failures_by_kind(episodes)
        log.warning(
            "step %d: %d of %d dialogues failed and were left out of the update: %s",
            step,
            sum(failed.values()),
            len(episodes),
            "; ".join(f"{kind} x{failed[kind]} (first: {msg})" for kind, msg in first.items()),
        )


#: The sampling-vs-trainer log-prob gap past which a step warns that the trainer is not scoring what
#: the sampler sampled: which metric, and its line, by the precision the model computes in.
#: fp32: every token agrees to rounding (max 9.5e-7 on the tiny model, 1.7e-5 on SmolLM2-135M), so a
#: single token 1e-3 off means another model sampled (the tiny model with its rotary ``inv_freq`` lost:
#: max 3e-3 to 8e-3 a step while the mean stayed near 1e-3). bf16: the KV-cache decode and the
#: trainer's one forward round differently, single tokens by up to 0.2, so the mean is read, 0.040-0.045
#: a token on SmolLM2-135M (docs/sampling.md, "bf16: the gap that is left"); the line is about twice that.
LOGPROB_GAP_WARN: dict[str, tuple[str, float]] = {
    "float32": ("rollout/logprob_diff_max", 1e-3),
    "bfloat16": ("rollout/logprob_diff_mean", 0.1),
}


def warn_logprob_gap(step: int, metrics: dict[str, Any], dtype: str) -> bool:
    """Warn once a step when the sampling-vs-trainer log-prob gap passes :data:`LOGPROB_GAP_WARN` for
    ``dtype`` (``model.dtype``); returns whether it warned."""
    key, limit = LOGPROB_GAP_WARN[dtype]
    gap = metrics.get(key)
    if gap is None or gap <= limit:
        return False
    log.warning(
        "step %d: the rollout log-prob gap %s is %.3g nats, above %g for model.dtype=%s: the trainer is "
        "not scoring the model that sampled. Check that the rollout backend's engine loads every weight "
        "on sync and keeps its buffers (rotary inv_freq) and tied weights through release and resume",
        step,
        key,
        gap,
        limit,
        dtype,
    )
    return True


def stop_if_too_many_failed(step: int, episodes: list[Episode], max_share: float) -> None:
    """Stop the run when more than ``max_share`` of a step's dialogues failed (the SAGE benchmark
    retries until it has a judgement; an update over the survivors would quietly change what is
    trained). The checkpoint before this step is intact, so ``--resume`` repeats the step."""
    failed = failures_by_kind(episodes)
    n_failed = sum(failed.values())
    if episodes and n_failed / len(episodes) > max_share:
        first = next((ep.error or "" for ep in episodes if ep.status != "finished" and ep.error), "")
        kinds = ", ".join(f"{kind} x{n}" for kind, n in failed.items())
        raise TrainError(
            f"step {step}: {n_failed} of {len(episodes)} dialogues failed ({kinds}; first: {first}), "
            f"more than rollout.max_failed_share={max_share}; fix the cause and rerun with --resume, "
            "or raise rollout.max_failed_share"
        )


def rollout_metrics(episodes: list[Episode], finished: list[Episode]) -> dict[str, Any]:
    """Reward, emotion, outcomes, turns and reply length of one step's dialogues."""
    done = outcomes(finished)
    # scored once, by the runner (``Episode.reward``, from ``rollout.reward``)
    rewards = [ep.reward for ep in finished if ep.reward is not None]
    turns = [ep.assistant_turns for ep in finished]
    return {
        "rollout/dialogues": len(episodes),
        "rollout/failed": len(episodes) - len(finished),
        # by rlver.errors kind (timeout, rate_limit, appraisal_parse, ...): an outage vs a bad prompt
        "rollout/failed_by_kind": failures_by_kind(episodes),
        "rollout/reward_mean": float(np.mean(rewards)) if rewards else 0.0,
        "rollout/reward_std": float(np.std(rewards)) if rewards else 0.0,
        "rollout/emotion_final_mean": float(np.mean([ep.final_emotion for ep in finished]))
        if finished
        else 0.0,
        "rollout/success_rate": done.success_rate,
        "rollout/failure_rate": done.failure_rate,
        "rollout/turns_mean": float(np.mean(turns)) if turns else 0.0,
        "rollout/response_tokens_mean": sum(ep.policy_tokens for ep in finished) / max(sum(turns), 1),
        "rollout/format_error_rate": sum(ep.format_errors for ep in finished) / max(sum(turns), 1),
    }


def summarise_eval(episodes: list[Episode]) -> dict[str, float | None]:
    """The benchmark's numbers on the held-out profiles (score = mean final emotion), counted by
    ``rlver.rollout.outcomes`` as ``rlver eval``'s metrics are: where no dialogue finished there is no
    score (``None``, logged as null, as ``rlver eval``'s metrics.json has it), not a 0 the report
    would draw beside ``eval/failed``."""
    out = outcomes(episodes)
    return {
        "score": float(out.score) if out.score is not None else None,
        "success_rate": out.success_rate,
        "failure_rate": out.failure_rate,
        "reward_mean": float(np.mean([ep.reward or 0.0 for ep in out.done])) if out.done else None,
        "turns_mean": out.mean_turns,
        "failed": float(len(out.failed)),
    }
