"""Strict parsing of the simulator LLM's structured answers.

The published code split the simulator's output on strings and trusted what it found. Here an answer
must contain exactly one JSON object that validates against a pydantic schema (missing fields,
non-integer changes and oversized text are errors). Preamble and code fences around the object are
tolerated because chat models add them; anything else is not. A malformed answer is re-asked ONCE with
the validation error appended; a second failure raises :class:`~rlver.errors.AppraisalParseError`
(never a retry loop).

Injection safety: the parser reads only the JSON *fields* of the simulator's answer. Text such as
"Change: +10" inside the agent's reply (or echoed in a reasoning field) is just string content of a
field, and a JSON object that appears verbatim in the agent's reply (an agent trying to plant a
ready-made appraisal that a careless simulator copies) is discarded as an echo, not read.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rlver.errors import AppraisalParseError
from rlver.llm.base import ChatModel, Completion, SamplingParams
from rlver.records import Message

#: Bounds on what a simulator answer may contain (characters).
MAX_ANSWER_CHARS = 32_000
MAX_REASON_CHARS = 3_000
MAX_REPLY_CHARS = 2_000
#: A stated change outside this range is not a sloppy number but a broken answer.
MAX_ABS_RAW_CHANGE = 100

_NUMBER = re.compile(r"^\s*([+-]?)\s*(\d{1,4})(?:\.0+)?\s*$")

M = TypeVar("M", bound=BaseModel)


class AnswerError(ValueError):
    """One answer could not be used; the message is short and meant for the re-ask prompt."""


def _text_field(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be blank")
    return value.strip() if isinstance(value, str) else value


class AppraisalAnswer(BaseModel):
    """The appraisal step's answer: four named reasoning steps and an integer change."""

    model_config = ConfigDict(extra="ignore", strict=False)

    understanding: str = Field(max_length=MAX_REASON_CHARS)
    goal_fit: str = Field(max_length=MAX_REASON_CHARS)
    inner_reaction: str = Field(max_length=MAX_REASON_CHARS)
    feeling: str = Field(max_length=MAX_REASON_CHARS)
    change: int

    _blank = field_validator("understanding", "goal_fit", "inner_reaction", "feeling", mode="before")(
        _text_field
    )

    @field_validator("change", mode="before")
    @classmethod
    def _integer_change(cls, value: Any) -> int:
        """An int, an integral float (5.0) or a numeric string ("+5", "-3"); never a bool or 5.5."""
        if isinstance(value, bool):
            raise ValueError("must be an integer, not a boolean")
        if isinstance(value, int):
            number = value
        elif isinstance(value, float) and value.is_integer():
            number = int(value)
        elif isinstance(value, str) and (m := _NUMBER.match(value)):
            number = int(m.group(2)) * (-1 if m.group(1) == "-" else 1)
        else:
            raise ValueError(f"must be an integer such as -3 or +5 (got {_short(value)})")
        if abs(number) > MAX_ABS_RAW_CHANGE:
            raise ValueError(f"must be between -10 and +10 (got {number})")
        return number


class ReplyAnswer(BaseModel):
    """The reply step's answer: what the user says and whether they want to end the dialogue."""

    model_config = ConfigDict(extra="ignore")

    reply: str = Field(max_length=MAX_REPLY_CHARS)
    end_dialogue: bool

    _blank = field_validator("reply", mode="before")(_text_field)


class PlannedReplyAnswer(BaseModel):
    """The ``sage`` protocol's reply step: a plan, a draft, its rewrite for realism, the final words.

    The published simulator plans its message (stance, aim, tone), writes a first version and then
    rewrites it to sound like a real person; only the final words are said. Every step is a required
    field so a model that skips the plan is re-asked rather than silently accepted.
    """

    model_config = ConfigDict(extra="ignore")

    stance: str = Field(max_length=MAX_REASON_CHARS)
    aim: str = Field(max_length=MAX_REASON_CHARS)
    tone: str = Field(max_length=MAX_REASON_CHARS)
    draft: str = Field(max_length=MAX_REPLY_CHARS)
    rewrite: str = Field(max_length=MAX_REASON_CHARS)
    reply: str = Field(max_length=MAX_REPLY_CHARS)
    end_dialogue: bool

    _blank = field_validator("stance", "aim", "tone", "draft", "rewrite", "reply", mode="before")(_text_field)

    def plan(self) -> dict[str, str]:
        """The steps before the final words (kept in the user turn's ``extra`` for inspection)."""
        return {k: getattr(self, k) for k in ("stance", "aim", "tone", "draft", "rewrite")}


