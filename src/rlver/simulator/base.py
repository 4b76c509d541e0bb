"""The simulated-user interface shared by the LLM-backed and the offline simulator.

A :class:`UserSimulator` is a factory (it holds models and settings); :meth:`UserSimulator.start`
returns a :class:`SimulatedUser` that holds one dialogue's state. Keeping per-dialogue state in its own
object is what lets the rollout runner advance hundreds of dialogues concurrently with one simulator.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Message, UserTurn
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import EmotionRules, EmotionState


class SimulatedUser(abc.ABC):
    """One user in one dialogue."""

    def __init__(self, profile: Profile, emotion: EmotionState) -> None:
        self.profile = profile
        self.emotion = emotion
        #: The dialogue as the user saw it: ``user`` = the simulated user, ``assistant`` = the agent's
        #: *visible* replies (think blocks already stripped).
        self.history: list[Message] = []

    def restore(self, history: Sequence[Message], emotion: int) -> None:
        """Put this user mid-dialogue: ``history`` as it saw it (visible text only), emotion now ``emotion``.

        Teacher-forced calibration uses it to have the simulator judge a recorded reply in its recorded context.
        Subclasses that keep derived state (n-gram sets, previous replies) override it and call super().
        """
        self.history = list(history)
        self.emotion = EmotionState(emotion, self.emotion.rules)

    @abc.abstractmethod
    async def open(self) -> UserTurn:
        """The user's opening message (the profile's ``opening`` when set, else written now)."""

    @abc.abstractmethod
    async def respond(self, agent_reply: str) -> UserTurn:
        """Appraise ``agent_reply`` (visible text only), update the emotion, and answer.

        Raises :class:`rlver.errors.SimulatorError` (or an ``LLMError``) when no valid turn can be
        produced; the caller marks the dialogue failed.
        """

    async def appraise(self, agent_reply: str) -> UserTurn:
        """Only the judgement of ``agent_reply``: the emotion moves, the user's answer may be left out.

        Teacher-forced calibration needs the emotion change and nothing else, so an LLM-backed user
        overrides this to skip the call that writes its answer (half the calls of a turn). The default
        is a whole :meth:`respond`, which is free for a user without a model.
        """
        return await self.respond(agent_reply)


class UserSimulator(abc.ABC):
    """Makes :class:`SimulatedUser` objects; one per run, shared by all dialogues."""

    name: str = "simulator"

    @property
    def cuts_reply(self) -> bool:
        """Whether the environment's safety bound (``env.max_reply_chars``) cuts what the user is shown
        of a reply; a published-text protocol quotes it uncut, as the published code does."""
        return True

    @property
    def goodbye_first(self) -> bool:
        """Whether the user's goodbye is checked before the emotion thresholds (SAGE's loop order)."""
        return False

    def __init__(
        self,
        rules: EmotionRules | None = None,
        *,
        difficulty: Difficulty | None = None,
        behaviour: str | None = None,
    ) -> None:
        self.rules = rules or EmotionRules()
        #: The run's difficulty and behaviour for every user; ``None`` follows each profile.
        self.difficulty = difficulty
        if behaviour is not None:
            get_behaviour(behaviour)  # fail at start-up on an unknown mode, not at the first dialogue
        self.behaviour = behaviour

    def persona_of(self, profile: Profile) -> tuple[Difficulty, str | None]:
        """The difficulty and behaviour one dialogue with ``profile`` runs with: the run's setting,
        else the profile's (then ``normal`` and cooperative)."""
        behaviour = self.behaviour if self.behaviour is not None else profile.behaviour
        get_behaviour(behaviour)
        return self.difficulty or profile.difficulty or "normal", behaviour

    def emotion_at(self, start_emotion: int) -> EmotionState:
        """A dialogue's emotion, starting at ``start_emotion``, moved by this run's rules."""
        return EmotionState(start_emotion, self.rules)

    @abc.abstractmethod
    def start(self, profile: Profile, *, start_emotion: int, seed: int = 0) -> SimulatedUser:
        """A fresh user for one dialogue."""

    def describe(self) -> dict[str, Any]:
        """Settings recorded in run manifests (models, sampling, prompt version). No secrets."""
        return {"name": self.name, "max_change": self.rules.max_change}
