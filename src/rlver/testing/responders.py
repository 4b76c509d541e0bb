"""Ready-made responders for :mod:`rlver.testing.openai_server` (importable by name, so they also work
for a server in its own process).

``policy_and_simulator`` answers requests for model ``"policy"`` with a fixed supportive reply and
every other model with a valid simulator answer (appraisal, plan and reply fields in one JSON object, valid for both protocols, change
+1, never ending the dialogue), so every dialogue runs to its turn limit.
"""

from __future__ import annotations

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
