"""The simulator LLM's answer schemas, read strictly (finding, validating, re-asking: rlver.llm.structured).

The published code split the simulator's output on strings and trusted what it found. Here an answer
must contain exactly one JSON object that validates against a pydantic schema (missing fields,
non-integer changes and oversized text are errors). Preamble and code fences around the object are
tolerated because chat models add them (:attr:`~rlver.llm.structured.Strictness.LENIENT`); anything else
is not. A malformed answer is re-asked ONCE with the validation error appended; a second failure raises
:class:`~rlver.errors.AppraisalParseError` (never a retry loop).

Injection safety: the parser reads only the JSON *fields* of the simulator's answer. Text such as
"Change: +10" inside the agent's reply (or echoed in a reasoning field) is just string content of a
field, and a JSON object that appears verbatim in the agent's reply (an agent trying to plant a
ready-made appraisal that a careless simulator copies) is discarded as an echo, not read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlver.errors import AppraisalParseError
from rlver.llm.base import ChatModel, SamplingParams
from rlver.llm.structured import (
    ReaskFailed,
    Strictness,
    StructuredResult,
    ask_parsed,
    ask_structured,
    default_reask,
    parse_structured,
)
from rlver.records import Message

#: Bounds on what a simulator answer may contain (characters).
MAX_ANSWER_CHARS = 32_000
MAX_REASON_CHARS = 3_000
MAX_REPLY_CHARS = 2_000
#: A stated change outside this range is not a sloppy number but a broken answer. Large statements
#: within it are kept: the published simulators parse any integer and then clamp it to ±10 (SAGE,
#: simulator_response.py:150-151 ``max(-10,min(10,``) or apply it as stated (RLVER training, hard_player_simulator_dsv3.py:219 ``self.emo_point+=int(planning["change"])``),
#: so a "+150" is a judgement the environment's rules (``EnvConfig.rules.bound_change``) deal with, not an error.
MAX_ABS_RAW_CHANGE = 9999

_NUMBER = re.compile(r"^\s*([+-]?)\s*(\d{1,4})(?:\.0+)?\s*$")

#: The simulator adds preamble, fences and remarks and may echo the agent (see rlver.llm.structured).
STRICTNESS = Strictness.LENIENT

M = TypeVar("M", bound=BaseModel)


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
            raise ValueError(
                f"must be an integer between -{MAX_ABS_RAW_CHANGE} and {MAX_ABS_RAW_CHANGE} (got {number})"
            )
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


def parse_simulator_answer(text: str, schema: type[M], *, quoted: Sequence[str] = ()) -> M:
    """Validate one simulator answer the simulator's way (``LENIENT``, bounded by MAX_ANSWER_CHARS).

    ``quoted`` is the untrusted text quoted into the prompt (the agent's replies): a JSON object found
    verbatim inside it is an echo of the agent, not the simulator's answer, and is ignored.
    """
    return parse_structured(text, schema, strictness=STRICTNESS, quoted=quoted, max_chars=MAX_ANSWER_CHARS)


def _times(n: int) -> str:
    return "twice" if n == 2 else f"{n} times"


async def ask_simulator(
    model: ChatModel,
    messages: Sequence[Message],
    sampling: SamplingParams,
    schema: type[M],
    *,
    reask_builder: Callable[[str], Message] = default_reask,
    quoted: Sequence[str] = (),
    step: str = "appraisal",
    reader: Callable[[str], M] | None = None,
    attempts: int = 2,
) -> tuple[M, StructuredResult]:
    """One simulator step: ask, re-ask once with the error, then raise :class:`AppraisalParseError`.

    With ``reader`` (a protocol that reads free text the published way) the answer is read by it,
    and a malformed answer is re-asked by sending the same request again, ``attempts`` calls in all
    (``0``: until one parses; :func:`~rlver.llm.structured.ask_parsed`). The error carries ``step``
    and every completion (``completions``), so a failed turn's cost is still counted.
    """
    try:
        if reader is not None:
            return await ask_parsed(model, messages, sampling, reader, attempts=attempts)
        return await ask_structured(
            model,
            messages,
            sampling,
            schema,
            strictness=STRICTNESS,
            reask=reask_builder,
            quoted=quoted,
            max_chars=MAX_ANSWER_CHARS,
        )
    except ReaskFailed as exc:
        error = AppraisalParseError(
            f"simulator {step} answer was malformed {_times(exc.result.attempts)}: {exc.problem}"
        )
        error.step = step  # type: ignore[attr-defined]
        error.completions = exc.result.completions  # type: ignore[attr-defined]
        raise error from None
