"""Turn one dialogue into one token sequence with an assistant-only mask.

Why one sequence per dialogue (not one per turn): the chat template is applied once, so every assistant
turn is scored in exactly the context the policy saw, and a single forward pass gives the log-probs of
all turns. User and system tokens are *environment* tokens: they are in the sequence (the policy
conditions on them) but the mask is 0 there, so no loss, advantage or KL is computed on them.

The sequence ends on the last assistant turn: a final user message is not appended, so the dialogue's
reward can sit on a trained token (the last token of the last assistant turn).

Two ways to find the assistant tokens:

1. ``{% generation %}`` templates (ours, and many recent models'): ``apply_chat_template`` returns
   ``assistant_masks`` computed from character offsets — exact and cheap.
2. Any other template: incremental prefix tokenisation. For assistant message *i* the prefix
   ``messages[:i]`` rendered with ``add_generation_prompt=True`` must be a token prefix of the full
   rendering; the tokens between it and the end of the turn (up to and including the end-of-turn
   token) are the assistant's. Templates that rewrite earlier turns (e.g. strip old think blocks)
   break this property; we detect that and raise instead of training on a wrong mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlver.errors import RlverError
from rlver.llm.control_tokens import ControlTokenError, render_ids, spells_control_tokens
from rlver.llm.sequence import SequenceError, chat_ids, end_of_turn_id
from rlver.records import Episode, Message


class TokenizationError(RlverError):
    """A dialogue cannot be tokenised with a correct assistant mask."""


@dataclass
class TokenizedEpisode:
    """One dialogue as token ids plus the masks the trainer needs.

    ``turn_end_positions[k]`` is the index in ``input_ids`` of the last token of the *k*-th kept
    assistant turn (its end-of-turn token when the template writes one): per-turn rewards go there.
    ``kept_turns`` counts the assistant turns whose tokens are all inside the sequence (fewer than the
    dialogue's when ``max_length`` cut it; see ``truncated``).
    """

    input_ids: list[int]
    assistant_mask: list[int]
    turn_end_positions: list[int]
    kept_turns: int
    truncated: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    #: Per position, the log-prob the token had when the policy sampled it (``None`` elsewhere);
    #: ``None`` altogether when the episode came without sampled ids.
    sample_logprobs: list[float | None] | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def n_assistant_tokens(self) -> int:
        return sum(self.assistant_mask)


def _has_generation_tags(tokenizer: Any) -> bool:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates: the default one is used
        template = template.get("default")
    return isinstance(template, str) and "{% generation %}" in template.replace("{%-", "{%").replace(
        "-%}", "%}"
    )


def _generation_tags_apply(tokenizer: Any, chat: list[dict[str, str]]) -> bool:
    """Whether ``apply_chat_template``'s assistant masks can be used for ``chat``.

    Not when a message spells a control token: transformers would encode it as the real token (a reply
    spelling ``<|im_start|>user`` would forge a turn), so such dialogues take the prefix path, where
    :func:`~rlver.llm.control_tokens.render_ids` keeps it text on every transformers version.
    """
    return _has_generation_tags(tokenizer) and not spells_control_tokens(tokenizer, chat)


def _dialogue_for_training(episode: Episode, system_prompt: str | None) -> list[Message]:
    messages = list(episode.messages)
    if system_prompt is not None and not (messages and messages[0].role == "system"):
        messages.insert(0, Message(role="system", content=system_prompt))
    while messages and messages[-1].role != "assistant":
        messages.pop()  # the user's last message is an environment transition we never train on
    if not any(m.role == "assistant" for m in messages):
        raise TokenizationError(f"episode {episode.episode_id or episode.profile_id}: no assistant turn")
    return messages


def _runs(mask: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of every maximal run of ones."""
    runs: list[tuple[int, int]] = []
    start = None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(mask)))
    return runs


