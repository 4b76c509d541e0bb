"""Training dynamics as explicit environment settings, with the published values (docs/protocol.md)."""

from __future__ import annotations

import asyncio

import pytest

from helpers import TEST_PROFILES
from rlver.env.dialogue import DialogueEnv, EnvConfig
from rlver.env.rewards import episode_reward
from rlver.llm.scripted import ScriptedChatModel
from rlver.records import Appraisal, UserTurn
from rlver.rollout.runner import RolloutConfig, run_rollouts
from rlver.rules import EVALUATION, PUBLISHED_TRAINING
from rlver.simulator.emotion import EmotionRules
from rlver.simulator.offline.user import OfflineSimulator
from rlver.simulator.replay import Recording, ReplaySimulator
from rlver.train.config import load_train_config

PROFILE = TEST_PROFILES["p1"]


def _recording(changes: list[int], goodbye_at: int | None = None) -> Recording:
    turns = [UserTurn(text="hi")]
    for i, c in enumerate(changes):
        a = Appraisal(raw_change=c, change=c, emotion_before=0, emotion_after=0, tier="B")
        turns.append(UserTurn(text="再见" if i == goodbye_at else f"u{i}", appraisal=a))
    return Recording("p1", tuple(f"r{i}" for i in range(len(changes))), tuple(turns))


def _run(config: EnvConfig, changes: list[int], goodbye_at: int | None = None) -> DialogueEnv:
    env = DialogueEnv(ReplaySimulator({"p1": _recording(changes, goodbye_at)}), config)

    async def go() -> None:
        await env.reset(PROFILE)
        i = 0
        while not env.done:
            await env.step(f"r{i}")
            i += 1

    asyncio.run(go())
    return env


def test_rules_without_bound_or_floor() -> None:
    rules = EmotionRules(dialogue=PUBLISHED_TRAINING)
    assert rules.apply(5, -30) == (-30, -25)
    assert rules.apply(95, 30) == (30, 100)  # the cap at 100 always applies, as published
    assert EmotionRules().apply(5, -30) == (-10, 0)


def test_published_training_dynamics() -> None:
    cfg = EnvConfig.published_training()
    env = _run(cfg, [30, 50, 0, -150, 5])
    ep = env.episode
    # 30 → 60 (unbounded) → 100 (capped, goes on) → 100 → -50 (unfloored, ends: <= 0)
    assert ep.emotions == [60, 100, 100, -50]
    assert ep.end_reason == "emotion_low"
    assert episode_reward(ep) == 0.0  # reward floored at 0
    # the same replies under the evaluation protocol: ±10 clamp, ends at 100 / below 10
    ev = _run(EnvConfig.evaluation(start_emotion=30), [30, 50, 0, -150, 5] + [0] * 5).episode
    assert ev.emotions[:5] == [40, 50, 50, 40, 45] and ev.end_reason == "turn_limit"


def test_published_turn_limit_is_checked_after_the_reply_with_greater_than() -> None:
    cfg = EnvConfig.published_training()
    ep = _run(cfg, [0] * 12).episode
    assert ep.assistant_turns == 9 and len(ep.emotions) == 9 and ep.end_reason == "turn_limit"
    assert cfg.rules.max_appraisals == 9
    old = _run(EnvConfig.training(), [0] * 12).episode
    assert old.assistant_turns == 8


def test_training_ends_on_goodbye_not_at_100() -> None:
    ep = _run(EnvConfig.published_training(), [10, 10, 10, 10, 10, 10, 10, 10], goodbye_at=7).episode
    assert ep.emotions[-1] == 100 and ep.assistant_turns == 8 and ep.end_reason == "satisfied"
    assert _run(EnvConfig.training(), [10] * 8).episode.end_reason == "emotion_high"


@pytest.mark.parametrize("shared", [True, False])
def test_shared_opening_per_group(shared: bool) -> None:
    profiles = [PROFILE.model_copy(update={"id": f"p{i}"}) for i in range(3)]
    config = RolloutConfig(
        n_per_profile=4, env=EnvConfig.training(max_assistant_turns=1, shared_opening=shared)
    )
    policy = ScriptedChatModel(["That sounds exhausting. What happened this week?"])
    episodes = asyncio.run(run_rollouts(policy, OfflineSimulator(seed=0), profiles, config, seed=7))
    assert len(episodes) == 12 and all(e.status == "finished" for e in episodes)
    groups = [{e.user_turns[0].text for e in episodes if e.profile_id == p.id} for p in profiles]
    if shared:
        assert all(len(g) == 1 for g in groups)
    else:  # without sharing, the copies write their own (so the check above can fail)
        assert any(len(g) > 1 for g in groups)


@pytest.mark.parametrize("preset", ["ppo-think", "ppo-nothink", "grpo-think", "grpo-nothink"])
def test_published_presets_set_the_published_dynamics(preset: str) -> None:
    cfg = load_train_config(preset)
    assert cfg.rollout.rules == PUBLISHED_TRAINING
    published = EnvConfig.published_training(think=cfg.rollout.think, agent_prompt="rlver-published")
    # the one TrainConfig → EnvConfig mapping both engines read (trainer, verl launcher)
    train, val = cfg.env_config(), cfg.env_config(evaluation=True)
    assert train == published
    assert val.rules == EVALUATION  # the benchmark's dialogue, whatever the training's dynamics


def test_audit_follows_the_dynamics_in_the_manifest() -> None:
    from rlver.transcripts.audit import AuditOptions, _rules_from_manifest, audit_episode

    cfg = EnvConfig.published_training()
    ep = _run(cfg, [30, 50, 0, -150, 5]).episode
    rules = _rules_from_manifest({"env": cfg.model_dump()}, AuditOptions(check_start=False))
    assert rules.rules == PUBLISHED_TRAINING and audit_episode(ep, rules)[0] == []
    flat = {k: v for k, v in cfg.model_dump().items() if k != "rules"} | cfg.rules.model_dump()
    assert _rules_from_manifest({"env": flat}, AuditOptions()) == rules.but(check_start=True)  # older files
    findings, _ = audit_episode(ep, AuditOptions(check_start=False))  # the evaluation's rules
    assert any("exceeds ±10" in f.message for f in findings)
    long = _run(cfg, [0] * 12).episode  # 9 replies under the "> 8" rule
    assert audit_episode(long, rules)[0] == []
