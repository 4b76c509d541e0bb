"""A group in which one dialogue failed (``rlver.rollout.failed_groups``): under an algorithm that needs
groups its finished dialogues are not trained either; under PPO they are. Checked on the rule itself, on
a real training step whose simulated user fails now and then, and in ``rlver explain``.

Why: a review planted "after one dialogue of a group fails, the group keeps its survivors" (a biased
baseline; a lone survivor trains on its raw score under ``grpo_lone_sample: raw``) and no test failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers import TINY_TRAIN_SETS
from rlver.errors import SimulatorError
from rlver.records import Episode
from rlver.rollout.failed_groups import rule, trainable_episodes
from test_env_rewards import make_episode


def _episode(profile: str, index: int, failed: bool) -> Episode:
    ep = make_episode(30, [40]).model_copy(update={"profile_id": profile, "sample_index": index})
    return ep.model_copy(update={"status": "failed"}) if failed else ep


def test_a_failed_dialogue_takes_its_group_with_it_when_the_algorithm_needs_groups() -> None:
    episodes = [
        _episode("a", 0, False), _episode("a", 1, False),
        _episode("b", 0, False), _episode("b", 1, True), _episode("b", 2, False),
        _episode("c", 0, True), _episode("c", 1, True),
    ]  # fmt: skip
    grouped = trainable_episodes(episodes, min_group_size=2)
    assert [(e.profile_id, e.sample_index) for e in grouped] == [("a", 0), ("a", 1)]
    alone = trainable_episodes(episodes, min_group_size=1)
    assert [(e.profile_id, e.sample_index) for e in alone] == [("a", 0), ("a", 1), ("b", 0), ("b", 2)]
    assert "nor is any dialogue of its group" in rule(2) and "group" not in rule(1)


def _failing_now_and_then(trainer: object, every: int) -> list[int]:
    """Make the user of every dialogue whose seed is a multiple of ``every`` fail at its first answer
    (a ``SimulatorError``, as a simulator that fails for good raises); returns those seeds."""
    simulator = trainer.simulator  # type: ignore[attr-defined]
    start = simulator.start
    failed: list[int] = []

    def start_user(*args: object, **kwargs: object) -> object:
        user = start(*args, **kwargs)
        seed = int(kwargs.get("seed", 0))  # type: ignore[call-overload]
        if seed % every == 0:

            async def fail(reply: str) -> object:
                failed.append(seed)
                raise SimulatorError("the simulated user failed (planted by the test)")

            user.respond = fail
        return user

    simulator.start = start_user
    return failed


@pytest.mark.parametrize(("algorithm", "dropped"), [("grpo", True), ("ppo", False)])
def test_a_training_step_trains_no_sibling_of_a_failed_dialogue(
    tmp_path: Path, algorithm: str, dropped: bool
) -> None:
    """One step of 4 profiles × 3 dialogues, a user failing now and then: GRPO trains only the groups
    with no failure (``rollout/dropped_with_group`` counts the others' finished dialogues), PPO every
    finished dialogue; the trained samples are exactly those."""
    from rlver.train.config import load_train_config
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    sets = [*TINY_TRAIN_SETS, "rollout.batch_size=4", "rollout.n_per_profile=3", "run.steps=1",
            f"algorithm.name={algorithm}", "run.checkpoint_every=0", "rollout.max_failed_share=0.9"]  # fmt: skip
    trainer = Trainer(load_train_config("tiny-offline", sets), tmp_path)
    failed = _failing_now_and_then(trainer, every=5)
    trained: list[list[tuple[str, int]]] = []
    score = trainer.learner.score

    def recorded(samples: list) -> object:  # type: ignore[type-arg]
        trained.append([(s.episode.profile_id, s.episode.sample_index) for s in samples])
        return score(samples)

    trainer.learner.score = recorded  # type: ignore[method-assign]
    run_dialogues = trainer._run_dialogues
    episodes: list[Episode] = []

    def ran(*args: object, **kwargs: object) -> list[Episode]:
        out = run_dialogues(*args, **kwargs)  # type: ignore[arg-type]
        if not kwargs["evaluation"]:  # the step's dialogues, not the held-out ones after it
            episodes.extend(out)
        return out

    trainer._run_dialogues = ran  # type: ignore[method-assign]
    (metrics,) = trainer.train()
    assert failed and 0 < metrics["rollout/failed"] < 12
    broken = {ep.profile_id for ep in episodes if ep.status == "failed"}
    assert 0 < len(broken) < 4, broken  # some groups lost a dialogue, some did not
    finished = [(ep.profile_id, ep.sample_index) for ep in episodes if ep.status == "finished"]
    want = [f for f in finished if f[0] not in broken] if dropped else finished
    assert sorted(trained[0]) == sorted(want)
    assert metrics["rollout/dropped_with_group"] == len(finished) - len(want)


def test_explain_names_the_rule_of_a_training_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest's ``published_run`` record holds the run's rule, and ``rlver explain`` prints it
    against the published run's (whose user never fails); GRPO's says the group goes too."""
    from rlver.train.config import load_train_config
    from rlver.train.published_run import published_run
    from test_explain import _train_explained

    monkeypatch.setenv("RLVER_CACHE_DIR", str(tmp_path))
    grpo = load_train_config("tiny-offline")
    ppo = load_train_config("tiny-offline", ["algorithm.name=ppo", "rollout.n_per_profile=1"])
    assert published_run(grpo)["failed_dialogue"] == rule(2)
    assert published_run(ppo)["failed_dialogue"] == rule(1)
    (line,) = [x for x in _train_explained(grpo, tmp_path) if x.startswith("  a failed dialogue:")]
    assert (
        rule(2) in line and "hard_player_simulator_dsv3.py:204-225" in line and line.endswith("row retries")
    )
