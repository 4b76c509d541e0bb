"""Empty and malformed simulator answers under the published-text protocols, read as the published code
reads them (issue 48): an empty reply is the user's reply, said at the first call; an empty appraisal
has no change and is sent again; a malformed one is sent again until it parses, as SAGE's loop, within
``parse_attempts`` (by default a large guard against a broken endpoint; ``0``: no bound)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rlver.errors import AppraisalParseError
from rlver.llm.openai_client import OpenAIChatModel
from rlver.records import Message
from rlver.simulator.llm.protocols.base import PARSE_GUARD
from rlver.simulator.llm.protocols.sage_published import SagePublishedProtocol
from rlver.simulator.llm.user import LLMSimulator
from rlver.testing.openai_server import FakeChatServer
from test_sage_published import Stub, _fresh_texts, exec_published  # noqa: F401 (an autouse fixture)
from test_sage_published_parts import _profile_from_row

APPRAISAL = "Content:\n懂了\nTargetCompletion:\n一半\nActivity:\n想\nAnalyse:\n还行\nChange:\n+5"
MALFORMED = "Content:\n懂了\nChange:\n说不上来"


def _row(shared_data: Path) -> dict[str, Any]:
    return json.loads((shared_data / "sage_test_profiles.jsonl").read_text(encoding="utf-8").splitlines()[0])


async def _respond(simulator: LLMSimulator, profile: Any, opening: str) -> Any:
    try:
        user = simulator.start(profile, start_emotion=40)
        user.restore([Message(role="user", content=opening)], 40)
        return await user.respond("我在听。")
    finally:
        await simulator.aclose()


def _simulator(url: str, **options: Any) -> LLMSimulator:
    model = OpenAIChatModel(base_url=url, model="sim", api_key_env=None)
    return LLMSimulator(model, protocol=SagePublishedProtocol(**options))


def test_an_empty_answer_is_read_as_sages_own_code_reads_it(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = _row(shared_data)
    answers = ["", APPRAISAL, ""]  # an empty appraisal (sent again), a change, an empty reply
    stub = Stub()
    stub.answers = list(answers)
    sage = exec_published(
        shared_data / "published_code" / "sage" / "simulator_response.py", monkeypatch, stub
    )
    history = [{"role": "user", "content": row["first_talk"]}, {"role": "assistant", "content": "我在听。"}]
    player = {"emo_point": 40, "emo_state": "Emotion-B", "player": row["player"], "scene": row["scene"]}
    said = sage["chat_player"]({**player, "history": history, "target": 0})
    queue = list(answers)
    with FakeChatServer(lambda _request: queue.pop(0)) as server:
        turn = asyncio.run(
            _respond(_simulator(server.url), _profile_from_row(row, shared_data), row["first_talk"])
        )
        sent = [r["messages"] for r in server.requests]
    assert sent == [[{"role": "user", "content": p}] for p in stub.prompts]  # 3 calls, the first two equal
    assert len(sent) == 3 and sent[0] == sent[1]
    assert turn.text == said["history"][-1]["content"] == ""
    assert turn.appraisal is not None and turn.appraisal.emotion_after == said["emo_point"] == 45


def test_a_malformed_answer_is_sent_again_within_its_cap_or_until_it_parses(shared_data: Path) -> None:
    row = _row(shared_data)
    profile = _profile_from_row(row, shared_data)
    for attempts, parses in ((2, False), (0, True), (4, True), (3, False)):
        queue = [MALFORMED, MALFORMED, MALFORMED, APPRAISAL, "Response:\n嗯。"]
        with FakeChatServer(lambda _request, q=queue: q.pop(0)) as server:
            simulator = _simulator(server.url, parse_attempts=attempts)
            if parses:
                turn = asyncio.run(_respond(simulator, profile, row["first_talk"]))
                assert turn.text == "嗯。" and len(server.requests) == 5
            else:
                with pytest.raises(AppraisalParseError, match="appraisal answer was malformed"):
                    asyncio.run(_respond(simulator, profile, row["first_talk"]))
                assert len(server.requests) == attempts
    assert SagePublishedProtocol().describe()["parse_attempts"] == PARSE_GUARD


def test_malformed_answers_are_handled_as_sages_loop_with_the_default_settings(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five malformed appraisals in a row, then one that parses: SAGE re-sends the same prompt until it
    parses; rlver with no setting sends the same requests (it used to fail the turn after two)."""
    row = _row(shared_data)
    answers = [MALFORMED] * 5 + [APPRAISAL, "Response:\n嗯。"]
    stub = Stub()
    stub.answers = list(answers)
    sage = exec_published(
        shared_data / "published_code" / "sage" / "simulator_response.py", monkeypatch, stub
    )
    history = [{"role": "user", "content": row["first_talk"]}, {"role": "assistant", "content": "我在听。"}]
    player = {"emo_point": 40, "emo_state": "Emotion-B", "player": row["player"], "scene": row["scene"]}
    said = sage["chat_player"]({**player, "history": history, "target": 0})
    queue = list(answers)
    with FakeChatServer(lambda _request: queue.pop(0)) as server:
        turn = asyncio.run(
            _respond(_simulator(server.url), _profile_from_row(row, shared_data), row["first_talk"])
        )
        sent = [r["messages"] for r in server.requests]
    assert len(stub.prompts) == 7
    assert sent == [[{"role": "user", "content": p}] for p in stub.prompts]
    assert turn.text == said["history"][-1]["content"] == "嗯。"
    assert turn.appraisal is not None and turn.appraisal.emotion_after == said["emo_point"] == 45
