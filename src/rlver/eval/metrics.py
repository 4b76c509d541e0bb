"""Benchmark metrics computed from episodes: the Sentient Benchmark's score, success and failure.

Definitions (they reproduce the public leaderboard exactly from its released transcripts):

- **score**: the mean final emotion (0–100) over the dialogues that finished;
- **success**: dialogues whose final emotion is ≥ 100; **failure**: dialogues whose final emotion is < 10
  (``Episode.succeeded`` / ``Episode.failed_low``; counted by ``rlver.rollout.outcomes``, which the
  trainer's summaries share);
- **failed runs** (``status == "failed"``: an API error, an unparseable simulator turn) are *excluded*
  from the score and reported separately, so an outage never looks like a bad model.

Beyond the leaderboard numbers we report the mean number of assistant turns, the mean emotion after each
turn (a trajectory), tokens per dialogue, a bootstrap 95% confidence interval of the score, and
per-behaviour / per-difficulty breakdowns. :func:`paired_comparison` compares two runs on the same
profiles, which is far more sensitive than comparing two independent means.

Rounding follows the leaderboard: scores are shown with one decimal, rounded half up
(:func:`round_half_up`), never with Python's binary-float ``round``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from rlver.records import Episode
from rlver.rollout.outcomes import Outcomes, outcomes
from rlver.stats import BOOTSTRAP_SEED, bootstrap_ci

#: ``Episode.meta`` keys that get their own breakdown table when episodes carry them.
BREAKDOWN_KEYS = ("behaviour", "difficulty")


def round_half_up(value: float | Fraction, digits: int = 1) -> float:
    """Round like the leaderboard does (54.75 → 54.8, 54.85 → 54.9), exact for means of integers."""
    dec = (
        Decimal(value.numerator) / Decimal(value.denominator)
        if isinstance(value, Fraction)
        else Decimal(repr(value))
    )
    quantum = Decimal(1).scaleb(-digits)
    return float(dec.quantize(quantum, rounding=ROUND_HALF_UP))


def emotion_path(episode: Episode) -> list[int]:
    """The emotion at the start and after each appraisal, in order.

    Uses ``Episode.emotions`` when filled, else the appraisals of the user turns (the two agree for
    episodes written by our runner; converted published transcripts may carry only one of them).
    """
    after = list(episode.emotions)
    if not after:
        after = [t.appraisal.emotion_after for t in episode.user_turns if t.appraisal is not None]
    return [episode.start_emotion, *after]


class GroupMetrics(BaseModel):
    """The leaderboard numbers for one slice of the episodes (a behaviour mode, a difficulty)."""

    n: int
    score: float
    success: int
    success_pct: float
    failure: int
    failure_pct: float


class Metrics(BaseModel):
    """Everything ``rlver score`` and the report show for one run."""

    n: int = Field(description="dialogues counted in the score (status finished)")
    n_failed_runs: int = Field(0, description="dialogues that failed (API/simulator errors); excluded")
    #: The same count under the name the report and metrics.json readers look for.
    failed: int = Field(0, description="dialogues that failed (= n_failed_runs)")
    #: The dialogues the run set out to score (profiles x n_per_profile), when known.
    expected: int | None = Field(None, description="dialogues the run was meant to score, when known")
    #: ``False`` when the score covers fewer dialogues than the run meant to score (failed or missing
    #: ones): such a score is *partial* and is labelled so wherever it is printed. SAGE retried until
    #: every dialogue had a judgement, so its scores are never partial.
    complete: bool = Field(True, description="the score covers every dialogue of the run")
    failed_run_kinds: dict[str, int] = Field(default_factory=dict)
    #: ``None`` (JSON ``null``) when no dialogue finished: there is no score, and 0.0 would read as one.
    score: float | None = Field(description="mean final emotion over counted dialogues (unrounded)")
    score_rounded: float | None = Field(description="score rounded half up to one decimal, as published")
    score_ci_low: float | None
    score_ci_high: float | None
    score_std: float
    success: int
    success_pct: float
    failure: int
    failure_pct: float
    mean_turns: float = Field(description="mean number of assistant replies per dialogue")
    #: Mean emotion at turn t (t = 0 is the start emotion, t = k after the k-th appraisal). A dialogue
    #: that ended earlier contributes its final emotion to every later turn ("carried forward"), so the
    #: curve's last point equals the score and early-ending dialogues are not silently dropped.
    trajectory: list[float] = Field(default_factory=list)
    trajectory_std: list[float] = Field(default_factory=list)
    trajectory_p25: list[float] = Field(default_factory=list)
    trajectory_p75: list[float] = Field(default_factory=list)
    #: How many dialogues were still running at each turn (the rest are carried forward).
    trajectory_live: list[int] = Field(default_factory=list)
    mean_policy_tokens: float = 0.0
    mean_simulator_tokens: float = 0.0
    #: The simulator's input / output tokens per dialogue, and input tokens per appraised turn.
    mean_simulator_prompt_tokens: float = 0.0
    mean_simulator_completion_tokens: float = 0.0
    mean_simulator_prompt_tokens_per_turn: float = 0.0
    format_errors: int = 0
    #: Agent replies cut at the agent's token cap, over the counted dialogues (SAGE set no cap).
    truncated_replies: int = 0
    #: Simulator calls cut at the simulator's token cap (each is re-asked once), counted dialogues.
    simulator_truncated_calls: int = 0
    end_reasons: dict[str, int] = Field(default_factory=dict)
    final_emotions: list[int] = Field(default_factory=list, description="per counted dialogue, in order")
    breakdowns: dict[str, dict[str, GroupMetrics]] = Field(default_factory=dict)

    def headline(self) -> str:
        if self.score_rounded is None:
            return f"no score: no dialogue finished ({self.n_failed_runs} failed)"
        label = "score" if self.complete else "PARTIAL score"
        return (
            f"{label} {self.score_rounded:.1f}  success {self.success}  failure {self.failure}  (n={self.n})"
        )

    def counts(self) -> str:
        """``n finished / m failed``: how partial failure is shown everywhere (terminal, report)."""
        text = f"{self.n} finished / {self.n_failed_runs} failed"
        if self.expected is not None and self.n + self.n_failed_runs < self.expected:
            text += f" / {self.expected - self.n - self.n_failed_runs} not run"
        return text + ("" if self.complete else " (partial)")

    def truncation(self) -> str:
        """How many replies a token cap cut, agent and simulator (shown on the terminal and the report)."""
        return (
            f"{self.truncated_replies} agent repl{'y' if self.truncated_replies == 1 else 'ies'} and "
            f"{self.simulator_truncated_calls} simulator call(s) cut at the token cap"
        )


def _group(out: Outcomes) -> GroupMetrics:
    return GroupMetrics(
        n=out.n,
        score=round_half_up(out.score or Fraction(0), 1),
        success=out.success,
        success_pct=100.0 * out.success_rate,
        failure=out.failure,
        failure_pct=100.0 * out.failure_rate,
    )


def _trajectory(
    episodes: Sequence[Episode],
) -> tuple[list[float], list[float], list[float], list[float], list[int]]:
    paths = [emotion_path(ep) for ep in episodes]
    if not paths:
        return [], [], [], [], []
    length = max(len(p) for p in paths)
    grid = np.empty((len(paths), length), dtype=np.float64)
    live = [0] * length
    for i, (ep, path) in enumerate(zip(episodes, paths, strict=True)):
        for t in range(length):
            if t < len(path):
                grid[i, t] = path[t]
                live[t] += 1
            else:  # carried forward: the dialogue had ended with this emotion
                grid[i, t] = ep.final_emotion
    p25, p75 = np.percentile(grid, [25, 75], axis=0)
    return (
        [float(x) for x in grid.mean(axis=0)],
        [float(x) for x in grid.std(axis=0)],
        [float(x) for x in p25],
        [float(x) for x in p75],
        live,
    )


def compute_metrics(
    episodes: Iterable[Episode], *, bootstrap_seed: int = BOOTSTRAP_SEED, expected: int | None = None
) -> Metrics:
    """Compute the benchmark metrics of one run. Failed runs are counted but excluded from the score.

    ``expected`` (the dialogues the run set out to score) makes a run with missing dialogues partial
    too, not only one with failed dialogues.
    """
    out = outcomes(episodes)
    done, finals = out.done, out.finals
    head = _group(out)
    ci = bootstrap_ci(finals, seed=bootstrap_seed)
    traj, traj_std, p25, p75, live = _trajectory(done)
    return Metrics(
        n=out.n,
        n_failed_runs=len(out.failed),
        failed=len(out.failed),
        expected=expected,
        complete=not out.failed and (expected is None or out.n >= expected),
        failed_run_kinds=dict(Counter(ep.error_kind or "unknown" for ep in out.failed)),
        score=float(out.score) if out.score is not None else None,
        score_rounded=head.score if out.n else None,
        score_ci_low=ci[0],
        score_ci_high=ci[1],
        score_std=float(np.std(finals)) if finals else 0.0,
        success=head.success,
        success_pct=head.success_pct,
        failure=head.failure,
        failure_pct=head.failure_pct,
        mean_turns=out.mean_turns,
        trajectory=traj,
        trajectory_std=traj_std,
        trajectory_p25=p25,
        trajectory_p75=p75,
        trajectory_live=live,
        mean_policy_tokens=float(np.mean([ep.policy_tokens for ep in done])) if done else 0.0,
        mean_simulator_tokens=float(np.mean([ep.simulator_tokens for ep in done])) if done else 0.0,
        **_simulator_cost(done),
        format_errors=sum(ep.format_errors for ep in done),
        truncated_replies=sum(ep.truncated_replies for ep in done),
        simulator_truncated_calls=sum(t.truncated_calls for ep in done for t in ep.user_turns),
        end_reasons=dict(Counter(ep.end_reason or "unknown" for ep in done)),
        final_emotions=finals,
        breakdowns=_breakdowns(done),
    )


def _breakdowns(done: Sequence[Episode]) -> dict[str, dict[str, GroupMetrics]]:
    """One table per :data:`BREAKDOWN_KEYS` key the episodes carry in ``meta``: value → its numbers."""
    breakdowns: dict[str, dict[str, GroupMetrics]] = {}
    for key in BREAKDOWN_KEYS:
        groups: dict[str, list[Episode]] = defaultdict(list)
        for ep in done:
            value = ep.meta.get(key)
            if value is not None:
                groups[str(value)].append(ep)
        if groups:
            breakdowns[key] = {name: _group(outcomes(eps)) for name, eps in sorted(groups.items())}
    return breakdowns


# -- paired comparison ------------------------------------------------------------------------------


class PairedComparison(BaseModel):
    """Run A against run B on the profiles both finished (matched by profile id and sample index)."""

    n_pairs: int
    only_in_a: int
    only_in_b: int
    #: The means, difference and interval are ``None`` when the runs share no finished dialogue.
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None = Field(description="mean of (A - B) final emotion over the pairs")
    diff_ci_low: float | None
    diff_ci_high: float | None
    wins: int = Field(description="pairs where A ended higher")
    ties: int
    losses: int
    sign_test_p: float = Field(description="two-sided exact sign test on wins vs losses (ties dropped)")


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact binomial (sign) test p-value for ``wins`` vs ``losses`` under p = 0.5."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def _key(ep: Episode) -> tuple[str, int]:
    return (ep.profile_id, ep.sample_index)


def paired_comparison(
    a: Iterable[Episode], b: Iterable[Episode], *, bootstrap_seed: int = BOOTSTRAP_SEED
) -> PairedComparison:
    """Compare two runs dialogue by dialogue on their shared (finished) profiles."""
    a_map = {_key(ep): ep for ep in a if ep.status == "finished"}
    b_map = {_key(ep): ep for ep in b if ep.status == "finished"}
    shared = sorted(set(a_map) & set(b_map))
    fa = np.array([a_map[k].final_emotion for k in shared], dtype=np.float64)
    fb = np.array([b_map[k].final_emotion for k in shared], dtype=np.float64)
    diff = fa - fb
    ci = bootstrap_ci(list(diff), seed=bootstrap_seed)
    wins = int((diff > 0).sum())
    losses = int((diff < 0).sum())
    ties = int((diff == 0).sum())
    return PairedComparison(
        n_pairs=len(shared),
        only_in_a=len(set(a_map) - set(b_map)),
        only_in_b=len(set(b_map) - set(a_map)),
        mean_a=float(fa.mean()) if shared else None,
        mean_b=float(fb.mean()) if shared else None,
        mean_diff=float(diff.mean()) if shared else None,
        diff_ci_low=ci[0],
        diff_ci_high=ci[1],
        wins=wins,
        ties=ties,
        losses=losses,
        sign_test_p=sign_test_p(wins, losses),
    )


def metrics_table_rows(named: Sequence[tuple[str, Metrics]]) -> list[dict[str, Any]]:
    """Rows for a leaderboard-like table (used by ``rlver score`` and the report)."""
    rows = []
    for name, m in named:
        rows.append(
            {
                "run": name,
                "n": m.n,
                "score": "-"
                if m.score_rounded is None
                else f"{m.score_rounded:.1f}" + ("" if m.complete else " (partial)"),
                "95% CI": f"[{m.score_ci_low:.1f}, {m.score_ci_high:.1f}]"
                if m.score_ci_low is not None
                else "-",
                "success": f"{m.success} ({m.success_pct:.0f}%)",
                "failure": f"{m.failure} ({m.failure_pct:.0f}%)",
                "failed runs": str(m.n_failed_runs),
                "mean turns": f"{m.mean_turns:.1f}",
                "policy tokens": f"{m.mean_policy_tokens:.0f}",
            }
        )
    return rows


def _simulator_cost(done: Sequence[Episode]) -> dict[str, float]:
    """Mean simulator input/output tokens per dialogue and input tokens per appraised turn."""
    if not done:
        return {}
    turns = [t for ep in done for t in ep.user_turns if t.appraisal is not None]
    return {
        "mean_simulator_prompt_tokens": float(np.mean([ep.simulator_prompt_tokens for ep in done])),
        "mean_simulator_completion_tokens": float(np.mean([ep.simulator_completion_tokens for ep in done])),
        "mean_simulator_prompt_tokens_per_turn": (
            float(np.mean([t.prompt_tokens for t in turns])) if turns else 0.0
        ),
    }
