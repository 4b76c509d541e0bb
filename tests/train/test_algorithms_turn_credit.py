"""The two turn-credit estimators worked by hand: MICA (``mica.py``, MAPO's estimator with v2's scopes)
and CTC-GRPO (``ctc_grpo.py``): turn rewards in, per-token advantages out, with a lone (user, turn)
cell, a dialogue that ended early, a group left with one dialogue, and a failed dialogue's group; the
same credit in both sample layouts; what the config and verl refuse.

The learning tests (power against a sign flip and a misplaced turn reward) are in
test_algorithms_turn_credit_learning.py.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
import torch

from rlver.errors import ConfigError
from rlver.rollout.failed_groups import trainable_episodes
from rlver.train.algorithms import get_algorithm
from rlver.train.algorithms.base import AdvantageInputs
from rlver.train.algorithms.ctc_grpo import CTCGRPOSettings
from rlver.train.algorithms.mica import MICASettings
from rlver.train.config import load_train_config
from rlver.train.learner import make_samples, pad_batch
from test_env_rewards import make_episode
from test_mapo import _episodes, _per_turn, _whole_layout

approx = pytest.approx
MICA = get_algorithm("mica")
CTC = get_algorithm("ctc_grpo")
H = 1 / math.sqrt(2)  # two values about their mean, over their unbiased std: +-1/sqrt(2)
#: group 0: dialogues 0 and 1; group 1: dialogue 2 and dialogue 3, which ended after one turn (its user
#: left: a failed dialogue in the sense of the papers, a finished one to rlver), so (g1, turn 1) holds
#: dialogue 2 alone
TURN_REWARDS = [[0.1, 0.2], [0.3, -0.2], [0.0, 0.1], [0.2]]
GROUPS = [0, 0, 1, 1]


def test_mica_by_hand() -> None:
    """Turn scope, each turn's own reward: (g0, t0) [0.1, 0.3], (g0, t1) [0.2, -0.2], (g1, t0) [0.0,
    0.2] are +-H; the lone cell (g1, t1) is 0. Batch scope, the returns with gamma 0.5: d0 (0.2, 0.2),
    d1 (0.2, -0.2), d2 (0.05, 0.1), d3 (0.2), against their mean and unbiased std. Mixed 0.4 / 0.6."""
    inputs = _whole_layout(TURN_REWARDS, GROUPS)
    out = MICA.advantages(inputs, MICASettings(gamma=0.5, mapo_eps=1e-12))
    g = {(0, 0): 0.2, (0, 1): 0.2, (1, 0): 0.2, (1, 1): -0.2, (2, 0): 0.05, (2, 1): 0.1, (3, 0): 0.2}
    mean, std = statistics.mean(g.values()), statistics.stdev(g.values())
    turn = {(0, 0): -H, (1, 0): H, (0, 1): H, (1, 1): -H, (2, 0): -H, (3, 0): H, (2, 1): 0.0}
    expected = {key: 0.4 * turn[key] + 0.6 * (g[key] - mean) / std for key in g}
    assert _per_turn(out.advantages, inputs) == approx(expected, abs=1e-6)
    assert out.returns is None and (out.advantages[inputs.mask == 0] == 0).all()
    assert out.stats == {"train/turn_groups": 4.0, "train/lone_turn_groups": 1.0}


def test_mica_judges_a_turn_by_its_own_change_where_mapo_sees_a_tie() -> None:
    """d0 and d1 have the same return from turn 0 on (0.3 and 0.3), so MAPO's turn level (the return)
    ties them at turn 0; MICA's (the turn's own reward, 0.1 against 0.3) credits d1's first reply."""
    inputs = _whole_layout([[0.1, 0.2], [0.3, 0.0]], [0, 0])
    turn_only: dict[str, Any] = {"mapo_batch_weight": 0.0, "gamma": 1.0}
    mica = _per_turn(MICA.advantages(inputs, MICASettings(**turn_only)).advantages, inputs)
    mapo = get_algorithm("mapo")
    mapo_out = _per_turn(mapo.advantages(inputs, mapo.settings_class(**turn_only)).advantages, inputs)
    assert mapo_out[(0, 0)] == mapo_out[(1, 0)] == 0.0
    assert mica[(0, 0)] == approx(-0.4 * H, abs=1e-5) and mica[(1, 0)] == approx(0.4 * H, abs=1e-5)


def test_mica_defaults_are_the_released_launch_settings() -> None:
    s = MICASettings()
    assert (s.mapo_turn_weight, s.mapo_batch_weight, s.mapo_turn_signal) == (0.4, 0.6, "reward")
    assert (s.gamma, s.clip_eps, s.clip_eps_high, s.dual_clip, s.kl_coef) == (0.85, 0.2, 0.28, 10.0, 0.0)


