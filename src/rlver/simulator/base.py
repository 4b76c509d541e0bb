"""The simulated-user interface shared by the LLM-backed and the offline simulator.

A :class:`UserSimulator` is a factory (it holds models and settings); :meth:`UserSimulator.start`
returns a :class:`SimulatedUser` that holds one dialogue's state. Keeping per-dialogue state in its own
object is what lets the rollout runner advance hundreds of dialogues concurrently with one simulator.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Sequence
from typing import Any

from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message, Tier, UserTurn
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import EmotionRules, EmotionState

#: The one tier at which a user who ends the dialogue is satisfied; a goodbye at any other tier is the
#: user leaving. The published prompts tell the user to say goodbye at two tiers only: at S, thanking
#: the agent (SAGE simulator_response.py:190; RLVER hard_player_simulator_dsv3.py:253), and at F,
#: wanting no more of the dialogue (simulator_response.py:194; dsv3 :257); SAGE's loop ends the
#: dialogue on any goodbye (test_npc.py:107-108), whatever the tier.
SATISFIED_TIER: Tier = "S"
#: The tiers the published prompts tell the user to say goodbye at (the offline user does).
GOODBYE_TIERS: tuple[Tier, ...] = ("S", "F")


def user_end_reason(tier: Tier) -> str:
    """Why a dialogue the user ended has ended: ``satisfied`` at :data:`SATISFIED_TIER`, else ``left``."""
    return "satisfied" if tier == SATISFIED_TIER else "left"


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

    def user_turn(
        self, text: str, appraisal: Appraisal | None, *, ends: bool, started: float, **more: Any
    ) -> UserTurn:
        """The record of one answer: ``text`` after ``appraisal``; when the user ends the dialogue
        (``ends``), the end reason of the tier it is at now (:func:`user_end_reason`). ``started``:
        :func:`time.perf_counter` when the turn began; ``more``: the kind's own fields of the record."""
        return UserTurn(
            text=text,
            appraisal=appraisal,
            ends_dialogue=ends,
            end_reason=user_end_reason(self.emotion.tier) if ends else None,
            latency_s=time.perf_counter() - started,
            **more,
        )

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
