"""Think-then-say: split a raw policy reply into its private reasoning and what the user may see.

In think mode the policy first reasons inside ``<think>…</think>`` and then replies; only the text after
the block reaches the simulated user (as in the paper). Policy output is untrusted, so the splitter is
deliberately conservative: whatever *might* be reasoning never reaches the user. In particular

* every ``<think>…</think>`` block is removed, wherever it is;
* an unclosed ``<think>`` hides everything after it (the model ran out of tokens mid-thought);
* a stray ``</think>`` with no opening tag hides everything before it (templates such as Qwen3's and
  DeepSeek-R1's put the opening tag in the *prompt*, so the completion starts inside the block);
* tags are matched case-insensitively and with inner whitespace (``< Think >``, ``</THINK >``), and
  ``<thinking>`` is treated like ``<think>``.

A reply is *well-formed* only when it is exactly one leading block with non-blank reasoning followed by
non-blank visible text. Anything else is a format error the reward may penalise.

What the simulated user is *shown* of a think-mode reply, and what later turns see of an earlier
reply when the history is thought-free, is :func:`shown_to_user`: the published think rollout's rule
(RLVER ``vllm_rollout_spmd_think.py:402-406`` ``split("</think>")[-1].strip()``), the text after the last ``</think>``, or the reply as
written when it has none, with the published tag spelling only. So a reply cut at the token cap
mid-thought reaches the user as it was written, not as an empty message (which the user would appraise
as silence). Without think mode the reply reaches the user as written, as both published loops pass it
(:meth:`rlver.env.dialogue.EnvConfig.shown_to_simulator`). :func:`split_think` stays the parser of the
reasoning (format errors, transcripts, reports); the two agree on every well-formed reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlver.profiles.published_code import find_published
from rlver.profiles.schema import Language
from rlver.simulator.llm import published_text

_TAG = re.compile(r"<\s*(/?)\s*think(?:ing)?\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class ThinkSplit:
    """The parts of one raw reply.

    ``thought``: all reasoning found (blocks joined by blank lines), ``visible``: what the user sees
    (stripped), ``well_formed``: exactly one leading think block followed by a non-empty reply.
    """

    thought: str
    visible: str
    well_formed: bool


def split_think(raw: str) -> ThinkSplit:
    """Split ``raw`` into reasoning and visible text (see the module docstring for the rules)."""
    thought_parts: list[str] = []
    visible_parts: list[str] = []
    tags: list[str] = []  # "open" / "close", in order, for the well-formedness check
    inside = False
    pos = 0
    for match in _TAG.finditer(raw):
        segment = raw[pos : match.start()]
        pos = match.end()
        is_close = bool(match.group(1))
        tags.append("close" if is_close else "open")
        if inside:
            thought_parts.append(segment)
            if is_close:
                inside = False
            # a nested/repeated opening tag inside a block changes nothing
        elif is_close:
            # Stray closing tag: everything shown so far was (implicitly opened) reasoning.
            thought_parts.extend(visible_parts)
            thought_parts.append(segment)
            visible_parts.clear()
        else:
            visible_parts.append(segment)
            inside = True
    tail = raw[pos:]
    if inside:
        thought_parts.append(tail)  # unclosed block: hide the rest
    else:
        visible_parts.append(tail)

    thought = "\n\n".join(p.strip() for p in thought_parts if p.strip())
    visible = "".join(visible_parts).strip()
    leading = raw[: _first_tag_start(raw)].strip() if tags else raw.strip()
    well_formed = tags == ["open", "close"] and not leading and bool(thought) and bool(visible)
    return ThinkSplit(thought=thought, visible=visible, well_formed=well_formed)


def _first_tag_start(raw: str) -> int:
    match = _TAG.search(raw)
    return match.start() if match else len(raw)


def visible_text(raw: str) -> str:
    """The reply without its reasoning, by the conservative :func:`split_think` (reports, judges)."""
    return split_think(raw).visible


#: The closing tag the published think rollout cuts at, in its one spelling.
PUBLISHED_CLOSE_TAG = "</think>"


def shown_to_user(raw: str) -> str:
    """What the simulated user sees of a raw think-mode reply: the published rule, on both engines.

    RLVER's think-mode rollout hands the user ``content.split("</think>")[-1].strip()`` when the reply
    holds the closing tag, else the reply as it is (``vllm_rollout_spmd_think.py:402-406`` ``split("</think>")[-1].strip()``). Only that
    spelling of the tag counts, as there (``</THINK>`` or ``</thinking>`` is text the user sees). The
    published code then also cuts at a ``你：`` prefix (``:407-410`` ``"你：" in extracted_content``); that is a parsing bug and is not
    copied (docs/protocol.md).
    """
    if PUBLISHED_CLOSE_TAG in raw:
        return raw.split(PUBLISHED_CLOSE_TAG)[-1].strip()
    return raw


# ---------------------------------------------------------------------------------------------------
# System prompts (our own wording). Kept short: the policy's context is precious in multi-turn RL.

_BASE = {
    "en": (
        "You are a warm, perceptive conversational partner. The person you are talking with has "
        "something on their mind. Listen closely, notice what they feel and what they need but may not "
        "say, and respond the way a caring, emotionally intelligent friend would: sincere, specific to "
        "what they told you, never preachy or formulaic. Ask at most one question at a time, keep replies "
        "short enough for a chat, and offer advice only when it seems welcome."
    ),
    "zh": (
        "你是一位温暖、敏锐的聊天伙伴。和你说话的人心里有事。请认真倾听，留意对方的感受，"
        "以及对方需要却未必说出口的东西，像一位体贴、懂人心的朋友那样回应：真诚、紧扣对方说过的具体内容，"
        "不说教、不套话。一次最多问一个问题，回复保持聊天的长度，只在对方似乎需要时才给建议。"
    ),
}

_THINK = {
    "en": (
        "\n\nBefore every reply, think privately: write your reasoning about how they feel, what they "
        "need right now and how best to respond inside <think> and </think>. Then write the reply itself "
        "after </think>. They are shown only the text after </think>; a reply without </think> is "
        "shown to them whole."
    ),
    "zh": (
        "\n\n每次回复前先在心里想一想：把你对对方感受、此刻需要以及如何回应的思考写在 <think> 和 </think> 之间，"
        "然后在 </think> 之后写出真正的回复。对方只能看到 </think> 之后的内容；没有 </think> 的回复，对方会看到全文。"
    ),
}


#: The benchmark's plain agent prompt, equivalent in content to the published one (SAGE/npc_response.py:14 ``role_system``:
#: an *intelligent* chat partner, 智能聊天伙伴, who talks with high EQ so the user feels comfortable,
#: happy or helped); no coaching. The role word is SAGE's own: a word such as "empathetic" would nudge
#: the agent toward the very skill the benchmark measures.
_NEUTRAL = {
    "en": (
        "You are an intelligent chat partner, good at chatting with the user with high emotional "
        "intelligence, so that they feel comfortable and glad they talked, or get the help they need."
    ),
    "zh": "你是一个智能聊天伙伴，善于用高情商的方式和用户聊天，让对方觉得舒服、开心，或者得到所需要的帮助。",
}

#: The published training prompt (RLVER ``vllm_rollout/system_prompt.py:1-25`` ``system_prompt_train_think``) in our own words: the
#: policy chats with a friend and is good at cheering friends up with emotionally intelligent replies;
#: the aim is a better mood or a closer bond; replies are warm, casual and everyday. The think version
#: (``:10-25`` ``system_prompt_train_think``) adds: decide how and what to answer before replying, weigh the strategy (logic and
#: tone), wrap the thinking in <think></think>, and a reply format. Keyed by language, then think mode.
_PUBLISHED: dict[str, dict[bool, str]] = {
    "en": {
        False: (
            "You are chatting with a friend, and you have a knack for lifting a friend's spirits with "
            "emotionally intelligent replies.\n\nWhat you want from each reply: your friend feels "
            "better, or the two of you feel closer.\n\nKeep the conversation warm, relaxed and "
            "everyday. A warm, natural reply is usually:\n1. short, casual and easy, in plain everyday "
            "words, with loose grammar;\n2. sprinkled with the little interjections and colloquial "
            "turns people use when they talk."
        ),
        True: (
            "You are chatting with a friend, and you have a knack for lifting a friend's spirits with "
            "emotionally intelligent replies. Before every reply you first work out how to answer and "
            "what to say; only once you have settled on an approach do you write the reply.\n\nWhat "
            "you want from each reply: your friend feels better, or the two of you feel closer.\n\n"
            "While thinking, weigh an emotionally intelligent way to answer: the line of thought to "
            "follow and the tone to take. Your thinking must sit between <think> and </think>.\n\n"
            "In the reply itself, keep the conversation warm, relaxed and everyday.\n\nAnswer in "
            "this shape:\n<think>\nyour thinking\n</think>\nyour reply"
        ),
    },
    "zh": {
        False: (
            "你正在和一位朋友聊天，你很会用高情商的话让朋友开心起来。\n\n每句回复想达到的，是让朋友心情好一些，"
            "或者让你们更亲近一点。\n\n聊天要亲切、随意，像平常过日子那样。自然亲切的回复通常是：\n"
            "1. 简短、轻松，用平常的字眼，语法不必讲究；\n2. 多用语气词和口头上的说法。"
        ),
        True: (
            "你正在和一位朋友聊天，你很会用高情商的话让朋友开心起来。每次回复之前，你会先想清楚怎么回、"
            "回些什么；想好了策略，再把回复写出来。\n\n每句回复想达到的，是让朋友心情好一些，"
            "或者让你们更亲近一点。\n\n思考时，琢磨一个高情商的回法：说话的思路和语气。思考的内容"
            "一定要放在 <think> 和 </think> 之间。\n\n回复本身要亲切、随意，像平常过日子那样。\n\n"
            "回复的格式：\n<think>\n你的思考\n</think>\n你的回复"
        ),
    },
}

#: Named agent prompts: ``neutral`` (the benchmark default), ``coaching`` (our empathy coaching,
#: which raises a base model's score, so it is not comparable with the published leaderboard) and
#: ``published`` (the published training's friend-chat prompt, in our words; the published presets).
AGENT_PROMPTS: dict[str, dict[str, str]] = {"neutral": _NEUTRAL, "coaching": _BASE}
#: Two more are the published text itself, read from the fetched files (never written here):
#: ``sage-published`` (SAGE's benchmark agent, ``sage/npc_response.py``; Chinese, for every profile)
#: and ``rlver-published`` (the published training prompts, ``rlver/system_prompt.py``, think and
#: no-think).
AGENT_PROMPT_NAMES: tuple[str, ...] = (
    "neutral",
    "coaching",
    "published",
    "sage-published",
    "rlver-published",
)
#: Where the fetched agent prompts come from (recorded in manifests with their sha256).
PUBLISHED_AGENT_PROMPT_FILES = {
    "sage-published": "sage/npc_response.py",
    "rlver-published": "rlver/system_prompt.py",
}


def absent_prompt_file(name: str) -> str | None:
    """The fetched file the agent prompt ``name`` is read from when no copy of it is on the data search
    path (``None``: a built-in prompt, or the file is here). A run checks it before any work starts:
    the prompt is first read when the manifest is written, after the agent model has loaded."""
    file = PUBLISHED_AGENT_PROMPT_FILES.get(name)
    return file if file is not None and find_published(file) is None else None


def system_prompt(think: bool, language: Language | str = "en", name: str = "coaching") -> str:
    """The policy's system prompt ``name`` for no-think or think-then-say mode, in English or Chinese.

    ``published`` and ``rlver-published`` have their own think version (as the published code has);
    the others add our think instructions to the same text (``sage-published``: the Chinese one).
    """
    if name == "sage-published":
        return published_text.sage_agent_prompt() + (_THINK["zh"] if think else "")
    if name == "rlver-published":
        return published_text.training_agent_prompts()[think]
    if name == "published":
        lang = language if language in _PUBLISHED else "en"
        return _PUBLISHED[lang][think]
    texts = AGENT_PROMPTS[name]
    lang = language if language in texts else "en"
    return texts[lang] + (_THINK[lang] if think else "")


def read_prompt_file(path: str) -> str:
    """The text of an agent-prompt file (``rollout.agent_prompt`` / ``--agent-prompt FILE``).

    A ``ValueError`` names the file and the choices, so a config error reads ``rollout.agent_prompt:
    ...`` with one line, and a misspelt name (``publish``) is not taken for a missing file silently.
    """
    from pathlib import Path

    from rlver.errors import InputError
    from rlver.io import read_text_file

    if not Path(path).expanduser().is_file():
        reason = "a folder" if Path(path).expanduser().is_dir() else "no such file"
        raise ValueError(
            f"{path!r} is neither {', '.join(AGENT_PROMPT_NAMES)} nor a readable text file ({reason})"
        )
    try:
        return read_text_file(path)
    except InputError as exc:  # not UTF-8, empty, too long: said as a value error of the setting
        raise ValueError(str(exc)) from None