def test_ctc_grpo_by_hand() -> None:
    """Outcomes (sum of the turns' changes): d0 0.3, d1 0.1 (group 0, std 0.14: +H, -H), d2 0.1, d3 0.2
    (group 1, std 0.07 under the floor 0.1: -0.05 / 0.1, +0.05 / 0.1). Credit, each turn's change less
    its dialogue's mean change: d0 [0.1, 0.2] -0.05, +0.05; d1 [0.3, -0.2] +0.25, -0.25; d2 [0.0, 0.1]
    -0.05, +0.05; d3, one turn, 0. Each turn: outcome + 15 x credit."""
    inputs = _whole_layout(TURN_REWARDS, GROUPS)
    out = CTC.advantages(inputs, CTCGRPOSettings(grpo_eps=1e-12))
    expected = {
        (0, 0): H - 0.75, (0, 1): H + 0.75, (1, 0): -H + 3.75, (1, 1): -H - 3.75,
        (2, 0): -0.5 - 0.75, (2, 1): -0.5 + 0.75, (3, 0): 0.5,
    }  # fmt: skip
    assert _per_turn(out.advantages, inputs) == approx(expected, abs=1e-6)
    assert out.returns is None and (out.advantages[inputs.mask == 0] == 0).all()
    assert out.stats == {"train/floored_groups": 1.0}
    # the outcome is the whole dialogue's change: d1 (0.4 + 0.1) beats d0 (0.1 + 0.2) though its last
    # turn did worse; credit: d0 -0.05, +0.05, d1 +0.15, -0.15
    other = _whole_layout([[0.1, 0.2], [0.4, 0.1]], [0, 0])
    by_turn = _per_turn(CTC.advantages(other, CTCGRPOSettings(grpo_eps=1e-12)).advantages, other)
    assert by_turn == approx(
        {(0, 0): -H - 0.75, (0, 1): -H + 0.75, (1, 0): H + 2.25, (1, 1): H - 2.25}, abs=1e-6
    )
    # the weight scales the credit alone: weight 2 gives d1's first turn -H + 2 x 0.25
    twice = CTC.advantages(inputs, CTCGRPOSettings(grpo_eps=1e-12, ctc_turn_weight=2))
    assert _per_turn(twice.advantages, inputs)[(1, 0)] == approx(-H + 0.5, abs=1e-6)


def test_ctc_grpo_floors_the_outcome_std() -> None:
    """Outcomes 0.05 and 0.1 differ by less than the floor: their std (0.035) is replaced by 0.1, so the
    outcome advantages are +-0.025 / 0.1, not +-H; the turn credit is untouched (each dialogue's two
    turns: +-0.025 about its mean). Floor 0: GRPO's +-H."""
    inputs = _whole_layout([[0.0, 0.05], [0.05, 0.05]], [0, 0])
    floored = CTC.advantages(inputs, CTCGRPOSettings(grpo_eps=1e-12))
    expected = {(0, 0): -0.25 - 0.375, (0, 1): -0.25 + 0.375, (1, 0): 0.25, (1, 1): 0.25}
    assert _per_turn(floored.advantages, inputs) == approx(expected, abs=1e-6)
    assert floored.stats == {"train/floored_groups": 1.0}
    unfloored = CTC.advantages(inputs, CTCGRPOSettings(grpo_eps=1e-12, ctc_std_min=0.0, ctc_turn_weight=0))
    assert _per_turn(unfloored.advantages, inputs)[(1, 0)] == approx(H, abs=1e-6)
    # without the std division the floor never acts, and no group is counted as floored
    unscaled = CTC.advantages(inputs, CTCGRPOSettings(grpo_eps=1e-12, grpo_scale_by_std=False))
    assert unscaled.stats == {"train/floored_groups": 0.0}


def test_ctc_grpo_defaults_are_the_released_recipe() -> None:
    """train_8b.sh: TURN_CREDIT_ALPHA 15, GRPO_STD_MIN 0.1, ENTROPY_COEFF 0.001, clip 0.2 both ways, no
    KL; GRPO divides by the std (norm_adv_by_std_in_grpo), eps 1e-6, a lone trace its raw score."""
    s = CTCGRPOSettings()
    assert (s.ctc_turn_weight, s.ctc_std_min, s.entropy_coef) == (15.0, 0.1, 0.001)
    assert (s.clip_eps, s.clip_eps_high, s.kl_coef) == (0.2, None, 0.0)
    assert (s.grpo_scale_by_std, s.grpo_eps, s.grpo_lone_sample) == (True, 1e-6, "raw")


def test_ctc_grpo_a_group_left_with_one_dialogue() -> None:
    """Dialogue 4 alone in group 2 (its sibling could not be tokenised): its outcome follows
    grpo_lone_sample (raw: the score over 1 + eps, -0.2; zero: 0); its turns are still centred on their
    own mean (+-0.2, times 15), since the credit needs no sibling."""
    inputs = _whole_layout([*TURN_REWARDS, [0.1, -0.3]], [*GROUPS, 2])
    raw = _per_turn(CTC.advantages(inputs, CTCGRPOSettings(grpo_eps=1e-6)).advantages, inputs)
    assert raw[(4, 0)] == approx(-0.2 / (1 + 1e-6) + 3.0, abs=1e-6)
    assert raw[(4, 1)] == approx(-0.2 / (1 + 1e-6) - 3.0, abs=1e-6)
    zero = CTC.advantages(inputs, CTCGRPOSettings(grpo_lone_sample="zero"))
    assert _per_turn(zero.advantages, inputs)[(4, 0)] == approx(3.0, abs=1e-6)


