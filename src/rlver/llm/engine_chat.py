"""The chat layer over any :class:`~rlver.llm.engine.TokenEngine`: messages in, completions out.

What it decides, once for every engine (the transformers one, a vLLM one):

* **templates**: a conversation's prompt ids come from the tokenizer's chat template, with earlier
  assistant turns as the ids the policy *sampled* when the dialogue knows them
  (:func:`rlver.llm.sequence.chat_ids`), so the policy conditions on its own tokens exactly as the
  trainer will score them; control tokens that a message spells stay text
  (:mod:`rlver.llm.control_tokens`);
* **stop rules**: a reply ends on the template's own end-of-turn token first, then on the model's and
  tokenizer's EOS ids and the usual end-of-turn tokens the vocabulary has (:func:`stop_token_ids`); the
  stop id stays in ``Completion.token_ids`` (the policy sampled it) and out of the text; a stop string
  of ``SamplingParams.stop`` cuts the text there;
* **think**: the reply's text drops special tokens but keeps ``<think>``/``</think>`` even where a
  tokenizer marks them special (:func:`reply_text`), because the environment splits the reasoning from
  what the user sees (:mod:`rlver.env.thinking`) and must see the tags to do it;
* **batching**: an engine that batches requests itself (:attr:`TokenEngine.queues_requests`, the
  transformers one) is sent each row as its own request (:meth:`TokenEngine.generate_request`), so
  rows of any number of concurrent callers share its running batch; for any other engine, rows whose
  settings differ only in their seed share one ``generate`` call, in a worker thread so the event loop
  keeps serving the simulated users meanwhile.

The engine's own words about how it samples (``sampler``, ``sampling_settings``) are recorded as the
engine states them (:func:`rlver.llm.engine.sampler_record`); this layer adds nothing to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlver.errors import PolicyOutOfMemoryError
from rlver.llm.base import ChatModel, Completion, MessagesLike, SamplingParams
from rlver.llm.control_tokens import render_ids
from rlver.llm.engine import TokenEngine, TokenOutput, engine_description, sampler_record
from rlver.llm.sequence import SequenceError, chat_ids, end_of_turn_id

#: End-of-turn markers a chat model may emit; generation stops at whichever the tokenizer knows.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>")
#: Tags the reply text keeps even when a tokenizer calls them special (the think split reads them).
THINK_TAGS = ("<think>", "</think>")


def generation_eos(model: Any) -> list[int]:
    """The EOS ids of a transformers model's ``generation_config`` (none when it has no config)."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    return [e for e in (eos if isinstance(eos, list) else [eos]) if isinstance(e, int)]


def stop_token_ids(tokenizer: Any, eos_ids: Sequence[int] = ()) -> list[int]:
    """The ids a reply ends on: the template's turn end first, then ``eos_ids`` (the model's
    generation EOS), the tokenizer's EOS and the usual end-of-turn tokens its vocabulary has."""
    ids: list[int] = []
    with contextlib.suppress(SequenceError):
        ids.append(end_of_turn_id(tokenizer))
    for value in [*eos_ids, tokenizer.eos_token_id]:
        if isinstance(value, int) and value not in ids:
            ids.append(value)
    vocab = tokenizer.get_vocab()
    for token in END_OF_TURN_TOKENS:
        if token in vocab and vocab[token] not in ids:
            ids.append(vocab[token])
    if not ids:
        raise ValueError("the tokenizer knows no end-of-turn token; cannot tell when a reply ends")
    return ids


@dataclass(frozen=True)
class TokenClasses:
    """What the reply text needs to know of a tokenizer's ids, computed once per tokenizer.

    Why once: ``get_vocab()`` builds a dict of the whole vocabulary (16 ms for SmolLM2's 49,152 ids on
    a 2-core box, about 100 ms for a 152,064-id one); per reply, at a thousand replies a step, that was
    minutes of host time. ``special``: the ids the text drops; ``kept``: the special ids it keeps (the
    think tags, where a tokenizer marks them special).
    """

    special: frozenset[int]
    kept: frozenset[int]

    @classmethod
    def of(cls, tokenizer: Any) -> TokenClasses:
        special = frozenset(getattr(tokenizer, "all_special_ids", None) or [])
        vocab = tokenizer.get_vocab()
        return cls(special, frozenset({vocab[tag] for tag in THINK_TAGS if tag in vocab} & special))


def reply_text(tokenizer: Any, ids: Sequence[int], classes: TokenClasses | None = None) -> str:
    """The text of a reply's ids: special tokens are markup and dropped, think tags are kept.

    ``classes``: the tokenizer's :class:`TokenClasses` (computed here when not given; a caller that
    decodes many replies keeps its own, as :class:`EngineChatModel` does). One ``decode`` per reply."""
    classes = classes or TokenClasses.of(tokenizer)
    if not classes.kept:
        return str(tokenizer.decode(list(ids), skip_special_tokens=True))
    special, kept = classes.special, classes.kept
    return str(tokenizer.decode([t for t in ids if t not in special or t in kept]))


