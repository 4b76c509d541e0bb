"""The shape of one language's ``sage`` protocol texts (see :mod:`rlver.simulator.prompts.sage`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SageTexts:
    """Every text the ``sage`` prompts are made of, in one language (``str.format`` templates)."""

    language: str
    #: Rules shared by every call of every dialogue (both steps' method and answer formats). Field: rubric.
    rules: str
    #: The optional -10..+10 magnitude rubric (the ``rlver-v1`` scale), inserted into ``rules``.
    rubric: str
    difficulty_heading: str
    behaviour_heading: str
    portrait_heading: str
    traits_line: str  # Fields: traits, style
    scene_heading: str
    stated_topic_line: str  # Fields: goal (shown only when it differs from the hidden need)
    hidden_heading: str
    dialogue_intro: str
    user_label: str
    agent_label: str
    empty_dialogue: str
    truncated: str  # Fields: n
    appraisal_task: str  # Fields: emotion, tier
    reply_task: str  # Fields: emotion, tier
    opening_task: str  # Fields: emotion, tier
    reask: str  # Fields: error
    not_given: str
