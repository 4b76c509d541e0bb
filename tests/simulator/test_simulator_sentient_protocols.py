"""The sentient user's prompt protocols are objects: the user never asks which one it holds.

docs/architecture.md: adding a protocol = one file (a ``LLMUserPrompts`` subclass with its options as
fields and its ``ProtocolDialogue``) + one line in ``PROTOCOLS``. These tests hold that count.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from pydantic import ValidationError

from helpers import TEST_PROFILES, add_for_test
from rlver.cli.eval_cmd import _user_block
from rlver.errors import ConfigError
from rlver.records import Message
from rlver.registry import Entry
from rlver.simulator.factory import SimulatorSpec, build_simulator
from rlver.simulator.llm import protocols
from rlver.simulator.llm.protocols import PROTOCOLS, DialogueStart, ProtocolDialogue, ReplyStep
from rlver.simulator.llm.protocols.v1 import V1Dialogue, V1Protocol
from rlver.simulator.llm.spec import LLMUserSpec
from rlver.simulator.llm.user import LLMSimulator
from rlver.testing.openai_server import FakeChatServer

SIMULATOR = Path(__file__).resolve().parents[2] / "src" / "rlver" / "simulator"

#: A comparison with a protocol's name: the branch the protocol objects replaced.
BRANCH = re.compile(r"protocol\w*\s*[!=]=|[!=]=\s*\"(?:sage|rlver-v1)\"|\"(?:sage|rlver-v1)\"\s*[!=]=")


def test_no_protocol_branch_remains_in_the_simulator() -> None:
    found = [
        f"{path.relative_to(SIMULATOR)}:{n}: {line.strip()}"
        for path in sorted(SIMULATOR.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BRANCH.search(line)
    ]
    assert not found, "branches on a protocol's name:\n" + "\n".join(found)
    assert BRANCH.search('if self.simulator.protocol == "sage":')  # the pattern sees the old shape


def test_each_protocol_file_holds_one_registered_protocol() -> None:
    """One file per protocol (besides the package and the interface), each registered once."""
    folder = Path(protocols.__file__).parent
    files = sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "base"))
    modules = sorted(cls.__module__.rsplit(".", 1)[-1] for _, cls in PROTOCOLS.items())
    assert modules == files
    for name, cls in PROTOCOLS.items():
        assert cls.model_fields["name"].default == name
        assert cls().describe()["prompts"] == name


class TerseDialogue(ProtocolDialogue):
    """The ``rlver-v1`` prompts with one extra line in every system message."""

    def __init__(self, inner: V1Dialogue, max_words: int) -> None:
        self.inner = inner
        self.line = f"Answer in at most {max_words} words."

    def _add(self, messages: list[Message]) -> list[Message]:
        system = messages[0].model_copy(update={"content": f"{messages[0].content}\n{self.line}"})
        return [system, *messages[1:]]

    def opening(self, emotion: int) -> list[Message]:
        return self._add(self.inner.opening(emotion))

    def appraisal(self, history: Sequence[Message], agent_reply: str, emotion: int) -> list[Message]:
        return self._add(self.inner.appraisal(history, agent_reply, emotion))

    def reply(self, step: ReplyStep) -> list[Message]:
        return self._add(self.inner.reply(step))

    def reask(self, error: str) -> Message:
        return self.inner.reask(error)


class TerseProtocol(V1Protocol):
    """What a new protocol's file holds: its name, its options, its prompts (here: rlver-v1's and a
    line) and its answers (rlver-v1's), like the RLOO test's algorithm built on GRPO."""

    name: Literal["terse"] = "terse"  # type: ignore[assignment]
    max_words: int = 20

    prompt_version: ClassVar[str] = "terse-v1"

    def dialogue(self, start: DialogueStart) -> ProtocolDialogue:
        inner = super().dialogue(start)
        assert isinstance(inner, V1Dialogue)
        return TerseDialogue(inner, self.max_words)

    def shown(self) -> dict[str, bool]:
        return {"max_words_line": True}


def _answer(request: dict[str, Any]) -> str:
    return json.dumps(
        {"understanding": "u", "goal_fit": "g", "inner_reaction": "i", "feeling": "f", "change": 4}
        | {"reply": "fine.", "end_dialogue": False}
    )


def test_a_new_protocol_is_one_file_and_one_registry_line(
    monkeypatch: pytest.MonkeyPatch, fake_server: FakeChatServer
) -> None:
    """Registered at run time and nowhere else: the config (nested or flat), the CLI's choices, the
    schema, the prompts sent and the manifest all follow."""
    add_for_test(monkeypatch, PROTOCOLS, Entry("terse", "a test's protocol", TerseProtocol, TerseProtocol))
    fake_server.responder = _answer
    model = {"model": "judge", "base_url": fake_server.url, "api_key_env": None}
    nested = {"kind": "llm", "model": model, "cache": None, "prompts": {"name": "terse", "max_words": 7}}
    flat = {"kind": "llm", "model": model, "cache": None, "protocol": "terse", "max_words": 7}
    spec = SimulatorSpec.model_validate(nested)
    assert isinstance(spec, LLMUserSpec) and spec.prompts == TerseProtocol(max_words=7)
    assert SimulatorSpec.model_validate(flat) == spec
    with pytest.raises(ValidationError, match="max_words"):
        SimulatorSpec.model_validate({**flat, "max_words": "many"})
    assert _user_block("terse", None, None) == {
        "prompts": {"name": "terse"}
    }  # rlver eval --sim-prompts terse
    assert "TerseProtocol" in json.dumps(SimulatorSpec.model_json_schema())

    sim = build_simulator(spec)
    assert isinstance(sim, LLMSimulator)

    async def one_turn() -> int:
        try:
            user = sim.start(TEST_PROFILES["f-1"], start_emotion=40)
            await user.open()
            turn = await user.respond("That sounds hard.")
        finally:
            await sim.aclose()
        assert turn.appraisal is not None and turn.text == "fine."
        return turn.appraisal.emotion_after

    assert asyncio.run(one_turn()) == 44
    for request in fake_server.requests:
        assert request["messages"][0]["content"].endswith("Answer in at most 7 words.")
    described = sim.describe()
    assert described["prompts"] == "terse" and described["prompt_version"] == "terse-v1"
    assert described["max_words_line"] is True


def test_a_protocol_by_name_and_an_unknown_one() -> None:
    assert LLMSimulator(object(), protocol="sage").protocol == PROTOCOLS.get("sage")()  # type: ignore[arg-type]
    assert PROTOCOLS.names()[:4] == ("sage", "sage-published", "rlver-published", "rlver-v1")
    known = f"known: {', '.join(PROTOCOLS)}"
    with pytest.raises(ConfigError, match=f"^unknown prompt set 'nope'; {known}$"):
        LLMSimulator(object(), protocol="nope")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown prompt set 'sag'; did you mean 'sage'"):
        LLMSimulator(object(), protocol="sag")  # type: ignore[arg-type]
