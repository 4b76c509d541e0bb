"""A tiny, fully local chat model for tests, the offline demo and CPU benchmarks.

Why this exists: development and CI machines have no GPU and no access to model hubs, yet the trainer,
the rollout runner and the tokenisation code must run against a *real* Hugging Face model and
tokenizer (chat template, assistant masks, ``generate``, ``save_pretrained``/Auto reload), not a mock.
So we build one in well under a second from bundled text:

* a byte-level BPE tokenizer (the GPT-2/Qwen family's scheme, so any UTF-8 text, Chinese included,
  round-trips) trained with the Hugging Face ``tokenizers`` library on ``corpus/*.txt``;
* ChatML special tokens (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``) and ``<think>`` /
  ``</think>`` as added tokens, so the think-then-say format is one token per tag;
* a ChatML chat template (Qwen2.5-Instruct's structure: a default system message when none is given)
  whose assistant content is wrapped in ``{% generation %}`` so that
  ``apply_chat_template(..., return_assistant_tokens_mask=True)`` marks exactly the tokens the policy
  produced (content + ``<|im_end|>``, not the ``<|im_start|>assistant`` header);
* a 2-layer Qwen2 decoder built from a config with a seeded initialisation.

Everything is deterministic for a seed: same seed, same tokenizer files, same weights.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rlver.io import atomic_write_text, make_temp_dir, share_like_umask

if TYPE_CHECKING:  # heavy imports stay out of module import time (the CLI imports us lazily)
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

#: ChatML, as used by Qwen. The assistant turn's content and its ``<|im_end|>`` sit inside
#: ``{% generation %}`` so transformers can return an assistant-token mask; the header and the newline
#: after ``<|im_end|>`` are the template's doing, not the policy's, so they stay outside.
#: Qwen2.5-Instruct's default system prompt behaviour: a conversation without a system message gets one.
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."

CHAT_TEMPLATE = (
    "{%- if not messages or messages[0]['role'] != 'system' -%}"
    "{{- '<|im_start|>system\\n' + 'You are a helpful assistant.' + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- generation -%}{{- message['content'] + '<|im_end|>' -}}{%- endgeneration -%}"
    "{{- '\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

Size = Literal["tiny", "small"]

#: Sampling defaults as Qwen2.5-7B-Instruct ships them in ``generation_config.json``.
QWEN_GENERATION_DEFAULTS: dict[str, Any] = {
    "do_sample": True,
    "temperature": 0.7,
    "top_p": 0.8,
    "top_k": 20,
    "repetition_penalty": 1.05,
}

#: Model shapes. "tiny" (2 layers, ~0.4M parameters) is for tests; "small" (~30M) for CPU/GPU benchmarks.
_SHAPES: dict[str, dict[str, int]] = {
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    "small": {
        "hidden_size": 512,
        "intermediate_size": 1408,
        "num_hidden_layers": 10,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
    },
}


def _qwen2_split_regex() -> str:
    try:
        from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

        return str(PRETOKENIZE_REGEX)
    except ImportError:  # older transformers: the same regex, as Qwen2 publishes it
        return (
            r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
            r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
        )


def corpus_lines() -> list[str]:
    """The bundled training text (our own everyday supportive-conversation sentences, en + zh)."""
    lines: list[str] = []
    corpus = resources.files("rlver.models").joinpath("corpus")
    for name in ("en.txt", "zh.txt"):
        text = corpus.joinpath(name).read_text(encoding="utf-8")
        lines.extend(line for line in text.splitlines() if line.strip())
    return lines


def train_tokenizer(vocab_size: int = 2000, *, min_frequency: int = 1) -> PreTrainedTokenizerBase:
    """Train a byte-level BPE tokenizer on the bundled corpus and wrap it for transformers.

    The normaliser and pre-tokeniser are Qwen2's (NFC, Qwen2's split regex, byte-level without its own
    regex). That is not a detail: the saved folder has ``model_type: qwen2``, and transformers 5 loads
    it through ``Qwen2Tokenizer``, which rebuilds the pipeline from vocab + merges with exactly these
    settings. Training with the same settings makes the in-memory and the reloaded tokenizer identical.
    """
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_qwen2_split_regex()), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    specials = [ENDOFTEXT, IM_START, IM_END]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    # <think> tags are added (never split) but not special: decoding with skip_special_tokens keeps them,
    # because the environment has to see them to separate the thought from the visible reply.
    tok.add_tokens([AddedToken(THINK_OPEN, special=False), AddedToken(THINK_CLOSE, special=False)])

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        model_max_length=4096,
        clean_up_tokenization_spaces=False,
    )
    wrapped.add_special_tokens({"additional_special_tokens": [IM_START]})
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def _model_config(tokenizer: PreTrainedTokenizerBase, size: Size, **overrides: Any) -> Any:
    from transformers import Qwen2Config

    if size not in _SHAPES:
        raise ValueError(f"size must be one of {sorted(_SHAPES)}, got {size!r}")
    shape: dict[str, Any] = dict(_SHAPES[size])
    shape.update(overrides)
    im_end = int(tokenizer.convert_tokens_to_ids(IM_END))  # type: ignore[arg-type]
    pad = int(tokenizer.convert_tokens_to_ids(ENDOFTEXT))  # type: ignore[arg-type]
    return Qwen2Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=pad,
        eos_token_id=im_end,
        pad_token_id=pad,
        **shape,
    )


def build_tiny_model(
    out_dir: str | Path,
    *,
    seed: int = 0,
    vocab_size: int = 2000,
    size: Size = "tiny",
    **config_overrides: Any,
) -> Path:
    """Build tokenizer + model and save them as a Hugging Face folder; return the folder.

    The folder loads with ``AutoTokenizer.from_pretrained`` / ``AutoModelForCausalLM.from_pretrained``,
    exactly like a downloaded checkpoint. ``config_overrides`` change the model shape (e.g.
    ``num_hidden_layers=1``).
    """
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(vocab_size)
    config = _model_config(tokenizer, size, **config_overrides)
    # A private RNG scope: building a model must not disturb the caller's random stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    # Qwen2.5-Instruct's shipped generation_config, traps included: two EOS ids and sampling defaults
    # (repetition_penalty 1.05, top_k 20, ...) that a backend inheriting them would sample with but the
    # trainer never scores with. Tests run against these so the local backend must neutralise them.
    model.generation_config = GenerationConfig(
        **QWEN_GENERATION_DEFAULTS,
        **{
            "eos_token_id": [config.eos_token_id, config.pad_token_id],
            "pad_token_id": config.pad_token_id,
            "bos_token_id": config.bos_token_id,
            "max_new_tokens": 64,
        },
    )
    with _quiet_progress():
        model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


#: Written beside the weights by :func:`ensure_tiny_model`: what the folder was built from.
BUILD_STAMP = "rlver_tiny.json"


def ensure_tiny_model(target: str | Path, *, seed: int = 0, size: Size = "tiny") -> Path:
    """The tiny model for ``(seed, size)`` at ``target``: reused when already built from the same
    settings, else built beside it and renamed into place. Every caller that puts the tiny model into
    a run folder (the local trainer, the verl launcher, ``rlver eval`` with ``agent_tiny``) uses this.

    Why atomic: a run killed mid-build must not leave a folder with config.json but no weights, which
    every later start would take for complete. Why the stamp: a folder built for another seed or size
    is rebuilt, not silently reused (the build is deterministic, so a rebuild changes nothing else).
    """
    target = Path(target)
    wanted = {"seed": seed, "size": size}
    stamp = target / BUILD_STAMP
    if (target / "config.json").exists() and stamp.exists():
        with contextlib.suppress(ValueError, OSError):
            if json.loads(stamp.read_text(encoding="utf-8")) == wanted:
                return target
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.*"):  # temporary folders of killed builds
        shutil.rmtree(stale, ignore_errors=True)
    tmp = make_temp_dir(target.parent, f".{target.name}.")
    try:
        build_tiny_model(tmp, seed=seed, size=size)
        atomic_write_text(tmp / BUILD_STAMP, json.dumps(wanted))
        share_like_umask(tmp)
        if target.exists():  # a partial folder, or one built from other settings
            shutil.rmtree(target)
        tmp.replace(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


@contextlib.contextmanager
def _quiet_progress() -> Iterator[None]:
    """Silence transformers' per-call progress bars (shard writing/loading) for a tiny model."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


