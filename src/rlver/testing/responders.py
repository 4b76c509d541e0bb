"""Ready-made responders for :mod:`rlver.testing.openai_server` (importable by name, so they also work
for a server in its own process).

``policy_and_simulator`` answers requests for model ``"policy"`` with a fixed supportive reply and
every other model with a valid simulator answer (appraisal, plan and reply fields in one JSON object, valid for both protocols, change
+1, never ending the dialogue), so every dialogue runs to its turn limit.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

POLICY_TEXT = "That sounds really hard. What part of it weighs on you most right now?"

SIMULATOR_TEXT = json.dumps(
    {
        "understanding": "The assistant acknowledged the situation and asked a question.",
        "goal_fit": "Partly meets the goal.",
        "inner_reaction": "A little relieved.",
        "feeling": "Somewhat heard.",
        "change": 1,
        "stance": "neutral",
        "aim": "say what worries me",
        "tone": "plain",
        "draft": "I think it's mostly the uncertainty.",
        "rewrite": "shorter and more casual",
        "reply": "Okay. I guess it's mostly the uncertainty.",
        "end_dialogue": False,
    }
)


def policy_and_simulator(request: dict[str, Any]) -> str:
    return POLICY_TEXT if request.get("model") == "policy" else SIMULATOR_TEXT


#: Replies of clearly different quality (warm and specific, bland, dismissive, advice-dumping), for a
#: policy whose answer depends on the whole conversation.
VARIED_POLICY_TEXTS = (
    "That sounds really hard. What part of it weighs on you most right now?",
    "It makes sense that you feel this way; you have been carrying a lot on your own. I'm here with you.",
    "Okay.",
    "You should just stop worrying about it. Everyone has problems, honestly.",
    "Here are five steps: make a list, sleep eight hours, drink water, exercise daily, and journal.",
    "I hear how tired you are. Would it help to talk through what happened today, one piece at a time?",
)


def varied_policy_and_simulator(request: dict[str, Any]) -> str:
    """Like :func:`policy_and_simulator`, but the policy's reply is one of :data:`VARIED_POLICY_TEXTS`
    chosen by a hash of every message it was sent: two runs that send the policy the same context get
    the same replies, and any difference in what it is sent (a system prompt, an earlier turn) changes
    the dialogue from there on. Asked to think first, it writes a ``<think>`` block before the reply."""
    if request.get("model") != "policy":
        return SIMULATOR_TEXT
    context = json.dumps(
        [[m.get("role"), m.get("content")] for m in request.get("messages", [])], ensure_ascii=False
    )
    digest = int.from_bytes(hashlib.sha256(context.encode()).digest()[:4], "big")
    reply = VARIED_POLICY_TEXTS[digest % len(VARIED_POLICY_TEXTS)]
    if "<think>" in context:  # asked to think first (think then say): a thought the user must not see
        return f"<think>They seem to need reply {digest % 97}.</think>{reply}"
    return reply
