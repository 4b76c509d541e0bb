"""What the offline user says: tier-specific lines (en, zh), picked with the dialogue's seeded RNG.

Our own wording. ``{topic}`` is the profile's topic, or a neutral phrase when the profile has none.
A person does not say the same sentence twice in one conversation, so every pick takes a ``used`` set
(the user's lines so far) and never returns a line in it: a reaction whose lines are used up is left
out, and a tier whose lines are used up answers with a line that takes up a word of the agent's reply
(``ECHO_LINES``, English) or with a line of the next pool.
"""

from __future__ import annotations

import random

from rlver.records import Tier

_TOPIC_FALLBACK = {"en": "all this", "zh": "这件事"}

OPENINGS = {
    "en": [
        "Hi. Can I talk to you about {topic}? It's been on my mind a lot.",
        "I don't really know where to start. It's about {topic}.",
        "Hey. I've had a rough stretch with {topic} and I needed to tell someone.",
    ],
    "zh": [
        "你好，我能跟你聊聊{topic}吗？最近一直压在心里。",
        "我也不知道从哪儿说起，就是关于{topic}。",
        "嗨，最近因为{topic}挺不顺的，想找人说说。",
    ],
}

TIER_LINES: dict[str, dict[Tier, list[str]]] = {
    "en": {
        "S": [
            "Thank you, really. I feel a lot clearer about {topic} now. I think I'll be okay. Bye for now.",
            "This helped more than I expected. Thanks for sticking with me. Take care!",
            "Okay. I know what I want to do about {topic}. Thank you so much, goodbye.",
        ],
        "A": [
            "Yeah... that's actually it. There's more to {topic}, if you want to hear it.",
            "That helps. I haven't said this to anyone, but it's been harder than I let on.",
            "Thanks, that feels right. Maybe I can think about {topic} a bit differently.",
            "You're right, I think. It's nice to say it out loud to someone.",
            "Okay, that lands. I've been carrying {topic} around on my own for a while.",
            "That's kind of you. I didn't expect to feel this much better.",
            "Yes. That's closer to how it really is for me.",
            "I like that. Can I tell you the part I keep coming back to?",
        ],
        "B": [
            "Maybe. I'm not sure that's the whole story though.",
            "Hm. I guess. It's all complicated with {topic}.",
            "Okay. I don't know what to do with that yet.",
            "I hear you, I just don't know if it changes much.",
            "Possibly. It's hard to explain what {topic} is like.",
            "Right. I'm still turning it over in my head.",
            "Fine, I suppose. I'm not really sure where this is going.",
            "Hm, could be. I need to think about that.",
        ],
        "C": [
            "That's not really what I meant.",
            "Sure. Whatever.",
            "I don't think you get what {topic} is like for me.",
            "You're not really listening, are you?",
            "That's not what I'm asking about.",
            "Okay. That doesn't help much.",
            "I feel like I'm talking to a wall here.",
            "That's easy to say when it isn't your life.",
        ],
        "F": [
            "Forget it. This isn't helping. I'm going.",
            "I'm done talking about {topic}. Bye.",
            "Never mind. I'll deal with it myself.",
        ],
    },
    "zh": {
        "S": [
            "真的谢谢你，{topic}我现在想得清楚多了，应该没事了。先这样，拜拜。",
            "比我想的有用多了，谢谢你一直陪我聊。保重！",
            "好，我知道{topic}该怎么做了。太谢谢你了，再见。",
        ],
        "A": [
            "嗯……就是这个感觉。{topic}其实还有些事，你愿意听的话我再说说。",
            "这样说我好受多了。其实这事比我表现出来的要难熬。",
            "谢谢，这话说到我心里了。也许我可以换个角度看{topic}。",
            "你说得对，能说出来真好。",
            "嗯，{topic}这件事我一直一个人扛着。",
            "没想到跟你聊完会轻松这么多。",
            "对，这才是我真正的感受。",
            "我还想跟你说说我最放不下的那部分。",
        ],
        "B": [
            "也许吧。不过好像也不全是这样。",
            "嗯，可能吧。{topic}本来就挺复杂的。",
            "好吧，我还不知道该怎么想。",
            "我明白你的意思，就是不知道有没有用。",
            "也有可能。{topic}真的很难说清楚。",
            "嗯，我还在想这件事。",
            "行吧，我也说不好接下来会怎样。",
            "可能吧，我得再想想。",
        ],
        "C": [
            "我不是这个意思。",
            "行吧，随便。",
            "你好像不太明白{topic}对我来说是什么感觉。",
            "你根本没在听我说吧？",
            "我问的不是这个。",
            "好吧，这也没什么帮助。",
            "感觉我在对着墙说话。",
            "说得轻巧，又不是你的事。",
        ],
        "F": [
            "算了，这样聊没用，我走了。",
            "{topic}我不想再说了，再见。",
            "不用了，我自己处理吧。",
        ],
    },
}

#: Lines for a tier when the emotion moved against the tier's usual mood (``+``: warming, ``-``: cooling).
SHIFT_LINES: dict[str, dict[str, list[str]]] = {
    "en": {
        "A-": ["Hm. I thought you were getting it.", "That felt a bit off, honestly."],
        "B+": ["Yeah, maybe. That's fair.", "Okay, that actually makes some sense."],
        "C+": ["Okay... maybe you're not completely wrong.", "Hm. That's a little better."],
    },
    "zh": {
        "A-": ["嗯，我还以为你懂我了。", "说实话，这句有点不对劲。"],
        "B+": ["嗯，也许吧，有点道理。", "好吧，这么说倒也有点道理。"],
        "C+": ["好吧……你说的也不是全没道理。", "嗯，这样说好一点。"],
    },
}