# -- per-process cache ------------------------------------------------------------------------------
_cache_lock = threading.Lock()
_cache_dirs: dict[tuple[int, str], Path] = {}
_cache_root: Path | None = None


def _cleanup_root() -> None:
    if _cache_root is not None:
        shutil.rmtree(_cache_root, ignore_errors=True)


def tiny_model_dir(seed: int = 0, size: Size = "tiny") -> Path:
    """The folder of the tiny model for ``seed``, built once per process into a temporary directory."""
    global _cache_root
    with _cache_lock:
        key = (seed, size)
        if key not in _cache_dirs:
            if _cache_root is None:
                _cache_root = Path(tempfile.mkdtemp(prefix="rlver-tiny-"))
                atexit.register(_cleanup_root)
            _cache_dirs[key] = build_tiny_model(_cache_root / f"{size}-seed{seed}", seed=seed, size=size)
        return _cache_dirs[key]


def tiny_model_and_tokenizer(
    seed: int = 0, size: Size = "tiny"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A fresh ``(model, tokenizer)`` pair for ``seed``, loaded with the Auto classes.

    The folder is built once per process; each call loads a *fresh* copy so a test that trains the model
    (or changes ``tokenizer.padding_side``) cannot leak into the next one.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model_dir(seed, size)
    tokenizer = AutoTokenizer.from_pretrained(path)
    with _quiet_progress():
        model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    return model, tokenizer
