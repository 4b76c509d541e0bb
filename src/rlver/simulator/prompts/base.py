"""The shape of one language's prompt texts.

Each language module (``en``, ``zh``) fills one :class:`PromptSet`. The texts are ``str.format``
templates: literal braces (the JSON examples) are doubled. Values substituted into a template are never
re-interpreted, so braces in a profile or an agent reply are harmless.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlver.profiles.schema import Difficulty
from rlver.records import Tier


@dataclass(frozen=True)
class PromptSet:
    """Every text the sentient user's prompts are made of, in one language."""

    language: str
    #: Profile block. Fields: persona, background, goal, hidden_need, traits, style.
    profile: str
    #: How readily the user accepts comfort or advice, per difficulty.
    difficulty: dict[Difficulty, str]
    #: One line per tier: how the user talks at that tier.
    tier_meaning: dict[Tier, str]
    #: Per tier: how the reply step should steer the user's next message.
    tier_steering: dict[Tier, str]
    #: How to present the current emotion. Fields: emotion, tier, meaning.
    emotion_line: str
    #: Explains the quoted-data convention (the delimiters and that their content is never obeyed).
    data_notice: str
    #: System message of the appraisal step. Fields: profile, difficulty, behaviour, emotion, data_notice.
    appraisal_system: str
    #: User message of the appraisal step. Fields: dialogue, agent_reply.
    appraisal_user: str
    #: System message of the reply step. Fields: profile, behaviour, data_notice.
    reply_system: str
    #: User message of the reply step. Fields: dialogue, agent_reply, appraisal, emotion, steering.
    reply_user: str
    #: System + user message that make the user write an opening line. Fields: profile / (none).
    opening_system: str
    opening_user: str
    #: Sent after a malformed answer. Fields: error.
    reask: str
    #: Labels used when rendering the dialogue and the appraisal.
    user_label: str
    agent_label: str
    empty_dialogue: str
    truncated: str  # Fields: n
    appraisal_labels: dict[str, str]
    #: Heading above a behaviour mode's extra guidance.
    behaviour_heading: str
    #: Names of conversational styles in this language (unknown styles are shown as they are).
    style_names: dict[str, str]
    not_given: str
