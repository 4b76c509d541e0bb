"""Tests that kill mutants of ``rlver.train.learner`` the first mutation run left alive (issue 42, item
3; ``python bench/mutants.py learner``). A :class:`Learner` is built directly on the tiny model with
hand-made samples (no rollout, no trainer: a fraction of a second each), so each property is checked
against numbers worked out here: the padded batch, the scored tensors per row, the minibatch
arithmetic, the averaged statistics, gradient clipping and the non-finite guard."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.train.algorithms import core, get_algorithm
from rlver.train.algorithms.base import ActorLossInputs, AdvantageInputs, LossTerms
from rlver.train.algorithms.ppo import PPOSettings
from rlver.train.batch import collate, policy_forward, value_forward
from rlver.train.config import UpdateSettings, load_train_config
from rlver.train.learner import Learner, LearnerParts, Sample, TrainError, make_samples, pad_batch
from rlver.train.loading import build_models
from rlver.train.optim import Optimisers
from rlver.train.perf import ModelFlops
from rlver.train.tokenize import TokenizedEpisode
from rlver.train.update import ValueCritic, clip_and_norm
from test_env_rewards import make_episode


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def seq(n: int, prompt: int, k: int = 0, sampled: bool = False) -> TokenizedEpisode:
    """``n`` tokens, the first ``prompt`` the prompt's and the rest one assistant turn ending at n - 1."""
    ids = [(7 * i + 3 * k) % 40 + 5 for i in range(n)]
    mask = [0] * prompt + [1] * (n - prompt)
    logprobs: list[float | None] | None = None
    if sampled:
        logprobs = [None] * prompt + [-1.0] * (n - prompt)
    return TokenizedEpisode(ids, mask, [n - 1], 1, sample_logprobs=logprobs)


def sample(n: int, prompt: int, reward: float, profile: str, k: int = 0, sampled: bool = False) -> Sample:
    episode = make_episode(30, [40]).model_copy(update={"profile_id": profile})
    return Sample(episode, seq(n, prompt, k, sampled), [reward])


def learner(
    tmp_path: Path,
    *sets: str,
    minibatch_samples: int = 1,
    temperature: float = 1.0,
    micro_batch_tokens: int = 16384,
) -> Learner:
    """A learner on fresh tiny models for ``tiny-offline`` with ``sets`` (``algorithm.name=...``...)."""
    config = load_train_config("tiny-offline", list(sets))
    algo = get_algorithm(config.algorithm.name)
    models = build_models(config, tmp_path, needs_critic=algo.needs_critic)
    torch.manual_seed(0)
    parts = LearnerParts(
        algo=algo, settings=config.algorithm, optim=config.optim, policy=models.policy,
        reference=models.reference, critic=models.critic,
        optimisers=Optimisers(models.policy, models.critic, config.optim, config.run.steps),
        pad_id=int(models.tokenizer.pad_token_id), device=models.device, temperature=temperature,
        minibatch_samples=minibatch_samples, update=UpdateSettings(micro_batch_tokens=micro_batch_tokens),
    )  # fmt: skip
    return Learner(parts)


def four() -> list[Sample]:
    """Four samples of different lengths in two groups, each group's rewards differing."""
    return [
        sample(9, 4, 1.0, "a", 0),
        sample(6, 1, 0.0, "b", 1),  # the assistant from token 1: the grid's first position
        sample(11, 5, 0.5, "a", 2),
        sample(7, 3, 2.0, "b", 3),
    ]


# ------------------------------------------------------------------------------------------ batch
def test_pad_batch_by_hand() -> None:
    """Row i's mask is its assistant mask shifted by one (the grid scores token t + 1 at t), each turn's
    reward sits on its last token's grid position, and group ids follow the profiles' first appearance."""
    b = pad_batch([sample(5, 2, 0.75, "q"), sample(3, 1, -1.0, "p"), sample(4, 2, 2.0, "q")])
    assert b.mask.tolist() == [[0, 1, 1, 1], [1, 1, 0, 0], [0, 1, 1, 0]]
    assert b.token_rewards.tolist() == [[0, 0, 0, 0.75], [0, -1.0, 0, 0], [0, 0, 2.0, 0]]
    assert b.scores.tolist() == [0.75, -1.0, 2.0]
    assert b.groups.tolist() == [0, 1, 0]


