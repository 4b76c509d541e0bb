"""In-training evaluation runs on the benchmark protocol by default, as ``rlver eval`` does (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlver.env.dialogue import EnvConfig
from rlver.eval.config import EvalConfig
from rlver.train.config import EvalSettings, eval_env, load_train_config

TRAINING = EnvConfig.training()


def test_benchmark_protocol_is_what_rlver_eval_runs() -> None:
    env = eval_env(TRAINING, EvalSettings())
    eval_default = EvalConfig(agent_tiny=True).env
    assert env == eval_default
    assert (env.rules.start_emotion, env.rules.max_assistant_turns, env.rules.appraise_final_reply) == (
        40,
        10,
        False,
    )
    # on the training protocol the same keys change the training rules
    trained = eval_env(TRAINING, EvalSettings(protocol="training", rules={"max_assistant_turns": 4}))
    assert trained.rules == TRAINING.rules.but(max_assistant_turns=4)
    # a think-mode policy is evaluated thinking; everything else stays the benchmark's
    thinking = eval_env(TRAINING.model_copy(update={"think": True}), EvalSettings())
    assert thinking == eval_default.model_copy(update={"think": True})


def test_training_protocol_and_overrides() -> None:
    assert eval_env(TRAINING, EvalSettings(protocol="training")) == TRAINING
    env = eval_env(TRAINING, EvalSettings(rules={"start_emotion": 50, "max_assistant_turns": 4}))
    assert (env.rules.start_emotion, env.rules.max_assistant_turns, env.rules.appraise_final_reply) == (
        50,
        4,
        False,
    )


def test_published_presets_evaluate_once_at_the_end_on_the_benchmark() -> None:
    for name in ("ppo-think", "ppo-nothink", "grpo-think", "grpo-nothink"):
        e = load_train_config(name).eval
        assert (e.every, e.at_start, e.protocol, e.profiles) == (0, False, "benchmark", "sage"), name


@pytest.mark.slow
def test_in_training_eval_dialogues_follow_the_benchmark(tmp_path: Path) -> None:
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    cfg = load_train_config(
        "tiny-offline",
        ["eval.protocol=benchmark", "eval.limit=2", "eval.samples_per_profile=1", "rollout.max_new_tokens=8",
         "run.tensorboard=false", "run.progress=false"],
    )  # fmt: skip
    episodes = Trainer(cfg, tmp_path).evaluate_episodes()
    assert episodes and all(ep.start_emotion == 40 for ep in episodes)
    for ep in episodes:
        assert ep.assistant_turns <= 10
        # every reply but the 10th is appraised: a dialogue that ran its 10 replies has 9 emotions
        assert len(ep.emotions) == (9 if ep.assistant_turns == 10 else ep.assistant_turns)
