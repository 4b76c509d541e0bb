"""One request to the transformers engine's queue: what the decode loop (:mod:`rlver.llm.decoding`) and
the queue's worker (:mod:`rlver.llm.scheduler`) both read, in a module of its own so that neither
imports the other for it."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlver.llm.base import SamplingParams

#: What a request's future carries: the sampled ids and their log-probs.
Sample = tuple[list[int], list[float]]


@dataclass
class Request:
    """One prompt to continue: its ids, the explicit settings, its seed and stop ids, and the future
    its caller waits on."""

    prompt: list[int]
    settings: dict[str, Any]
    sampling: SamplingParams
    seed: int | None
    stops: frozenset[int]
    request_id: str = ""
    future: Future[Sample] = field(default_factory=Future)
    #: the scheduler's take that first saw it waiting (its cohort; ``None`` until then)
    seen: int | None = None

    @property
    def key(self) -> tuple[float, float, int]:
        """What rows of one batch must share: the step samples them with one set of settings."""
        s = self.settings
        return (float(s["temperature"]), float(s["top_p"]), int(s["top_k"]))