def test_clip_and_norm() -> None:
    """The gradient's norm before clipping; with a bound the gradient is scaled down to it; a model
    without gradients has norm 0."""
    layer = torch.nn.Linear(2, 1, bias=False)
    assert clip_and_norm(layer, 1.0) == 0.0
    layer.weight.grad = torch.tensor([[3.0, 4.0]])
    assert clip_and_norm(layer, None) == pytest.approx(5.0)
    assert layer.weight.grad.tolist() == [[3.0, 4.0]]  # no bound: untouched
    assert clip_and_norm(layer, 1.0) == pytest.approx(5.0)
    assert layer.weight.grad[0].tolist() == pytest.approx([0.6, 0.8], abs=1e-5)


def test_the_minibatch_arithmetic(tmp_path: Path) -> None:
    """Samples per optimiser step is at least 1; the count of steps rounds up and is at least 1."""
    lone = learner(tmp_path, "algorithm.name=grpo", minibatch_samples=0)
    assert lone.minibatch_size() == 1 and lone.minibatch_count(0) == 1 and lone.minibatch_count(3) == 3
    two = learner(tmp_path, "algorithm.name=grpo", minibatch_samples=2)
    assert [two.minibatch_count(n) for n in (1, 2, 3, 4)] == [1, 1, 2, 2]


def test_the_nonfinite_guard_counts_in_a_row_and_stops_at_the_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A finite norm resets the count; each skip is logged with the norms at fault; the run stops on
    the limit-th skipped step in a row, not after, saying what to do."""
    lr = learner(tmp_path, "algorithm.name=grpo", "optim.max_nonfinite_in_a_row=2")
    assert lr._skip_nonfinite({"a": math.inf}, 1) and lr.nonfinite_in_a_row == 1
    assert not lr._skip_nonfinite({"a": 1.0}, 2) and lr.nonfinite_in_a_row == 0
    with caplog.at_level("WARNING", logger="rlver.train.update"):
        assert lr._skip_nonfinite({"a": math.nan, "b": 1.0, "c": math.inf}, 3)
    assert caplog.messages[-1:] == [
        "step 3: non-finite gradient norm (a, c); optimiser step skipped (1 in a row, stop at 2)"
    ]
    with pytest.raises(TrainError) as stopped:
        lr._skip_nonfinite({"a": 1.0, "b": math.nan, "c": math.inf}, 4)
    assert str(stopped.value) == (
        "step 4: 2 optimiser steps in a row had a non-finite gradient norm (b, c); the run stops "
        "(optim.max_nonfinite_in_a_row=2). Lower optim.actor_lr / optim.critic_lr, or check the rewards "
        "for inf/NaN"
    )


def _alone(lr: Learner, s: Sample) -> torch.Tensor:
    """``s``'s log-probs scored in a micro-batch of its own, without padding: ``[len - 1]``."""
    mb = collate([s.seq], [0], lr.parts.pad_id, lr.parts.device)
    with torch.no_grad():
        return policy_forward(lr.parts.policy, mb, lr.parts.temperature)[0][0].cpu()


