"""The token-level engine seam: what samples a reply, in token ids, with nothing of chat about it.

Why a seam at this level: an inference engine (transformers in this process, vLLM, SGLang) takes
token ids and gives token ids back; the chat template, the end-of-turn rule, stop strings and the
reply's text are the same whichever engine drew the tokens. So the chat layer
(:class:`rlver.llm.engine_chat.EngineChatModel`) turns messages into prompt ids and sampled ids into
a :class:`~rlver.llm.base.Completion` once, over any :class:`TokenEngine`, and an engine implements
only the calls below. verl's rollout workers are split the same way: ``BaseRollout``
(verl/workers/rollout/base.py, commit ad79d2b) has ``resume(tags)``, ``update_weights(weights)``
(a generator of ``(name, tensor)``) and ``release()``, and its servers' ``generate(prompt_ids,
sampling_params, request_id)`` returns a ``TokenOutput`` of token ids and log-probs.

The contract of :meth:`TokenEngine.generate`:

* one :class:`TokenOutput` per prompt, in order: the sampled ids, each one's log-prob under
  ``log_softmax(logits / temperature)`` before any top-p/top-k filtering (greedy: temperature 1),
  which is what the trainer scores, and why it stopped;
* a row ends at the first of ``stop_token_ids`` (kept as its last id: the policy sampled it), at a
  stop string of ``sampling.stop`` (the ids up to the token that completed it), or after
  ``sampling.max_tokens`` ids (``finish_reason="length"``);
* row ``i`` draws from its own ``seeds[i]``, so its tokens do not depend on the other rows;
* every setting it uses is stated by :meth:`TokenEngine.sampling_settings` and what it does beyond
  them by :meth:`TokenEngine.sampler`. Both are the engine's own answer, written by the class that
  samples (abstract here, so an engine cannot inherit another's), and the chat layer and the trainer
  record them as given, with the engine's class beside them (:func:`sampler_record`).

:meth:`TokenEngine.generate_request` is the per-request form (one prompt, awaited; the seed in its
sampling parameters), which an engine with its own queue of requests (:attr:`TokenEngine.queues_requests`)
batches with everything else waiting.

The lifecycle, as the trainer drives it through its rollout backend (verl's order for a co-located
engine): sample; :meth:`TokenEngine.release` before the update (free the KV cache and, for an engine
with its own copy, the weights); :meth:`TokenEngine.resume` after it (take the memory back);
:meth:`TokenEngine.update_weights` with the trained weights, before the next sample.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

    from rlver.llm.base import SamplingParams

FinishReason = Literal["stop", "length"]
#: what :meth:`TokenEngine.resume` may take back, in verl's order (``BaseRollout.resume(tags)``)
RESUME_TAGS: tuple[str, ...] = ("weights", "kv_cache")
#: ``generate``'s arguments: the prompts' token ids, one seed per prompt (``None``: unseeded), the ids
#: that end a row
PromptIds = Sequence[Sequence[int]]
#: one prompt's token ids (a request of :meth:`TokenEngine.generate_request`)
PromptRow = Sequence[int]
RowSeeds = Sequence[int | None]
StopIds = Sequence[int]


@dataclass(frozen=True)
class TokenOutput:
    """One row's sample: ``token_ids`` as drawn (a stop id included), ``logprobs`` one per id, and
    ``finish_reason`` (``"stop"``: a stop id or stop string ended it; ``"length"``: the token cap)."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(
                f"TokenOutput: {len(self.token_ids)} token ids but {len(self.logprobs)} log-probs"
            )


