"""MAPO-style turn-level credit (``rlver.train.algorithms.mapo``): the mixed advantage worked by hand, the
same credit for each turn in both sample layouts (one sample per dialogue, or one per assistant turn),
where the learner finds the turns, what the config and verl refuse, and a training step in each layout.

The learning test (the offline user, 10 seeds, the do-nothing controls) is in test_train_learning.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rlver.errors import ConfigError
from rlver.train.algorithms import get_algorithm
from rlver.train.algorithms.base import AdvantageInputs
from rlver.train.algorithms.mapo import MAPOSettings, monte_carlo_returns
from rlver.train.config import load_train_config
from rlver.train.learner import make_samples, pad_batch, turn_indices
from rlver.train.tokenize import TokenizedEpisode
from test_env_rewards import make_episode

approx = pytest.approx
MAPO = get_algorithm("mapo")


def _whole_layout(turn_rewards: list[list[float]], groups: list[int]) -> AdvantageInputs:
    """One row per dialogue: turn k is two action tokens, its reward on the second, a user token
    (mask 0) after it; rows padded to the longest."""
    width = 3 * max(len(r) for r in turn_rewards)
    mask, rewards = torch.zeros(len(turn_rewards), width), torch.zeros(len(turn_rewards), width)
    turns = torch.full((len(turn_rewards), width), -1, dtype=torch.long)
    for i, row in enumerate(turn_rewards):
        for k, r in enumerate(row):
            mask[i, 3 * k : 3 * k + 2] = 1.0
            turns[i, 3 * k : 3 * k + 2] = k
            rewards[i, 3 * k + 1] = r
    return AdvantageInputs(
        mask, rewards, rewards.sum(dim=1), torch.tensor(groups),
        dialogues=torch.arange(len(turn_rewards)), turn_index=turns,
    )  # fmt: skip


def _per_turn(adv: torch.Tensor, inputs: AdvantageInputs) -> dict[tuple[int, int], float]:
    """The advantage of each (dialogue, turn), checked to be the same on every token of the turn."""
    assert inputs.dialogues is not None and inputs.turn_index is not None
    out: dict[tuple[int, int], float] = {}
    for b, t in (inputs.mask > 0).nonzero().tolist():
        key = (int(inputs.dialogues[b]), int(inputs.turn_index[b, t]))
        assert out.setdefault(key, float(adv[b, t])) == approx(float(adv[b, t]), abs=1e-6), key
    return out


def test_the_mixed_advantage_by_hand() -> None:
    """Group 0: dialogues 0 and 1; group 1: dialogue 2 and dialogue 3, which ended after one turn.
    Returns (gamma 1): d0 (0.3, 0.2), d1 (0.1, -0.2), d2 (0.1, 0.1), d3 (0.2).
    Turn level: (g0, turn 0) [0.3, 0.1] and (g0, turn 1) [0.2, -0.2] and (g1, turn 0) [0.1, 0.2] are
    each ±1/sqrt(2) about their mean (two values: the unbiased std is the gap over sqrt 2); (g1, turn 1)
    holds d2 alone: 0. Batch level: the 7 returns against their mean 0.8/7 and unbiased std."""
    inputs = _whole_layout([[0.1, 0.2], [0.3, -0.2], [0.0, 0.1], [0.2]], [0, 0, 1, 1])
    out = MAPO.advantages(inputs, MAPOSettings(mapo_eps=1e-12))
    g = {(0, 0): 0.3, (0, 1): 0.2, (1, 0): 0.1, (1, 1): -0.2, (2, 0): 0.1, (2, 1): 0.1, (3, 0): 0.2}
    mean, std = statistics.mean(g.values()), statistics.stdev(g.values())
    h = 1 / math.sqrt(2)
    turn = {(0, 0): h, (1, 0): -h, (0, 1): h, (1, 1): -h, (2, 0): -h, (3, 0): h, (2, 1): 0.0}
    expected = {key: 0.4 * turn[key] + 0.6 * (g[key] - mean) / std for key in g}
    assert _per_turn(out.advantages, inputs) == approx(expected, abs=1e-6)
    assert out.returns is None and (out.advantages[inputs.mask == 0] == 0).all()
    assert out.stats == {"train/turn_groups": 4.0, "train/lone_turn_groups": 1.0}


def test_a_turn_is_credited_with_what_followed_it_not_with_the_whole_dialogue() -> None:
    """Two dialogues of one user with the same final score: the first lifted the user at turn 0 and
    lost it at turn 1, the second the reverse. GRPO gives both dialogues the same advantage (0);
    here turn 0 of the first and turn 1 of the second are credited, the others blamed."""
    inputs = _whole_layout([[0.2, -0.1], [-0.1, 0.2]], [0, 0])
    mixed = _per_turn(MAPO.advantages(inputs, MAPOSettings()).advantages, inputs)
    assert mixed[(0, 0)] == mixed[(1, 0)]  # same return from turn 0 on (0.1): no credit either way
    assert mixed[(0, 1)] < 0 < mixed[(1, 1)]  # turn 1: -0.1 against +0.2
    grpo = get_algorithm("grpo").advantages(inputs, get_algorithm("grpo").settings_class(name="grpo"))
    assert not grpo.advantages.any()


def test_a_weight_of_zero_leaves_one_level_and_gamma_discounts_later_turns() -> None:
    inputs = _whole_layout([[0.0, 0.4], [0.0, 0.0], [0.1, 0.0]], [0, 0, 0])
    batch_only = _per_turn(MAPO.advantages(inputs, MAPOSettings(mapo_turn_weight=0.0)).advantages, inputs)
    g = [0.4, 0.4, 0.0, 0.0, 0.1, 0.0]  # returns of (d0 t0, d0 t1, d1 t0, d1 t1, d2 t0, d2 t1)
    z = [(x - statistics.mean(g)) / (statistics.stdev(g) + 1e-6) for x in g]
    keys = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert batch_only == approx({k: 0.6 * v for k, v in zip(keys, z, strict=True)}, abs=1e-6)
    discounted = MAPO.advantages(inputs, MAPOSettings(mapo_batch_weight=0.0, gamma=0.5)).advantages
    turn0 = [0.2, 0.0, 0.1]  # d0's turn-0 return is 0 + 0.5 x 0.4
    z0 = [(x - statistics.mean(turn0)) / (statistics.stdev(turn0) + 1e-6) for x in turn0]
    by_turn = _per_turn(discounted, inputs)
    assert [by_turn[(d, 0)] for d in range(3)] == approx([0.4 * v for v in z0], abs=1e-6)
    with pytest.raises(ValueError, match="both 0"):
        MAPOSettings(mapo_turn_weight=0.0, mapo_batch_weight=0.0)


def test_monte_carlo_returns_by_hand() -> None:
    """Dialogue 0: rewards 0.1, 0.2 (gamma 0.5: 0.2 at turn 1, 0.1 + 0.5 x 0.2 = 0.2 at turn 0);
    dialogue 1: one turn of -0.3. Nothing follows a dialogue's last turn."""
    keys, g = monte_carlo_returns({0: {0: 0.1, 1: 0.2}, 1: {0: -0.3}}, 0.5)
    assert dict(zip(keys, g.tolist(), strict=True)) == approx({(0, 1): 0.2, (0, 0): 0.2, (1, 0): -0.3})