# ---------------------------------------------------------------------------------------- scoring
def test_scoring_fills_each_row_to_its_own_end(tmp_path: Path) -> None:
    """Off-policy (two minibatches) with a critic: every row's old log-probs are what the policy gives the
    sequence alone, its values are the critic's, and every position past the row's end stays 0."""
    lr = learner(
        tmp_path, "algorithm.name=ppo", "rollout.n_per_profile=1", minibatch_samples=2, temperature=0.7
    )
    assert lr.parts.critic is not None
    with torch.no_grad():  # the value head starts at 0: give it weights, so that misplaced values show
        for param in lr.parts.critic.parameters():
            if not param.abs().sum():
                param.normal_(std=0.5)
    samples = four()
    b = lr.score(samples)
    assert b.old_logp is not None and b.values is not None and b.ref_logp is None
    for i, s in enumerate(samples):
        end = len(s.seq) - 1
        assert torch.allclose(b.old_logp[i, :end].cpu(), _alone(lr, s), atol=1e-5)
        assert b.old_logp[i, end:].abs().sum() == 0 and b.values[i, end:].abs().sum() == 0
        mb = collate([s.seq], [0], lr.parts.pad_id, lr.parts.device)
        assert torch.allclose(b.values[i, :end].cpu(), value_forward(lr.parts.critic, mb)[0].cpu(), atol=1e-5)
        assert b.advantages[i, end:].abs().sum() == 0 and b.returns is not None
        assert b.returns[i, end:].abs().sum() == 0
    # advantages and returns stand on the action tokens only (GAE over them)
    assert ((b.advantages != 0) <= (b.mask > 0)).all() and (b.advantages != 0).any()
    assert b.stats["train/advantage_abs_mean"] == pytest.approx(
        float((b.advantages.abs() * b.mask).sum() / b.mask.sum())
    )
    assert "train/kl_ref" not in b.stats  # no KL term: no reference


def test_on_policy_scores_nothing_and_a_kl_term_scores_the_reference(tmp_path: Path) -> None:
    """One minibatch, one epoch, no KL: no forward pass before the update (old log-probs are the
    update's own). A KL term needs the old and the reference log-probs, and logs their k1 mean."""
    lr = learner(tmp_path, "algorithm.name=grpo", minibatch_samples=4)
    assert lr.on_policy(4) and lr.score(four()).scored == {}
    kl = learner(tmp_path, "algorithm.name=grpo", "algorithm.kl_coef=0.1", minibatch_samples=4)
    assert not kl.on_policy(4)
    b = kl.score(four())
    assert set(b.scored) == {"old_logp", "ref_logp"} and b.old_logp is not None and b.ref_logp is not None
    k1 = float(((b.old_logp - b.ref_logp) * b.mask).sum() / b.mask.sum())
    assert b.stats["train/kl_ref"] == pytest.approx(k1, abs=1e-7)
    assert torch.equal(b.old_logp, b.ref_logp)  # the reference is the untrained policy: k1 = 0
    assert kl.parts.reference is not None


# ----------------------------------------------------------------------------------------- update
def test_an_on_policy_step_logs_minus_the_token_mean_advantage(tmp_path: Path) -> None:
    """At ratio 1 the clipped surrogate is -A on each action token, so the logged policy loss is minus
    the mean advantage over the minibatch's action tokens (each sample's own count: the normaliser is
    the minibatch's assistant tokens on the shifted grid), and nothing is clipped."""
    lr = learner(tmp_path, "algorithm.name=grpo", minibatch_samples=4)
    b = lr.score(four())
    expected = -float((b.advantages * b.mask).sum() / b.mask.sum())
    assert expected != 0.0
    stats = lr.update(b, 1, torch.Generator().manual_seed(0))
    assert stats["train/policy_loss"] == pytest.approx(expected, abs=1e-6)
    assert stats["train/clip_fraction"] == 0.0 and stats["train/approx_kl"] == 0.0
    assert stats["train/optimizer_steps"] == 1.0 and stats["train/nonfinite_skips"] == 0.0
    assert "train/early_stopped" not in stats and stats["train/grad_norm_actor"] > 0


def record_minibatch_steps(lr: Learner) -> list[dict[str, float]]:
    """The statistics of each optimiser step ``lr.update`` takes, in order (the list fills as it runs)."""
    seen: list[dict[str, float]] = []
    real = lr._minibatch_step

    def recorded(*args: Any) -> dict[str, float]:
        seen.append(real(*args))
        return seen[-1]

    lr._minibatch_step = recorded  # type: ignore[method-assign]
    return seen


def test_the_steps_statistics_are_means_over_its_minibatches(tmp_path: Path) -> None:
    """Two epochs of two minibatches: four optimiser steps; each logged loss term is the mean of the
    four minibatches' values, and the skipped-step count a sum."""
    lr = learner(tmp_path, "algorithm.name=grpo", "algorithm.epochs=2", minibatch_samples=2)
    b = lr.score(four())
    seen = record_minibatch_steps(lr)
    stats = lr.update(b, 1, torch.Generator().manual_seed(0))
    assert len(seen) == 4 and stats["train/optimizer_steps"] == 4.0
    for key in ("train/policy_loss", "train/approx_kl", "train/entropy", "train/grad_norm_actor"):
        assert stats[key] == pytest.approx(sum(s[key] for s in seen) / 4, rel=1e-6), key
    assert stats["train/approx_kl"] > 0  # the later minibatches ran after a step: off-policy


