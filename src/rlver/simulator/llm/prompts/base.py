"""The shape of one language's prompt texts, and how a language module becomes one.

Each language module (``en``, ``zh``) holds only text: one upper-case constant per :class:`PromptSet`
field (``appraisal_system`` -> ``APPRAISAL_SYSTEM``), and :func:`texts_from_module` builds the set, so
the field list is written once, here (the ``sage`` texts work the same way with
:class:`~rlver.simulator.llm.prompts.sage_base.SageTexts`). The texts are ``str.format`` templates: literal
braces (the JSON examples) are doubled. Values substituted into a template are never re-interpreted, so
braces in a profile or an agent reply are harmless.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

from rlver.errors import ConfigError
from rlver.profiles.schema import Difficulty
from rlver.records import Tier

T = TypeVar("T")


def texts_from_module(cls: type[T], module: ModuleType) -> T:
    """``cls`` (a dataclass of texts) from ``module``'s upper-case constants, one per field.

    A missing constant is a programming error caught at import, named with its module.
    """
    names: list[str] = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    missing = [n.upper() for n in names if not hasattr(module, n.upper())]
    if missing:
        raise ConfigError(
            f"{module.__name__} lacks {', '.join(missing)} (one constant per {cls.__name__} field)"
        )
    return cls(**{n: getattr(module, n.upper()) for n in names})


def for_language(table: dict[str, T], language: str, what: str) -> T:
    """``table[language]``, or a :class:`ConfigError` naming the languages there are."""
    try:
        return table[language]
    except KeyError:
        raise ConfigError(f"no {what} for language {language!r}; choose one of: {', '.join(table)}") from None


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