def _mask_from_generation_tags(tokenizer: Any, chat: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    out = tokenizer.apply_chat_template(
        chat, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids = list(out["input_ids"])
    mask = [int(bool(m)) for m in out["assistant_masks"]]
    return ids, mask


def _tokens(tokenizer: Any, chat: list[dict[str, str]], *, add_generation_prompt: bool) -> list[int]:
    """The template's ids; control tokens spelled by the (untrusted) messages stay text."""
    try:
        return render_ids(tokenizer, chat, add_generation_prompt=add_generation_prompt)
    except ControlTokenError as exc:
        raise TokenizationError(str(exc)) from exc


def _mask_by_prefixes(tokenizer: Any, chat: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    ids = _tokens(tokenizer, chat, add_generation_prompt=False)
    mask = [0] * len(ids)
    eos = end_of_turn_id(tokenizer)
    for i, message in enumerate(chat):
        if message["role"] != "assistant":
            continue
        prefix = _tokens(tokenizer, chat[:i], add_generation_prompt=True)
        start = len(prefix)
        upto = _tokens(tokenizer, chat[: i + 1], add_generation_prompt=False)
        if ids[: len(upto)] != upto or upto[:start] != prefix:
            raise TokenizationError(
                "the chat template renders earlier turns differently once later turns are added, so the "
                "assistant tokens cannot be located; use a template with {% generation %} tags"
            )
        end = len(upto)
        # Stop after the end-of-turn token: what the template writes after it (a newline) is not
        # something the model generated.
        turn = upto[start:end]
        if eos is not None and eos in turn:
            end = start + len(turn) - turn[::-1].index(eos)
        for j in range(start, end):
            mask[j] = 1
    return ids, mask


def episode_to_tensors(
    episode: Episode,
    tokenizer: Any,
    *,
    max_length: int | None = None,
    system_prompt: str | None = None,
) -> TokenizedEpisode:
    """Tokenise ``episode`` once, with an assistant-only mask and the end of every assistant turn.

    ``system_prompt`` is prepended when the episode's messages have no system message (the policy
    must be trained on the prompt it was sampled with). ``max_length`` drops whole trailing turns so
    that the sequence still ends on a complete assistant turn; only when not even the first assistant
    turn fits is a turn cut mid-way (then its last kept token carries the turn's reward).
    """
    messages = _dialogue_for_training(episode, system_prompt)
    chat = [{"role": m.role, "content": m.content} for m in messages]
    n_assistant = sum(1 for m in messages if m.role == "assistant")
    sample_logprobs: list[float | None] | None = None
    if episode.sampled and any(t is not None for t in episode.sampled[:n_assistant]):
        # Token-exact: the sampled ids themselves, template tokens only around them (rlver.llm.sequence).
        turns = episode.sampled[:n_assistant]
        try:
            built = chat_ids(
                tokenizer,
                chat,
                [t.token_ids if t else None for t in turns],
                [t.logprobs if t else None for t in turns],
                add_generation_prompt=False,
            )
        except SequenceError as exc:
            raise TokenizationError(str(exc)) from exc
        ids, mask, sample_logprobs = built.ids, built.mask, built.logprobs
    elif _generation_tags_apply(tokenizer, chat):
        ids, mask = _mask_from_generation_tags(tokenizer, chat)
    else:
        ids, mask = _mask_by_prefixes(tokenizer, chat)
    runs = _runs(mask)
    if len(runs) != n_assistant:
        raise TokenizationError(
            f"expected {n_assistant} assistant turns in the token mask, found {len(runs)} "
            "(the chat template's {% generation %} block must wrap each assistant message)"
        )
    truncated = False
    if max_length is not None and len(ids) > max_length:
        truncated = True
        fitting = [r for r in runs if r[1] <= max_length]
        if fitting:
            cut = fitting[-1][1]
            runs = fitting
        elif runs[0][0] < max_length:
            cut = max_length
            runs = [(runs[0][0], cut)]
        else:
            raise TokenizationError(f"max_length={max_length} leaves no assistant token")
        ids, mask = ids[:cut], mask[:cut]
    else:
        # End on the last assistant token: anything the template appends after it is not trained.
        cut = runs[-1][1]
        ids, mask = ids[:cut], mask[:cut]
    return TokenizedEpisode(
        sample_logprobs=sample_logprobs[:cut] if sample_logprobs is not None else None,
        input_ids=ids,
        assistant_mask=mask,
        turn_end_positions=[end - 1 for _, end in runs],
        kept_turns=len(runs),
        truncated=truncated,
    )


def episode_turn_samples(
    episode: Episode,
    tokenizer: Any,
    *,
    max_length: int | None = None,
    system_prompt: str | None = None,
) -> list[TokenizedEpisode]:
    """One training sample per assistant turn, for think mode with a thought-free history.

    Sample *k*'s prompt is exactly what the policy saw when it sampled turn *k*: the earlier replies as
    the user saw them (:func:`~rlver.env.thinking.shown_to_user`), rendered by the template, all mask 0; its response is
    turn *k*'s sampled ids (mask 1), closed with a mask-0 end token when it did not end on one. This is
    the published think-mode layout (RLVER vllm_rollout_spmd_think.py:683-691 ``for _ in range(dialogue_turns[i])`` expands each dialogue
    into one sample per turn). A sample longer than ``max_length`` keeps its prompt and the first
    response tokens that fit; one whose prompt alone does not fit is dropped (``meta["dropped"]``
    counts them on the first sample), so a long dialogue loses its *late* turns' samples, never
    earlier ones.
    """
    from rlver.env.thinking import shown_to_user

    messages = _dialogue_for_training(episode, system_prompt)
    turns = list(episode.sampled) if episode.sampled else []
    out: list[TokenizedEpisode] = []
    dropped = 0
    k = -1
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        k += 1
        chat = [
            {
                "role": m.role,
                "content": shown_to_user(m.content) if m.role == "assistant" else m.content,
            }
            for m in messages[:i]
        ] + [{"role": "assistant", "content": message.content}]
        turn = turns[k] if k < len(turns) else None
        sampled: list[list[int] | None] = [None] * k
        sampled.append(turn.token_ids if turn else None)
        logps: list[list[float] | None] = [None] * k
        logps.append(turn.logprobs if turn else None)
        try:
            built = chat_ids(tokenizer, chat, sampled, logps, add_generation_prompt=False)
        except SequenceError as exc:
            raise TokenizationError(str(exc)) from exc
        end = built.turn_ends[-1]
        start = end
        while start > 0 and built.mask[start - 1]:
            start -= 1
        mask = [1 if start <= j <= end else 0 for j in range(end + 1)]
        ids, lps = built.ids[: end + 1], built.logprobs[: end + 1]
        truncated = False
        if max_length is not None and len(ids) > max_length:
            if start >= max_length:
                dropped += 1
                continue
            ids, mask, lps, end, truncated = (
                ids[:max_length],
                mask[:max_length],
                lps[:max_length],
                max_length - 1,
                True,
            )
        out.append(
            TokenizedEpisode(
                input_ids=ids,
                assistant_mask=mask,
                turn_end_positions=[end],
                kept_turns=1,
                truncated=truncated,
                meta={"per_turn": True, "turn": k},
                sample_logprobs=lps if turn is not None else None,
            )
        )
    if not out:
        raise TokenizationError(f"episode {episode.episode_id or episode.profile_id}: no turn sample fits")
    out[0].meta["dropped"] = dropped
    return out
