"""``rlver export``: a checkpoint (or a run folder) → a plain Hugging Face model folder, LoRA merged.

The result loads with ``AutoModelForCausalLM.from_pretrained`` and serves with vLLM/SGLang like any
other model: no peft, no rlver needed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from rlver.errors import InputError, Problem
from rlver.io import _fsync_dir, atomic_write_json, make_temp_dir, share_like_umask
from rlver.models.reference import BASE_MODEL_DIR
from rlver.train.checkpoint import latest_checkpoint

#: Written into every export; a folder holding it may be replaced by a new export without --force.
EXPORT_MARKER = "rlver_export.json"
#: What a Hugging Face model folder holds: an export from before the marker existed is recognised by
#: holding nothing else.
_MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "tokenizer.model",
    "model.safetensors.index.json",
)


def _is_model_file(name: str) -> bool:
    return name in _MODEL_FILES or (name.startswith("model") and name.endswith(".safetensors"))


def check_export_target(out_dir: Path, *, force: bool = False) -> str:
    """Say how ``out_dir`` may be written: ``"new"`` (absent or empty), ``"replace"`` (an earlier
    export) or ``"into"`` (anything else, only with ``force``); raise :class:`InputError` otherwise.

    Exporting once replaced an eval run's ``config.json`` without a word; a folder that is not an
    export is never touched unless the user says so.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(
            Problem(str(out_dir), None, None, "is a file; give a folder path for the exported model")
        )
    if not out_dir.exists():
        return "new"
    entries = sorted(p.name for p in out_dir.iterdir())
    if not entries:
        return "new"
    if EXPORT_MARKER in entries or all(_is_model_file(n) for n in entries):
        return "replace"
    if force:
        return "into"
    shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
    raise InputError(
        Problem(
            str(out_dir),
            None,
            None,
            f"not empty and not an earlier export (holds {shown}); choose a new folder, "
            "or add --force to write the model files into it (files of the same name are replaced)",
        )
    )


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint folder, or the latest checkpoint of a run folder."""
    if not path.exists():  # "not a checkpoint" read as if the folder were there, with the wrong files
        raise InputError(
            Problem(str(path), None, None, "no such folder; give a training run or checkpoint folder")
        )
    if not path.is_dir():
        raise InputError(
            Problem(str(path), None, None, "a file, not a folder; give a training run or checkpoint folder")
        )
    if (path / "policy").is_dir():
        return path
    for root in (path / "checkpoints", path):
        found = latest_checkpoint(root) if root.is_dir() else None
        if found is not None:
            return found
    raise InputError(
        Problem(str(path), None, None, "not a checkpoint (no policy/ folder) and no checkpoints inside")
    )


def export_checkpoint(
    checkpoint: Path, out_dir: Path, *, dtype: str | None = None, force: bool = False
) -> Path:
    """Write ``out_dir`` with the merged model and its tokenizer; return it.

    ``dtype`` (float32, bfloat16, float16) defaults to the run's ``model.dtype`` as recorded in the
    checkpoint's ``state.json``: a bf16 run's checkpoints hold fp32 master weights (mixed precision), but
    what it serves is a bf16 model, half the size. Older checkpoints without the record keep their dtype.

    The model is written to a temporary folder beside ``out_dir`` and moved into place, with the
    umask's modes (``save_pretrained`` writes the weights 0600), so a crash leaves the old export.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    how = check_export_target(out_dir, force=force)
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
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(out_dir.parent, f".{out_dir.name}.export.")
    try:
        model.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(policy).save_pretrained(tmp)
        atomic_write_json(tmp / EXPORT_MARKER, {"checkpoint": str(ckpt.resolve()), "dtype": dtype})
        share_like_umask(tmp)
        _move_into_place(tmp, out_dir, how)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _move_into_place(tmp: Path, out_dir: Path, how: str) -> None:
    if how == "into":  # --force on a foreign folder: only files of the same name are replaced
        for item in tmp.iterdir():
            os.replace(item, out_dir / item.name)
        tmp.rmdir()
    else:
        old = None
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old.{os.getpid()}")
            os.replace(out_dir, old)
        os.replace(tmp, out_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(out_dir.parent)


def resolve_model_folder(path: Path) -> Path:
    """The folder to load for ``--agent-local PATH``: a model folder as is, or the latest policy of a
    training run folder or checkpoint folder.

    A run folder holds ``checkpoints/step_N/policy``, not a model at its top; loading it directly
    gave a cut-off tokenizer error. A full-model policy is loaded from the checkpoint; a LoRA adapter
    needs its base merged first, so the error names the ``rlver export`` command that does it.
    """
    if (path / "config.json").exists() and not (path / "checkpoints").is_dir():
        return path
    if not ((path / "policy").is_dir() or (path / "checkpoints").is_dir() or any(path.glob("step_*"))):
        return path  # not ours: the model loader names what is missing
    try:
        ckpt = resolve_checkpoint(path)
    except InputError:
        hint = (
            f"; to evaluate the untrained model pass --agent-local {path / BASE_MODEL_DIR}"
            if (path / BASE_MODEL_DIR / "config.json").exists()
            else ""
        )
        raise InputError(
            Problem(str(path), None, None, f"a training run folder with no checkpoint yet{hint}")
        ) from None
    policy = ckpt / "policy"
    if (policy / "adapter_config.json").exists():
        raise InputError(
            Problem(
                str(policy),
                None,
                None,
                "holds a LoRA adapter, not a whole model: merge it first with "
                f"`rlver export {path} {path / 'exported'}`, then pass --agent-local {path / 'exported'}",
            )
        )
    if not (policy / "config.json").exists():
        raise InputError(Problem(str(policy), None, "config.json", "missing: this checkpoint has no model"))
    return policy