def test_target_kl_stops_after_the_minibatch_that_passed_it(tmp_path: Path) -> None:
    """The first minibatch runs at ratio 1 (approx_kl 0, not above any target); the second, after one
    optimiser step, passes a tiny target: two updates of the four, and the step says it stopped."""
    lr = learner(tmp_path, "algorithm.name=grpo", "algorithm.epochs=2", "algorithm.target_kl=1e-9",
                 minibatch_samples=2)  # fmt: skip
    stats = lr.update(lr.score(four()), 1, torch.Generator().manual_seed(0))
    assert stats["train/minibatch_updates"] == 2.0 == stats["train/optimizer_steps"]
    assert stats["train/early_stopped"] == 1.0
    calm = learner(tmp_path, "algorithm.name=grpo", "algorithm.epochs=2", "algorithm.target_kl=1e9",
                   minibatch_samples=2)  # fmt: skip
    stats = calm.update(calm.score(four()), 1, torch.Generator().manual_seed(0))
    assert stats["train/minibatch_updates"] == 4.0 and stats["train/early_stopped"] == 0.0


def test_truncated_is_weights_and_their_statistics(tmp_path: Path) -> None:
    """Token TIS on-policy: each weight is min(exp(old - sampled), threshold) with the sampler's
    log-prob -1 on every assistant token (the first, at position 0 of the shifted grid, is not
    scored); the logged mean and clipped share are over the minibatch's action tokens."""
    lr = learner(tmp_path, "algorithm.name=grpo", "algorithm.rollout_is=token",
                 "algorithm.rollout_is_threshold=1.5", minibatch_samples=4)  # fmt: skip
    samples = [sample(9, 4, 1.0, "a", 0, True), sample(7, 3, 0.0, "a", 1, True)]
    weights, clipped, n = [], 0, 0
    for s in samples:
        old = _alone(lr, s)
        action = torch.tensor(s.seq.assistant_mask[1:], dtype=torch.bool)
        w = torch.exp(old[action] + 1.0)
        weights.append(w.clamp(max=1.5))
        clipped += int((w > 1.5).sum())
        n += int(action.sum())
    stats = lr.update(lr.score(samples), 1, torch.Generator().manual_seed(0))
    assert stats["rollout/is_weight_mean"] == pytest.approx(float(torch.cat(weights).sum()) / n, rel=1e-5)
    assert stats["rollout/is_clipped_frac"] == pytest.approx(clipped / n)


# ---------------------------------------------------------------------------------------- samples
def test_samples_per_dialogue_or_per_turn_and_the_untokenisable_counted() -> None:
    """A dialogue without an assistant turn cannot be tokenised: counted, not trained. In the
    thought-free layout (think, ``think_context: visible``) each assistant turn is a sample earning
    the reward from its turn on (delta rewards 30 -> 45 -> 20 -> 70: 0.15, -0.25, 0.5, so 0.4, 0.25 and
    0.5); otherwise one sample per dialogue earns each turn's reward on that turn."""
    _, tokenizer = tiny_model_and_tokenizer(0)
    ep = make_episode(30, [45, 20, 70], think=True, replies=["<think>a</think>x", "y", "<think>c</think>z"])
    silent = make_episode(30, []).model_copy(update={"profile_id": "silent"})
    sets = ["rollout.reward.mode=delta", "rollout.think=true"]
    visible = load_train_config("tiny-offline", [*sets, "rollout.think_context=visible"]).rollout
    samples, dropped = make_samples([ep, silent], tokenizer, visible, 4096)
    assert dropped == 1 and len(samples) == 3
    assert [s.rewards for s in samples] == [pytest.approx([r]) for r in (0.4, 0.25, 0.5)]
    full = load_train_config("tiny-offline", [*sets, "rollout.think_context=full"]).rollout
    (whole,), dropped = make_samples([silent, ep], tokenizer, full, 4096)
    assert dropped == 1 and whole.rewards == pytest.approx([0.15, -0.25, 0.5])


