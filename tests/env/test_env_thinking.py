"""Think-then-say splitting: the user must never see reasoning, whatever the policy writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlver.env.thinking import shown_to_user, split_think, system_prompt


def test_well_formed_reply() -> None:
    s = split_think("<think>They sound tired.</think>That sounds exhausting.")
    assert s.thought == "They sound tired."
    assert s.visible == "That sounds exhausting."
    assert s.well_formed


def test_whitespace_and_case_tolerated() -> None:
    s = split_think("\n  < Think >\nplan\n</THINK >\n\n  Hello there.  \n")
    assert s.visible == "Hello there."
    assert s.thought == "plan"
    assert s.well_formed


def test_no_think_block_is_visible_but_not_well_formed() -> None:
    s = split_think("Just a reply.")
    assert s.visible == "Just a reply."
    assert s.thought == ""
    assert not s.well_formed


@pytest.mark.parametrize(
    ("raw", "visible"),
    [
        ("<think>still thinking about what to s", ""),  # unclosed: hide everything after
        ("Hi! <think>secret plan", "Hi!"),  # unclosed after some text
        ("secret plan</think>Reply here", "Reply here"),  # stray close: template opened the block
        ("<think>a</think>Hello <think>b</think>world", "Hello world"),  # two blocks
        ("<think>a<think>nested</think>Reply", "Reply"),  # repeated open inside a block
        ("<thinking>x</thinking>Reply", "Reply"),  # <thinking> variant
        ("<think></think>Reply", "Reply"),  # empty reasoning
        ("Reply</think>", ""),  # stray close at the very end hides what came before
    ],
)
def test_never_leaks_reasoning(raw: str, visible: str) -> None:
    s = split_think(raw)
    assert s.visible == visible
    for secret in ("secret", "plan", "nested", "still thinking"):
        assert secret not in s.visible


@pytest.mark.parametrize(
    "raw",
    [
        "<think>a</think>",  # nothing visible
        "<think>a</think>   \n",  # only whitespace visible
        "<think></think>Reply",  # blank reasoning
        "<think>  </think>Reply",
        "Intro <think>a</think>Reply",  # block not leading
        "<think>a</think>Hello <think>b</think>world",  # two blocks
        "<think>a",  # unclosed
        "a</think>Reply",  # no opening tag
        "<think>a</think>Reply</think>",  # extra close
    ],
)
def test_format_errors(raw: str) -> None:
    assert not split_think(raw).well_formed


def test_tags_never_survive_in_visible_text() -> None:
    for raw in ["<think>x</think>a</think>b", "a<think>", "</think>", "<THINK>x</think><think>y"]:
        assert "think" not in split_think(raw).visible.lower()


def test_system_prompts_differ_by_mode_and_language() -> None:
    en, en_think = system_prompt(False, "en"), system_prompt(True, "en")
    zh, zh_think = system_prompt(False, "zh"), system_prompt(True, "zh")
    assert "<think>" not in en and "<think>" in en_think and "</think>" in en_think
    assert "<think>" not in zh and "<think>" in zh_think
    assert en != zh and any("\u4e00" <= ch <= "\u9fff" for ch in zh)
    assert system_prompt(False, "fr") == en  # unknown language falls back to English


# -- properties ------------------------------------------------------------------------------------

_pieces = st.lists(
    st.one_of(
        st.sampled_from(["<think>", "</think>", "<THINK >", "< /think>", "<thinking>", "</thinking>"]),
        st.text(alphabet="ab \n<>/", max_size=8),
    ),
    max_size=12,
)
_plain = st.text(alphabet="abc xyz.\n", max_size=30)


@settings(max_examples=300, deadline=None)
@given(_pieces)
def test_no_tag_ever_reaches_the_user(pieces: list[str]) -> None:
    visible = split_think("".join(pieces)).visible
    assert "think>" not in visible.lower().replace(" ", "")


@settings(max_examples=200, deadline=None)
@given(_plain, _plain)
def test_one_leading_block_is_exactly_split(thought: str, reply: str) -> None:
    s = split_think(f"<think>{thought}</think>{reply}")
    assert s.visible == reply.strip()
    assert s.thought == thought.strip()
    assert s.well_formed == (bool(thought.strip()) and bool(reply.strip()))


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("<think>plan</think>That sounds hard.", "That sounds hard."),
        ("<think>still thinking about what to s", "<think>still thinking about what to s"),  # cut
        ("plain reply, no tags", "plain reply, no tags"),
        ("<think>a</think>b<think>c</think> d ", "d"),  # the text after the LAST closing tag
        ("thought with the tag in the prompt</think>\nReply.", "Reply."),
        ("<THINK>a</ Think >Reply", "<THINK>a</ Think >Reply"),  # the published spelling only
        ("<think>a</thinking>Reply ", "<think>a</thinking>Reply "),  # raw, as the rollout passes it
        ("<think>a</think>", ""),
    ],
)
def test_shown_to_user_follows_the_published_rule(raw: str, shown: str) -> None:
    """RLVER vllm_rollout_spmd_think.py:402-406: after the last </think>, else the raw text."""
    assert shown_to_user(raw) == shown


def test_shown_to_user_agrees_with_split_think_on_well_formed_replies() -> None:
    for raw in ("<think>why</think>Because.", "<think>\nplan\n</think>\n\nHello there. "):
        assert split_think(raw).well_formed
        assert shown_to_user(raw) == split_think(raw).visible