def test_inputs_without_their_turns_are_refused() -> None:
    """Inputs built without ``dialogues`` or ``turn_index`` (the learner fills both) are an error naming
    them; a ``dialogues`` tensor of the wrong length too (one id per sample)."""
    inputs = _whole_layout([[0.1], [0.2]], [0, 0])
    for missing in ("dialogues", "turn_index"):
        with pytest.raises(ValueError, match=r"^mapo needs AdvantageInputs\.dialogues and \.turn_index \("):
            MAPO.advantages(replace(inputs, **{missing: None}), MAPOSettings())
    with pytest.raises(ValueError, match="zip"):
        MAPO.advantages(replace(inputs, dialogues=torch.arange(3)), MAPOSettings())


def _episodes() -> list:
    """Two users, two dialogues each, of 3, 2, 3 and 1 assistant turns (delta rewards)."""
    replies = ["<think>a</think>x", "y", "<think>c</think>z"]
    shapes = [("u1", [45, 20, 70]), ("u1", [35, 50]), ("u2", [30, 40, 45]), ("u2", [10])]
    return [
        make_episode(30, afters, replies=replies[: len(afters)], think=True).model_copy(
            update={"profile_id": user}
        )
        for user, afters in shapes
    ]


@pytest.mark.parametrize("gamma", [1.0, 0.8])
def test_both_layouts_give_each_turn_the_same_advantage(gamma: float) -> None:
    """The same dialogues as one sample each (think_context: full) and as one sample per assistant turn
    (visible, each earning the reward from its turn on): through the learner's samples and padded
    batch, every turn gets the same advantage in both."""
    from rlver.models.tiny import tiny_model_and_tokenizer

    _, tokenizer = tiny_model_and_tokenizer(0)
    sets = ["algorithm.name=mapo", "rollout.reward.mode=delta", "rollout.think=true"]
    result = {}
    for layout in ("full", "visible"):
        rollout = load_train_config("tiny-offline", [*sets, f"rollout.think_context={layout}"]).rollout
        samples, dropped = make_samples(_episodes(), tokenizer, rollout, 4096)
        assert dropped == 0 and len(samples) == (4 if layout == "full" else 9)
        b = pad_batch(samples)
        inputs = AdvantageInputs(
            b.mask, b.token_rewards, b.scores, b.groups, dialogues=b.dialogues, turn_index=b.turn_index,
            per_turn=layout == "visible",
        )  # fmt: skip
        result[layout] = _per_turn(MAPO.advantages(inputs, MAPOSettings(gamma=gamma)).advantages, inputs)
    assert len(result["full"]) == 9
    assert result["visible"] == approx(result["full"], abs=1e-5)


