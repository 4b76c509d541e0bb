"""The replay user: an oracle that answers with a recorded dialogue's appraisals and user replies.

Why it exists: ``rlver calibrate --simulator replay`` runs rlver's *environment* (turn limit, emotion
arithmetic, end rules) on the recorded agent replies of a released SAGE result file, with this user
playing back the recorded judgements. If our protocol equals the published one, every trajectory
(turns, emotions, end) comes out identical; any difference is a protocol difference or a data quirk.

The user is keyed by profile id (one recorded dialogue per profile and file) and by the turn index,
which it reads from its own history (so it works both free-running and after
:meth:`~rlver.simulator.base.SimulatedUser.restore`). It only answers the reply that was recorded at
that turn: anything else raises :class:`~rlver.errors.SimulatorError`, because an oracle cannot judge
a reply it has never seen.

The emotion arithmetic is *not* replayed: the recorded ``change`` is applied by our
:class:`~rlver.simulator.emotion.EmotionState`, so the check covers our clamp and cap. The user ends the
dialogue with the published goodbye rule: its reply contains 再见 or 拜拜 (SAGE/test_npc.py:107 ``"再见" in``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlver.errors import SimulatorError
from rlver.profiles.schema import Profile
from rlver.records import Appraisal, Message, UserTurn
from rlver.simulator.base import Judgement, SimulatedUser, UserSimulator
from rlver.simulator.emotion import EmotionRules, EmotionState

#: The published evaluation ends the dialogue when the user's reply contains one of these.
GOODBYE_WORDS = ("再见", "拜拜")


def says_goodbye(text: str) -> bool:
    """The published goodbye rule (substring test on the user's reply)."""
    return any(word in text for word in GOODBYE_WORDS)


@dataclass(frozen=True)
class Recording:
    """One recorded dialogue: the agent's *visible* replies and the user turns (opening first)."""

    profile_id: str
    agent_replies: tuple[str, ...]
    user_turns: tuple[UserTurn, ...]


class ReplayUser(SimulatedUser):
    """Plays back one recorded dialogue."""

    def __init__(self, profile: Profile, emotion: EmotionState, record: Recording) -> None:
        super().__init__(profile, emotion)
        self.record = record
        self._agent = record.agent_replies

    async def open(self) -> UserTurn:
        text = self.record.user_turns[0].text if self.record.user_turns else (self.profile.opening or "")
        self.history.append(Message(role="user", content=text))
        return UserTurn(text=text)

    async def respond(self, agent_reply: str) -> UserTurn:
        started = time.perf_counter()
        k = sum(1 for m in self.history if m.role == "assistant")  # 0-based index of this reply
        pid = self.record.profile_id
        if k >= len(self._agent) or k + 1 >= len(self.record.user_turns):
            raise SimulatorError(f"replay {pid}: no recorded user reply after agent reply {k + 1}")
        if self._agent[k].strip() != agent_reply.strip():
            raise SimulatorError(
                f"replay {pid}: agent reply {k + 1} differs from the recorded one "
                f"(an oracle can only judge recorded replies)"
            )
        recorded = self.record.user_turns[k + 1]
        text = recorded.text
        appraisal: Appraisal | None = None
        if recorded.appraisal is not None:
            said = recorded.appraisal  # the recorded judgement, moved by this run's rules
            appraisal = self.applied(
                Judgement(
                    said.change,
                    said.understanding,
                    said.goal_fit,
                    said.inner_reaction,
                    said.feeling,
                    said.features,
                )
            )
        self.history.append(Message(role="assistant", content=agent_reply))
        self.history.append(Message(role="user", content=text))
        return self.user_turn(text, appraisal, ends=says_goodbye(text), started=started)


class ReplaySimulator(UserSimulator):
    """Makes replay users from recorded dialogues, keyed by profile id."""

    name = "replay"

    def __init__(self, records: Mapping[str, Recording], rules: EmotionRules | None = None) -> None:
        super().__init__(rules)
        self.records = dict(records)

    def start(self, profile: Profile, *, start_emotion: int, seed: int = 0) -> ReplayUser:
        record = self.records.get(profile.id)
        if record is None:
            raise SimulatorError(f"replay: no recorded dialogue for profile {profile.id!r}")
        return ReplayUser(profile, EmotionState(start_emotion, self.rules), record)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "dialogues": len(self.records), "max_change": self.rules.max_change}
