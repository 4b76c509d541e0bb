"""``rlver export``: a checkpoint (or a run folder) → a plain Hugging Face model folder, LoRA merged.

The result loads with ``AutoModelForCausalLM.from_pretrained`` and serves with vLLM/SGLang like any
other model: no peft, no rlver needed.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlver.errors import InputError, Problem
from rlver.train.checkpoint import latest_checkpoint


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint folder, or the latest checkpoint of a run folder."""
    if (path / "policy").is_dir():
        return path
    for root in (path / "checkpoints", path):
        found = latest_checkpoint(root) if root.is_dir() else None
        if found is not None:
            return found
    raise InputError(
        Problem(str(path), None, None, "not a checkpoint (no policy/ folder) and no checkpoints inside")
    )


def export_checkpoint(checkpoint: Path, out_dir: Path, *, dtype: str | None = None) -> Path:
    """Write ``out_dir`` with the merged model and its tokenizer; return it.

    ``dtype`` (float32, bfloat16, float16) defaults to the run's ``model.dtype`` as recorded in the
    checkpoint's ``state.json``: a bf16 run's checkpoints hold fp32 master weights (mixed precision), but
    what it serves is a bf16 model, half the size. Older checkpoints without the record keep their dtype.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpt = resolve_checkpoint(checkpoint)
    policy = ckpt / "policy"
    adapter = policy / "adapter_config.json"
    info = (
        json.loads((ckpt / "state.json").read_text(encoding="utf-8"))
        if (ckpt / "state.json").exists()
        else {}
    )
    dtype = dtype or info.get("model_dtype")
    torch_dtype = getattr(torch, dtype) if dtype else "auto"
    if adapter.exists():
        from peft import PeftModel

        base = info.get("base_model") or json.loads(adapter.read_text(encoding="utf-8")).get(
            "base_model_name_or_path"
        )
        if not base:
            raise InputError(Problem(str(adapter), None, "base_model_name_or_path", "no base model recorded"))
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
        model = PeftModel.from_pretrained(model, policy).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch_dtype)
    if dtype:  # merge_and_unload may leave fp32 adapter-merged weights beside a bf16 base
        model = model.to(getattr(torch, dtype))
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(policy).save_pretrained(out_dir)
    return out_dir