class EngineChatModel(ChatModel):
    """A :class:`ChatModel` whose replies a :class:`TokenEngine` samples (see the module docstring)."""

    #: one engine, one generation at a time (see ChatModel.batch_serially)
    batch_serially = True

    def __init__(
        self, engine: TokenEngine, tokenizer: Any, *, name: str | None = None, eos_ids: Sequence[int] = ()
    ) -> None:
        """``eos_ids``: the model's generation EOS ids (:func:`generation_eos`), stop ids after the
        template's turn end."""
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("the tokenizer has no chat template; a chat model needs one")
        self.engine = engine
        self.tokenizer: Any = tokenizer
        self.name = name or engine.name
        self.stop_token_ids = stop_token_ids(tokenizer, eos_ids)
        #: special and think-tag ids, once per tokenizer (never per reply)
        self.token_classes = TokenClasses.of(tokenizer)
        self._request_ids = itertools.count()
        #: an admission barrier is set on the engine: prompts are encoded on the event loop, so a
        #: request is queued before the loop settles (an encode in a worker thread would land after)
        self._encode_inline = False
        #: the engine's own (:attr:`TokenEngine.queues_requests`): the rollout sends it each request alone
        self.queues_requests = engine.queues_requests

    def set_admission_barrier(self, barrier: Callable[[], None] | None) -> bool:
        """Set on the engine; while one is set, prompts are encoded on the event loop (see above)."""
        honoured = self.engine.set_admission_barrier(barrier)
        self._encode_inline = honoured and barrier is not None
        return honoured

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "class": type(self).__name__,
            **engine_description(self.engine),
            "sampler": {**sampler_record(self.engine), "stop_token_ids": list(self.stop_token_ids)},
        }

    def sampling_settings(self, sampling: SamplingParams) -> dict[str, Any]:
        """Every setting the engine samples ``sampling`` with (its own statement)."""
        return self.engine.sampling_settings(sampling)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, engine={self.engine!r})"

    # -- templates --------------------------------------------------------------------------------------
    def prompt_ids(self, messages: MessagesLike) -> list[int]:
        """The prompt's ids; earlier assistant turns as *sampled* when the caller knows their ids
        (``assistant_token_ids``, set by the dialogue environment), so the policy conditions on its own
        tokens, as the trainer will score them (see :mod:`rlver.llm.sequence`)."""
        conversation = [{"role": m.role, "content": m.content} for m in messages]
        sampled = getattr(messages, "assistant_token_ids", None)
        if sampled and any(t is not None for t in sampled):
            return chat_ids(self.tokenizer, conversation, sampled, add_generation_prompt=True).ids
        # control tokens that the messages spell stay text (rlver.llm.control_tokens)
        return render_ids(self.tokenizer, conversation, add_generation_prompt=True)

    # -- stop rules and think -----------------------------------------------------------------------------
    def to_completion(
        self, out: TokenOutput, prompt_len: int, sampling: SamplingParams, latency: float
    ) -> Completion:
        """Cut at the first stop id (kept in ``token_ids``: the policy produced it), then at the first
        stop string in the text."""
        stops = set(self.stop_token_ids)
        tokens = out.token_ids
        end = next((k for k, t in enumerate(tokens) if t in stops), None)
        if end is not None:
            ids, body, finish = tokens[: end + 1], tokens[:end], "stop"
        else:
            ids, body, finish = tokens, tokens, out.finish_reason
        text = reply_text(self.tokenizer, body, self.token_classes)
        if sampling.stop:
            cut = min((text.find(s) for s in sampling.stop if s in text), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        return Completion(
            text=text,
            prompt_tokens=prompt_len,
            completion_tokens=len(ids),
            latency_s=latency,
            finish_reason=finish,
            token_ids=list(ids),
            token_logprobs=list(out.logprobs[: len(ids)]),
        )

    # -- ChatModel ----------------------------------------------------------------------------------------
    async def complete(self, messages: MessagesLike, sampling: SamplingParams) -> Completion:
        (result,) = await self.complete_many([messages], sampling)
        if isinstance(result, BaseException):
            raise result
        return result

    async def complete_many(
        self, batch: Sequence[MessagesLike], sampling: SamplingParams
    ) -> list[Completion | BaseException]:
        """One engine call for the whole batch (the engine chunks it); failures are returned in place."""
        if self.engine.queues_requests:
            return await self.queued(batch, [sampling] * len(batch))
        return await asyncio.to_thread(self.sample, batch, sampling, [sampling.seed] * len(batch))

    async def complete_each(
        self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
    ) -> list[Completion | BaseException]:
        """Rows whose settings differ only in ``seed`` share one engine call; each keeps its seed."""
        if len(batch) != len(samplings):
            raise ValueError("complete_each: one SamplingParams per conversation")
        if self.engine.queues_requests:
            return await self.queued(batch, samplings)
        results: list[Completion | BaseException | None] = [None] * len(batch)
        groups: dict[str, list[int]] = {}
        for i, s in enumerate(samplings):
            groups.setdefault(s.model_copy(update={"seed": None}).model_dump_json(), []).append(i)
        for positions in groups.values():
            shared = samplings[positions[0]]
            seeds = [samplings[i].seed for i in positions]
            out = await asyncio.to_thread(self.sample, [batch[i] for i in positions], shared, seeds)
            for i, r in zip(positions, out, strict=True):
                results[i] = r
        return [r if r is not None else RuntimeError("no result") for r in results]

    async def queued(
        self, batch: Sequence[MessagesLike], samplings: Sequence[SamplingParams]
    ) -> list[Completion | BaseException]:
        """Each row its own request to an engine that batches requests itself
        (:attr:`TokenEngine.queues_requests`), queued in the batch's order; the prompts are encoded in
        a worker thread (on the loop while an admission barrier is set). Failures are returned in
        place; running out of memory raises (the caller's step fails, naming what to lower)."""
        if self._encode_inline:
            prompts = self._encode_each(batch)
        else:
            prompts = await asyncio.to_thread(self._encode_each, batch)
        rows = [i for i, ids in enumerate(prompts) if not isinstance(ids, BaseException)]
        results: list[Completion | BaseException] = [
            ids if isinstance(ids, BaseException) else RuntimeError("no result") for ids in prompts
        ]
        start = time.perf_counter()
        outs = await self.engine.generate_requests(
            [prompts[i] for i in rows],  # type: ignore[misc]
            [samplings[i] for i in rows],
            [f"{self.name}-{next(self._request_ids)}" for _ in rows],
            stop_token_ids=self.stop_token_ids,
        )
        latency = time.perf_counter() - start
        for i, out in zip(rows, outs, strict=True):
            if isinstance(out, PolicyOutOfMemoryError):
                raise out  # never a dropped dialogue: the caller's step fails, naming what to lower
            ids = prompts[i]
            assert not isinstance(ids, BaseException)
            results[i] = (
                out
                if isinstance(out, BaseException)
                else self.to_completion(out, len(ids), samplings[i], latency)
            )
        return results

    def _encode_each(self, batch: Sequence[MessagesLike]) -> list[list[int] | BaseException]:
        out: list[list[int] | BaseException] = []
        for messages in batch:
            try:
                out.append(self.prompt_ids(messages))
            except Exception as exc:  # a bad conversation fails alone
                out.append(exc)
        return out

    def sample(
        self, batch: Sequence[MessagesLike], sampling: SamplingParams, seeds: Sequence[int | None]
    ) -> list[Completion | BaseException]:
        """Encode each conversation, sample them in one engine call, cut each into a completion (runs
        in a worker thread). A bad conversation fails alone; a setting the engine cannot honour or a
        failed call fails every row; running out of memory on one row fails the caller's step."""
        results: list[Completion | BaseException | None] = [None] * len(batch)
        try:
            self.engine.sampling_settings(sampling)
        except ValueError as exc:  # a setting we cannot honour fails every row, loudly
            return [exc] * len(batch)
        prompts: list[tuple[int, list[int]]] = []
        for i, messages in enumerate(batch):
            try:
                prompts.append((i, self.prompt_ids(messages)))
            except Exception as exc:  # a bad conversation fails alone
                results[i] = exc
        if prompts:
            start = time.perf_counter()
            try:
                outs: Sequence[TokenOutput | BaseException] = self.engine.generate(
                    [ids for _, ids in prompts],
                    sampling,
                    seeds=[seeds[i] for i, _ in prompts],
                    stop_token_ids=self.stop_token_ids,
                )
            except PolicyOutOfMemoryError:
                raise  # never a dropped dialogue: the caller's step fails, naming what to lower
            except Exception as exc:  # any other failure of the whole call
                outs = [exc] * len(prompts)
            latency = time.perf_counter() - start
            for (i, ids), out in zip(prompts, outs, strict=True):
                results[i] = (
                    out
                    if isinstance(out, BaseException)
                    else self.to_completion(out, len(ids), sampling, latency)
                )
        return [r if r is not None else RuntimeError("no result") for r in results]