@pytest.mark.filterwarnings("ignore:Detected call of:UserWarning")  # no optimiser step ran
def test_nonfinite_gradients_skip_the_optimiser_step_and_are_summed(tmp_path: Path) -> None:
    """Two minibatches whose gradients are NaN: neither optimiser step runs (the weights are as they
    were), and ``train/nonfinite_skips`` counts both (a sum over the step, where the losses are means)."""
    lr = learner(tmp_path, "algorithm.name=grpo", "optim.max_nonfinite_in_a_row=5", minibatch_samples=2)
    params = [p for p in lr.parts.policy.parameters() if p.requires_grad]
    params[0].register_hook(lambda grad: grad * math.nan)
    before = [p.detach().clone() for p in params]
    stats = lr.update(lr.score(four()), 1, torch.Generator().manual_seed(0))
    assert stats["train/nonfinite_skips"] == 2.0 and stats["train/optimizer_steps"] == 2.0
    assert all(torch.equal(a, p) for a, p in zip(before, params, strict=True))
    assert lr.nonfinite_in_a_row == 2


def test_a_critics_loss_and_norm_are_logged_beside_the_actors(tmp_path: Path) -> None:
    """PPO: the critic's value loss, clip share and gradient norm join the step's statistics, and its
    FLOPs the update's."""
    lr = learner(tmp_path, "algorithm.name=ppo", "rollout.n_per_profile=1", minibatch_samples=4)
    stats = lr.update(lr.score(four()), 1, torch.Generator().manual_seed(0))
    assert stats["train/value_loss"] > 0 and stats["train/grad_norm_critic"] > 0
    # the update's FLOPs (perf/mfu on a GPU) count the critic's forward and backward beside the policy's
    lengths = [len(s.seq) for s in four()]
    critic = getattr(lr.parts.critic, "backbone", lr.parts.critic)
    both = [ModelFlops.of(lr.parts.policy), ModelFlops.of(critic)]
    assert lr.perf.flops == pytest.approx(sum(f.sequences(lengths) for f in both))
    assert 0.0 <= stats["train/value_clip_fraction"] <= 1.0
    grpo = learner(tmp_path, "algorithm.name=grpo", minibatch_samples=4)
    assert "train/grad_norm_critic" not in grpo.update(
        grpo.score(four()), 1, torch.Generator().manual_seed(0)
    )


def test_a_lora_policys_reference_is_the_base_without_its_adapter(tmp_path: Path) -> None:
    """LoRA keeps no frozen copy: the reference log-probs are the policy's with the adapter switched
    off. Moving the adapter moves the old log-probs and leaves the reference's as they were."""
    lr = learner(tmp_path, "algorithm.name=grpo", "algorithm.kl_coef=0.1", "model.lora.enabled=true",
                 minibatch_samples=4)  # fmt: skip
    assert lr.parts.reference is None
    before = lr.score(four())
    assert before.ref_logp is not None and before.old_logp is not None
    assert torch.allclose(before.ref_logp, before.old_logp, atol=1e-6)  # a fresh adapter is 0
    with torch.no_grad():
        for name, param in lr.parts.policy.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    after = lr.score(four())
    assert after.old_logp is not None and after.ref_logp is not None
    assert torch.equal(after.ref_logp, before.ref_logp)
    assert (after.old_logp - before.old_logp).abs().max() > 1e-3


def test_the_minibatch_order_comes_from_the_given_generator(tmp_path: Path) -> None:
    """Two learners with the same weights and the same generator seed train the same, whatever the
    global RNG has been doing (a resumed run replays its steps from the saved generator)."""
    runs = []
    for global_seed in (1, 2):
        lr = learner(tmp_path, "algorithm.name=grpo", minibatch_samples=2)
        b = lr.score(four())
        torch.manual_seed(global_seed)
        runs.append(lr.update(b, 1, torch.Generator().manual_seed(5))["train/grad_norm_actor"])
    assert runs[0] == runs[1]


