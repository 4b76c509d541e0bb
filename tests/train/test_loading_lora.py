"""A LoRA run's KL reference is its base model: the policy with its adapters disabled, no second copy.

Full fine-tuning needs a frozen copy of the starting weights (``loading.load_reference``), because the
policy's own weights move. With LoRA the base never moves, so ``with policy.disable_adapter():`` *is*
the reference and costs no memory; a copy would be a second base model (15 GB for a 7B one in bf16).
These tests hold that down (issue 33): the run keeps no reference module and no second set of base
weights, its KL is exactly 0 before the first update, and once the adapter has moved the reference
still computes the base, in the precision the policy's frozen base is held in (bf16 weights under
``dtype: bfloat16``; an fp32 copy computing under autocast, as full fine-tuning's reference does, would
not equal it and would charge a KL to a policy that has not moved, issue 23).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from rlver.train.config import load_train_config

#: A one-step run small enough for a unit test (about 4 s on CPU).
ONE_STEP = [
    "model.lora.enabled=true",
    "algorithm.kl_coef=0.1",  # > 0, so the reference log-probs are computed and the KL is logged
    "rollout.batch_size=2",
    "rollout.n_per_profile=2",
    "rollout.rules.max_assistant_turns=1",
    "rollout.max_new_tokens=8",
    "eval.limit=1",
    "eval.every=0",
    "eval.at_start=false",
    "run.steps=1",
    "run.checkpoint_every=0",
    "run.progress=false",
    "run.tensorboard=false",
]


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _held_parameters(*modules: nn.Module | None) -> int:
    """Parameters the modules hold, each storage counted once (a shared tensor is not a copy)."""
    storages: dict[int, int] = {}
    for module in modules:
        if module is not None:
            for p in module.parameters():
                storages[p.untyped_storage().data_ptr()] = p.numel()
    return sum(storages.values())


def _adapter_parameters(policy: nn.Module) -> int:
    return sum(p.numel() for name, p in policy.named_parameters() if "lora_" in name)


def _modules_held(*owners: object) -> list[nn.Module]:
    """Every module among the owners' attributes: where a reference copy would have to live."""
    return [v for owner in owners for v in vars(owner).values() if isinstance(v, nn.Module)]


@pytest.mark.parametrize(
    ("algorithm", "dtype"), [("grpo", "float32"), ("grpo", "bfloat16"), ("ppo", "bfloat16")]
)
def test_a_lora_run_keeps_no_copy_and_starts_at_kl_0(tmp_path: Path, algorithm: str, dtype: str) -> None:
    """Step 1 scores its batch before any update, so its logged KL to the reference is the step-0 KL."""
    from transformers import AutoModelForCausalLM

    from rlver.train.trainer import Trainer

    config = load_train_config(
        "tiny-offline", [f"algorithm.name={algorithm}", f"model.dtype={dtype}", *ONE_STEP]
    )
    trainer = Trainer(config, tmp_path / "run")
    assert trainer.reference is None and trainer.learner.parts.reference is None
    base = AutoModelForCausalLM.from_pretrained(trainer.base)
    held = _held_parameters(*_modules_held(trainer, trainer.learner, trainer.learner.parts, trainer.chat))
    expected = _held_parameters(base) + _adapter_parameters(trainer.policy) + _held_parameters(trainer.critic)
    assert held == expected, "the run holds a second copy of the base model"

    metrics = trainer.train()[0]
    assert metrics["train/kl_ref"] == 0.0  # exactly: the reference and the untrained policy agree
    if algorithm == "grpo":
        assert metrics["train/kl_loss"] == 0.0  # the k3 term in the loss, on the first minibatch


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_lora_reference_is_the_base_after_the_adapter_moves(tmp_path: Path, dtype: str) -> None:
    """With a trained (here: randomised) adapter the reference log-probs are a separately loaded base
    model's, bit for bit, in the dtype the base is held in, and the policy gets its adapter back after."""
    from transformers import AutoModelForCausalLM

    from rlver.train.algorithms import get_algorithm
    from rlver.train.batch import MicroBatch, policy_forward
    from rlver.train.learner import Learner, LearnerParts
    from rlver.train.loading import build_models, torch_dtype
    from rlver.train.optim import Optimisers

    config = load_train_config("tiny-offline", [f"model.dtype={dtype}", *ONE_STEP])
    models = build_models(config, tmp_path, needs_critic=False)
    assert models.reference is None
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in models.policy.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    parts = LearnerParts(
        algo=get_algorithm(config.algorithm.name), settings=config.algorithm, optim=config.optim,
        policy=models.policy, reference=None, critic=None,
        optimisers=Optimisers(models.policy, None, config.optim, config.run.steps),
        pad_id=int(models.tokenizer.pad_token_id), device=models.device, temperature=0.7,
    )  # fmt: skip
    learner = Learner(parts)
    assert "ref_logp" in learner._scorers(4)
    ids = torch.arange(5, 45, device=models.device).reshape(2, 20)  # on the policy's device (CUDA too)
    mb = MicroBatch([0, 1], ids, torch.ones_like(ids), torch.ones((2, 19), device=models.device))
    base = (
        AutoModelForCausalLM.from_pretrained(models.base, dtype=torch_dtype(dtype)).to(models.device).eval()
    )
    models.policy.eval()
    with torch.no_grad():
        policy_before = policy_forward(models.policy, mb, 0.7)[0]
        ref = learner._reference_logp(mb)
        policy_after = policy_forward(models.policy, mb, 0.7)[0]
        expected = policy_forward(base, mb, 0.7)[0]
    assert torch.equal(ref, expected)
    assert (ref - policy_before).abs().max().item() > 1e-3  # the adapter did move the policy
    assert torch.equal(policy_after, policy_before)  # and it is back on after the reference pass
    # without a KL term no reference log-probs are computed at all
    no_kl = LearnerParts(**{**vars(parts), "settings": config.algorithm.model_copy(update={"kl_coef": 0.0})})
    assert "ref_logp" not in Learner(no_kl)._scorers(4)


def test_full_fine_tuning_keeps_its_frozen_copy(tmp_path: Path) -> None:
    """Full fine-tuning with a KL term needs the copy: the policy's own weights move."""
    from rlver.train.loading import build_models

    config = load_train_config("tiny-offline", ["algorithm.kl_coef=0.1"])
    models = build_models(config, tmp_path, needs_critic=False)
    assert models.reference is not None
    assert not any(p.requires_grad for p in models.reference.parameters())
    policy_only = _held_parameters(models.policy)
    assert _held_parameters(models.policy, models.reference) == 2 * policy_only
