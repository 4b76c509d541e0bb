"""The dialogue environment: termination rules, think stripping before the simulator, records.

The simulated user is the real :class:`LLMSimulator`; only its LLM's *text* is scripted (each
agent reply costs two simulator calls: appraisal, then reply; one JSON answer serves both steps).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from helpers import NURSE_EN
from rlver.env.dialogue import DialogueEnv, EnvConfig, EnvStateError, StepResult
from rlver.llm.scripted import ScriptedChatModel
from rlver.simulator.llm.user import LLMSimulator

PROFILE = NURSE_EN


def answer(change: int, *, end: bool = False, reply: str = "mm, okay") -> str:
    return json.dumps(
        {
            "understanding": "the agent acknowledged the schedule",
            "goal_fit": "partly",
            "inner_reaction": "a bit calmer",
            "feeling": "heard",
            "change": change,
            "reply": reply,
            "end_dialogue": end,
        }
    )


def simulator_for(
    changes: Sequence[int], *, end_at: int | None = None
) -> tuple[LLMSimulator, ScriptedChatModel]:
    """A sentient simulator whose LLM states ``changes[i]`` for the i-th agent reply."""
    script: list[str] = []
    for i, c in enumerate(changes):
        text = answer(c, end=(end_at is not None and i == end_at))
        script += [text, text]  # appraisal call, reply call
    llm = ScriptedChatModel(script)
    return LLMSimulator(llm), llm


async def play(env: DialogueEnv, reply: str = "That sounds really frustrating.", limit: int = 50) -> int:
    await env.reset(PROFILE, seed=3)
    steps = 0
    while not env.done and steps < limit:
        await env.step(reply)
        steps += 1
    return steps


def test_evaluation_protocol_turn_limit_never_appraises_the_tenth_reply() -> None:
    sim, llm = simulator_for([1] * 20)
    env = DialogueEnv(sim, EnvConfig.evaluation())
    steps = asyncio.run(play(env))
    ep = env.episode
    assert steps == 10 and ep.assistant_turns == 10
    assert len(ep.emotions) == 9  # at most 9 appraisals
    assert len(llm.calls) == 18  # 9 appraisals + 9 replies, nothing for the 10th reply
    assert ep.end_reason == "turn_limit"
    assert ep.start_emotion == 40 and ep.final_emotion == 49
    assert ep.messages[-1].role == "assistant"  # the unappraised final reply
    assert ep.messages[0].role == "system"


def test_training_protocol_appraises_every_reply() -> None:
    sim, llm = simulator_for([2] * 20)
    env = DialogueEnv(sim, EnvConfig.training())
    asyncio.run(play(env))
    ep = env.episode
    assert ep.assistant_turns == 8 and len(ep.emotions) == 8
    assert len(llm.calls) == 16
    assert ep.start_emotion == 30 and ep.final_emotion == 46 and ep.end_reason == "turn_limit"
    assert ep.messages[-1].role == "user"


def test_last_step_result_when_final_reply_is_not_appraised() -> None:
    sim, _ = simulator_for([0] * 5)

    async def run() -> None:
        env = DialogueEnv(sim, EnvConfig(max_assistant_turns=2))
        await env.reset(PROFILE)
        first = await env.step("one")
        assert not first.done and first.user_message == "mm, okay"
        last = await env.step("two")
        assert last.done and last.user_message is None and last.info["appraised"] is False
        assert last.emotion == 40 and last.info["end_reason"] == "turn_limit"

    asyncio.run(run())


async def _last_step(env: DialogueEnv) -> StepResult:
    """Play to the end; every step before the last is neither terminated nor truncated."""
    await env.reset(PROFILE, seed=3)
    result = await env.step("That sounds really frustrating.")
    while not result.done:
        assert not result.terminated and not result.truncated
        result = await env.step("That sounds really frustrating.")
    return result


@pytest.mark.parametrize(
    ("changes", "config", "end_at", "reason", "terminated"),
    [
        ([10] * 20, EnvConfig.evaluation(), None, "emotion_high", True),
        ([-10] * 20, EnvConfig.evaluation(), None, "emotion_low", True),
        ([-3] * 10, EnvConfig.evaluation(), 2, "left", True),
        ([0] * 5, EnvConfig(max_assistant_turns=2), None, "turn_limit", False),  # unappraised last reply
        ([0] * 5, EnvConfig.training(max_assistant_turns=2), None, "turn_limit", False),  # appraised
    ],
)
def test_step_says_terminated_or_truncated(
    changes: list[int], config: EnvConfig, end_at: int | None, reason: str, terminated: bool
) -> None:
    """As Gymnasium's step: the dialogue's own end (emotion, the user leaving) is *terminated*, the
    turn limit *truncated*; ``done`` is either."""
    sim, _ = simulator_for(changes, end_at=end_at)
    last = asyncio.run(_last_step(DialogueEnv(sim, config)))
    assert last.info["end_reason"] == reason and last.done
    assert (last.terminated, last.truncated) == (terminated, not terminated)


def test_ends_when_emotion_reaches_100() -> None:
    sim, _ = simulator_for([10] * 20)
    env = DialogueEnv(sim, EnvConfig.evaluation())
    steps = asyncio.run(play(env))
    assert steps == 6  # 40 -> 100 in six +10 steps
    assert env.episode.end_reason == "emotion_high" and env.episode.final_emotion == 100


def test_ends_when_emotion_falls_below_10() -> None:
    sim, _ = simulator_for([-25] * 20)  # clamped to -10 per turn
    env = DialogueEnv(sim, EnvConfig.evaluation())
    steps = asyncio.run(play(env))
    ep = env.episode
    assert steps == 4 and ep.emotions == [30, 20, 10, 0]
    assert ep.end_reason == "emotion_low"
    assert ep.user_turns[1].appraisal is not None and ep.user_turns[1].appraisal.raw_change == -25


def test_exactly_10_does_not_end() -> None:
    sim, _ = simulator_for([-10, -10, -10, 0, 0])
    env = DialogueEnv(sim, EnvConfig(max_assistant_turns=5))
    asyncio.run(play(env))
    assert env.episode.emotions == [30, 20, 10, 10] and env.episode.end_reason == "turn_limit"


def test_user_leaving_ends_the_dialogue() -> None:
    sim, _ = simulator_for([-3] * 10, end_at=2)
    env = DialogueEnv(sim, EnvConfig.evaluation())
    steps = asyncio.run(play(env))
    assert steps == 3
    assert env.episode.end_reason == "left"  # tier C at 31: the user left, not satisfied
    assert env.episode.final_emotion == 31


def test_stop_on_emotion_off_keeps_talking() -> None:
    sim, _ = simulator_for([10] * 20)
    env = DialogueEnv(sim, EnvConfig.training(stop_on_emotion=False))
    asyncio.run(play(env))
    assert env.episode.assistant_turns == 8 and env.episode.final_emotion == 100


def test_think_is_stripped_before_the_simulator_and_format_errors_counted() -> None:
    sim, llm = simulator_for([1] * 10)

    async def run() -> None:
        env = DialogueEnv(sim, EnvConfig.training(think=True, max_assistant_turns=3))
        await env.reset(PROFILE)
        await env.step("<think>SECRET-PLAN-1</think>I hear you.")
        await env.step("no think block at all")
        r = await env.step("<think>CUT-THOUGHT unclosed, ran out of tokens")
        # the published rule (vllm_rollout_spmd_think.py:402-406): no </think>, so the reply as written
        # reaches the user, not an empty message
        assert r.info["visible"] == "<think>CUT-THOUGHT unclosed, ran out of tokens"
        ep = env.episode
        assert ep.format_errors == 2
        assert ep.meta["think"] is True
        # The policy keeps its raw text (reasoning included) in its own context...
        policy_ctx = [m.content for m in env.messages_for_policy()]
        assert "<think>SECRET-PLAN-1</think>I hear you." in policy_ctx
        assert "<think>" in policy_ctx[0]  # think-mode system prompt
        # ...but the simulator never saw a closed thought; the cut one it saw as written.
        for call in llm.calls:
            assert not any("SECRET-PLAN" in text for text in call)
        assert any("CUT-THOUGHT" in text for call in llm.calls for text in call)
        assert any("I hear you." in text for call in llm.calls for text in call)

    asyncio.run(run())


def test_without_think_mode_a_reply_holding_a_think_block_reaches_the_user_as_written() -> None:
    """SAGE's loop and RLVER's no-think rollout hand the simulator the agent's reply as it is
    (test_npc.py:113-115, vllm_rollout_spmd.py:496-504): no think mode, nothing is cut or counted."""
    sim, llm = simulator_for([1] * 5)
    reply = "<think>SHOWN</think>Okay. "

    async def run() -> None:
        env = DialogueEnv(sim, EnvConfig(max_assistant_turns=2))
        await env.reset(PROFILE)
        result = await env.step(reply)
        assert result.info["visible"] == reply
        assert env.episode.format_errors == 0
        assert env.messages_for_policy()[-2].content == reply

    asyncio.run(run())
    assert any("SHOWN" in text for call in llm.calls for text in call)


def test_think_mode_shows_the_user_and_the_later_turns_the_text_after_the_published_tag() -> None:
    """The think layout (vllm_rollout_spmd_think.py:402-406, :555-556): the user sees the text after
    the last ``</think>``; with ``think_context: visible`` the policy's later turns see the same."""
    sim, llm = simulator_for([1] * 5)

    async def run() -> None:
        env = DialogueEnv(sim, EnvConfig(max_assistant_turns=3, think=True))
        await env.reset(PROFILE)
        first = await env.step("<think>HIDDEN</think> Okay. ")
        assert first.info["visible"] == "Okay."
        second = await env.step("<THINK>NOT A TAG</THINK>Fine.")  # another spelling is text the user sees
        assert second.info["visible"] == "<THINK>NOT A TAG</THINK>Fine."
        history = [m.content for m in env.messages_for_policy() if m.role == "assistant"]
        assert history == ["Okay.", "<THINK>NOT A TAG</THINK>Fine."]

    asyncio.run(run())
    assert not any("HIDDEN" in text for call in llm.calls for text in call)