def test_the_learner_finds_each_action_tokens_turn() -> None:
    """Row 0, token ids 0..9: turn 0 is tokens 2-3 (end 3), turn 1 tokens 6-8 (end 8); on the shifted
    grid (position p is token p + 1) positions 1-2 and 5-7. Row 1: two turns with one token between
    (ends 2 and 5: positions 0-1 and 3-4). Row 2: an action token past the last turn end counts to that
    turn. Row 3: a per-turn sample is its one turn."""
    seqs = [
        TokenizedEpisode(list(range(10)), [0, 0, 1, 1, 0, 0, 1, 1, 1, 0], [3, 8], 2),
        TokenizedEpisode(list(range(6)), [0, 1, 1, 0, 1, 1], [2, 5], 2),
        TokenizedEpisode(list(range(5)), [0, 1, 1, 0, 1], [2], 1),
        TokenizedEpisode(list(range(6)), [0, 0, 0, 1, 1, 0], [4], 1, meta={"per_turn": True, "turn": 2}),
    ]
    mask = torch.zeros(4, 9)
    for i, q in enumerate(seqs):
        mask[i, : len(q) - 1] = torch.tensor(q.assistant_mask[1:], dtype=torch.float32)
    out = turn_indices(seqs, mask)
    assert out.dtype == torch.long
    assert out[0].tolist() == [-1, 0, 0, -1, -1, 1, 1, 1, -1]
    assert out[1].tolist() == [0, 0, -1, 1, 1, -1, -1, -1, -1]
    assert out[2].tolist() == [0, 0, -1, 0, -1, -1, -1, -1, -1]
    assert out[3].tolist() == [-1, -1, 2, 2, -1, -1, -1, -1, -1]


