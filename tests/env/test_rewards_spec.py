"""One RewardSpec and one TrainConfig → environment mapping, shared by the local trainer and verl."""

from __future__ import annotations

import pytest

from rlver.env.rewards import RewardSpec
from rlver.errors import ConfigError
from rlver.records import Episode
from rlver.registry import Entry
from rlver.rollout.outcomes import outcomes
from rlver.train.config import TrainConfig, eval_env, load_train_config
from rlver.train.step_metrics import summarise_eval


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
    assert held_out.env == eval_env(cfg.env_config(), cfg.eval, cfg.simulator.kind)
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
    # nothing finished: no score (null in metrics.jsonl, as rlver eval's metrics.json), not 0, and the
    # training report draws no point for it
    nothing = summarise_eval([_ep(50, status="failed")])
    assert nothing["score"] is None and nothing["failed"] == 1.0
    from rlver.eval.training_report import held_out_points

    rows = [{"step": 1, **{f"eval/{k}": v for k, v in nothing.items()}}, {"step": 2, "eval/score": 41.0}]
    assert held_out_points(rows) == [{"step": 2, "score": 41.0}]


def test_a_new_reward_mode_is_one_function_and_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/architecture.md, "Adding things": a mode registered at run time is a config value at once,
    and the rollout runner pays it (the trainer and verl's loop read the same ``RewardSpec``)."""
    from helpers import SAM_EN, add_for_test
    from rlver.env.rewards import REWARD_MODES, turn_rewards
    from rlver.llm.scripted import ScriptedChatModel
    from rlver.rollout.runner import rollout
    from rlver.simulator.offline.user import OfflineSimulator

    def gain_at_end(episode: Episode, spec: RewardSpec) -> list[float]:
        """All of the dialogue's gain on its last reply (none before)."""
        n = episode.assistant_turns
        return [0.0] * (n - 1) + [(episode.final_emotion - episode.start_emotion) / 100] if n else []

    with pytest.raises(ConfigError, match="unknown reward mode 'gain_at_end'"):
        load_train_config("tiny-offline", ["rollout.reward.mode=gain_at_end"])
    add_for_test(monkeypatch, REWARD_MODES, Entry("gain_at_end", "a test's mode", gain_at_end))
    cfg = load_train_config(
        "tiny-offline", ["rollout.reward.mode=gain_at_end", "rollout.rules.max_assistant_turns=3"]
    )
    policy = ScriptedChatModel(["That sounds exhausting. What happened at work today?"])
    episodes = rollout(policy, OfflineSimulator(seed=1), [SAM_EN], cfg.rollout_config())
    assert episodes and all(ep.assistant_turns == 3 for ep in episodes)
    for ep in episodes:
        assert turn_rewards(ep, cfg.rollout.reward)[:-1] == [0.0, 0.0]
        assert ep.reward == pytest.approx((ep.final_emotion - ep.start_emotion) / 100)
