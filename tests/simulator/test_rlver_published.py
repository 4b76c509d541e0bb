"""``rlver-published`` sends the requests of the published training simulator, byte for byte (issue 41).

The reference is ``PlayerSimulator`` of the fetched ``hard_player_simulator_dsv3.py``, executed here (in
the test only) with ``call_api`` replaced by a stub. Two published bugs are worked around, as
docs/published-text.md says: the file does not compile as released (``call_api``'s docstring is not indented;
the same one-docstring repair rlver makes before parsing it), and it imports its system prompts from
``verl.workers.rollout.vllm_rollout.system_prompt`` (a stand-in module here). ``PlayerSimulator`` is made
without its ``__init__``, which reads ``data/train_profile.jsonl`` and calls the model; the state
``__init__`` would set (emotion, state, tier table) is set directly. The dialogues are released SAGE
transcripts (no training transcript was released); the prompts do not depend on who wrote them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from rlver.llm.openai_client import OpenAIChatModel
from rlver.records import Message
from rlver.rules import PUBLISHED_TRAINING
from rlver.simulator.emotion import EmotionRules
from rlver.simulator.llm import published_text
from rlver.simulator.llm.protocols.rlver_published import read_training_appraisal
from rlver.simulator.llm.user import LLMSimulator
from rlver.testing.openai_server import FakeChatServer
from test_sage_published import Stub, _fresh_texts, appraisal_answer, exec_source, reply_answer, state_of  # noqa: F401 (an autouse fixture)
from test_sage_published_parts import _profile_from_row, answer_variants

RELEASED = "sage_released/deepseek-v3-simulator/gpt-4o-0808_result.jsonl"


class Unparsed(BaseException):
    """The published loop would ask again: the answer did not parse."""


def training_simulator_class(shared_data: Path, monkeypatch: pytest.MonkeyPatch, stub: Any) -> Any:
    """The fetched file's ``PlayerSimulator`` class, its ``call_api`` replaced by ``stub``: the file is
    repaired as rlver repairs it (``call_api``'s docstring) and its prompts import gets a stand-in."""
    path = shared_data / "published_code" / "rlver" / "hard_player_simulator_dsv3.py"
    source = published_text._repair_call_api(path.read_text(encoding="utf-8"))
    prompts = types.ModuleType("verl.workers.rollout.vllm_rollout.system_prompt")
    for name in ("verl", "verl.workers", "verl.workers.rollout", "verl.workers.rollout.vllm_rollout"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, prompts.__name__, prompts)
    return exec_source(source, path, monkeypatch, stub, call="call_api")["PlayerSimulator"]


def exec_training_simulator(shared_data: Path, monkeypatch: pytest.MonkeyPatch, stub: Any) -> Any:
    """A ``PlayerSimulator`` made without its ``__init__`` (which reads a profile file and calls the
    model), with the state ``__init__`` would set."""
    cls = training_simulator_class(shared_data, monkeypatch, stub)
    simulator = cls.__new__(cls)
    simulator.emo_count = dict(published_text.training_texts().tiers)
    simulator.header = {}
    return simulator


async def _rlver_requests(
    url: str, profile: Any, history: list[dict[str, Any]], k: int, emotion: int
) -> None:
    model = OpenAIChatModel(base_url=url, model="sim", api_key_env=None)
    simulator = LLMSimulator(
        model, protocol="rlver-published", rules=EmotionRules(dialogue=PUBLISHED_TRAINING)
    )
    try:
        user = simulator.start(profile, start_emotion=emotion)
        if k == 0:
            await user.open()
            return
        before = [Message(role=m["role"], content=m["content"]) for m in history[: 2 * k - 1]]
        user.restore(before, emotion)
        await user.respond(history[2 * k - 1]["content"])
    finally:
        await simulator.aclose()


def test_each_training_request_is_the_published_simulators(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [
        json.loads(line) for line in (shared_data / RELEASED).read_text(encoding="utf-8").splitlines()[:3]
    ]
    rows = {
        json.loads(line)["id"]: json.loads(line)
        for line in (shared_data / "sage_test_profiles.jsonl").read_text().splitlines()
    }
    stub = Stub()
    published = exec_training_simulator(shared_data, monkeypatch, stub)
    compared = 0
    for record in records:
        row = dict(rows[record["id"]])
        row.pop("first_talk")  # the training profiles have no opening line: the user writes one
        profile = _profile_from_row(row, shared_data)
        history = record["history"]
        for k in range(0, (len(history) - 1) // 2 + 1):
            emotion = 30 if k == 0 else history[2 * k - 2]["emotion-point"]
            if k == 0:
                answers = [reply_answer(history[0])]
                data_history: list[dict[str, Any]] = []
            else:
                answers = [
                    appraisal_answer(history[2 * k]["planning"], fit="Reason"),
                    reply_answer(history[2 * k]),
                ]
                data_history = [{"role": m["role"], "content": m["content"]} for m in history[: 2 * k]]
            published.emo_point, published.emo_state = emotion, "Emotion-C" if k == 0 else state_of(emotion)
            stub.prompts.clear()
            stub.answers = list(answers)
            published.chat_player(
                {"player": row["player"], "scene": row["scene"], "target": "eq", "history": data_history,
                 "emo_point": emotion, "emo_state": published.emo_state}
            )  # fmt: skip
            expected = list(stub.prompts)
            queue = list(answers)
            with FakeChatServer(lambda _r, q=queue: q.pop(0)) as server:
                asyncio.run(_rlver_requests(server.url, profile, history, k, emotion))
                sent = [r["messages"] for r in server.requests]
            assert sent == [[{"role": "user", "content": p}] for p in expected], (record["id"], k)
            compared += 1
    assert compared >= 20


def test_the_training_parser_reads_every_answer_as_the_published_code(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = exec_training_simulator(shared_data, monkeypatch, Stub())
    namespace = published.planning_reply.__globals__
    agree = parsed = 0
    for text in answer_variants(1200, seed=1) + [
        v.replace("Target", "").replace("Completion", "Reason") for v in answer_variants(400, seed=2)
    ]:
        calls = [text]

        def api(_prompt: str, calls: list[str] = calls) -> str:
            if not calls:
                raise Unparsed
            return calls.pop()

        namespace["call_api"] = api
        published.emo_point, published.emo_state = 30, "Emotion-C"
        try:
            _, planning = published.planning_reply(
                {
                    "player": "p",
                    "scene": "s",
                    "target": "eq",
                    "history": [],
                    "emo_point": 30,
                    "emo_state": "Emotion-C",
                }
            )
            expected: dict[str, Any] | None = {
                **planning,
                "change": int(planning["change"]),
                "emo_point": published.emo_point,
            }
        except Unparsed:
            expected = None
        try:
            ours = read_training_appraisal(text)
            got: dict[str, Any] | None = {
                "content": ours.understanding, "reason": ours.goal_fit, "activity": ours.inner_reaction,
                "analyse": ours.feeling, "change": ours.change, "emo_point": min(30 + ours.change, 100),
            }  # fmt: skip
        except ValueError:
            got = None
        assert got == expected, text
        agree += 1
        parsed += got is not None
    assert agree == 1600 and parsed >= 300
