"""One RewardSpec and one TrainConfig → environment mapping, shared by the local trainer and verl."""

from __future__ import annotations

import pytest

from rlver.env.rewards import RewardSpec
from rlver.errors import ConfigError
from rlver.records import Episode
from rlver.rollout.outcomes import outcomes
from rlver.train.config import TrainConfig, eval_env, load_train_config
from rlver.train.rollout_stats import summarise_eval


def test_the_reward_nests_in_the_rollout_settings_and_reaches_the_runner() -> None:
    cfg = load_train_config("tiny-offline", ["rollout.reward.mode=mixed", "rollout.reward.mixed_weight=0.25"])
    assert cfg.rollout.reward == RewardSpec(mode="mixed", mixed_weight=0.25)
    assert cfg.rollout_config().reward is cfg.rollout.reward
    assert cfg.rollout_config(evaluation=True).reward is cfg.rollout.reward


def test_a_config_yaml_written_before_the_spec_nested_still_loads() -> None:
    """``--resume`` reads the run folder's config.yaml: flat reward keys map onto ``rollout.reward``."""
    cfg = TrainConfig.model_validate({"rollout": {"reward_mode": "delta", "format_penalty": 0.1}})
    assert cfg.rollout.reward == RewardSpec(mode="delta", format_penalty=0.1)


def test_a_bad_reward_is_refused_at_load_time() -> None:
    with pytest.raises(ConfigError, match="unknown reward mode 'median'"):
        load_train_config("tiny-offline", ["rollout.reward.mode=median"])


def test_one_mapping_for_training_and_evaluation_dialogues() -> None:
    cfg = load_train_config("grpo-think")
    train, held_out = cfg.rollout_config(), cfg.rollout_config(evaluation=True)
    assert train.env == cfg.env_config() and held_out.env == cfg.env_config(evaluation=True)
    assert held_out.env == eval_env(cfg.env_config(), cfg.eval)
    assert (train.n_per_profile, held_out.n_per_profile) == (
        cfg.rollout.n_per_profile,
        cfg.eval.samples_per_profile,
    )


def _ep(final: int, status: str = "finished", reward: float | None = None) -> Episode:
    return Episode(profile_id=f"p{final}", final_emotion=final, status=status, reward=reward)  # type: ignore[arg-type]


def test_training_summaries_count_outcomes_as_the_benchmark_does() -> None:
    eps = [_ep(100, reward=1.0), _ep(9, reward=0.09), _ep(10, reward=0.1), _ep(55, status="failed")]
    out = outcomes(eps)
    assert (out.n, out.success, out.failure, len(out.failed)) == (3, 1, 1, 1)
    assert [ep.succeeded for ep in out.done] == [True, False, False]
    assert [ep.failed_low for ep in out.done] == [False, True, False]
    summary = summarise_eval(eps)
    assert summary["score"] == pytest.approx(119 / 3)
    assert (summary["success_rate"], summary["failure_rate"]) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    assert summary["failed"] == 1.0
    assert summarise_eval([_ep(50, status="failed")])["score"] == 0.0
