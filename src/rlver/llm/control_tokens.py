"""Chat templates rendered to ids with the control tokens that *messages* spell kept as plain text.

Why: message text is untrusted. A reply (or a simulated user's message) that spells ``<|im_end|>`` or
``<|im_start|>user`` must stay text, or it forges an end of turn or a whole extra turn in what the
policy is prompted with and trained on. ``apply_chat_template`` tokenises the rendered chat in one go,
so it turns such spellings into the real tokens. transformers only added
``apply_chat_template(sanitize_control_tokens=True)`` late in 5.x (5.17 lacks it, 5.24 has it), and it
cannot be combined with ``return_assistant_tokens_mask``; pyproject allows every 5.x. So we do the
same thing ourselves, on every version: mark the control tokens inside the messages with private-use
characters, render the template to *text*, then encode the template's text normally and each marked
token with special-token parsing off. Chats that spell no control token take transformers' own path
unchanged, so ordinary rollouts and training sequences get exactly the ids they always had.
"""

from __future__ import annotations

import contextlib
import re
from functools import lru_cache
from typing import Any

from rlver.errors import RlverError

# The private-use markers transformers uses for the same purpose (chat_template_utils): no tokenizer
# gives them meaning and no message needs them, so any already in a message are dropped first.
_START = "\U000f0000"
_END = "\U000f0001"

#: Attribute caching a tokenizer's control tokens with what they were derived from.
_CACHE_ATTR = "_rlver_control_tokens"


class ControlTokenError(RlverError):
    """A control token cannot be kept as text: the tokenizer makes it from plain text too."""


def _template_text(tokenizer: Any) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates: their text, all of it
        return "\0".join(str(t) for t in template.values())
    return template if isinstance(template, str) else ""


def control_tokens(tokenizer: Any) -> tuple[str, ...]:
    """The tokens a message must not produce: special tokens, and added tokens the template writes.

    The same set as transformers' ``sanitize_control_tokens`` (its ``chat_control_tokens`` when the
    tokenizer declares them). Added tokens the template never writes (a model's ``<think>`` when the
    template does not mention it) are the model's vocabulary, not structure: they stay tokens.
    """
    template = _template_text(tokenizer)
    key = (template, len(tokenizer) if hasattr(tokenizer, "__len__") else None)
    cached = getattr(tokenizer, _CACHE_ATTR, None)
    if isinstance(cached, tuple) and len(cached) == 2 and cached[0] == key:
        return tuple(cached[1])
    declared = getattr(tokenizer, "chat_control_tokens", None)
    added = list((getattr(tokenizer, "added_tokens_decoder", None) or {}).values())
    found = {str(t) for t in getattr(tokenizer, "all_special_tokens", None) or [] if t}
    for token in added:
        content = str(getattr(token, "content", token))
        special = bool(getattr(token, "special", False))
        if declared is not None:
            wanted = special or content in set(declared)
        else:
            wanted = special or (content in template and not content.isspace())
        if wanted and content:
            found.add(content)
    tokens = tuple(sorted(found, key=lambda t: (-len(t), t)))  # longest first: a token beats its parts
    # a tokenizer object that refuses attributes derives them each time
    with contextlib.suppress(AttributeError):
        setattr(tokenizer, _CACHE_ATTR, (key, tokens))
    return tokens


def _contains(obj: Any, tokens: tuple[str, ...]) -> bool:
    if isinstance(obj, str):
        return any(t in obj for t in tokens)
    if isinstance(obj, dict):
        return any(_contains(v, tokens) for v in obj.values())
    if isinstance(obj, list | tuple):
        return any(_contains(v, tokens) for v in obj)
    return False


def spells_control_tokens(tokenizer: Any, chat: list[dict[str, Any]]) -> bool:
    """Whether any message of ``chat`` spells one of the tokenizer's control tokens."""
    return _contains(chat, control_tokens(tokenizer))