@pytest.mark.parametrize("algorithm", ["mica", "ctc_grpo"])
def test_a_failed_dialogue_takes_its_group_out_of_the_step(algorithm: str) -> None:
    """Both need groups (min_group_size 2): a dialogue that failed (its simulator errored) takes its
    group's finished dialogues with it (rlver.rollout.failed_groups), so no turn is centred on a
    survivor alone."""
    eps = [
        make_episode(30, [40, 50]).model_copy(update={"profile_id": p, "sample_index": i})
        for p, i in (("a", 0), ("a", 1), ("b", 0), ("b", 1))
    ]
    eps[3] = eps[3].model_copy(update={"status": "failed"})
    kept = trainable_episodes(eps, min_group_size=get_algorithm(algorithm).min_group_size)
    assert [(e.profile_id, e.sample_index) for e in kept] == [("a", 0), ("a", 1)]


@pytest.mark.parametrize("algorithm", ["mica", "ctc_grpo"])
def test_both_layouts_give_each_turn_the_same_advantage(algorithm: str) -> None:
    """One sample per dialogue (think_context: full) or one per assistant turn (visible): through the
    learner's samples and padded batch, every turn gets the same advantage."""
    from rlver.models.tiny import tiny_model_and_tokenizer

    _, tokenizer = tiny_model_and_tokenizer(0)
    sets = [f"algorithm.name={algorithm}", "rollout.reward.mode=delta", "rollout.think=true"]
    algo, result = get_algorithm(algorithm), {}
    for layout in ("full", "visible"):
        cfg = load_train_config("tiny-offline", [*sets, f"rollout.think_context={layout}"])
        b = pad_batch(make_samples(_episodes(), tokenizer, cfg.rollout, 4096)[0])
        inputs = AdvantageInputs(
            b.mask, b.token_rewards, b.scores, b.groups, dialogues=b.dialogues, turn_index=b.turn_index,
            per_turn=layout == "visible",
        )  # fmt: skip
        result[layout] = _per_turn(algo.advantages(inputs, cfg.algorithm).advantages, inputs)
    assert len(result["full"]) == 9 and any(v != 0 for v in result["full"].values())
    assert result["visible"] == approx(result["full"], abs=1e-5)


def test_the_config_and_verl_refuse_what_they_cannot_run(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match=r"rollout\.reward\.mode must be one of delta \(got final"):
        load_train_config("tiny-offline", ["algorithm.name=ctc_grpo"])
    with pytest.raises(ConfigError, match=r"rollout\.reward\.mode must be one of delta, mixed \(got final"):
        load_train_config("tiny-offline", ["algorithm.name=mica"])
    from rlver.integrations.verl.config import refuse_unsupported
    from rlver.integrations.verl.launch import load_verl_config

    for name in ("mica", "ctc_grpo"):
        cfg = load_verl_config(
            "tiny-offline",
            [f"algorithm.name={name}", "rollout.reward.mode=delta", f"verl.out_dir={tmp_path}"],
        )
        with pytest.raises(ConfigError) as refused:
            refuse_unsupported(cfg)
        assert str(refused.value).startswith(f"algorithm.name={name}: verl 0.9.1")


def test_inputs_without_their_turns_are_refused() -> None:
    inputs = _whole_layout([[0.1], [0.2]], [0, 0])
    inputs.turn_index = None
    with pytest.raises(ValueError, match=r"AdvantageInputs\.dialogues and \.turn_index"):
        CTC.advantages(inputs, CTCGRPOSettings())
    assert torch.is_tensor(inputs.mask)


@pytest.mark.parametrize(
    ("algorithm", "own"),
    [
        (
            "mica",
            {
                "algorithm.mapo_turn_signal": "reward",
                "algorithm.gamma": 0.85,
                "algorithm.clip_eps_high": 0.28,
            },
        ),
        ("ctc_grpo", {"algorithm.ctc_turn_weight": 15.0, "algorithm.ctc_std_min": 0.1}),
    ],
)
def test_explain_names_the_algorithms_settings(algorithm: str, own: dict[str, object]) -> None:
    """``rlver explain`` lists a run's settings that differ from the published preset it is compared
    with (``published_run``, recorded in the run's manifest): the turn-credit settings among them."""
    from rlver.train.published_run import published_run

    cfg = load_train_config("tiny-offline", [f"algorithm.name={algorithm}", "rollout.reward.mode=delta"])
    differences = published_run(cfg)["differences"]
    assert differences["algorithm.name"]["run"] == algorithm
    assert {path: differences[path]["run"] for path in own} == own
