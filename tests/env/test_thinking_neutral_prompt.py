"""The benchmark's neutral agent prompt uses SAGE's role word in both languages (issue 36, item 4):
an *intelligent* chat partner (智能聊天伙伴, SAGE/npc_response.py:14), never a word such as
"empathetic" (善解人意) that nudges the agent toward the skill being measured."""

from __future__ import annotations

import pytest

from rlver.env.thinking import system_prompt


@pytest.mark.parametrize("think", [False, True])
def test_neutral_prompt_says_intelligent_chat_partner(think: bool) -> None:
    zh, en = system_prompt(think, "zh", "neutral"), system_prompt(think, "en", "neutral")
    assert "智能聊天伙伴" in zh and "善解人意" not in zh
    assert "intelligent chat partner" in en and "empathetic" not in en.lower()