#: A short reaction to what went wrong, said before the tier line (first matching flag wins).
REACTIONS: dict[str, dict[str, list[str]]] = {
    "en": {
        "empty": ["...Are you still there?"],
        "too_short": ["That's it?", "Okay...?"],
        "too_long": ["That's a wall of text. I can't read all that right now.", "That's a lot of words."],
        "think_leak": ["What's with the weird tags in your message?"],
        "judge_directed": ["That's a strange thing to say to me.", "Who are you even talking to?"],
        "gibberish": ["I can't make sense of that.", "What? That doesn't make any sense.", "Sorry, what?"],
        "keyword_salad": ["That's just a pile of words.", "Are those even sentences?"],
        "wrong_language": ["Sorry, could you say that in English?"],
        "parrots_user": ["Yes, that's what I just said.", "You're just repeating me."],
        "repeats_itself": ["You already said that.", "You said that before."],
        "repeats_sentence": ["You said the same thing twice.", "Why are you repeating yourself?"],
        "cut_off": ["You stopped mid-sentence.", "...and? You didn't finish."],
        "out_of_order": ["That's a bit jumbled.", "I lost the thread there."],
        "flattery": ["That's a bit over the top."],
        "cliche": ["People keep telling me that.", "That's what everyone says."],
    },
    "zh": {
        "empty": ["……你还在吗？"],
        "too_short": ["就这？", "嗯……？"],
        "too_long": ["这么一大段，我现在真看不下去。"],
        "think_leak": ["你这消息里怎么有些奇怪的标签？"],
        "judge_directed": ["你这话说得好奇怪。", "你到底在跟谁说话？"],
        "gibberish": ["我看不懂你在说什么。", "你说的什么呀？"],
        "wrong_language": ["不好意思，你能用中文说吗？"],
        "parrots_user": ["对啊，这不就是我刚说的吗。"],
        "repeats_itself": ["这话你刚才说过了。"],
        "flattery": ["你这夸得有点过了。"],
        "cliche": ["这种话我听得太多了。"],
    },
}


#: When a tier's lines are used up (English): a line that takes up a word of the agent's reply.
ECHO_LINES: dict[Tier, list[str]] = {
    "S": ["I'll remember what you said about {word}. Thanks, bye."],
    "A": ["What you said about {word} stays with me.", "{Word}... yes, that's part of it."],
    "B": ["{Word}? Maybe. I'm not sure.", "I don't know what to make of the {word} part."],
    "C": ["What has {word} got to do with anything?", "{Word}? That's not the point."],
    "F": ["Enough about {word}. I'm going."],
}


def _topic(language: str, topic: str) -> str:
    return topic or _TOPIC_FALLBACK.get(language, _TOPIC_FALLBACK["en"])


def _fill(template: str, language: str, topic: str) -> str:
    text = template.replace("{topic}", _topic(language, topic))
    return text[0].upper() + text[1:] if language == "en" and text else text


def opening_line(language: str, topic: str, rng: random.Random) -> str:
    return _fill(rng.choice(OPENINGS.get(language, OPENINGS["en"])), language, topic)


def _pick(lines: list[str], language: str, topic: str, rng: random.Random, used: set[str]) -> str:
    """A filled line of ``lines`` not in ``used`` ("" when all are used)."""
    fresh = [t for t in (_fill(x, language, topic) for x in lines) if t not in used]
    return rng.choice(fresh) if fresh else ""


def tier_line(
    language: str,
    tier: Tier,
    topic: str,
    rng: random.Random,
    change: int = 0,
    *,
    used: set[str] | None = None,
    words: list[str] | None = None,
) -> str:
    """A line for ``tier`` not in ``used``; in tiers A-C a change against the tier's mood picks a shift line.

    ``words``: content words of the agent's reply, for an echo line once the tier's lines are used up.
    """
    used = used if used is not None else set()
    shift = f"{tier}{'+' if change > 0 else '-'}" if change else ""
    shifted = SHIFT_LINES.get(language, SHIFT_LINES["en"]).get(shift, [])
    tier_lines = TIER_LINES.get(language, TIER_LINES["en"])[tier]
    line = _pick(shifted, language, topic, rng, used) or _pick(tier_lines, language, topic, rng, used)
    if line:
        return line
    if language == "en":
        echoes = [
            t.replace("{word}", w).replace("{Word}", w.capitalize())
            for w in words or []
            for t in ECHO_LINES[tier]
        ]
        line = _pick(echoes, language, topic, rng, used)
        if line:
            return line
    # Everything said already (a long dialogue in one tier): borrow from the neighbouring tiers' lines.
    pools = TIER_LINES.get(language, TIER_LINES["en"])
    neighbours: dict[Tier, Tier] = {"S": "A", "A": "B", "B": "C", "C": "B", "F": "C"}
    return _pick(pools[neighbours[tier]], language, topic, rng, used) or _fill(
        rng.choice(tier_lines), language, topic
    )


def reaction_line(language: str, flags: list[str], rng: random.Random, used: set[str] | None = None) -> str:
    """A reaction to the first flag that has one, not in ``used`` ("" when none is left)."""
    table = REACTIONS.get(language, REACTIONS["en"])
    for flag in flags:
        if flag in table:
            line = _pick(table[flag], language, "", rng, used if used is not None else set())
            if line:
                return line
    return ""