@lru_cache(maxsize=64)
def _patterns(tokens: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A regex for any control token, and one for a marked token (group 1) or a lone marker."""
    any_token = re.compile("|".join(map(re.escape, tokens)) or "(?!)")
    marked = re.compile(f"{_START}({any_token.pattern}){_END}|[{_START}{_END}]")
    return any_token, marked


def _mark(obj: Any, any_token: re.Pattern[str]) -> Any:
    if isinstance(obj, str):
        clean = obj.replace(_START, "").replace(_END, "")
        return any_token.sub(lambda m: f"{_START}{m.group(0)}{_END}", clean)
    if isinstance(obj, dict):
        return {k: _mark(v, any_token) for k, v in obj.items()}  # keys are the template's, not marked
    if isinstance(obj, list | tuple):
        return [_mark(v, any_token) for v in obj]
    return obj


def _encode(tokenizer: Any, text: str) -> list[int]:
    return [int(i) for i in tokenizer.encode(text, add_special_tokens=False)]


def _encode_as_text(tokenizer: Any, text: str) -> list[int]:
    """``text`` through the tokenizer's pipeline with no added token matched, special or not.

    A ``tokenizers``-backed tokenizer: normaliser, pre-tokeniser and model of the backend directly
    (``split_special_tokens`` alone would still match non-special added tokens). Any other: the
    tokenizer's own ``split_special_tokens``.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    model: Any = getattr(backend, "model", None)
    if backend is not None and model is not None and hasattr(model, "tokenize"):
        if backend.normalizer is not None:
            text = backend.normalizer.normalize_str(text)
        splits = [text]
        if backend.pre_tokenizer is not None:
            splits = [piece for piece, _ in backend.pre_tokenizer.pre_tokenize_str(text)]
        return [int(token.id) for piece in splits for token in model.tokenize(piece)]
    return [int(i) for i in tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)]


def _encode_piece(tokenizer: Any, piece: str, *, as_text: bool, newline: list[int]) -> list[int]:
    """A piece from the middle of a chat. Encoded after a newline that is then removed, so a
    SentencePiece tokenizer does not add the word-start space it adds at the start of a string."""
    encode = _encode_as_text if as_text else _encode
    ids = encode(tokenizer, "\n" + piece)
    if ids[: len(newline)] == newline:
        return ids[len(newline) :]
    return encode(tokenizer, piece)


def _render_marked(
    tokenizer: Any, chat: list[dict[str, Any]], tokens: tuple[str, ...], *, add_generation_prompt: bool
) -> list[int]:
    any_token, marked = _patterns(tokens)
    text = tokenizer.apply_chat_template(
        _mark(chat, any_token), tokenize=False, add_generation_prompt=add_generation_prompt
    )
    if not isinstance(text, str):
        raise ControlTokenError(f"the chat template rendered {type(text).__name__}, not text")
    # [template text, marked token, template text, ...]; None in place of the token for a lone marker,
    # which still separates the text on either side so that it cannot join into a control token.
    pieces = marked.split(text)
    newline = _encode(tokenizer, "\n")
    ids = _encode(tokenizer, pieces[0])
    for i, piece in enumerate(pieces[1:], start=1):
        if not piece:
            continue
        as_text = i % 2 == 1
        piece_ids = _encode_piece(tokenizer, piece, as_text=as_text, newline=newline)
        if as_text and tokenizer.convert_tokens_to_ids(piece) in piece_ids:
            raise ControlTokenError(
                f"{piece!r} cannot be kept as text: the tokenizer makes it from plain text"
            )
        ids += piece_ids
    return ids


def render_ids(tokenizer: Any, chat: list[dict[str, Any]], *, add_generation_prompt: bool) -> list[int]:
    """``chat`` rendered by the tokenizer's chat template, as ids; control tokens spelled inside the
    messages stay text, only the template's own control tokens are tokens.

    A chat that spells none is tokenised by ``apply_chat_template`` itself (the very same ids as
    before this existed).
    """
    tokens = control_tokens(tokenizer)
    if _contains(chat, tokens):
        return _render_marked(tokenizer, chat, tokens, add_generation_prompt=add_generation_prompt)
    out = tokenizer.apply_chat_template(
        chat, tokenize=True, return_dict=True, add_generation_prompt=add_generation_prompt
    )
    return [int(i) for i in out["input_ids"]]
