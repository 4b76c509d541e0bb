"""Ask a model for one JSON object, validate it against a pydantic model, re-ask once with the error.

Three callers need this and each has its own tolerance for what surrounds the object, so the tolerance
is a setting (:class:`Strictness`) rather than three parsers:

* the **simulator** (``LENIENT``) answers every turn, adds preamble, code fences and remarks, and may
  echo the agent's text: objects are found anywhere, identical repeats count as one, top-level keys
  are normalised (``"Goal fit"`` → ``goal_fit``), and an object that appears verbatim in the quoted
  conversation (``quoted``) is an echo of the agent, not the simulator's answer;
* the **judge** (``PREAMBLE``) may put a short preamble before its object, or wrap it in one code
  fence; nothing may follow an unfenced object;
* **profile generation** (``EXACT``) accepts only the object itself, optionally inside one code fence
  that wraps the whole answer and after a leading ``<think>`` block.

Every problem is an :class:`AnswerError` whose message is short and written to be sent back to the
model. :func:`ask_structured` re-asks ONCE with that message and then raises :class:`ReaskFailed`
(never a retry loop); callers turn it into their own error type (a simulator step, a dialogue's
judgement). LLM errors (timeouts, HTTP failures) propagate unchanged: the client already retried them.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rlver.llm.base import ChatModel, Completion, SamplingParams
from rlver.records import Message

M = TypeVar("M", bound=BaseModel)

#: Default bound on an answer's length (characters); callers pass their own.
MAX_ANSWER_CHARS = 32_000
#: Validation problems quoted in one error message (the rest would only bloat the re-ask).
MAX_PROBLEMS = 8

_FENCE_ANYWHERE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)
_FENCE_WHOLE = re.compile(r"^```(?:json|JSON)?\s*\n(.*)\n```$", re.DOTALL)
_THINK = re.compile(r"^<think>.*?</think>\s*", re.DOTALL)


class Strictness(str, Enum):
    """What may surround the JSON object in an answer (see the module docstring)."""

    EXACT = "exact"
    PREAMBLE = "preamble"
    LENIENT = "lenient"


class AnswerError(ValueError):
    """One answer could not be used; the message is short and meant for the re-ask prompt."""


class ReaskFailed(AnswerError):
    """The answer was unusable twice (the second time after a re-ask with the first error)."""

    def __init__(self, problem: str, result: StructuredResult) -> None:
        super().__init__(problem)
        self.problem = problem
        self.result = result


@dataclass
class StructuredResult:
    """A validated answer plus what it cost (every completion, the re-ask included)."""

    answer: BaseModel | None = None
    completions: list[Completion] = field(default_factory=list)
    attempts: int = 1
    wall_s: float = 0.0

    @property
    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.completions)

    @property
    def prompt_tokens(self) -> int:
        """Input tokens of every attempt (what a hosted model bills as input)."""
        return sum(c.prompt_tokens for c in self.completions)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.completions)

    @property
    def truncated(self) -> int:
        """Completions cut at the token cap (``finish_reason == "length"``), re-asks included."""
        return sum(1 for c in self.completions if c.finish_reason == "length")


# -- finding the object ---------------------------------------------------------------------------


def extract_json_objects(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Every top-level JSON object in ``text`` as ``(source_text, object)``, in order.

    Scans for ``{`` and lets :class:`json.JSONDecoder` decode from there, so preamble, trailing
    remarks and Markdown code fences around the object do not matter. Nested objects are part of
    their parent, not separate candidates.
    """
    decoder = json.JSONDecoder()
    found: list[tuple[str, dict[str, Any]]] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append((text[i:end], obj))
        i = text.find("{", end)
    return found


def _check_size(text: str, max_chars: int) -> None:
    if not text or not text.strip():
        raise AnswerError("the answer was empty")
    if len(text) > max_chars:
        raise AnswerError(f"the answer is too long ({len(text)} characters long; the limit is {max_chars})")


