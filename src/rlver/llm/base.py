"""One async chat interface for every model in the system: the policy under test and the simulator.

Keeping a single interface means the rollout runner, the simulator and the evaluator never care whether
a model is a remote OpenAI-compatible endpoint, a local transformers model, or a cached replay.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from rlver.config import MAX_COUNT
from rlver.records import Message
from rlver.seeding import Seed


class SamplingParams(BaseModel):
    """Sampling settings. Recorded in every run manifest so results can be reproduced."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    temperature: float = Field(
        default=1.0,
        ge=0.0,
        description="0 samples greedily (the local sampler's argmax; a server's own greedy decoding)",
    )
    top_p: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description=(
            "Nucleus sampling: sample from the smallest set of tokens whose probability reaches this."
        ),
    )
    max_tokens: int | None = Field(
        default=512,
        ge=1,
        le=MAX_COUNT,
        description=(
            "The most tokens one answer may have; ``null``: none sent, the server's own limit applies "
            "(an OpenAI-compatible endpoint only, as SAGE's calls send none)."
        ),
    )
    seed: Seed | None = Field(
        default=None,
        description=(
            "The sampling seed (a fixed seed becomes a distinct, reproducible seed per call); ``null``: "
            "unseeded."
        ),
    )
    stop: list[str] | None = Field(
        default=None, description="Strings that end an answer (the string itself is left out)."
    )
    # Extra fields passed through to the server untouched (e.g. {"top_k": 20} for vLLM).
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra fields passed through to the server untouched (e.g. ``{top_k: 20}`` for vLLM).",
    )
    model_default: bool = Field(
        default=False,
        description=(
            "Send no ``temperature`` or ``top_p``, so the server samples with the model's own defaults (a"
            " self-hosted model's ``generation_config``), as SAGE's ``call_npc`` did: it sets nothing "
            "(SAGE/npc_response.py:22 ``call_llm(history)``). Only an OpenAI-compatible endpoint can honour it: the local "
            "backend reads no ``generation_config``, so ``rlver eval`` refuses it for a local agent "
            "(docs/protocol.md)."
        ),
    )

    @model_serializer(mode="wrap")
    def _unsent_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """With ``model_default`` the temperature and top_p are not sent, so not written either: a
        block written out (``config.yaml``, a manifest) reads back as the same settings."""
        data: dict[str, Any] = handler(self)
        if self.model_default:
            data.pop("temperature", None)
            data.pop("top_p", None)
        return data

    def sent(self) -> dict[str, Any]:
        """What a request body carries of the sampling fields (an OpenAI-compatible endpoint), each
        field the body leaves out as ``"server default"``: the manifest's record of what was sent."""
        unsent = "server default"
        return {
            "temperature": unsent if self.model_default else self.temperature,
            "top_p": unsent if self.model_default else self.top_p,
            "max_tokens": unsent if self.max_tokens is None else self.max_tokens,
        }

    @model_validator(mode="after")
    def _one_source(self) -> SamplingParams:
        """``model_default`` with a stated temperature or top_p would record values that were not sent."""
        stated = sorted({"temperature", "top_p"} & self.model_fields_set)
        if self.model_default and stated:
            raise ValueError(
                f"sampling: model_default sends no temperature or top_p, but {' and '.join(stated)} "
                "is set; give one or the other"
            )
        return self


class Completion(BaseModel):
    """The result of one chat call."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None  # "stop", "length", ...
    cached: bool = False
    # Token ids of the completion when the backend knows them (local models): lets the trainer
    # skip re-tokenisation. Not serialised into transcripts.
    token_ids: list[int] | None = Field(default=None, exclude=True)
    # Log-prob of each of ``token_ids`` at sampling time, under softmax(logits / temperature) (local
    # models): the trainer compares it with its own scoring (rollout/logprob_diff_*). Not serialised.
    token_logprobs: list[float] | None = Field(default=None, exclude=True)


MessagesLike = Sequence[Message]


class ChatModel(abc.ABC):
    """An async chat model.

    Subclasses implement :meth:`complete`. :meth:`complete_many` issues a batch; the default runs the
    calls concurrently, local backends override it with one batched forward pass.
    """

    #: A short name recorded in manifests (model id, never a key).
    name: str = "model"
    #: The rollout hands each turn its own seed (reproducible local sampling). An endpoint says
    #: ``False``: it is sent a seed only when the user set ``sampling.seed`` (SAGE sends none).
    seeded_per_turn: bool = True
    #: An answer whose text is empty is returned as an empty completion instead of raised. Set for the
    #: agent under test (an empty reply is the agent's answer and is appraised: SAGE appraised the empty
    #: replies of its released files) and for a simulator whose protocol reads ``""`` as the published
    #: code does; others keep ``False`` (an empty answer is an error, retried by the client).
    accept_empty: bool = False
    #: With ``accept_empty``: ask again (up to the client's attempts) while the answer stays empty, and
    #: take it only then. ``False`` (``ModelSpec.retry_empty``'s default): the first empty answer is
    #: taken, as SAGE's one ``call_llm`` takes it.
    retry_empty: bool = False
    #: Generates one batch at a time (a model in this process: a second batch would only queue behind
    #: the first on the same device). The rollout runner then forms each batch from every dialogue
    #: waiting while the previous one ran; an endpoint takes new requests while others are in flight.
    batch_serially: bool = False
    #: Batches concurrent requests itself (an engine with one queue that refills its slots as rows
    #: end): the rollout runner sends each dialogue's request alone, the moment it is ready, and forms
    #: no batches of its own (see :meth:`set_admission_barrier` for what keeps a rollout reproducible).
    queues_requests: bool = False

    def set_admission_barrier(self, barrier: Callable[[], None] | None) -> bool:
        """Hand ``barrier`` (``None``: remove it) to the engine that admits this model's requests
        (:meth:`rlver.llm.engine.TokenEngine.set_admission_barrier`); whether it is honoured. A model
        with no such engine (an endpoint, a script) has nothing to hold: ``False``."""
        return False

    @abc.abstractmethod
    async def complete(self, messages: MessagesLike, sampling: SamplingParams) -> Completion:
        """Return the assistant's next message for ``messages``."""

    async def complete_many(
        self, batch: Sequence[MessagesLike], sampling: SamplingParams
    ) -> list[Completion | BaseException]:
        """Complete every conversation of ``batch``; a failure is returned in place, not raised.

        Returning exceptions in place is what lets one failed dialogue be marked failed while the
        others go on.
        """
        results = await asyncio.gather(*(self.complete(m, sampling) for m in batch), return_exceptions=True)
        return list(results)

    async def complete_each(
        self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
    ) -> list[Completion | BaseException]:
        """Like :meth:`complete_many` with one :class:`SamplingParams` per conversation (per-dialogue
        seeds); failures are returned in place. Local backends still batch rows that differ only in seed.
        """
        if len(batch) != len(samplings):
            raise ValueError("complete_each: one SamplingParams per conversation")
        results = await asyncio.gather(
            *(self.complete(m, s) for m, s in zip(batch, samplings, strict=True)), return_exceptions=True
        )
        return list(results)

    def describe(self) -> dict[str, Any]:
        """Settings worth recording in a manifest. Must never include secrets."""
        return {"name": self.name, "class": type(self).__name__}

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release network clients, if any."""
