"""In-training evaluation runs on the benchmark protocol by default, as ``rlver eval`` does (issue 13)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from helpers import published_training_argv, run_rlver
from rlver.env.dialogue import EnvConfig
from rlver.eval.config import EvalConfig
from rlver.manifest import RunManifest
from rlver.testing.openai_server import FakeChatServer
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
    trained = eval_env(TRAINING, EvalSettings(dialogue="training", rules={"max_assistant_turns": 4}))
    assert trained.rules == TRAINING.rules.but(max_assistant_turns=4)
    # a think-mode policy is evaluated thinking; everything else stays the benchmark's
    thinking = eval_env(TRAINING.model_copy(update={"think": True}), EvalSettings())
    assert thinking == eval_default.model_copy(update={"think": True})


def test_training_protocol_and_overrides() -> None:
    assert eval_env(TRAINING, EvalSettings(dialogue="training")) == TRAINING
    env = eval_env(TRAINING, EvalSettings(rules={"start_emotion": 50, "max_assistant_turns": 4}))
    assert (env.rules.start_emotion, env.rules.max_assistant_turns, env.rules.appraise_final_reply) == (
        50,
        4,
        False,
    )


def test_published_presets_evaluate_once_at_the_end_on_the_benchmark() -> None:
    for name in ("ppo-think", "ppo-nothink", "grpo-think", "grpo-nothink"):
        e = load_train_config(name).eval
        assert (e.every, e.at_start, e.dialogue, e.profiles) == (0, False, "benchmark", "sage"), name


@pytest.mark.slow
def test_in_training_eval_dialogues_follow_the_benchmark(tmp_path: Path) -> None:
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    cfg = load_train_config(
        "tiny-offline",
        ["eval.dialogue=benchmark", "eval.limit=2", "eval.samples_per_profile=1", "rollout.max_new_tokens=8",
         "run.tensorboard=false", "run.progress=false"],
    )  # fmt: skip
    episodes = Trainer(cfg, tmp_path).evaluate_episodes()
    assert episodes and all(ep.start_emotion == 40 for ep in episodes)
    for ep in episodes:
        assert ep.assistant_turns <= 10
        # every reply but the 10th is appraised: a dialogue that ran its 10 replies has 9 emotions
        assert len(ep.emotions) == (9 if ep.assistant_turns == 10 else ep.assistant_turns)


def test_the_benchmark_evaluation_asks_what_rlver_eval_asks() -> None:
    """With an LLM user on the SAGE profiles the presets' held-out user is ``rlver eval``'s: SAGE's own
    text and SAGE's agent prompt, whatever protocol training used (the same model and sampling)."""
    cfg = load_train_config("grpo-nothink")
    assert cfg.simulator.prompts.name == "rlver-published"  # type: ignore[attr-defined]
    held_out = cfg.eval_simulator()
    the_same_user = {k: v for k, v in cfg.simulator.model_dump().items() if k != "prompts"}
    eval_config = EvalConfig.model_validate(
        {"agent_tiny": True, "profiles": "sage", "simulator": the_same_user}
    )
    assert held_out == eval_config.simulator and held_out.prompts.name == "sage-published"  # type: ignore[attr-defined]
    assert cfg.env_config(evaluation=True) == eval_config.env
    assert cfg.env_config(evaluation=True).agent_prompt == "sage-published"
    on_training = load_train_config("grpo-nothink", ["eval.dialogue=training"])
    assert on_training.eval_simulator() == on_training.simulator
    english = load_train_config("grpo-nothink", ["eval.profiles=en-test"]).eval_simulator()
    assert english.prompts.name == "sage"  # type: ignore[attr-defined]  # rlver eval's default there


class TwoFormatJudge:
    """A deterministic judge for both published simulators' prompts (the training run's and SAGE's):
    the change and the reply depend on the whole prompt, so on the agent's words."""

    def __init__(self, *appraisal_heads: str) -> None:
        self.heads = appraisal_heads

    def __call__(self, request: dict[str, Any]) -> str:
        prompt = request["messages"][0]["content"]
        digest = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
        if prompt.startswith(self.heads):
            change = ("+5", "-5", "+10", "0", "-10", "+3")[digest % 6]
            return (
                f"Content:\n理解\nTargetCompletion:\n一半\nReason:\n一半\nActivity:\n想\n"
                f"Analyse:\n还行\nChange:\n{change}"
            )
        return f"Thinking:\n想一想\nResponse:\n嗯，{digest % 100}。"