def test_episode_records_tokens_and_timing() -> None:
    sim, _ = simulator_for([1] * 5)
    env = DialogueEnv(sim, EnvConfig(max_assistant_turns=3, appraise_final_reply=True))
    asyncio.run(play(env))
    ep = env.episode
    assert ep.simulator_tokens > 0
    assert len(ep.timings) == 3 and all(t.simulator_s >= 0 for t in ep.timings)
    assert ep.status == "finished" and ep.error is None
    assert [m.role for m in ep.messages[:3]] == ["system", "user", "assistant"]
    assert len(ep.user_turns) == 4 and ep.user_turns[0].appraisal is None


def test_misuse_is_reported() -> None:
    sim, _ = simulator_for([1] * 5)

    async def run() -> None:
        env = DialogueEnv(sim, EnvConfig(max_assistant_turns=1))
        with pytest.raises(EnvStateError):
            await env.step("hello")
        await env.reset(PROFILE)
        await env.step("hello")
        with pytest.raises(EnvStateError):
            await env.step("again")

    asyncio.run(run())


def test_system_prompt_override_and_language() -> None:
    sim, _ = simulator_for([1])

    async def run() -> None:
        env = DialogueEnv(sim, EnvConfig(system_prompt="Be kind."))
        await env.reset(PROFILE)
        assert env.messages_for_policy()[0].content == "Be kind."
        env2 = DialogueEnv(sim, EnvConfig(language="zh"))
        await env2.reset(PROFILE)
        assert any("\u4e00" <= ch <= "\u9fff" for ch in env2.messages_for_policy()[0].content)

    asyncio.run(run())


def test_config_presets() -> None:
    ev, tr = EnvConfig.evaluation(), EnvConfig.training()
    assert (ev.rules.max_assistant_turns, ev.rules.appraise_final_reply, ev.rules.start_emotion) == (
        10,
        False,
        40,
    )
    assert (ev.rules.max_appraisals, tr.rules.max_appraisals) == (9, 8)
    assert (tr.rules.max_assistant_turns, tr.rules.appraise_final_reply, tr.rules.start_emotion) == (
        8,
        True,
        30,
    )
    assert (ev.agent_prompt, tr.agent_prompt) == ("neutral", "coaching")
    assert EnvConfig() == ev  # the defaults are the benchmark's
    assert EnvConfig.training(think=True).think
    with pytest.raises(ValueError):
        EnvConfig(max_assistant_turns=0)