@pytest.mark.parametrize("layout", ["full", "visible"])
def test_the_learner_hands_mapo_the_turns(layout: str, tmp_path: Path) -> None:
    """``Learner.score`` passes each sample's dialogue, turns and layout to the algorithm: in either
    layout every turn's advantage is the one MAPO gives the whole-dialogue batch by hand."""
    from rlver.models.tiny import tiny_model_and_tokenizer
    from test_learner_mutants import learner

    _, tokenizer = tiny_model_and_tokenizer(0)
    sets = ["algorithm.name=mapo", "rollout.reward.mode=delta", "rollout.think=true"]
    full = load_train_config("tiny-offline", [*sets, "rollout.think_context=full"]).rollout
    b = pad_batch(make_samples(_episodes(), tokenizer, full, 4096)[0])
    by_hand = AdvantageInputs(
        b.mask, b.token_rewards, b.scores, b.groups, dialogues=b.dialogues, turn_index=b.turn_index
    )
    expected = _per_turn(MAPO.advantages(by_hand, MAPOSettings()).advantages, by_hand)
    rollout = load_train_config("tiny-offline", [*sets, f"rollout.think_context={layout}"]).rollout
    samples, _ = make_samples(_episodes(), tokenizer, rollout, 4096)
    lr = learner(tmp_path, *sets)
    scored = lr.score(samples)
    inputs = AdvantageInputs(
        scored.mask, scored.token_rewards, scored.scores, scored.groups,
        dialogues=scored.dialogues, turn_index=scored.turn_index,
    )  # fmt: skip
    assert _per_turn(scored.advantages, inputs) == approx(expected, abs=1e-5)


def test_the_config_refuses_what_mapo_cannot_use() -> None:
    with pytest.raises(ConfigError, match=r"rollout\.reward\.mode must be one of delta, mixed \(got final"):
        load_train_config("tiny-offline", ["algorithm.name=mapo"])
    with pytest.raises(ConfigError, match=r"n_per_profile >= 2"):
        load_train_config(
            "tiny-offline", ["algorithm.name=mapo", "rollout.reward.mode=delta", "rollout.n_per_profile=1"]
        )
    cfg = load_train_config("tiny-offline", ["algorithm.name=mapo", "rollout.reward.mode=delta"])
    assert isinstance(cfg.algorithm, MAPOSettings)
    assert (cfg.algorithm.mapo_turn_weight, cfg.algorithm.mapo_batch_weight) == (0.4, 0.6)


def test_verl_refuses_it_in_one_line(tmp_path: Path) -> None:
    from rlver.integrations.verl.config import refuse_unsupported
    from rlver.integrations.verl.launch import load_verl_config

    cfg = load_verl_config(
        "tiny-offline", ["algorithm.name=mapo", "rollout.reward.mode=delta", f"verl.out_dir={tmp_path}"]
    )
    with pytest.raises(ConfigError) as refused:
        refuse_unsupported(cfg)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("algorithm.name=mapo: verl 0.9.1")
    assert message.endswith("--trainer local")


@pytest.mark.parametrize("layout", ["whole", "per-turn"])
def test_a_training_step_in_each_layout(layout: str, tmp_path: Path) -> None:
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    sets = [
        "algorithm.name=mapo", "rollout.reward.mode=delta", "rollout.batch_size=2", "rollout.n_per_profile=2",
        "rollout.rules.max_assistant_turns=2", "rollout.max_new_tokens=8", "run.steps=1", "eval.every=0",
        "eval.at_start=false", "run.progress=false", "run.tensorboard=false",
    ]  # fmt: skip
    if layout == "per-turn":
        sets += ["rollout.think=true", "rollout.think_context=visible"]
    trainer = Trainer(load_train_config("tiny-offline", sets), tmp_path)
    before = [p.detach().clone() for p in trainer.policy.parameters()]
    metrics = trainer.train_step()
    assert metrics["train/turn_groups"] >= 2 and metrics["train/advantage_abs_mean"] > 0
    assert metrics["rollout/samples"] >= 4
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.policy.parameters(), strict=True))