@pytest.mark.slow  # a 1-step run and an `rlver eval` of its checkpoint: ~1 min on the 2-core box
def test_the_in_training_figure_equals_rlver_eval_of_the_checkpoint(
    shared_data: Path, tmp_path: Path
) -> None:
    from rlver.simulator.llm import published_text
    from rlver.transcripts.training import read_metrics

    rows = (shared_data / "rlver_train_profiles.jsonl").read_text().splitlines()[:2]
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    heads = (
        published_text.training_texts().appraisal_template[:40],
        published_text.sage_texts().appraisal_template[:40],
    )
    sim = ("--sim-base-url", "URL", "--sim-model", "sim", "--sim-key-env", "")
    with FakeChatServer(TwoFormatJudge(*heads)) as server:
        argv = published_training_argv(
            server.url, "rollout.rules.max_assistant_turns=1", "rollout.batch_size=2",
            "rollout.n_per_profile=2", "rollout.max_new_tokens=8", "eval.profiles=sage",
            "eval.dialogue=benchmark", "eval.limit=3", "eval.temperature=1.0", "rollout.think=true",
        )  # fmt: skip
        done = run_rlver(*argv, cwd=tmp_path, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        players = [
            json.loads(r)["player"]
            for r in (shared_data / "sage_test_profiles.jsonl").read_text().splitlines()[:3]
        ]

        def on_sage_profiles(request: dict[str, Any]) -> bool:
            return any(player in request["messages"][0]["content"] for player in players)

        held_out = [r["messages"] for r in server.requests if on_sage_profiles(r)]
        server.requests.clear()
        argv = [a.replace("URL", server.url) for a in sim]
        evaluated = run_rlver(
            "eval", "--agent-local", "run", "--profiles", "sage", "--limit", "3",
            "--seed", "12345", "--agent-temperature", "1.0", "--agent-max-tokens", "8",
            "--simulator", "llm", *argv, "--out", "ev", "--no-report", cwd=tmp_path, timeout=900,
        )  # fmt: skip
        assert evaluated.returncode == 0, evaluated.stderr[-3000:]
        assert "warning:" not in evaluated.stderr  # no flag contradicts the run
        benchmark = [r["messages"] for r in server.requests]
    metrics = [r for r in read_metrics(tmp_path / "run") if "eval/score" in r]
    score = json.loads((tmp_path / "ev" / "metrics.json").read_text(encoding="utf-8"))["score"]
    assert metrics[-1]["eval/score"] == pytest.approx(score, abs=1e-9), (metrics[-1], score)
    key = lambda m: json.dumps(m, ensure_ascii=False)  # noqa: E731
    assert sorted(map(key, held_out)) == sorted(map(key, benchmark))  # SAGE's own requests, both runs
    assert sum(m[0]["content"].startswith(heads[1]) for m in held_out) >= 6  # SAGE's appraisals
    # a think-trained run is evaluated thinking, with no --think given: its manifest's mode
    assert RunManifest.read(tmp_path / "ev").think is True


def test_the_benchmark_swap_follows_the_kinds_registry_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which user is handed SAGE's text is the kind's ``prompt_set`` (``simulator/spec.KINDS``), not
    its name: with the attribute off, the LLM user of a preset is evaluated as it was trained."""
    from rlver.simulator.spec import KINDS, simulator_kind

    assert [name for name in KINDS if simulator_kind(name).prompt_set] == ["llm"]
    monkeypatch.setattr(simulator_kind("llm"), "prompt_set", False)
    cfg = load_train_config("grpo-nothink")
    assert cfg.eval_simulator() == cfg.simulator
    assert cfg.env_config(evaluation=True).agent_prompt != "sage-published"