def _body(text: str, strictness: Strictness) -> str:
    """The part of an ``EXACT`` or ``PREAMBLE`` answer that must be the JSON object."""
    body = text.strip()
    if strictness is Strictness.EXACT:
        body = _THINK.sub("", body).strip()
        fenced = _FENCE_WHOLE.match(body)
        body = fenced.group(1).strip() if fenced else body
        if not body:
            raise AnswerError("the answer was empty")
        return body
    fenced = _FENCE_ANYWHERE.search(body)
    if fenced:  # one fenced block, possibly between short remarks
        body = fenced.group(1).strip()
    if not body.startswith("{"):  # a short preamble, but nothing after the object
        start = body.find("{")
        if start < 0:
            raise AnswerError("no JSON object was found in the answer; answer with one JSON object only")
        body = body[start:]
    return body


def parse_json_object(
    text: str, strictness: Strictness, *, max_chars: int = MAX_ANSWER_CHARS
) -> dict[str, Any]:
    """The one JSON object of an ``EXACT`` or ``PREAMBLE`` answer, not yet validated."""
    if strictness is Strictness.LENIENT:
        raise ValueError("parse_json_object reads one object; use parse_structured for LENIENT answers")
    _check_size(text, max_chars)
    try:
        obj = json.loads(_body(text, strictness))
    except json.JSONDecodeError as exc:
        raise AnswerError(
            f"the answer is not a single JSON object: not valid JSON ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno})"
        ) from None
    if not isinstance(obj, dict):
        raise AnswerError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


# -- validating it --------------------------------------------------------------------------------


def describe_validation_error(exc: ValidationError) -> str:
    """Pydantic's errors as ``field 'a.b' is missing; field 'c' must be ...`` (at most MAX_PROBLEMS)."""
    parts = []
    for err in exc.errors()[:MAX_PROBLEMS]:
        where = ".".join(str(p) for p in err["loc"]) or "(object)"
        if err["type"] == "missing":
            parts.append(f"field {where!r} is missing")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"field {where!r} {msg}" if msg.startswith("must") else f"field {where!r}: {msg}")
    return "; ".join(parts)


def _normalise_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", key.strip()).lower()


def _squash(text: str) -> str:
    return "".join(text.split())


def _own_objects(text: str, quoted: Sequence[str]) -> list[dict[str, Any]]:
    """The answer's objects minus those copied verbatim from the quoted conversation."""
    candidates = extract_json_objects(text)
    if not candidates:
        raise AnswerError("no JSON object was found in the answer")
    # Only quoted text that contains a brace can hold an echoed object: skip the rest cheaply.
    squashed_quotes = [_squash(q) for q in quoted if q and "{" in q]
    own = [obj for source, obj in candidates if not any(_squash(source) in q for q in squashed_quotes)]
    if not own:
        raise AnswerError("the only JSON object in the answer was copied from the quoted conversation")
    return own


def _parse_lenient(text: str, schema: type[M], quoted: Sequence[str]) -> M:
    valid: list[M] = []
    errors: list[str] = []
    for obj in _own_objects(text, quoted):
        try:
            valid.append(schema.model_validate({_normalise_key(str(k)): v for k, v in obj.items()}))
        except ValidationError as exc:
            errors.append(describe_validation_error(exc))
    if not valid:
        # Report the error of the candidate closest to the schema (fewest problems).
        raise AnswerError(min(errors, key=lambda e: e.count(";")))
    distinct = {v.model_dump_json() for v in valid}
    if len(distinct) > 1:
        raise AnswerError(f"the answer contains {len(distinct)} different JSON objects; give exactly one")
    return valid[0]


def parse_structured(
    text: str,
    schema: type[M],
    *,
    strictness: Strictness,
    quoted: Sequence[str] = (),
    max_chars: int = MAX_ANSWER_CHARS,
) -> M:
    """Validate an answer against ``schema``; raise :class:`AnswerError` when it is unusable.

    ``quoted`` (``LENIENT`` only) is the untrusted text that was quoted into the prompt: a JSON
    object found verbatim inside it is an echo, not the answer, and is ignored.
    """
    if strictness is Strictness.LENIENT:
        _check_size(text, max_chars)
        return _parse_lenient(text, schema, quoted)
    obj = parse_json_object(text, strictness, max_chars=max_chars)
    try:
        return schema.model_validate(obj)
    except ValidationError as exc:
        raise AnswerError(describe_validation_error(exc)) from None