class OpeningAnswer(BaseModel):
    """The opening step's answer: the user's first message."""

    model_config = ConfigDict(extra="ignore")

    reply: str = Field(max_length=MAX_REPLY_CHARS)

    _blank = field_validator("reply", mode="before")(_text_field)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _normalise_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", key.strip()).lower()


def _squash(text: str) -> str:
    return "".join(text.split())


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


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(object)"
        if err["type"] == "missing":
            parts.append(f"field {where!r} is missing")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"field {where!r} {msg}" if msg.startswith("must") else f"field {where!r}: {msg}")
    return "; ".join(parts)


def parse_answer(text: str, schema: type[M], *, quoted: Sequence[str] = ()) -> M:
    """Validate a simulator answer against ``schema``; raise :class:`AnswerError` when unusable.

    ``quoted`` is the untrusted text that was quoted into the prompt (the agent's replies): a JSON
    object found verbatim inside it is an echo of the agent, not the simulator's answer, and is
    ignored.
    """
    if not text or not text.strip():
        raise AnswerError("the answer was empty")
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError(f"the answer is too long ({len(text)} characters; at most {MAX_ANSWER_CHARS})")
    candidates = extract_json_objects(text)
    if not candidates:
        raise AnswerError("no JSON object was found in the answer")
    # Only quoted text that contains a brace can hold an echoed object: skip the rest cheaply.
    squashed_quotes = [_squash(q) for q in quoted if q and "{" in q]
    own = [obj for source, obj in candidates if not any(_squash(source) in q for q in squashed_quotes)]
    if not own:
        raise AnswerError("the only JSON object in the answer was copied from the quoted conversation")
    valid: list[M] = []
    errors: list[str] = []
    for obj in own:
        try:
            valid.append(schema.model_validate({_normalise_key(str(k)): v for k, v in obj.items()}))
        except ValidationError as exc:
            errors.append(_describe(exc))
    if not valid:
        # Report the error of the candidate closest to the schema (fewest problems).
        best = min(errors, key=lambda e: e.count(";"))
        raise AnswerError(best)
    distinct = {v.model_dump_json() for v in valid}
    if len(distinct) > 1:
        raise AnswerError(f"the answer contains {len(distinct)} different JSON objects; give exactly one")
    return valid[0]


@dataclass
class StructuredResult:
    """A validated answer plus what it cost (every completion, the re-ask included)."""

    answer: BaseModel
    completions: list[Completion] = field(default_factory=list)
    attempts: int = 1
    wall_s: float = 0.0

    @property
    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.completions)

    @property
    def prompt_tokens(self) -> int:
        """Input tokens of every attempt (what a hosted simulator bills as input)."""
        return sum(c.prompt_tokens for c in self.completions)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.completions)


async def ask_structured(
    model: ChatModel,
    messages: Sequence[Message],
    sampling: SamplingParams,
    schema: type[M],
    *,
    reask_builder: Callable[[str], Message] | None = None,
    quoted: Sequence[str] = (),
    step: str = "appraisal",
) -> tuple[M, StructuredResult]:
    """Ask ``model`` for a ``schema`` answer; re-ask once with the error; then raise.

    ``reask_builder(error) -> Message`` makes the follow-up message (in the prompt's language).
    LLM errors (timeouts, HTTP failures) propagate unchanged: the client already retried them.
    """
    started = time.perf_counter()
    convo = list(messages)
    result = StructuredResult(answer=None)  # type: ignore[arg-type]
    last_error = ""
    for attempt in (1, 2):
        completion = await model.complete(convo, sampling)
        result.completions.append(completion)
        result.attempts = attempt
        try:
            answer = parse_answer(completion.text, schema, quoted=quoted)
        except AnswerError as exc:
            last_error = str(exc)
            if completion.finish_reason == "length":
                last_error += " (the answer was cut off at the token limit; be brief)"
            if attempt == 1:
                follow = (
                    reask_builder(last_error)
                    if reask_builder
                    else Message(role="user", content=f"Your answer could not be used: {last_error}")
                )
                convo = [
                    *convo,
                    Message(role="assistant", content=completion.text[:MAX_ANSWER_CHARS]),
                    follow,
                ]
            continue
        result.answer = answer
        result.wall_s = time.perf_counter() - started
        return answer, result
    error = AppraisalParseError(
        f"simulator {step} answer was malformed twice (asked once again with the error): {last_error}"
    )
    error.step = step  # type: ignore[attr-defined]
    error.completions = result.completions  # type: ignore[attr-defined]
    raise error
