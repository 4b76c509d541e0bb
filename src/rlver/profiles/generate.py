"""LLM-written user profiles: the generation run (attempts, near-duplicate rejection, resume).

The published method's training world is 500 profiles; its builder scripts called placeholder LLMs and
trusted whatever came back. Here every answer is treated as untrusted input: it must be exactly one
JSON object with every field present and of the right type and size, in the requested language, and
not a near-copy of a profile already accepted. Rejected answers are logged with their reason next to
the output (``<out stem>.rejected.jsonl``) so prompt or model problems are visible, and the loop is
bounded by a maximum number of attempts so a model that never complies cannot spin forever.

Profiles are appended one line at a time (:func:`rlver.io.append_jsonl`); a second run with the same
``--out`` counts what is there (accepted and rejected) and continues to ``n``, drawing the same
topics it would have drawn had it never stopped. What one attempt asks for is
:mod:`rlver.profiles.generation_prompt`; how its answer is checked, :mod:`rlver.profiles.answer_check`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlver.errors import InputError, LLMError, Problem, RlverError
from rlver.io import append_jsonl, iter_jsonl, repair_torn_tail
from rlver.llm.base import ChatModel, Completion, SamplingParams
from rlver.profiles.answer_check import Rejection, answer_to_profile, read_answer
from rlver.profiles.generation_prompt import SYSTEM, AttemptPlan, SeedTopic, build_messages, plan_attempt
from rlver.profiles.schema import Profile
from rlver.profiles.similarity import Embedder, make_index, profile_text

#: Default similarity above which a candidate is a near-duplicate, per method. Calibrated on the
#: published training profiles: unrelated pairs reach at most ~0.30 (ngram) / ~0.41 (tfidf).
DEFAULT_MAX_SIMILARITY: dict[str, float] = {"ngram": 0.5, "tfidf": 0.6, "embed": 0.9}

#: Consecutive LLM failures after which the run stops (the endpoint is down, not flaky).
MAX_LLM_FAILURES_IN_A_ROW = 5


# --------------------------------------------------------------------------------------------------
# The generation loop
# --------------------------------------------------------------------------------------------------
@dataclass
class GenerateSettings:
    n: int
    language: str = "en"
    seed: int = 0
    with_opening: bool = False
    similarity: str = "ngram"
    max_similarity: float | None = None  # None: DEFAULT_MAX_SIMILARITY[similarity]
    max_attempts: int | None = None  # per invocation; None: 3 * missing + 10
    concurrency: int = 4
    sampling: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=1.0, max_tokens=2048))
    source: str = "generated"

    @property
    def threshold(self) -> float:
        return (
            self.max_similarity
            if self.max_similarity is not None
            else DEFAULT_MAX_SIMILARITY[self.similarity]
        )


@dataclass
class GenerateReport:
    out: Path
    rejected_path: Path
    target: int
    existing: int = 0
    accepted: int = 0
    attempts: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return self.existing + self.accepted

    @property
    def complete(self) -> bool:
        return self.total >= self.target

    def as_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "rejected_log": str(self.rejected_path),
            "target": self.target,
            "existing": self.existing,
            "accepted": self.accepted,
            "total": self.total,
            "attempts": self.attempts,
            "rejected": dict(self.rejected),
            "complete": self.complete,
        }


def rejected_path_for(out: Path) -> Path:
    """Where rejected answers of ``out`` are logged: ``<stem>.rejected.jsonl`` beside it."""
    return out.with_name(f"{out.stem}.rejected.jsonl")


def _count_lines(path: Path) -> int:
    return sum(1 for _ in iter_jsonl(path)) if path.exists() else 0


def _existing_profiles(out: Path) -> list[Profile]:
    profiles: list[Profile] = []
    if not out.exists():
        return profiles
    for lineno, obj in iter_jsonl(out):
        try:
            profiles.append(Profile.model_validate(obj))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputError(
                Problem(str(out), lineno, ".".join(map(str, first["loc"])) or None, first["msg"]),
                summary=f"{out} holds a line that is not a profile; fix or move it before resuming",
            ) from None
    return profiles


@dataclass
class _Run:
    """One call of :func:`generate_profiles`: where it writes, what it has accepted, how it stands."""

    settings: GenerateSettings
    report: GenerateReport
    index: Any  # a similarity index (rlver.profiles.similarity.make_index)
    seen_ids: set[str]
    on_result: Callable[[str, dict[str, Any]], None] | None
    failures_in_a_row: int = 0
    last_error: LLMError | None = None

    def reject(self, plan: AttemptPlan, kind: str, reason: str, answer: str, **extra: Any) -> None:
        record = {
            "attempt": plan.attempt,
            "topic": plan.topic.topic,
            "kind": kind,
            "reason": reason,
            **extra,
            "answer": answer[:4000],
        }
        append_jsonl(self.report.rejected_path, record)
        self.report.rejected[kind] += 1
        if self.on_result:
            self.on_result("rejected", record)

    def candidate(self, plan: AttemptPlan, answer: str) -> tuple[Profile, str]:
        """The answer as a new profile and its similarity text; :class:`Rejection` if unusable."""
        s = self.settings
        profile = answer_to_profile(
            read_answer(answer), plan, s.language, with_opening=s.with_opening, source=s.source
        )
        if profile.id in self.seen_ids:
            raise Rejection(
                "duplicate", "identical to a profile already accepted", similar_to=profile.id, similarity=1.0
            )
        text = profile_text(profile)
        near, sim = self.index.nearest(text)
        if near is not None and sim >= s.threshold:
            raise Rejection(
                "duplicate",
                f"near-duplicate of {near}: {s.similarity} similarity {sim:.2f} >= {s.threshold:.2f}",
                similar_to=near,
                similarity=round(sim, 4),
            )
        return profile, text

    def accept(self, plan: AttemptPlan, profile: Profile, text: str) -> None:
        append_jsonl(self.report.out, profile.model_dump(mode="json", exclude_defaults=False))
        self.index.add(profile.id, text)
        self.seen_ids.add(profile.id)
        self.report.accepted += 1
        if self.on_result:
            self.on_result("accepted", {"attempt": plan.attempt, "id": profile.id, "topic": plan.topic.topic})

    def handle(self, plan: AttemptPlan, result: Completion | BaseException) -> None:
        """One attempt's outcome: an LLM failure, a rejection or a new profile (in attempt order)."""
        if isinstance(result, BaseException):
            if not isinstance(result, (LLMError, TimeoutError)):
                raise result
            self.failures_in_a_row += 1
            self.last_error = result if isinstance(result, LLMError) else LLMError(str(result))
            self.reject(plan, "llm_error", f"{type(result).__name__}: {result}", "")
            return
        self.failures_in_a_row = 0
        try:
            profile, text = self.candidate(plan, result.text)
        except Rejection as rej:
            self.reject(plan, rej.kind, rej.reason, result.text, **rej.extra)
            return
        self.accept(plan, profile, text)

    def raise_if_endpoint_down(self) -> None:
        if self.failures_in_a_row >= MAX_LLM_FAILURES_IN_A_ROW and self.last_error is not None:
            raise type(self.last_error)(
                f"the model failed {self.failures_in_a_row} times in a row; stopping "
                f"({self.report.total}/{self.settings.n} profiles in {self.report.out}, rerun to resume): "
                f"{self.last_error}"
            )


