"""One dialogue driven turn by turn, with a person on one side (``rlver chat``).

The rollout runner (:mod:`rlver.rollout.runner`) advances many dialogues at once for evaluation and
training; :func:`play` drives one through the same :class:`~rlver.env.dialogue.DialogueEnv` (``reset``,
then ``step`` until it says the dialogue is over), so a dialogue typed by hand follows the rules of
every other one: the same system prompt, think handling, reply cut, emotion ends and turn limit.

Either side may be a person. The agent is any async function from the policy's context to a reply
(:data:`Agent`): a model's completion, or a line typed at the terminal. A person playing the user is
a :class:`PersonAsUser`, a simulator whose turns come from a callback instead of a model. Reading and
printing stay with the caller (the CLI): this module only calls what it is given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from rlver.env.dialogue import DialogueEnv, StepResult
from rlver.llm.base import Completion
from rlver.profiles.schema import Language, Profile
from rlver.records import Episode, Message, UserTurn
from rlver.simulator.base import SimulatedUser, UserSimulator
from rlver.simulator.emotion import EmotionState

#: The agent's next reply for the policy's context (system prompt + dialogue so far), or ``None`` when
#: the person playing the agent ends the dialogue.
Agent = Callable[[list[Message]], Awaitable[Completion | None]]
#: The person's next line as the user, or ``None`` when they end the dialogue.
Ask = Callable[[], Awaitable[str | None]]


class Stopped(Exception):
    """The person playing the user ended the dialogue (raised through ``env.step`` to :func:`play`)."""


class _Person(SimulatedUser):
    """One dialogue's user, played by a person: no appraisal, so the emotion stays where it started."""

    def __init__(self, profile: Profile, emotion: EmotionState, ask: Ask) -> None:
        super().__init__(profile, emotion)
        self._ask = ask

    async def open(self) -> UserTurn:
        return await self._turn()

    async def respond(self, agent_reply: str) -> UserTurn:
        self.history.append(Message(role="assistant", content=agent_reply))
        return await self._turn()

    async def _turn(self) -> UserTurn:
        text = await self._ask()
        if text is None:
            raise Stopped
        self.history.append(Message(role="user", content=text))
        return UserTurn(text=text)


class PersonAsUser(UserSimulator):
    """The user side played by a person: each turn is ``ask()``'s line."""

    name = "person"

    def __init__(self, ask: Ask) -> None:
        super().__init__()
        self._ask = ask

    def start(self, profile: Profile, *, start_emotion: int, seed: int = 0) -> SimulatedUser:
        return _Person(profile, EmotionState(start_emotion, self.rules), self._ask)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


def person_profile(language: Language) -> Profile:
    """The profile behind a person playing the user: the environment needs one, and only its language
    is used (the policy's built-in system prompt follows it)."""
    described = dict.fromkeys(("persona", "background", "goal", "hidden_need"), "a person at the terminal")
    return Profile.model_validate({"id": "person", "language": language, "source": "terminal", **described})


async def play(
    env: DialogueEnv,
    profile: Profile,
    agent: Agent,
    *,
    seed: int = 0,
    on_open: Callable[[str, int], None] | None = None,
    on_step: Callable[[StepResult], None] | None = None,
) -> Episode:
    """Run one dialogue: ``env.reset(profile)``, then the agent's reply to ``env.step`` until the
    environment ends the dialogue or a person stops it (the agent returns ``None``, or a
    :class:`PersonAsUser` raises :class:`Stopped`). ``on_open(opening, emotion)`` and ``on_step`` let
    the caller show each turn. A dialogue a person stopped has no end reason."""
    try:
        opening = await env.reset(profile, seed=seed)
    except Stopped:
        return env.episode
    if on_open is not None:
        on_open(opening, env.emotion)
    while not env.done:
        completion = await agent(env.messages_for_policy())
        if completion is None:
            break
        try:
            result = await env.step(completion.text, completion=completion)
        except Stopped:
            break
        if on_step is not None:
            on_step(result)
    return env.episode