# -- asking ---------------------------------------------------------------------------------------


def default_reask(error: str) -> Message:
    return Message(role="user", content=f"Your answer could not be used: {error}")


async def ask_structured(
    model: ChatModel,
    messages: Sequence[Message],
    sampling: SamplingParams,
    schema: type[M],
    *,
    strictness: Strictness,
    reask: Callable[[str], Message] = default_reask,
    quoted: Sequence[str] = (),
    max_chars: int = MAX_ANSWER_CHARS,
) -> tuple[M, StructuredResult]:
    """Ask ``model`` for a ``schema`` answer; re-ask once with the error; then raise :class:`ReaskFailed`.

    ``reask(error) -> Message`` makes the follow-up message (in the prompt's language); the model's
    own unusable answer goes before it, so the model sees what it wrote.
    """

    def read(text: str) -> M:
        return parse_structured(text, schema, strictness=strictness, quoted=quoted, max_chars=max_chars)

    def follow_up(convo: list[Message], text: str, problem: str) -> list[Message]:
        return [*convo, Message(role="assistant", content=text[:max_chars]), reask(problem)]

    return await _ask_until_read(model, messages, sampling, read, follow_up, attempts=2)


async def ask_parsed(
    model: ChatModel,
    messages: Sequence[Message],
    sampling: SamplingParams,
    read: Callable[[str], M],
    *,
    attempts: int = 2,
) -> tuple[M, StructuredResult]:
    """Ask ``model`` and read the answer with ``read``; re-send the same request on a malformed one.

    For protocols whose answers are free text read the published way (``read`` raises
    ``ValueError`` where the published parser raises): the published loop re-sends the same prompt
    until it parses, without bound (SAGE/simulator_response.py:135-161 ``time.sleep(3)``). Here the request is the same
    bytes each time, at most ``attempts`` times in all (``0``: until one parses, as published), then
    :class:`ReaskFailed`.
    """

    def read_or_answer_error(text: str) -> M:
        try:
            return read(text)
        except AnswerError:
            raise
        except ValueError as exc:
            raise AnswerError(str(exc) or type(exc).__name__) from None

    def same(convo: list[Message], text: str, problem: str) -> list[Message]:
        return convo

    return await _ask_until_read(model, messages, sampling, read_or_answer_error, same, attempts=attempts)


async def _ask_until_read(
    model: ChatModel,
    messages: Sequence[Message],
    sampling: SamplingParams,
    read: Callable[[str], M],
    follow_up: Callable[[list[Message], str, str], list[Message]],
    *,
    attempts: int,
) -> tuple[M, StructuredResult]:
    """The one ask-read-retry loop: ``follow_up(convo, answer, problem)`` makes the next request after
    an answer ``read`` refused (:class:`AnswerError`); after ``attempts`` calls (``0``: no bound),
    :class:`ReaskFailed`."""
    started = time.perf_counter()
    convo = list(messages)
    result = StructuredResult()
    problem = ""
    for attempt in itertools.count(1) if attempts == 0 else range(1, attempts + 1):
        completion = await model.complete(convo, sampling)
        result.completions.append(completion)
        result.attempts = attempt
        try:
            answer = read(completion.text)
        except AnswerError as exc:
            problem = str(exc)
            if completion.finish_reason == "length":
                problem += " (the answer was cut off at the token limit; be brief)"
            convo = follow_up(convo, completion.text, problem)
            continue
        result.answer = answer
        result.wall_s = time.perf_counter() - started
        return answer, result
    result.wall_s = time.perf_counter() - started
    raise ReaskFailed(problem, result)
