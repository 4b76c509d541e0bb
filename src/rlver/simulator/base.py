"""The simulated-user interface shared by every simulator kind.

A :class:`UserSimulator` is a factory (it holds models and settings); :meth:`UserSimulator.start`
returns a :class:`SimulatedUser` that holds one dialogue's state. Keeping per-dialogue state in its own
object is what lets the rollout runner advance hundreds of dialogues concurrently with one simulator.

A new kind implements one method, :meth:`SimulatedUser.judge` (its appraisal of a reply: the change it
states and why), and names its user class in :attr:`UserSimulator.user_class`. The base does the rest,
the same for every kind: the rules move the emotion (:meth:`SimulatedUser.applied`: the per-turn bound,
the range, the tier reached), the answer (a line for the tier, until the kind writes its own), whether
and why the user ends the dialogue (:func:`user_end_reason`) and the record of the turn
(:meth:`SimulatedUser.user_turn`). The offline, LLM and replay users write their own answers and
openings, and use the same rules, end reason and records.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message, Tier, UserTurn
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import EmotionRules, EmotionState

#: The one tier at which a user who ends the dialogue is satisfied; a goodbye at any other tier is the
#: user leaving. The published prompts tell the user to say goodbye at two tiers only: at S, thanking
#: the agent (SAGE simulator_response.py:190 ``Emotion-S``; RLVER hard_player_simulator_dsv3.py:253 ``Emotion-S``), and at F,
#: wanting no more of the dialogue (simulator_response.py:194 ``Emotion-F``; dsv3 :257 ``Emotion-F``); SAGE's loop ends the
#: dialogue on any goodbye (test_npc.py:107-108 ``"再见" in``), whatever the tier.
SATISFIED_TIER: Tier = "S"
#: The tiers the published prompts tell the user to say goodbye at (the offline user does).
GOODBYE_TIERS: tuple[Tier, ...] = ("S", "F")


def user_end_reason(tier: Tier) -> str:
    """Why a dialogue the user ended has ended: ``satisfied`` at :data:`SATISFIED_TIER`, else ``left``."""
    return "satisfied" if tier == SATISFIED_TIER else "left"


#: What a user says when its kind writes no answer of its own: one line per tier, goodbye at S and F.
TIER_LINES: dict[str, dict[Tier, str]] = {
    "en": {
        "S": "Thank you, that really helped. Bye.",
        "A": "Yes, that helps.",
        "B": "Okay.",
        "C": "I'm not sure that helps.",
        "F": "I've had enough of this. Bye.",
    },
    "zh": {
        "S": "谢谢你，真的帮到我了。再见。",
        "A": "嗯，这样有帮助。",
        "B": "好吧。",
        "C": "我不确定这有没有用。",
        "F": "我受够了。再见。",
    },
}
#: The first line of a user whose profile has none and whose kind writes none.
OPENING_LINES = {"en": "Can I talk to you about something?", "zh": "我能跟你说件事吗？"}


@dataclass(frozen=True)
class Judgement:
    """A kind's appraisal of one reply: the change it states (before any rule) and, in words, what it
    understood, how the reply fits the user's goal, its inner reaction and its feeling; ``features``:
    the contributions a scoring kind adds them up from (recorded as they are)."""

    change: int
    understanding: str = ""
    goal_fit: str = ""
    inner_reaction: str = ""
    feeling: str = ""
    features: Mapping[str, float] = field(default_factory=dict)


#: A kind's own options, as its user reads them (typically the kind's spec class, ``OfflineSpec``...).
OptionsT = TypeVar("OptionsT")


class SimulatedUser(Generic[OptionsT]):
    """One user in one dialogue. ``options``: its kind's typed options (a kind's user subclasses
    ``SimulatedUser[ItsSpec]`` and reads ``self.options.<field>``), handed over by
    :meth:`UserSimulator.start`; ``None`` for a kind that has none of its own."""

    def __init__(self, profile: Profile, emotion: EmotionState, options: OptionsT | None = None) -> None:
        self.profile = profile
        self.emotion = emotion
        #: the kind's options (:attr:`UserSimulator.options` of the simulator that started this user)
        self._options = options
        #: The dialogue as the user saw it: ``user`` = the simulated user, ``assistant`` = the agent's
        #: *visible* replies (think blocks already stripped).
        self.history: list[Message] = []

    @property
    def options(self) -> OptionsT:
        """The kind's typed options; a user started without any has none to read (an error naming
        the class, not an ``AttributeError`` on ``None`` three lines later)."""
        if self._options is None:
            raise TypeError(f"{type(self).__name__} was started without its kind's options")
        return self._options

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

    # -- what a kind implements ------------------------------------------------------------------
    async def judge(self, agent_reply: str) -> Judgement:
        """This kind's appraisal of ``agent_reply`` (visible text only) in the dialogue so far
        (:attr:`history`, the emotion now in :attr:`emotion`): the one method a new kind writes."""
        raise NotImplementedError(
            f"{type(self).__name__}.judge: a simulator kind states its appraisal of a reply (a Judgement)"
        )

    async def answer(self, agent_reply: str, appraisal: Appraisal) -> str:
        """What the user says after its appraisal: by default the line of the tier it reached."""
        return TIER_LINES[_language(self.profile)][appraisal.tier]

    # -- what the base does for every kind -------------------------------------------------------
    def applied(self, judgement: Judgement) -> Appraisal:
        """The rules applied to a stated change (our arithmetic, not the judge's): the bound, the
        range and the tier reached, with the stated and the applied change both recorded."""
        before, change, after = self.emotion.apply(judgement.change)
        return Appraisal(
            understanding=judgement.understanding,
            goal_fit=judgement.goal_fit,
            inner_reaction=judgement.inner_reaction,
            feeling=judgement.feeling,
            raw_change=judgement.change,
            change=change,
            emotion_before=before,
            emotion_after=after,
            tier=self.emotion.tier,
            features=dict(judgement.features),
        )

    async def open(self) -> UserTurn:
        """The user's opening message: the profile's ``opening`` when set, else a plain first line."""
        text = self.profile.opening or OPENING_LINES[_language(self.profile)]
        self.history.append(Message(role="user", content=text))
        return UserTurn(text=text)

    async def respond(self, agent_reply: str) -> UserTurn:
        """Appraise ``agent_reply`` (visible text only), update the emotion, and answer; the user
        says goodbye, ending the dialogue, at the tiers the published prompts say it at.

        Raises :class:`rlver.errors.SimulatorError` (or an ``LLMError``) when no valid turn can be
        produced; the caller marks the dialogue failed.
        """
        started = time.perf_counter()
        appraisal = self.applied(await self.judge(agent_reply))
        text = await self.answer(agent_reply, appraisal)
        self.history.append(Message(role="assistant", content=agent_reply))
        self.history.append(Message(role="user", content=text))
        return self.user_turn(text, appraisal, ends=appraisal.tier in GOODBYE_TIERS, started=started)

    async def appraise(self, agent_reply: str) -> UserTurn:
        """Only the judgement of ``agent_reply``: the emotion moves, the user's answer may be left out.

        Teacher-forced calibration needs the emotion change and nothing else, so an LLM-backed user
        overrides this to skip the call that writes its answer (half the calls of a turn). The default
        is a whole :meth:`respond`, which is free for a user without a model.
        """
        return await self.respond(agent_reply)


def _language(profile: Profile) -> str:
    return profile.language if profile.language in TIER_LINES else "en"


class UserSimulator:
    """Makes :class:`SimulatedUser` objects; one per run, shared by all dialogues."""

    name: str = "simulator"
    #: the user a kind that writes only :meth:`SimulatedUser.judge` starts (see :meth:`start`)
    user_class: ClassVar[type[SimulatedUser] | None] = None

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
        options: Any = None,
    ) -> None:
        self.rules = rules or EmotionRules()
        #: the kind's own options (its spec), handed to every user :meth:`start` makes
        self.options = options
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

    def start(self, profile: Profile, *, start_emotion: int, seed: int = 0) -> SimulatedUser:
        """A fresh user for one dialogue: by default a :attr:`user_class` at ``start_emotion`` under
        this run's rules (a kind with more to set up overrides this)."""
        if self.user_class is None:
            raise NotImplementedError(f"{type(self).__name__}: set user_class or override start")
        return self.user_class(profile, self.emotion_at(start_emotion), self.options)

    def describe(self) -> dict[str, Any]:
        """Settings recorded in run manifests (models, sampling, prompt version). No secrets."""
        return {"name": self.name, "max_change": self.rules.max_change}
