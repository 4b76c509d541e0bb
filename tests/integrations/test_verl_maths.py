"""Against real verl 0.9.1 (``make verl-test``; skipped without verl): rlver's training maths gives verl's
own numbers. First two hand-picked points (the capped k3 term, the advantage of a GRPO group of one),
then a differential test: on 200 random batches (multi-turn masks with user turns between replies and
right padding, groups of unequal size with a lone sample, ratios inside and past both clips, truncated
importance weights at token and sequence level) GAE and whitening, PPO's value targets, the policy
loss (asymmetric clip, dual clip, TIS), the value loss, GRPO's advantages and the k1/k3 estimators
equal what ``verl.trainer.ppo.core_algos`` computes; and ``lr_lambda`` equals verl's schedulers at every
step.

``tests/train/test_core_kl_clamp.py``, ``tests/train/test_grpo_lone_sample.py``,
``tests/train/test_optim_schedule.py`` and ``tests/train/test_train_algorithms.py`` hold the same points by
hand on every machine."""

from __future__ import annotations

import numpy as np
import pytest
import torch

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
verl_F = pytest.importorskip("verl.utils.torch_functional")

from rlver.train.algorithms.core import group_advantages, kl_k3  # noqa: E402


def test_k3_matches_verls_low_var_kl_with_its_cap() -> None:
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(4, 9, generator=g) * 20  # wide enough that some tokens pass the cap of 10
    ref = -torch.rand(4, 9, generator=g) * 20
    theirs = core_algos.kl_penalty(logp, ref, "low_var_kl")
    assert bool((theirs == 10.0).any()), "the inputs reach verl's cap"
    assert torch.allclose(kl_k3(logp, ref), theirs, atol=1e-6)


@pytest.mark.parametrize("scale", [True, False])
def test_a_group_of_one_gets_verls_advantage(scale: bool) -> None:
    scores = torch.tensor([0.7, 0.2, 0.9, 0.4, 0.1, 0.3])
    groups = [0, 0, 1, 2, 2, 2]  # group 1 has one sample
    rewards = torch.zeros(6, 3)
    rewards[:, -1] = scores
    theirs, _ = core_algos.compute_grpo_outcome_advantage(
        rewards, torch.ones(6, 3), np.array(groups), epsilon=1e-6, norm_adv_by_std_in_grpo=scale
    )
    ours = group_advantages(scores, groups, eps=1e-6, scale=scale, lone="raw")
    assert torch.allclose(ours, theirs[:, 0], atol=1e-6)


# -- differential test: rlver's maths against verl 0.9.1's own functions on random batches ----------------
#: Random batches per function. Each is a fresh draw of everything below, so the comparison covers
#: masks, group layouts and ratios no hand-made case names.
BATCHES = 200