def test_the_critics_gradients_are_clipped_to_the_bound() -> None:
    """``optim.max_grad_norm`` bounds the critic's gradient as it does the actor's."""
    model = torch.nn.Linear(2, 1, bias=False)
    critic = ValueCritic(model, get_algorithm("ppo"), PPOSettings())
    model.weight.grad = torch.tensor([[3.0, 4.0]])
    assert critic.clip_grad(1.0) == {"train/grad_norm_critic": pytest.approx(5.0)}
    assert model.weight.grad[0].tolist() == pytest.approx([0.6, 0.8], abs=1e-5)


def test_the_run_stops_naming_the_step_whose_gradients_were_not_finite(tmp_path: Path) -> None:
    lr = learner(tmp_path, "algorithm.name=grpo", "optim.max_nonfinite_in_a_row=1", minibatch_samples=4)
    params = [p for p in lr.parts.policy.parameters() if p.requires_grad]
    params[0].register_hook(lambda grad: grad * math.nan)
    with pytest.raises(TrainError, match=r"^step 7: 1 optimiser steps in a row"):
        lr.update(lr.score(four()), 7, torch.Generator().manual_seed(0))


def test_ppos_kl_penalty_reaches_the_advantages(tmp_path: Path) -> None:
    """PPO with a KL term, the policy moved off its frozen reference: the batch's advantages are PPO's
    on the rewards minus ``kl_coef`` × k1(old ‖ ref) on every action token, to each row's last token."""
    lr = learner(tmp_path, "algorithm.name=ppo", "rollout.n_per_profile=1", "algorithm.kl_coef=0.1",
                 minibatch_samples=4)  # fmt: skip
    with torch.no_grad():
        for param in lr.parts.policy.parameters():
            param.add_(0.05 * torch.randn_like(param))
    b = lr.score(four())
    assert b.old_logp is not None and b.ref_logp is not None and b.values is not None
    k1 = (b.old_logp - b.ref_logp) * b.mask
    assert b.stats["train/kl_ref"] == pytest.approx(float(k1.sum() / b.mask.sum()), abs=1e-7)
    assert abs(b.stats["train/kl_ref"]) > 1e-4
    paid = AdvantageInputs(
        b.mask, b.token_rewards - 0.1 * k1, b.scores - 0.1 * k1.sum(dim=1), b.groups, b.values
    )
    want = lr.parts.algo.advantages(paid, lr.settings)
    assert torch.allclose(b.advantages, want.advantages, atol=1e-6)
    assert want.returns is not None and b.returns is not None
    assert torch.allclose(b.returns, want.returns, atol=1e-6)


def test_each_step_clips_both_models_gradients_to_the_bound(tmp_path: Path) -> None:
    """``optim.max_grad_norm``: the logged norms are before clipping, and the gradients the optimiser
    stepped with (left on the parameters after the last step) have the bound's norm."""
    lr = learner(tmp_path, "algorithm.name=ppo", "rollout.n_per_profile=1", "optim.max_grad_norm=0.001",
                 minibatch_samples=4)  # fmt: skip
    stats = lr.update(lr.score(four()), 1, torch.Generator().manual_seed(0))
    assert lr.parts.critic is not None
    for model, key in [
        (lr.parts.policy, "train/grad_norm_actor"),
        (lr.parts.critic, "train/grad_norm_critic"),
    ]:
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert stats[key] > 0.01
        assert float(torch.norm(torch.stack([g.norm() for g in grads]))) == pytest.approx(0.001, rel=1e-3)


def test_the_is_statistics_of_a_one_token_minibatch(tmp_path: Path) -> None:
    """A minibatch holding a single action token: its weight mean is that token's weight (divided by
    1, the count, not by the guard's floor)."""
    lr = learner(tmp_path, "algorithm.name=grpo", "algorithm.rollout_is=token", minibatch_samples=1)
    one = sample(4, 3, 1.0, "a", 0, True)  # assistant_mask [0, 0, 0, 1]: one action token on the grid
    weight = min(math.exp(float(_alone(lr, one)[-1]) + 1.0), 2.0)
    stats = lr.update(lr.score([one]), 1, torch.Generator().manual_seed(0))
    assert stats["rollout/is_weight_mean"] == pytest.approx(weight, rel=1e-5)


