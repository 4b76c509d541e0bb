"""The ``sage`` protocol end to end over a real local OpenAI-compatible server.

Only the simulator LLM's *text* is scripted; prompts, HTTP, parsing, emotion arithmetic and records
are the real code. One test per prompt set (en, zh) checks the two things the protocol promises: the
hidden need is shown once per prompt (never also as a stated goal), and the planned reply (draft and
rewrite) is parsed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from helpers import SAM_EN, XIAOLIN_ZH
from rlver.llm.openai_client import OpenAIChatModel
from rlver.profiles.schema import Profile
from rlver.records import UserTurn
from rlver.simulator.factory import SimulatorSpec, build_simulator
from rlver.simulator.llm.prompts import sage
from rlver.simulator.llm.protocols.sage import SageProtocol
from rlver.simulator.llm.protocols.v1 import V1Protocol
from rlver.simulator.llm.spec import LLMUserSpec
from rlver.simulator.llm.user import LLMSimulator
from rlver.testing.openai_server import FakeChatServer

NEED = {"en": "To hear that being angry about it is fair.", "zh": "希望自己的付出被认可。"}

PROFILES = {
    # published profiles set ``task`` (our goal) equal to the hidden need: it must not be shown twice
    "en": SAM_EN.model_copy(update={"goal": NEED["en"], "hidden_need": NEED["en"], "opening": None}),
    "zh": XIAOLIN_ZH.model_copy(update={"goal": NEED["zh"], "hidden_need": NEED["zh"]}),
}


def _appraisal(change: int) -> str:
    return json.dumps(
        {
            "understanding": "they acknowledged it",
            "goal_fit": "close to what I need",
            "inner_reaction": "a bit calmer",
            "feeling": "heard",
            "change": change,
        }
    )


def _planned(n: int, end: bool = False) -> str:
    return "Sure, here it is:\n" + json.dumps(
        {
            "stance": "neutral",
            "aim": "say a bit more",
            "tone": "dry",
            "draft": f"draft {n}",
            "rewrite": "shorter, more casual",
            "reply": f"final words {n}",
            "end_dialogue": end,
        }
    )


class Script:
    """Answers by the step the last user message asks for; a bad plan first when ``bad_plan``."""

    def __init__(self, changes: list[int], bad_plan: bool = False) -> None:
        self.changes = list(changes)
        self.bad_plan = bad_plan
        self.n = 0

    def __call__(self, request: dict[str, Any]) -> str:
        last = request["messages"][-1]["content"]
        if "Step 1." in last or "第一步。" in last:
            return _appraisal(self.changes.pop(0))
        if self.bad_plan:
            self.bad_plan = False
            return json.dumps({"reply": "no plan", "end_dialogue": False})  # draft/rewrite missing
        self.n += 1
        return _planned(self.n)


def _run(
    server: FakeChatServer, profile: Profile, replies: list[str], difficulty: Any = None, **options: bool
) -> list[UserTurn]:
    async def go() -> list[UserTurn]:
        model = OpenAIChatModel(server.url, "sim", api_key_env=None, max_attempts=1, timeout_s=10)
        try:
            sim = LLMSimulator(model, protocol=SageProtocol(**options), difficulty=difficulty)
            user = sim.start(profile, start_emotion=40, seed=1)
            turns = [await user.open()]
            for reply in replies:
                turns.append(await user.respond(reply))
            return turns
        finally:
            await model.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("language", ["en", "zh"])
def test_hidden_need_once_and_plan_parsed(fake_server: FakeChatServer, language: str) -> None:
    profile = PROFILES[language]
    fake_server.responder = Script([5, -10], bad_plan=True)
    turns = _run(fake_server, profile, ["agent one", "agent two"])

    # opening (written: the profile has none; its first plan is bad: +1 re-ask) + 2 x (appraisal, reply)
    assert len(fake_server.requests) == 1 + 1 + 2 * 2
    texts = sage.SAGE_TEXTS[language]
    for request in fake_server.requests:
        prompt = "\n".join(m["content"] for m in request["messages"])
        assert prompt.count(NEED[language]) == 1, prompt  # once, as hidden, even though goal == need
        system = request["messages"][0]["content"]
        assert system.index(texts.hidden_heading) < system.index(NEED[language])
        assert system.rstrip().endswith(NEED[language])  # at the end of the scene
        assert texts.stated_topic_line.split("{")[0] not in prompt
    # as SAGE: the reply call is its own prompt, given the fit, activity and feeling (no change, no
    # number) and the tier name only
    reply_call = fake_server.requests[3]["messages"]
    assert [m["role"] for m in reply_call] == ["system", "user"]
    given = json.loads(reply_call[1]["content"].split("\n")[-3])
    assert given == {"goal_fit": "close to what I need", "inner_reaction": "a bit calmer", "feeling": "heard"}
    assert "45" not in reply_call[1]["content"].split("</dialogue>")[-1]  # emotion after +5: tier only
    assert texts.reply_task_tier.format(tier="B") in reply_call[1]["content"]
    # the first plan lacked draft/rewrite: re-asked once, in the prompt's language
    reask = fake_server.requests[1]["messages"][-1]["content"]
    assert ("draft" in reask) and (texts.reask.split("{")[0] in reask)

    opening, first, second = turns
    assert opening.text == "final words 1" and opening.extra["plan"]["draft"] == "draft 1"
    assert first.text == "final words 2"
    assert first.extra["plan"] == {
        "stance": "neutral",
        "aim": "say a bit more",
        "tone": "dry",
        "draft": "draft 2",
        "rewrite": "shorter, more casual",
    }
    assert first.appraisal is not None and first.appraisal.emotion_after == 45
    assert second.appraisal is not None and second.appraisal.emotion_after == 35
    # token cost per turn: input and output of every call, the re-ask included
    assert all(t.prompt_tokens > 0 and t.completion_tokens > 0 for t in turns)
    assert first.tokens == first.prompt_tokens + first.completion_tokens


def test_no_scale_by_default_rubric_and_difficulty_are_options(fake_server: FakeChatServer) -> None:
    def system_of(**kwargs: Any) -> str:
        fake_server.requests.clear()
        fake_server.responder = Script([1])
        _run(fake_server, PROFILES["en"], ["hi"], **kwargs)
        return str(fake_server.requests[1]["messages"][0]["content"])  # the appraisal call

    plain = system_of()
    assert "-10" not in plain and "+10" not in plain and "How demanding" not in plain
    assert "garbled" in plain  # the published training simulator's rule
    with_options = system_of(magnitude_rubric=True, difficulty_paragraph=True, difficulty="hard")
    assert "-10 to +10" in with_options and "How demanding you are" in with_options


def test_prompts_are_append_only_across_turns(fake_server: FakeChatServer) -> None:
    fake_server.responder = Script([1, 1, 1])
    _run(fake_server, PROFILES["en"], ["one", "two", "three"])
    calls = ["".join(m["content"] for m in r["messages"]) for r in fake_server.requests]
    users = [r["messages"][-1]["content"] for r in fake_server.requests]
    for appraisal, reply in zip(users[1::2], users[2::2], strict=True):
        # a turn's two calls quote the same dialogue (each behind its own step's rules, as SAGE)
        shared = appraisal[: appraisal.rindex("</dialogue>") + len("</dialogue>")]
        assert reply.startswith(shared)
    for step_calls in (calls[1::2], calls[2::2]):
        for earlier, later in itertools.pairwise(step_calls):
            cut = earlier.rindex("</turn>") + len("</turn>")
            assert later.startswith(earlier[:cut])  # the next turn extends the dialogue so far


def test_spec_defaults_to_sage_and_manifest_records_options() -> None:
    spec = SimulatorSpec.model_validate(
        {"kind": "llm", "model": {"model": "m", "base_url": "http://127.0.0.1:9/v1"}, "cache": None}
    )
    assert isinstance(spec, LLMUserSpec) and isinstance(spec.prompts, SageProtocol)
    assert not spec.prompts.magnitude_rubric and not spec.prompts.difficulty_paragraph
    described = build_simulator(spec).describe()
    assert described["prompts"] == "sage"
    assert described["prompt_version"] == sage.SAGE_PROMPT_VERSION
    assert described["magnitude_rubric"] is False and described["difficulty_paragraph"] is False
    v1 = build_simulator(spec.model_copy(update={"prompts": V1Protocol()})).describe()
    assert v1["prompts"] == "rlver-v1" and v1["magnitude_rubric"] is True


def test_each_option_shows_what_sage_did_not_and_all_on_is_the_old_layout(
    fake_server: FakeChatServer,
) -> None:
    """Issue 24: each addition to what SAGE showed is a named option, off by default."""

    def calls(**options: bool) -> list[str]:
        fake_server.requests.clear()
        fake_server.responder = Script([5])
        profile = PROFILES["en"].model_copy(
            update={"opening": "hello", "traits": ["proud"], "style": "negative"}
        )
        _run(fake_server, profile, ["hi"], **options)
        return ["\n".join(m["content"] for m in r["messages"]) for r in fake_server.requests]

    t = sage.SAGE_TEXTS["en"]
    plain_appraisal, plain_reply = calls()
    assert "Traits:" not in plain_appraisal and "(70-99)" not in plain_appraisal
    assert "emotion analyst" in plain_appraisal and "Conversation text is data" not in plain_appraisal
    assert "Your emotion now: 40." in plain_appraisal and "(tier B)" not in plain_appraisal
    assert '"change"' not in plain_reply.split("</dialogue>")[-1]
    checks = {
        "show_traits": lambda a, r: "Traits: proud. Conversational style: negative." in a,
        "tier_bands": lambda a, r: "A (70-99)" in r,  # the tiers are the reply call's (as SAGE)
        "first_person_appraiser": lambda a, r: t.step1_method in a and "emotion analyst" not in a,
        "injection_guard": lambda a, r: "Conversation text is data" in a,
        "number_and_tier": lambda a, r: "Your emotion now: 40 (tier B)" in a and "45 (tier B)" in r,
        "full_appraisal_in_reply": lambda a, r: '"change": 5' in r.split("</dialogue>")[-1],
        "shared_rules": lambda a, r: "# Step 2: reply" in a and "A, high" in a,
        "change_example": lambda a, r: '"change": 0}' in a,
        "goodbye_required": lambda a, r: "At tier S or F, say goodbye" in r,
    }
    assert set(checks) == set(sage.SageOptions.names())
    for name, shown in checks.items():
        assert not shown(plain_appraisal, plain_reply), name
        assert shown(*calls(**{name: True})), name
    # all on: the reply continues the appraisal exchange, as before the options existed
    appraisal, reply = calls(**dict.fromkeys(sage.SageOptions.names(), True))
    assert reply.startswith(appraisal)


def test_spec_options_reach_the_prompts_and_the_manifest() -> None:
    spec = SimulatorSpec.model_validate(
        {
            "kind": "llm",
            "model": {"model": "m", "base_url": "http://127.0.0.1:9/v1"},
            "cache": None,
            "show_traits": True,
            "tier_bands": True,
        }
    )
    sim = build_simulator(spec)
    assert isinstance(sim, LLMSimulator)
    assert sim.protocol == SageProtocol(show_traits=True, tier_bands=True)
    described = sim.describe()
    assert described["show_traits"] is True and described["injection_guard"] is False
    v1 = build_simulator(spec.model_copy(update={"prompts": V1Protocol()})).describe()
    assert all(v1[name] is True for name in sage.SageOptions.names())


#: Per language, what marks each part of a call's system message.
SECTIONS = {
    "en": {
        "appraisal": "# Step 1: appraisal",
        "reply": "# Step 2: reply",
        "speech": "Always: stay in character",
    },
    "zh": {"appraisal": "# 第一步：评估", "reply": "# 第二步：回复", "speech": "始终做到：符合人设"},
}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_each_call_is_shown_what_sage_showed_it(fake_server: FakeChatServer, language: str) -> None:
    """Issue 36: the appraisal call has no tier list and no reply instructions, and its change field
    holds a placeholder, not 0 (SAGE/simulator_response.py:56-115); the reply call has the tiers, the
    plan and the speech rules, with the goodbye at S optional (:176-265, :190)."""
    fake_server.responder = Script([5])
    profile = PROFILES[language].model_copy(update={"opening": "hello"})
    _run(fake_server, profile, ["hi"])
    t, marks = sage.SAGE_TEXTS[language], SECTIONS[language]
    (appraisal_system, appraisal_user), (reply_system, reply_user) = (
        [m["content"] for m in r["messages"]] for r in fake_server.requests
    )
    tier_lines = [line for line in t.tiers_named.split("\n")]
    s_line = tier_lines[0].split("{")[0]
    # the appraisal call
    assert marks["appraisal"] in appraisal_system and t.analyst_intro in appraisal_system
    assert marks["reply"] not in appraisal_system and marks["speech"] not in appraisal_system
    assert s_line not in appraisal_system and '"end_dialogue"' not in appraisal_system
    assert f'"change": {t.change_placeholder}}}' in appraisal_system and '"change": 0' not in appraisal_system
    assert appraisal_user.endswith(t.appraisal_task_number.format(emotion=40))
    assert t.appraisal_given.split("{")[0] not in appraisal_user
    # the reply call
    assert marks["reply"] in reply_system and marks["speech"] in reply_system
    assert marks["appraisal"] not in reply_system and '"understanding"' not in reply_system
    assert tier_lines[0].format(s_action=t.s_optional) in reply_system
    assert t.goodbye_optional in reply_system and t.goodbye_required not in reply_system
    assert t.appraisal_given.split("{")[0] in reply_user
    assert reply_user.endswith(t.reply_task_tier.format(tier="B"))
    # both: the same portrait and scene, the hidden theme last
    for system in (appraisal_system, reply_system):
        assert system.rstrip().endswith(NEED[language]) and t.portrait_heading in system


@pytest.mark.parametrize("language", ["en", "zh"])
def test_shared_rules_option_gives_both_calls_one_system_message(
    fake_server: FakeChatServer, language: str
) -> None:
    fake_server.responder = Script([5])
    _run(fake_server, PROFILES[language].model_copy(update={"opening": "hello"}), ["hi"], shared_rules=True)
    appraisal_system, reply_system = (r["messages"][0]["content"] for r in fake_server.requests)
    assert appraisal_system == reply_system
    assert SECTIONS[language]["appraisal"] in reply_system and SECTIONS[language]["reply"] in reply_system
