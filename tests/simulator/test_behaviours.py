"""User behaviour modes: complete guidance in both languages, clear errors, selection per profile or
per run, and that the guidance really reaches the simulator (LLM prompt over real HTTP; offline bias)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any

import pytest

from rlver.errors import ConfigError
from rlver.llm.openai_client import OpenAIChatModel
from rlver.profiles.sets import load_profile_set
from rlver.simulator.behaviours import (
    BEHAVIOURS,
    COOPERATIVE,
    LANGUAGES,
    behaviour_names,
    get_behaviour,
    guidance,
    resolve_behaviour,
)
from rlver.simulator.llm.user import LLMSimulator
from rlver.simulator.offline.user import OfflineSimulator
from rlver.testing.openai_server import FakeChatServer

CJK = re.compile(r"[\u4e00-\u9fff]")
ADVERSARIAL = ["escalating", "gaslighting", "validation_seeking", "withdrawn"]


def test_every_mode_has_guidance_in_every_language() -> None:
    assert behaviour_names() == ["cooperative", *ADVERSARIAL]
    seen: set[str] = set()
    for name in ADVERSARIAL:
        mode = get_behaviour(name)
        assert mode.name == name and mode.adversarial and mode.description
        assert mode.offline_change_bias < 0
        for lang in LANGUAGES:
            for step in ("appraisal", "reply"):
                text = guidance(mode, lang, step)
                assert len(text) > 60, (name, lang, step)
                assert text not in seen, "each mode and step has its own wording"
                seen.add(text)
                has_cjk = bool(CJK.search(text))
                assert has_cjk == (lang == "zh"), (name, lang, step)
    assert not COOPERATIVE.adversarial and COOPERATIVE.offline_change_bias == 0
    assert all(
        v == "" for v in (*COOPERATIVE.appraisal_guidance.values(), *COOPERATIVE.reply_guidance.values())
    )


def test_unknown_mode_lists_valid_names() -> None:
    with pytest.raises(ConfigError) as info:
        get_behaviour("sulky")
    message = str(info.value)
    assert "'sulky'" in message
    for name in BEHAVIOURS:
        assert name in message


def test_names_are_forgiving_and_resolution_order() -> None:
    assert get_behaviour(None) is COOPERATIVE and get_behaviour("") is COOPERATIVE
    assert get_behaviour("Validation-Seeking").name == "validation_seeking"
    assert resolve_behaviour(None, None).name == "cooperative"
    assert resolve_behaviour("withdrawn", None).name == "withdrawn"
    assert resolve_behaviour("withdrawn", "escalating").name == "escalating"  # the run wins
    with pytest.raises(ConfigError):
        resolve_behaviour("withdrawn", "nope")


class Recorder:
    """A simulator LLM's text: always a valid all-in-one answer; remembers every system prompt."""

    def __init__(self) -> None:
        self.systems: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        with self.lock:
            self.systems.append(request["messages"][0]["content"])
        return json.dumps(
            {
                "understanding": "u",
                "goal_fit": "g",
                "inner_reaction": "i",
                "feeling": "f",
                "change": -1,
                "reply": "fine",
                "end_dialogue": False,
            }
        )


def _one_turn(sim: Any, profile: Any) -> None:
    async def run() -> None:
        user = sim.start(profile, start_emotion=40)
        await user.open()
        await user.respond("That sounds hard. What happened?")
        await sim.model.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_guidance_reaches_the_llm_per_profile_and_per_run(lang: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLVER_BEHAVIOUR_TEST_KEY", "sk-x")
    profile = load_profile_set(f"{lang}-test")[0].model_copy(update={"behaviour": "gaslighting"})
    gas = get_behaviour("gaslighting")
    withdrawn = get_behaviour("withdrawn")
    recorder = Recorder()
    with FakeChatServer(recorder) as server:

        def model() -> OpenAIChatModel:
            return OpenAIChatModel(server.url, "sim", api_key_env="RLVER_BEHAVIOUR_TEST_KEY")

        _one_turn(LLMSimulator(model()), profile)  # the profile's mode
        per_profile = list(recorder.systems)
        recorder.systems.clear()
        _one_turn(LLMSimulator(model(), behaviour="withdrawn"), profile)  # the run overrides
        per_run = list(recorder.systems)
    joined = "\n".join(per_profile)
    assert gas.appraisal_guidance[lang] in joined and gas.reply_guidance[lang] in joined
    assert withdrawn.appraisal_guidance[lang] not in joined
    joined = "\n".join(per_run)
    assert withdrawn.appraisal_guidance[lang] in joined and withdrawn.reply_guidance[lang] in joined
    assert gas.appraisal_guidance[lang] not in joined


def test_offline_bias_per_profile_and_run() -> None:
    base = load_profile_set("en-test")[0]
    reply = "That sounds exhausting. What has been the hardest part for you this week?"

    def change(sim: OfflineSimulator, profile: Any) -> tuple[int, dict[str, float]]:
        async def run() -> tuple[int, dict[str, float]]:
            user = sim.start(profile, start_emotion=50)
            await user.open()
            turn = await user.respond(reply)
            assert turn.appraisal is not None
            return turn.appraisal.raw_change, turn.appraisal.features

        return asyncio.run(run())

    coop, coop_features = change(OfflineSimulator(), base)
    assert "behaviour_bias" not in coop_features
    for name in ADVERSARIAL:
        raw, features = change(OfflineSimulator(), base.model_copy(update={"behaviour": name}))
        assert features["behaviour_bias"] == get_behaviour(name).offline_change_bias
        assert raw == coop + get_behaviour(name).offline_change_bias
    # A run-wide mode overrides the profile's.
    raw, features = change(
        OfflineSimulator(behaviour="escalating"), base.model_copy(update={"behaviour": "withdrawn"})
    )
    assert features["behaviour_bias"] == -2
    with pytest.raises(ConfigError, match="choose one of"):
        OfflineSimulator(behaviour="sulky")