class TokenEngine(abc.ABC):
    """A sampler of token ids: ``generate``, ``update_weights``, ``release``, ``resume``, and what it
    states about itself (``describe``, ``sampler``, ``sampling_settings``)."""

    #: a short name for manifests (the model's id or folder, never a key)
    name: str = "engine"
    #: the engine batches requests itself (one queue for every caller, slots refilled as rows end, as
    #: an inference server does), so its callers send each request alone, the moment it is ready
    queues_requests: bool = False

    @abc.abstractmethod
    def generate(
        self, prompts: PromptIds, sampling: SamplingParams, *, seeds: RowSeeds, stop_token_ids: StopIds
    ) -> list[TokenOutput]:
        """Sample one continuation of each prompt (the contract is in the module docstring). Blocks;
        the chat layer calls it from a worker thread. A failure of the call raises."""

    async def generate_request(
        self,
        prompt_ids: Sequence[int],
        sampling_params: SamplingParams,
        request_id: str,
        *,
        stop_token_ids: StopIds,
    ) -> TokenOutput:
        """One request, awaited: the call inference servers expose (verl's server
        ``generate(prompt_ids, sampling_params, request_id)``, vLLM's ``AsyncLLM.generate(prompt,
        sampling_params, request_id)``, SGLang's ``async_generate``), with the row's seed as
        ``sampling_params.seed``. An engine that batches requests itself (:attr:`queues_requests`)
        overrides it; this default samples the one row with :meth:`generate` in a worker thread."""
        (out,) = await asyncio.to_thread(
            self.generate,
            [list(prompt_ids)],
            sampling_params,
            seeds=[sampling_params.seed],
            stop_token_ids=stop_token_ids,
        )
        return out

    async def generate_requests(
        self,
        prompts: PromptIds,
        samplings: Sequence[SamplingParams],
        request_ids: Sequence[str],
        *,
        stop_token_ids: StopIds,
    ) -> list[TokenOutput | BaseException]:
        """Several requests at once, in order (so an engine with a queue prefills them together);
        each row's failure in its place. The default awaits :meth:`generate_request` for each."""
        calls = [
            self.generate_request(p, s, r, stop_token_ids=stop_token_ids)
            for p, s, r in zip(prompts, samplings, request_ids, strict=True)
        ]
        return list(await asyncio.gather(*calls, return_exceptions=True))

    def set_admission_barrier(self, barrier: Callable[[], None] | None) -> bool:
        """Register (``None``: remove) a blocking callable the engine calls from its own thread before
        it admits waiting requests, at the start of a busy period and after a step that answered a row,
        so that which rows share a step is fixed by the caller's work, not by wall time (a rollout:
        :func:`rlver.rollout.batching.loop_barrier`). Returns whether the engine honours it; an engine
        without a queue of its own (this default) has no admission to hold and returns ``False``."""
        return False

    @abc.abstractmethod
    def sampling_settings(self, sampling: SamplingParams) -> dict[str, Any]:
        """Every setting this engine samples ``sampling`` with, explicitly (recorded in manifests and
        ``sampling.json``); a setting it cannot honour raises ``ValueError`` naming it."""

    @abc.abstractmethod
    def sampler(self) -> dict[str, Any]:
        """What this engine does beyond :meth:`sampling_settings` (its seeding, what it reads from the
        model's ``generation_config``, its stop ids, its cache), in its own words."""

    def describe(self) -> dict[str, Any]:
        """Where it runs, for the manifest's ``agent`` (device, dtype, batch size); never secrets, and
        none of :data:`RESERVED_DESCRIBE_KEYS` (:func:`engine_description` refuses them)."""
        return {}

    # -- lifecycle (verl's BaseRollout) ---------------------------------------------------------------
    @abc.abstractmethod
    def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load the trained weights, given by the policy's ``state_dict`` names (tied weights appear
        under each of their names). An engine that samples on the trained module itself has nothing to
        copy."""

    @abc.abstractmethod
    def release(self) -> None:
        """The rollout is over: free what this engine holds on the device for the update's peak."""

    @abc.abstractmethod
    def resume(self, tags: Sequence[str] = RESUME_TAGS) -> None:
        """The update is over: take back what :meth:`release` freed, as verl's ``resume(tags)`` does:
        ``"weights"`` first (:meth:`update_weights` follows and fills them), then ``"kv_cache"``
        (after the weights are in, so the update's peak never holds both). No tags given: both."""


#: The keys of the manifest's ``agent`` that the chat layer writes itself (the model's name, its class,
#: the sampler record): an engine's :meth:`TokenEngine.describe` may not use them.
RESERVED_DESCRIBE_KEYS = ("name", "class", "sampler")


def engine_description(engine: TokenEngine) -> dict[str, Any]:
    """``engine.describe()``, refused (``TypeError`` naming the class and the keys) when it uses a key
    of :data:`RESERVED_DESCRIBE_KEYS`: dropped without a word, an engine's ``name`` or ``sampler`` would
    never reach the manifest its author reads, and overwriting the chat layer's would misname the run."""
    described = engine.describe()
    reserved = [key for key in RESERVED_DESCRIBE_KEYS if key in described]
    if reserved:
        raise TypeError(
            f"{engine_class(engine)}.describe() returned {', '.join(reserved)}: the chat layer writes "
            f"{', '.join(RESERVED_DESCRIBE_KEYS)} itself (the sampler's words go in sampler()); "
            "name the engine's own keys otherwise"
        )
    return described


def engine_class(engine: TokenEngine) -> str:
    """The engine's class as ``module.QualName``: the record names what sampled, not what it claims."""
    cls = type(engine)
    return f"{cls.__module__}.{cls.__qualname__}"


def sampler_record(engine: TokenEngine) -> dict[str, Any]:
    """``engine.sampler()`` with the engine's own class first, and, when that class did not write the
    description itself but inherited it, the class that did (``described_by``): a subclass that
    samples differently and says nothing cannot pass its parent's words off as its own."""
    owner = next(c for c in type(engine).__mro__ if "sampler" in vars(c))
    record: dict[str, Any] = {"engine": engine_class(engine)}
    if owner is not type(engine):
        record["described_by"] = f"{owner.__module__}.{owner.__qualname__}"
    return {**record, **engine.sampler()}