# ----------------------------------------------------------- second run's survivors (micro-batches)
#: micro-batches of at most 16 padded tokens split ``four()`` (lengths 9, 6, 11, 7) into [11], [9], [7, 6]:
#: three micro-batches, one of them two rows of different lengths
SPLIT = 16


def _moved(lr: Learner, std: float = 0.05) -> Learner:
    """``lr`` with its policy moved off its (frozen) reference, so that the two disagree."""
    with torch.no_grad():
        gen = torch.Generator().manual_seed(3)
        for param in lr.parts.policy.parameters():
            param.add_(std * torch.randn(param.shape, generator=gen).to(param.device))
    return lr


def test_grpos_kl_loss_is_k3_to_the_reference_over_the_minibatch(tmp_path: Path) -> None:
    """GRPO puts ``kl_coef`` × k3(policy ‖ reference) in the loss: on a policy moved off its reference
    the update logs ``kl_loss``, the minibatch's mean k3 over its action tokens, where the first (and
    only) step's policy is the one that scored the batch; each micro-batch reads its own rows of the
    reference log-probs, so a split minibatch gives the same number."""
    lr = _moved(learner(tmp_path, "algorithm.name=grpo", "algorithm.kl_coef=0.1", minibatch_samples=4,
                        micro_batch_tokens=SPLIT))  # fmt: skip
    b = lr.score(four())
    assert b.old_logp is not None and b.ref_logp is not None
    want = float((core.kl_k3(b.old_logp, b.ref_logp) * b.mask).sum() / b.mask.sum())
    assert want > 1e-4
    stats = lr.update(b, 1, torch.Generator().manual_seed(0))
    assert stats["train/kl_loss"] == pytest.approx(want, rel=1e-4)


def test_the_update_scores_at_the_batchs_temperature(tmp_path: Path) -> None:
    """Off-policy at temperature 0.7 (two minibatches: old log-probs scored before the update): the
    first optimiser step runs on the policy that scored the batch, so its ratio is 1 on every token
    (approx_kl 0, nothing clipped): the update's log-probs are at the same temperature as the old."""
    lr = learner(tmp_path, "algorithm.name=grpo", minibatch_samples=2, temperature=0.7)
    b = lr.score(four())
    assert b.old_logp is not None
    seen = record_minibatch_steps(lr)
    lr.update(b, 1, torch.Generator().manual_seed(0))
    assert seen[0]["train/approx_kl"] == pytest.approx(0.0, abs=1e-6)
    assert seen[0]["train/clip_fraction"] == 0.0
    assert seen[1]["train/approx_kl"] > 1e-6  # after a step: the check can see a moved policy


def _entropies_seen(lr: Learner, monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    """The entropy tensors the algorithm's actor loss is given, one per micro-batch, as they come."""
    seen: list[torch.Tensor] = []
    real = lr.parts.algo.actor_loss

    def recorded(x: ActorLossInputs, settings: Any) -> LossTerms:
        seen.append(x.entropy)
        return real(x, settings)

    monkeypatch.setattr(lr.parts.algo, "actor_loss", recorded)
    return seen


@pytest.mark.parametrize("coef", [0.0, 0.5])
def test_the_entropy_carries_a_gradient_only_when_it_is_in_the_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, coef: float
) -> None:
    """``entropy_coef`` 0: the entropy is a logged statistic, computed outside autograd (no graph kept
    for it); any positive coefficient, 1 or below, puts it in the loss with its gradient."""
    lr = learner(tmp_path, "algorithm.name=grpo", f"algorithm.entropy_coef={coef}", minibatch_samples=4)
    seen = _entropies_seen(lr, monkeypatch)
    lr.update(lr.score(four()), 1, torch.Generator().manual_seed(0))
    assert seen and all(e.requires_grad == (coef > 0) for e in seen)


