"""Load the models a run trains: the policy (full or LoRA), the critic, and the reference policy.

:func:`build_models` assembles the set a run needs (from a checkpoint when resuming); the trainer only
uses what it returns.

* Policy: any causal LM folder / hub id (or ``tiny``). With LoRA (peft) only the adapter trains, and the
  frozen reference policy costs nothing: it is the same model with the adapter disabled.
* Critic (PPO): a *separate* copy of the base model's transformer with a scalar head (the
  verl/OpenRLHF design), so value learning never disturbs the policy's features and it has its own
  learning rate and optimiser.
* Dropout is switched off everywhere: RL's importance ratios assume that the model that scored the
  rollout (old log-probs) and the model being updated agree exactly at step 0.
* ``dtype: bfloat16`` is mixed precision (``rlver.llm.precision``): fully fine-tuned weights (policy and
  critic) are kept in fp32 — the master copy AdamW updates and checkpoints hold — and every forward pass
  computes in bf16 under autocast. With LoRA the frozen base is loaded in bf16 (it never changes, so
  rounding costs nothing) and peft keeps the trainable adapter in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlver.llm.precision import compute_in_bf16
from rlver.models.devices import default_device
from rlver.models.reference import base_model_folder
from rlver.train.config import ModelSettings, TrainConfig

VALUE_HEAD_FILE = "value_head.pt"


def resolve_device(name: str | None) -> torch.device:
    if name:
        return torch.device(name)
    return torch.device(default_device())


def torch_dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def _no_dropout(model: nn.Module) -> None:
    config = getattr(model, "config", None)
    if config is not None:
        for key, value in list(vars(config).items()):
            if "dropout" in key and isinstance(value, float):
                setattr(config, key, 0.0)
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0


def _lora(model: nn.Module, settings: ModelSettings) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    lora = settings.lora
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        bias="none",
    )
    return get_peft_model(model, config)  # type: ignore[arg-type]


def _enable_checkpointing(model: Any, settings: ModelSettings) -> None:
    if not settings.gradient_checkpointing:
        return
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if settings.lora.enabled and hasattr(model, "enable_input_require_grads"):
        model.enable_input_require_grads()


def load_tokenizer(path: Path | str) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(
    base: Path | str, settings: ModelSettings, device: torch.device, *, resume_from: Path | None = None
) -> nn.Module:
    """The trainable policy; ``resume_from`` is a checkpoint's ``policy/`` folder."""
    from transformers import AutoModelForCausalLM

    model = _load_trainable(AutoModelForCausalLM, base, settings, device, resume_from)
    return model.to(device)  # type: ignore[no-any-return]


def _load_trainable(
    auto_class: Any,
    base: Path | str,
    settings: ModelSettings,
    device: torch.device,
    resume_from: Path | None,
) -> Any:
    """Load ``base`` with ``auto_class`` as a trainable module: a (resumed) LoRA adapter on the frozen
    base when LoRA is on, else the full weights (from the checkpoint when resuming).

    Full fine-tuning always holds fp32 weights; ``bfloat16`` then means bf16 *compute* (autocast), never
    bf16 weights, whose rounding would swallow small updates (see ``rlver.llm.precision``)."""
    dtype = torch_dtype(settings.dtype)
    if settings.lora.enabled:
        model: Any = auto_class.from_pretrained(base, dtype=dtype)
        if resume_from is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, resume_from, is_trainable=True)
        else:
            model = _lora(model, settings)
    else:
        model = auto_class.from_pretrained(resume_from or base, dtype=torch.float32)
        if dtype == torch.bfloat16:
            compute_in_bf16(model, device)
    _no_dropout(model)
    _enable_checkpointing(model, settings)
    return model


def load_reference(base: Path | str, settings: ModelSettings, device: torch.device) -> nn.Module:
    """A frozen copy of the base model (full fine-tuning with a KL term only), in the policy's precision.

    Its weights are fp32 like the policy's master weights, and with ``dtype: bfloat16`` it computes
    under the same autocast. Why not bf16 weights (half the memory)? At step 0 the reference and the
    policy are the same model, so their log-probs must agree exactly; bf16-rounded weights against the
    policy's fp32 ones gave a log-prob gap of 2.3e-3, i.e. a KL penalty on a policy that
    has not moved.
    """
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    if settings.dtype == "bfloat16":  # compute exactly as the policy does (rlver.llm.precision)
        compute_in_bf16(model, device)
    _no_dropout(model)
    model.requires_grad_(False)
    return model.to(device).eval()  # type: ignore[no-any-return]


class ValueModel(nn.Module):
    """A transformer body plus a scalar head: ``values[b, t]`` estimates the return from token ``t``.

    The head starts at zero so the first advantages are plain reward-to-go, not noise.
    """

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        hidden = out.last_hidden_state
        # the head stays fp32 even when the body computes in bf16 (it is not wrapped by autocast)
        return self.head(hidden.float()).squeeze(-1)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(folder)  # type: ignore[operator]
        torch.save(self.head.state_dict(), folder / VALUE_HEAD_FILE)


def load_critic(
    base: Path | str, settings: ModelSettings, device: torch.device, *, resume_from: Path | None = None
) -> ValueModel:
    from transformers import AutoModel

    backbone = _load_trainable(AutoModel, base, settings, device, resume_from)
    hidden = int(backbone.config.hidden_size)
    critic = ValueModel(backbone, hidden)
    if resume_from is not None:
        critic.head.load_state_dict(torch.load(resume_from / VALUE_HEAD_FILE, map_location="cpu"))
    return critic.to(device)


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


@dataclass
class Models:
    """Everything a run computes with: where, from which base, and the modules themselves."""

    device: torch.device
    base: Path | str
    tokenizer: Any
    policy: nn.Module
    critic: ValueModel | None  # only for an algorithm that trains one
    reference: nn.Module | None  # a frozen copy, only for full fine-tuning with a KL term


def build_models(
    config: TrainConfig, work_dir: Path, *, needs_critic: bool, checkpoint: Path | None = None
) -> Models:
    """The tokenizer, policy, critic (``needs_critic``) and reference of a run, resumed from
    ``checkpoint`` when given. With LoRA there is no separate reference: it is the policy with its
    adapter disabled, which costs no memory."""
    device = resolve_device(config.model.device)
    m = config.model
    base = base_model_folder(m.path, work_dir, tiny_seed=m.tiny_seed, tiny_size=m.tiny_size)
    tokenizer = load_tokenizer(base)
    policy = load_policy(
        base, config.model, device, resume_from=checkpoint / "policy" if checkpoint else None
    )
    critic = None
    if needs_critic:
        value_from = checkpoint / "value" if checkpoint else None
        critic = load_critic(base, config.model, device, resume_from=value_from)
    reference = None
    if config.algorithm.kl_coef > 0 and not config.model.lora.enabled:
        reference = load_reference(base, config.model, device)
    return Models(device, base, tokenizer, policy, critic, reference)