def _start_run(
    out: Path,
    settings: GenerateSettings,
    against: Sequence[Profile],
    embedder: Embedder | None,
    on_result: Callable[[str, dict[str, Any]], None] | None,
) -> _Run:
    """Repair and read what earlier runs left in ``out`` (and its rejection log); index it all."""
    rej_path = rejected_path_for(out)
    for path in (out, rej_path):
        repair_torn_tail(path)
    existing = _existing_profiles(out)
    report = GenerateReport(out=out, rejected_path=rej_path, target=settings.n, existing=len(existing))
    index = make_index(settings.similarity, embedder=embedder)
    for p in [*against, *existing]:
        index.add(p.id, profile_text(p))
    return _Run(settings, report, index, {p.id for p in existing}, on_result)


def _sampling_for(settings: GenerateSettings, plan: AttemptPlan) -> SamplingParams:
    """A fixed sampling seed becomes a distinct seed per attempt (so retries are not repeats)."""
    seed = settings.sampling.seed
    return settings.sampling.model_copy(update={"seed": None if seed is None else seed + plan.attempt})


async def generate_profiles(
    model: ChatModel,
    topics: Sequence[SeedTopic],
    out: str | Path,
    settings: GenerateSettings,
    *,
    against: Sequence[Profile] = (),
    embedder: Embedder | None = None,
    on_result: Callable[[str, dict[str, Any]], None] | None = None,
) -> GenerateReport:
    """Generate profiles into ``out`` until it holds ``settings.n`` (or the attempts run out).

    ``against``: other profiles (e.g. an existing training set) new ones must not duplicate.
    ``on_result("accepted"|"rejected", record)`` is called after each attempt (progress display).
    Raises the last :class:`LLMError` after :data:`MAX_LLM_FAILURES_IN_A_ROW` failed calls in a row.
    """
    if not topics:
        raise InputError(Problem("seed topics", None, None, "no seed topics given"))
    if settings.language not in SYSTEM:
        raise InputError(Problem("--lang", None, None, f"expected one of {', '.join(SYSTEM)}"))
    run = _start_run(Path(out), settings, against, embedder, on_result)
    report = run.report
    attempt = report.existing + _count_lines(report.rejected_path)
    missing = settings.n - report.existing
    budget = settings.max_attempts if settings.max_attempts is not None else 3 * max(missing, 0) + 10
    while report.total < settings.n and report.attempts < budget:
        width = min(settings.concurrency, settings.n - report.total, budget - report.attempts)
        plans = [plan_attempt(topics, settings.seed, attempt + i) for i in range(width)]
        attempt += width
        report.attempts += width
        calls = [
            model.complete(
                build_messages(p, settings.language, with_opening=settings.with_opening),
                _sampling_for(settings, p),
            )
            for p in plans
        ]
        results = await asyncio.gather(*calls, return_exceptions=True)
        # Results are handled in attempt order, so the outcome does not depend on arrival order.
        for plan, result in zip(plans, results, strict=True):
            run.handle(plan, result)
        run.raise_if_endpoint_down()
    return report


def raise_if_incomplete(report: GenerateReport) -> None:
    """A clear error when the attempt budget ran out before ``n`` profiles were accepted."""
    if not report.complete:
        reasons = ", ".join(f"{k}: {v}" for k, v in report.rejected.most_common()) or "none"
        raise RlverError(
            f"stopped after {report.attempts} attempts with {report.total}/{report.target} profiles "
            f"in {report.out} (rejected: {reasons}; reasons in {report.rejected_path}). "
            "Rerun the same command to continue, or raise --max-attempts."
        )