def _layout(g: torch.Generator, rows: int, width: int) -> tuple[torch.Tensor, list[list[int]]]:
    """A multi-turn action mask ``[rows, width]`` (a prompt, then assistant runs between user runs,
    then right padding: zeros inside and after the response) and each row's turn-end positions."""
    mask = torch.zeros(rows, width)
    ends: list[list[int]] = []
    for r in range(rows):
        t = int(torch.randint(0, 4, (1,), generator=g))  # the prompt's tokens
        stop = width - int(torch.randint(0, width // 3, (1,), generator=g))  # right padding
        row_ends = []
        while t < stop:
            run = int(torch.randint(1, 6, (1,), generator=g))
            mask[r, t : min(t + run, stop)] = 1.0
            row_ends.append(min(t + run, stop) - 1)
            t += run + int(torch.randint(1, 5, (1,), generator=g))  # a user turn between replies
        if not row_ends:  # every row answers at least once
            mask[r, 0] = 1.0
            row_ends = [0]
        ends.append(row_ends)
    return mask, ends


def _groups(g: torch.Generator, rows: int) -> list[int]:
    """Group ids of unequal sizes (1 to 5), always with one group of a lone sample."""
    out, gid = [0], 1  # group 0 is the lone sample
    while len(out) < rows:
        out += [gid] * int(torch.randint(2, 6, (1,), generator=g))
        gid += 1
    order = torch.randperm(rows, generator=g).tolist()
    return [out[:rows][i] for i in order]


def _batch(seed: int) -> dict[str, torch.Tensor | list[int]]:
    g = torch.Generator().manual_seed(seed)
    rows, width = int(torch.randint(3, 12, (1,), generator=g)), int(torch.randint(8, 40, (1,), generator=g))
    mask, ends = _layout(g, rows, width)
    rewards = torch.zeros(rows, width)
    for r, row_ends in enumerate(ends):
        for e in row_ends:
            rewards[r, e] = float(torch.randn(1, generator=g))
    old = -3 * torch.rand(rows, width, generator=g)
    # ratios from 0.1 to 10: inside the clip, past 1 ± eps, and past the dual clip's c = 3
    logp = old + 1.2 * torch.randn(rows, width, generator=g)
    sampled = old + 0.3 * torch.randn(rows, width, generator=g)
    return {
        "mask": mask,
        "rewards": rewards,
        "values": torch.randn(rows, width, generator=g),
        "new_values": torch.randn(rows, width, generator=g),
        "returns": torch.randn(rows, width, generator=g),
        "old": old,
        "logp": logp,
        "sampled": sampled,
        "ref": old + 0.5 * torch.randn(rows, width, generator=g),
        "adv": torch.randn(rows, width, generator=g),
        "groups": _groups(g, rows),
    }


def _on(mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return x[mask > 0]


def test_gae_whitening_and_value_targets_match_verl() -> None:
    """PPO's advantages (GAE over the action tokens, whitened) and its value targets (the returns
    before whitening) against ``compute_gae_advantage_return``, on interleaved multi-turn masks."""
    from rlver.train.algorithms import get_algorithm
    from rlver.train.algorithms.base import AdvantageInputs
    from rlver.train.algorithms.core import masked_whiten
    from rlver.train.algorithms.ppo import PPOSettings

    ppo = get_algorithm("ppo")
    for seed in range(BATCHES):
        b = _batch(seed)
        mask, rewards, values = b["mask"], b["rewards"], b["values"]
        assert isinstance(mask, torch.Tensor) and isinstance(rewards, torch.Tensor)
        assert isinstance(values, torch.Tensor)
        gamma, lam = [(1.0, 1.0), (0.99, 0.95), (0.9, 0.5)][seed % 3]
        inputs = AdvantageInputs(mask, rewards, rewards.sum(dim=1), torch.zeros(len(mask)), values=values)
        ours = ppo.advantages(inputs, PPOSettings(gamma=gamma, lam=lam))
        theirs_adv, theirs_ret = core_algos.compute_gae_advantage_return(rewards, values, mask, gamma, lam)
        assert ours.returns is not None
        assert torch.allclose(_on(mask, ours.returns), _on(mask, theirs_ret), atol=1e-5), seed
        assert torch.allclose(_on(mask, ours.advantages), _on(mask, theirs_adv), atol=1e-4), seed
        x = b["adv"]
        assert isinstance(x, torch.Tensor)
        assert torch.allclose(
            _on(mask, masked_whiten(x, mask)), _on(mask, verl_F.masked_whiten(x, mask)), atol=1e-5
        )


def test_policy_loss_matches_verl_with_asymmetric_and_dual_clip_and_tis_weights() -> None:
    """The clipped surrogate (ε_low 0.2, ε_high 0.28; dual clip c = 3, or off, which rlver hands verl
    as c = 1e9), weighed by truncated importance weights, against ``compute_policy_loss_vanilla``:
    the loss, the clip fraction and ``ppo_kl`` (verl's k1 of old ‖ new)."""
    from omegaconf import OmegaConf

    from rlver.train.algorithms.core import policy_loss, rollout_is_weights

    for seed in range(BATCHES):
        b = _batch(seed)
        mask, old, logp, sampled, adv = (b[k] for k in ("mask", "old", "logp", "sampled", "adv"))
        assert all(isinstance(t, torch.Tensor) for t in (mask, old, logp, sampled, adv))
        dual = [3.0, None][seed % 2]
        level = ["token", "sequence", None][seed % 3]
        weights = None if level is None else rollout_is_weights(old, sampled, mask, level, 2.0).weights
        ours = policy_loss(
            logp, old, adv, mask, clip_eps=0.2, clip_eps_high=0.28, dual_clip=dual, is_weights=weights
        )
        cfg = OmegaConf.create(
            {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28,
             "clip_ratio_c": 1e9 if dual is None else dual, "global_batch_info": {}}
        )  # fmt: skip
        loss, metrics = core_algos.compute_policy_loss_vanilla(
            old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask,
            loss_agg_mode="token-mean", config=cfg, rollout_is_weights=weights,
        )  # fmt: skip
        assert ours.loss.item() == pytest.approx(loss.item(), abs=1e-5), seed
        assert ours.clip_fraction.item() == pytest.approx(metrics["actor/pg_clipfrac"], abs=1e-6), seed
        assert ours.ppo_kl.item() == pytest.approx(metrics["actor/ppo_kl"], abs=1e-5), seed


@pytest.mark.parametrize(
    "mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
)
def test_every_loss_aggregation_matches_verls_agg_loss_over_micro_batches(mode: str) -> None:
    """``core.aggregate`` on each of two micro-batches, told the minibatch's counts, against verl's
    ``agg_loss`` told the same global counts (``batch_num_tokens``, ``global_batch_size``,
    ``loss_scale_factor``, as ``verl/workers/utils/losses.py`` passes them), summed."""
    from rlver.train.algorithms.core import Aggregation, aggregate

    for seed in range(BATCHES):
        b = _batch(seed)
        mask, per_token = b["mask"], b["logp"]
        assert isinstance(mask, torch.Tensor) and isinstance(per_token, torch.Tensor)
        n_tok, n_seq = float(mask.sum()), float((mask.sum(dim=1) > 0).sum())
        agg = Aggregation(mode, n_tok, n_seq, 97.0)
        cut = 1 + seed % (mask.shape[0] - 1)
        ours = sum(aggregate(per_token[r], mask[r], agg) for r in (slice(0, cut), slice(cut, None)))
        theirs = sum(
            core_algos.agg_loss(
                per_token[r], mask[r], mode, batch_num_tokens=n_tok, global_batch_size=n_seq,
                loss_scale_factor=97,
            )
            for r in (slice(0, cut), slice(cut, None))
        )  # fmt: skip
        assert float(ours) == pytest.approx(float(theirs), rel=1e-5, abs=1e-6), seed


def test_dr_grpos_actor_loss_matches_verls_seq_mean_token_sum_norm() -> None:
    """Dr. GRPO's whole actor loss (clipped surrogate, k3 KL, entropy bonus) against verl's policy
    loss, ``low_var_kl`` and entropy each through ``agg_loss`` with ``seq-mean-token-sum-norm``, as
    ``verl/workers/utils/losses.py`` adds them; the clip fraction stays verl's token mean."""
    from omegaconf import OmegaConf

    from rlver.train.algorithms import get_algorithm
    from rlver.train.algorithms.base import ActorLossInputs
    from rlver.train.algorithms.dr_grpo import DrGRPOSettings

    settings = DrGRPOSettings(kl_coef=0.05, entropy_coef=0.01, loss_scale_factor=64)
    for seed in range(BATCHES):
        b = _batch(seed)
        mask, old, logp, adv = (b[k] for k in ("mask", "old", "logp", "adv"))
        assert all(isinstance(t, torch.Tensor) for t in (mask, old, logp, adv))
        g = torch.Generator().manual_seed(seed)
        ref = old + (torch.rand(old.shape, generator=g) - 0.5)
        entropy = torch.rand(old.shape, generator=g)
        n_seq = float((mask.sum(dim=1) > 0).sum())
        x = ActorLossInputs(mask, float(mask.sum()), logp, old, adv, entropy, ref, None, n_seq)
        ours = get_algorithm("dr_grpo").actor_loss(x, settings)
        info = {"global_batch_size": n_seq, "loss_scale_factor": 64}
        cfg = OmegaConf.create(
            {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0,
             "global_batch_info": info}
        )  # fmt: skip
        mode = "seq-mean-token-sum-norm"
        pg, metrics = core_algos.compute_policy_loss_vanilla(
            old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask, loss_agg_mode=mode, config=cfg
        )  # fmt: skip
        kl = core_algos.agg_loss(core_algos.kl_penalty(logp, ref, "low_var_kl"), mask, mode, **info)
        ent = core_algos.agg_loss(entropy, mask, mode, **info)
        theirs = pg - 0.01 * ent + 0.05 * kl
        assert ours.loss.item() == pytest.approx(theirs.item(), rel=1e-5, abs=1e-6), seed
        assert ours.stats["clip_fraction"].item() == pytest.approx(metrics["actor/pg_clipfrac"], abs=1e-6)


def test_value_loss_and_its_clip_fraction_match_verl() -> None:
    from rlver.train.algorithms.core import value_loss

    for seed in range(BATCHES):
        b = _batch(seed)
        mask, new, old, ret = b["mask"], b["new_values"], b["values"], b["returns"]
        assert all(isinstance(t, torch.Tensor) for t in (mask, new, old, ret))
        ours = value_loss(new, old, ret, mask, clip_range=0.2)
        loss, clipfrac = core_algos.compute_value_loss(new, ret, old, mask, cliprange_value=0.2)
        assert ours.loss.item() == pytest.approx(loss.item(), abs=1e-5), seed
        assert ours.clip_fraction.item() == pytest.approx(clipfrac.item(), abs=1e-7), seed  # exact share


@pytest.mark.parametrize("scale", [True, False])
def test_grpo_advantages_match_verl_on_groups_of_unequal_size(scale: bool) -> None:
    """GRPO's per-token advantages (groups of 1 to 5 dialogues, always one lone sample) against
    ``compute_grpo_outcome_advantage``, whose score is each row's summed token rewards."""
    from rlver.train.algorithms import get_algorithm
    from rlver.train.algorithms.base import AdvantageInputs
    from rlver.train.algorithms.grpo import GRPOSettings

    grpo = get_algorithm("grpo")
    for seed in range(BATCHES):
        b = _batch(seed)
        mask, rewards, groups = b["mask"], b["rewards"], b["groups"]
        assert (
            isinstance(mask, torch.Tensor) and isinstance(rewards, torch.Tensor) and isinstance(groups, list)
        )
        assert min(groups.count(x) for x in set(groups)) == 1  # a lone sample in every batch
        inputs = AdvantageInputs(mask, rewards, rewards.sum(dim=1), torch.tensor(groups))
        ours = grpo.advantages(inputs, GRPOSettings(grpo_scale_by_std=scale))
        theirs, _ = core_algos.compute_grpo_outcome_advantage(
            rewards, mask, np.array(groups), epsilon=1e-6, norm_adv_by_std_in_grpo=scale
        )
        assert torch.allclose(_on(mask, ours.advantages), _on(mask, theirs), atol=1e-5), seed


def test_kl_estimators_match_verl() -> None:
    """k1 (PPO's reward penalty) and k3 (GRPO's loss term, capped at 10) against ``kl_penalty``."""
    from rlver.train.algorithms.core import kl_k1

    for seed in range(BATCHES):
        b = _batch(seed)
        logp, ref = b["logp"], b["ref"]
        assert isinstance(logp, torch.Tensor) and isinstance(ref, torch.Tensor)
        assert torch.allclose(kl_k1(logp, ref), core_algos.kl_penalty(logp, ref, "k1"), atol=1e-6)
        assert torch.allclose(kl_k3(logp, ref), core_algos.kl_penalty(logp, ref, "low_var_kl"), atol=1e-5)


@pytest.mark.parametrize(
    ("schedule", "warmup", "total"),
    [
        ("constant", 20, 1000),  # the published presets' actor: 2 % of 1,000 steps
        ("constant", 50, 1000),  # and critic: 5 %
        ("cosine", 20, 1000),
        ("cosine", 50, 1000),
        ("cosine", 0, 30),
        ("cosine", 3, 10),
        ("constant", 0, 10),
    ],
)
def test_lr_lambda_is_verls_schedule_step_by_step(schedule: str, warmup: int, total: int) -> None:
    """``rlver.train.optim.lr_lambda`` against the multiplier of verl's own FSDP schedulers
    (``get_constant_schedule_with_warmup``, ``get_cosine_schedule_with_warmup`` with verl's defaults:
    ``min_lr_ratio`` 0, half a cycle, 0-indexed steps) at every step a run takes (0 .. total - 1)."""
    from verl.utils.torch_functional import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    from rlver.train.optim import lr_lambda

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    if schedule == "constant":
        theirs = get_constant_schedule_with_warmup(opt, num_warmup_steps=warmup)
    else:
        theirs = get_cosine_schedule_with_warmup(opt, num_warmup_steps=warmup, num_training_steps=total)
    verl_lambda = theirs.lr_lambdas[0]
    ours = lr_lambda(schedule, warmup, total)
    for n in range(total):
        assert ours(n) == pytest.approx(verl_lambda(n), abs=1e-12), (schedule, warmup, total, n)
