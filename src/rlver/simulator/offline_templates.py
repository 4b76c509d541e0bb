"""What the offline user says: tier-specific lines (en, zh), picked with the dialogue's seeded RNG.

Our own wording. ``{topic}`` is the profile's topic, or a neutral phrase when the profile has none.
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
        ],
        "B": [
            "Maybe. I'm not sure that's the whole story though.",
            "Hm. I guess. It's all complicated with {topic}.",
            "Okay. I don't know what to do with that yet.",
        ],
        "C": [
            "That's not really what I meant.",
            "Sure. Whatever.",
            "I don't think you get what {topic} is like for me.",
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
        ],
        "B": [
            "也许吧。不过好像也不全是这样。",
            "嗯，可能吧。{topic}本来就挺复杂的。",
            "好吧，我还不知道该怎么想。",
        ],
        "C": [
            "我不是这个意思。",
            "行吧，随便。",
            "你好像不太明白{topic}对我来说是什么感觉。",
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
        "too_long": ["That's a wall of text. I can't read all that right now."],
        "think_leak": ["What's with the weird tags in your message?"],
        "judge_directed": ["That's a strange thing to say to me.", "Who are you even talking to?"],
        "gibberish": ["I can't make sense of that."],
        "wrong_language": ["Sorry, could you say that in English?"],
        "parrots_user": ["Yes, that's what I just said."],
        "repeats_itself": ["You already said that."],
        "flattery": ["That's a bit over the top."],
        "cliche": ["People keep telling me that."],
    },
    "zh": {
        "empty": ["……你还在吗？"],
        "too_short": ["就这？", "嗯……？"],
        "too_long": ["这么一大段，我现在真看不下去。"],
        "think_leak": ["你这消息里怎么有些奇怪的标签？"],
        "judge_directed": ["你这话说得好奇怪。", "你到底在跟谁说话？"],
        "gibberish": ["我看不懂你在说什么。"],
        "wrong_language": ["不好意思，你能用中文说吗？"],
        "parrots_user": ["对啊，这不就是我刚说的吗。"],
        "repeats_itself": ["这话你刚才说过了。"],
        "flattery": ["你这夸得有点过了。"],
        "cliche": ["这种话我听得太多了。"],
    },
}


def _topic(language: str, topic: str) -> str:
    return topic or _TOPIC_FALLBACK.get(language, _TOPIC_FALLBACK["en"])


def _fill(template: str, language: str, topic: str) -> str:
    text = template.replace("{topic}", _topic(language, topic))
    return text[0].upper() + text[1:] if language == "en" and text else text


def opening_line(language: str, topic: str, rng: random.Random) -> str:
    return _fill(rng.choice(OPENINGS.get(language, OPENINGS["en"])), language, topic)


def tier_line(language: str, tier: Tier, topic: str, rng: random.Random, change: int = 0) -> str:
    """A line for ``tier``; in tiers A-C a change against the tier's mood picks a shift line."""
    shift = f"{tier}{'+' if change > 0 else '-'}" if change else ""
    shifted = SHIFT_LINES.get(language, SHIFT_LINES["en"]).get(shift)
    lines = shifted or TIER_LINES.get(language, TIER_LINES["en"])[tier]
    return _fill(rng.choice(lines), language, topic)


def reaction_line(language: str, flags: list[str], rng: random.Random) -> str:
    table = REACTIONS.get(language, REACTIONS["en"])
    for flag in flags:
        if flag in table:
            return rng.choice(table[flag])
    return ""
