"""The user profile: who the simulated user is and what they need."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlver.limits import text_too_long

Language = Literal["en", "zh"]
Difficulty = Literal["easy", "normal", "hard"]

#: Conversational styles of the published data, with their Chinese labels.
PUBLISHED_STYLES: dict[str, str] = {"负面型": "negative", "被动型": "passive", "回避型": "avoidant"}


class Profile(BaseModel):
    """A simulated user's profile.

    ``hidden_need`` is what the user really wants from the conversation but will not say outright
    (being heard, validation, a concrete plan, ...). ``style`` is the conversational style
    (``negative``, ``passive``, ``avoidant`` in the published data; any other word is allowed).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    language: Language = "en"
    persona: str = Field(min_length=1)
    background: str = Field(min_length=1)
    goal: str = Field(min_length=1)
    hidden_need: str = Field(min_length=1)
    traits: list[str] = Field(default_factory=list)
    style: str = "passive"
    topic: str = ""
    need_type: str = ""  # e.g. "validation", "advice", "being heard"
    difficulty: Difficulty | None = None  # a per-profile default; a run may override it
    behaviour: str | None = None  # user behaviour mode (cooperative, escalating, ...); run may override
    opening: str | None = None  # the user's first message; when absent the simulator writes one
    source: str = ""  # where the profile came from ("bundled:en-train", "sage", a file path)
    #: A published row's ``scene`` exactly as the file has it (background and hidden-need heading in
    #: one text): the published prompts quote it whole (``sage-published``), so a native dump keeps it.
    published_scene: str | None = Field(default=None, repr=False)

    @field_validator("id", "persona", "background", "goal", "hidden_need")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("*")
    @classmethod
    def _not_too_long(cls, value: object) -> object:
        """Every text (and trait) within :data:`rlver.limits.MAX_TEXT_CHARS`: a profile's texts are
        quoted into every simulator prompt, and a 2 MB persona was accepted without a word."""
        for text in value if isinstance(value, list) else [value]:
            why = text_too_long(len(text)) if isinstance(text, str) else None
            if why:
                raise ValueError(why)
        return value
