"""Chat token sequences built from the *sampled* ids of assistant turns (token-exact rollouts).

Why: rendering a dialogue's text through the chat template again is not what the policy produced.
Decode → re-encode drifts (other merges), a reply cut at ``max_new_tokens`` would get an end token it
never sampled, a reply that stopped on ``<|endoftext|>`` would be recorded as ``<|im_end|>``, and a
reply that *spelled* a control token as text would turn into the real control token. So wherever a
turn's sampled ids are known they are used as they are; only the template's structural tokens around
them (role headers, the newline after the end token, the other roles' messages) come from the
template. The local backend builds its prompts with this function and the trainer its sequences, so
what is trained is exactly what was sampled, in exactly the context it was sampled in.

The rule for a reply that did not end on the template's end-of-turn token (cut at ``max_new_tokens``,
or stopped on another EOS such as ``<|endoftext|>``, which is kept): it is *closed* with the
template's end-of-turn token, with mask 0 (never trained: the policy did not sample it), then the
template's own text after its end token (``"\\n"`` in ChatML) follows. The verl path does the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlver.errors import RlverError
from rlver.llm.control_tokens import ControlTokenError, render_ids


class SequenceError(RlverError):
    """The chat template cannot be split into per-turn segments (it rewrites earlier turns)."""


@dataclass
class ChatIds:
    """A rendered dialogue: ids, assistant mask (1 = sampled by the policy) and sampling log-probs.

    ``logprobs[j]`` is the log-prob the token ``ids[j]`` had when it was sampled (``None`` where unknown
    or not sampled). ``turn_ends[k]`` is the index of the last mask-1 token of assistant turn *k*.
    """

    ids: list[int]
    mask: list[int]
    logprobs: list[float | None]
    turn_ends: list[int]


def _render(tokenizer: Any, chat: list[dict[str, str]], *, add_generation_prompt: bool) -> list[int]:
    """The template's ids for ``chat``; control tokens that messages spell stay text (a user message
    or a reply without sampled ids must not forge a turn), on every transformers version."""
    try:
        return render_ids(tokenizer, chat, add_generation_prompt=add_generation_prompt)
    except ControlTokenError as exc:
        raise SequenceError(str(exc)) from exc


#: Attribute caching a tokenizer's derived turn end (the template is rendered twice to find it).
_TURN_END_ATTR = "_rlver_turn_end_id"


def end_of_turn_id(tokenizer: Any) -> int:
    """The token the chat *template* closes an assistant turn with, read from the template itself.

    Why not ``tokenizer.eos_token_id``: for many checkpoints eos is not the turn end (Qwen2.5 base and
    many fine-tunes: eos ``<|endoftext|>`` while ChatML closes turns with ``<|im_end|>``; Gemma closes
    them with ``<end_of_turn>``). Taking eos would insert a mask-0 eos after every reply and drop the
    template's own closing. So render one short assistant turn with two different contents: what both
    renderings end with is what the template writes after any reply (ChatML: ``<|im_end|>`` ``\\n``),
    and its first token is the turn end. Only when the template writes nothing after the content, or
    writes plain text there, does eos stand in.
    """
    cached = getattr(tokenizer, _TURN_END_ATTR, None)
    if isinstance(cached, int):
        return cached
    found = _template_turn_end(tokenizer)
    if found is None:
        eos = tokenizer.eos_token_id
        if not isinstance(eos, int):
            raise SequenceError("the chat template closes no turn and the tokenizer has no eos token")
        found = int(eos)
    # a tokenizer object that refuses attributes derives it each time
    with contextlib.suppress(AttributeError):
        setattr(tokenizer, _TURN_END_ATTR, found)
    return found


def _template_turn_end(tokenizer: Any) -> int | None:
    user = [{"role": "user", "content": "hello"}]
    try:
        prompt = _render(tokenizer, user, add_generation_prompt=True)
        turns = []
        for content in ("A", "Bb cc"):
            full = _render(
                tokenizer, [*user, {"role": "assistant", "content": content}], add_generation_prompt=False
            )
            if full[: len(prompt)] != prompt:
                return None
            turns.append(full[len(prompt) :])
    except Exception:  # a template that needs other roles or kwargs: fall back to eos
        return None
    common = 0
    while common < min(map(len, turns)) and turns[0][-1 - common] == turns[1][-1 - common]:
        common += 1
    if common == 0:
        return None
    first = int(turns[0][len(turns[0]) - common])
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    added = set((getattr(tokenizer, "added_tokens_decoder", None) or {}).keys())
    return first if first in special or first in added else None


def chat_ids(
    tokenizer: Any,
    chat: list[dict[str, str]],
    sampled: Sequence[Sequence[int] | None],
    sampled_logprobs: Sequence[Sequence[float] | None] | None = None,
    *,
    add_generation_prompt: bool,
) -> ChatIds:
    """Render ``chat`` with the assistant turns' sampled ids (``sampled[k]`` for the *k*-th assistant
    message; ``None`` = not known, the template's tokens are used and still marked 1)."""
    eos = end_of_turn_id(tokenizer)
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float | None] = []
    turn_ends: list[int] = []
    done: list[int] = []  # the template's rendering of chat[:i+1] for the last assistant turn i
    k = 0
    for i, message in enumerate(chat):
        if message["role"] != "assistant":
            continue
        prompt = _render(tokenizer, chat[:i], add_generation_prompt=True)
        if prompt[: len(done)] != done:
            raise SequenceError(
                "the chat template renders earlier turns differently once later turns are added; "
                "the assistant turns' tokens cannot be placed"
            )
        head = prompt[len(done) :]
        ids += head
        mask += [0] * len(head)
        logprobs += [None] * len(head)
        full = _render(tokenizer, chat[: i + 1], add_generation_prompt=False)
        if full[: len(prompt)] != prompt:
            raise SequenceError("the chat template's generation prompt is not a prefix of the turn")
        turn = full[len(prompt) :]
        # the template's own end token of this turn, and what it writes after it (ChatML: "\n")
        end = len(turn) - turn[::-1].index(eos) - 1 if eos in turn else len(turn)
        tail = turn[end + 1 :]
        given = sampled[k] if k < len(sampled) else None
        body_ids: list[int]
        body_lp: list[float | None]
        if given is None:
            body_ids, body_lp = turn[: end + 1], [None] * (end + 1)
        else:
            lps = sampled_logprobs[k] if sampled_logprobs and k < len(sampled_logprobs) else None
            body_ids = list(given)
            body_lp = (
                [float(x) for x in lps]
                if lps is not None and len(lps) == len(body_ids)
                else [None] * len(body_ids)
            )
        if not body_ids:
            raise SequenceError(f"assistant turn {k} has no tokens")
        ids += body_ids
        mask += [1] * len(body_ids)
        logprobs += body_lp
        turn_ends.append(len(ids) - 1)
        if body_ids[-1] != eos:  # cut at max_new_tokens, or stopped on another EOS: close, untrained
            ids.append(eos)
            mask.append(0)
            logprobs.append(None)
        ids += tail
        mask += [0] * len(tail)
        logprobs += [None] * len(tail)
        done = full
        k += 1
    if add_generation_prompt or not turn_ends:
        rest = _render(tokenizer, chat, add_generation_prompt=add_generation_prompt)
        if rest[: len(done)] != done:
            raise SequenceError("the chat template renders earlier turns differently at the end")
        extra = rest[len(done) :]
        ids += extra
        mask += [0] * len(extra)
        logprobs += [None] * len(extra)
    return ChatIds(ids=ids, mask=mask, logprobs=logprobs, turn_ends=turn_ends)
