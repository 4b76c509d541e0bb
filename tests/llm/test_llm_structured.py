"""llm/structured.py: what each strictness accepts, the validation messages, and the one re-ask.

The simulator (LENIENT), the judge (PREAMBLE) and profile generation (EXACT) have their own tests of
what they accept; this file shows the three settings side by side on the same answers. The re-ask
goes through a real OpenAI-compatible HTTP server on 127.0.0.1 (only the model's text is scripted).
"""

from __future__ import annotations

import asyncio
import json
import types
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from rlver.errors import ConfigError
from rlver.llm.base import SamplingParams
from rlver.llm.openai_client import OpenAIChatModel
from rlver.llm.structured import (
    MAX_PROBLEMS,
    AnswerError,
    ReaskFailed,
    Strictness,
    ask_structured,
    describe_validation_error,
    parse_json_object,
    parse_structured,
)
from rlver.records import Message
from rlver.simulator.llm.prompts.base import texts_from_module
from rlver.simulator.llm.prompts.sage_base import SageTexts
from rlver.testing.openai_server import FakeChatServer


class Small(BaseModel):
    a: int
    b: str = Field(default="", max_length=20)


OBJ = json.dumps({"a": 1, "b": "x"})
EXACT, PREAMBLE, LENIENT = Strictness.EXACT, Strictness.PREAMBLE, Strictness.LENIENT


@pytest.mark.parametrize(
    ("text", "accepted_by"),
    [
        (OBJ, {EXACT, PREAMBLE, LENIENT}),
        ("```json\n" + OBJ + "\n```", {EXACT, PREAMBLE, LENIENT}),
        ("<think>plan</think>\n" + OBJ, {EXACT, PREAMBLE, LENIENT}),
        ("Here is my answer: " + OBJ, {PREAMBLE, LENIENT}),
        ("Sure:\n```json\n" + OBJ + "\n```\nThanks!", {PREAMBLE, LENIENT}),
        (OBJ + " hope this helps", {LENIENT}),
        (OBJ + "\n" + OBJ, {LENIENT}),  # identical repeats are one answer, leniently
        (json.dumps({"A": 1}), {LENIENT}),  # key case is normalised, leniently
        ("no object at all", set()),
        ("[1, 2]", set()),
    ],
)
def test_each_strictness_accepts_what_it_says(text: str, accepted_by: set[Strictness]) -> None:
    for strictness in Strictness:
        if strictness in accepted_by:
            assert parse_structured(text, Small, strictness=strictness).a == 1
        else:
            with pytest.raises(AnswerError):
                parse_structured(text, Small, strictness=strictness)


@pytest.mark.parametrize("strictness", list(Strictness))
def test_common_checks_and_messages(strictness: Strictness) -> None:
    with pytest.raises(AnswerError, match="empty"):
        parse_structured("  ", Small, strictness=strictness)
    with pytest.raises(AnswerError, match=r"too long .*characters long; the limit is 50"):
        parse_structured(json.dumps({"a": 1, "b": "x" * 60}), Small, strictness=strictness, max_chars=50)
    with pytest.raises(AnswerError, match="field 'a' is missing"):
        parse_structured('{"b": "y"}', Small, strictness=strictness)
    with pytest.raises(AnswerError, match="field 'b': String should have at most 20 characters"):
        parse_structured(json.dumps({"a": 1, "b": "y" * 21}), Small, strictness=strictness)


def test_exact_and_preamble_name_the_json_problem() -> None:
    with pytest.raises(AnswerError, match=r"not a single JSON object: not valid JSON \(Extra data at line 1"):
        parse_json_object(OBJ + " and more", EXACT)
    with pytest.raises(AnswerError, match="expected a JSON object, got list"):
        parse_json_object("[1, 2]", EXACT)
    with pytest.raises(AnswerError, match="no JSON object was found"):
        parse_json_object("nothing here", PREAMBLE)
    with pytest.raises(ValueError, match="use parse_structured"):
        parse_json_object(OBJ, LENIENT)  # several objects may stand in a lenient answer


def test_validation_messages_are_bounded() -> None:
    class Many(BaseModel):
        x0: int
        x1: int
        x2: int
        x3: int
        x4: int
        x5: int
        x6: int
        x7: int
        x8: int
        x9: int

    with pytest.raises(ValidationError) as info:
        Many.model_validate({})
    message = describe_validation_error(info.value)
    assert message.count("is missing") == MAX_PROBLEMS and "'x0'" in message and "'x9'" not in message


# -- the re-ask, over HTTP -------------------------------------------------------------------------
def _ask(server: FakeChatServer, **kwargs: Any) -> tuple[Small, Any]:
    async def go() -> tuple[Small, Any]:
        model = OpenAIChatModel(server.url, "fake", api_key_env=None, max_attempts=1, timeout_s=10)
        try:
            return await ask_structured(
                model,
                [Message(role="user", content="give JSON")],
                SamplingParams(temperature=0),
                Small,
                **kwargs,
            )
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_reask_once_with_the_callers_message(fake_server: FakeChatServer) -> None:
    answers = iter(["Here you go: " + OBJ, OBJ])
    fake_server.responder = lambda request: next(answers)

    def reask(problem: str) -> Message:
        return Message(role="user", content=f"REASK<{problem}>")

    answer, result = _ask(fake_server, strictness=EXACT, reask=reask)
    assert answer.a == 1 and result.attempts == 2 and len(result.completions) == 2
    second = fake_server.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "Here you go: " + OBJ}
    assert second[-1]["content"].startswith("REASK<the answer is not a single JSON object")
    # The same first answer is fine for a caller that allows a preamble: one call only.
    fake_server.responder = lambda request: "Here you go: " + OBJ
    assert _ask(fake_server, strictness=PREAMBLE)[1].attempts == 1


def test_unusable_twice_raises_once_and_stops(fake_server: FakeChatServer) -> None:
    fake_server.responder = lambda request: '{"b": "no a"}'
    with pytest.raises(ReaskFailed, match="field 'a' is missing") as info:
        _ask(fake_server, strictness=LENIENT)
    assert fake_server.served == 2 and info.value.result.attempts == 2
    assert len(info.value.result.completions) == 2  # the cost of both calls is kept


# -- texts_from_module (the prompt sets are built the same way) -------------------------------------
def test_a_language_module_missing_a_text_is_named() -> None:
    module = types.ModuleType("rlver.simulator.llm.prompts.sage_xx")
    module.LANGUAGE = "xx"  # type: ignore[attr-defined]
    with pytest.raises(
        ConfigError, match=r"sage_xx lacks RULES, RUBRIC, .* \(one constant per SageTexts field\)"
    ):
        texts_from_module(SageTexts, module)