def test_an_entropy_bonus_is_the_gradient_when_the_advantages_are_zero(tmp_path: Path) -> None:
    """Every sample of a group earning the same, GRPO's advantages are 0 and so is the surrogate's
    gradient: without an entropy bonus the actor's gradient is 0; a bonus of 0.5 is all of it."""
    even = [
        sample(n, p, 1.0, g, k)
        for k, (n, p, g) in enumerate([(9, 4, "a"), (6, 1, "b"), (11, 5, "a"), (7, 3, "b")])
    ]
    norms = []
    for coef in (0.0, 0.5):
        lr = learner(tmp_path, "algorithm.name=grpo", f"algorithm.entropy_coef={coef}", minibatch_samples=4)
        b = lr.score(even)
        assert b.advantages.abs().max() == 0
        norms.append(lr.update(b, 1, torch.Generator().manual_seed(0))["train/grad_norm_actor"])
    assert norms[0] == 0.0 and norms[1] > 1e-4


def test_micro_batching_leaves_the_losses_and_gradients_as_one_pass_gives(tmp_path: Path) -> None:
    """PPO on one minibatch, in one micro-batch or in three (rows of different lengths): each
    micro-batch's actor and critic losses are sums over the minibatch's action-token count, so the
    logged losses and both models' gradient norms are the one-pass ones."""
    stats = []
    for budget in (16384, SPLIT):
        lr = learner(tmp_path, "algorithm.name=ppo", "rollout.n_per_profile=1", minibatch_samples=4,
                     micro_batch_tokens=budget)  # fmt: skip
        stats.append(lr.update(lr.score(four()), 1, torch.Generator().manual_seed(0)))
    for key in ("train/policy_loss", "train/value_loss", "train/grad_norm_actor", "train/grad_norm_critic"):
        assert stats[1][key] == pytest.approx(stats[0][key], rel=1e-4, abs=1e-6), key


def test_per_turn_samples_keep_their_dialogue_and_fit_max_length() -> None:
    """Thought-free layout with a tight ``max_length``: every turn sample fits it (its response cut),
    each is its own turn's sequence and belongs to its dialogue (one group); two dialogues that cannot
    be tokenised are both counted."""
    _, tokenizer = tiny_model_and_tokenizer(0)
    ep = make_episode(30, [45, 20, 70], think=True, replies=["<think>a</think>x", "y", "<think>c</think>z"])
    sets = ["rollout.reward.mode=delta", "rollout.think=true", "rollout.think_context=visible"]
    visible = load_train_config("tiny-offline", sets).rollout
    roomy, _ = make_samples([ep], tokenizer, visible, 4096)
    shortest = min(len(s.seq) for s in roomy)
    silent = [make_episode(30, []).model_copy(update={"profile_id": f"silent{i}"}) for i in range(2)]
    samples, dropped = make_samples([silent[0], ep, silent[1]], tokenizer, visible, shortest - 1)
    assert dropped == 2 and samples
    assert all(len(s.seq) <= shortest - 1 for s in samples)
    assert samples[0].seq.truncated  # the first turn kept its prompt and lost its response's end
    assert [s.seq.meta["turn"] for s in samples] == list(range(len(samples)))
    assert all(s.episode is ep for s in samples)
    assert pad_batch(samples).groups.tolist() == [0] * len(samples)


def test_a_sample_mean_aggregation_is_the_same_over_split_micro_batches(tmp_path: Path) -> None:
    """Dr. GRPO divides by the minibatch's samples × its constant: each micro-batch is told the
    minibatch's sample count (``ActorLossInputs.samples``), so splitting the minibatch into
    micro-batches changes neither the loss nor the gradient (a micro-batch counting its own samples
    would weigh each split's samples more)."""
    out = []
    for budget in (16384, SPLIT):
        lr = learner(tmp_path / str(budget), "algorithm.name=dr_grpo", minibatch_samples=4,
                     micro_batch_tokens=budget)  # fmt: skip
        out.append(lr.update(lr.score(four()), 1, torch.Generator().manual_seed(0)))
    whole, split = out
    assert split["train/policy_loss"] == pytest.approx(whole["train/policy_loss"], rel=1e-4, abs=1e-7)
    assert split["train/grad_norm_actor"] == pytest.approx(whole["train/grad_norm_actor"], rel=1e-4)
    assert whole["train/grad_norm_actor"] > 1e-6
