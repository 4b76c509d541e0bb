"""A simulator kind that writes only its appraisal (``SimulatedUser.judge``) gets the rest from the
base: the rules that move the emotion (bound, range, tier), an answer for the tier, the goodbye and
its end reason, and the records."""

from __future__ import annotations

import asyncio
import runpy
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import TEST_PROFILES
from rlver.env.dialogue import DialogueEnv, EnvConfig
from rlver.simulator.base import TIER_LINES, Judgement, SimulatedUser, UserSimulator


class QuestionLover(SimulatedUser):
    """A new kind in one method: a question moves it up by 30 (more than the rules allow), else down 4."""

    async def judge(self, agent_reply: str) -> Judgement:
        return Judgement(30 if "?" in agent_reply else -4, understanding=f"heard {agent_reply!r}")


class QuestionLovers(UserSimulator):
    name = "question-lover"
    user_class = QuestionLover


def _dialogue(replies: list[str], start: int = 40) -> DialogueEnv:
    env = DialogueEnv(QuestionLovers(), EnvConfig.evaluation(start_emotion=start))

    async def go() -> None:
        await env.reset(TEST_PROFILES["p1"].model_copy(update={"opening": None}))
        for reply in replies:
            if env.done:
                break
            await env.step(reply)

    asyncio.run(go())
    return env


def test_the_base_bounds_the_change_names_the_tier_answers_and_records() -> None:
    episode = _dialogue(["How are you?", "Fine.", "Why?"]).episode
    turns = episode.user_turns
    assert turns[0].text == "Can I talk to you about something?"  # no opening: the base's first line
    first = turns[1].appraisal
    assert first is not None and (first.raw_change, first.change) == (30, 10)  # the ±10 bound
    assert (first.emotion_before, first.emotion_after, first.tier) == (40, 50, "B")
    assert first.understanding == "heard 'How are you?'"
    assert turns[1].text == TIER_LINES["en"]["B"] and turns[2].appraisal.change == -4  # type: ignore[union-attr]
    assert episode.emotions == [50, 46, 56]


def test_the_user_says_goodbye_at_s_satisfied_and_at_f_left() -> None:
    high = _dialogue(["?"] * 3, start=90).episode
    assert high.user_turns[-1].text == TIER_LINES["en"]["S"] and high.final_emotion == 100
    low = _dialogue(["no"] * 3, start=12).episode
    assert low.final_emotion == 8 and low.user_turns[-1].end_reason in (None, "left")
    # the environment's own emotion ends come first; a goodbye alone ends with the base's reason
    user = QuestionLover(TEST_PROFILES["p1"], QuestionLovers().emotion_at(95))
    turn = asyncio.run(user.respond("what now?"))
    assert turn.ends_dialogue and turn.end_reason == "satisfied"
    user = QuestionLover(TEST_PROFILES["p1"], QuestionLovers().emotion_at(12))
    turn = asyncio.run(user.respond("no"))
    assert turn.ends_dialogue and turn.end_reason == "left" and turn.text == TIER_LINES["en"]["F"]


def test_a_kind_without_an_appraisal_says_what_it_lacks() -> None:
    user: SimulatedUser[None] = SimulatedUser(TEST_PROFILES["p1"], UserSimulator().emotion_at(40))
    with pytest.raises(NotImplementedError, match="judge"):
        asyncio.run(user.respond("hi"))


@dataclass(frozen=True)
class Fussiness:
    """A kind's own options, typed: what its user reads through ``self.options``."""

    points: int


class Fussy(SimulatedUser[Fussiness]):
    async def judge(self, agent_reply: str) -> Judgement:
        return Judgement(-self.options.points)


class Fussies(UserSimulator):
    name = "fussy"
    user_class = Fussy


def test_a_kind_hands_its_typed_options_to_every_user_it_starts() -> None:
    """The kind's options reach its users through the base's ``start`` (no back-reference to the
    simulator, no isinstance check), and a user started without them says so by name."""
    sim = Fussies(options=Fussiness(points=3))
    users = [sim.start(TEST_PROFILES["p1"], start_emotion=40, seed=s) for s in (0, 1)]
    assert all(u.options is sim.options for u in users)
    turn = asyncio.run(users[0].respond("hello"))
    assert turn.appraisal is not None and turn.appraisal.change == -3
    with pytest.raises(TypeError, match="Fussy was started without its kind's options"):
        asyncio.run(Fussy(TEST_PROFILES["p1"], sim.emotion_at(40)).respond("hello"))


def test_the_drilled_kinds_user_reads_its_spec_as_options() -> None:
    """The additions drill's simulator kind (``tests/data/additions/simulator_kind.py.txt``), run here
    in seconds: its user reads ``sternness`` from the options its simulator was built with."""
    source = Path(__file__).parents[1] / "data" / "additions" / "simulator_kind.py.txt"
    kind = runpy.run_path(str(source), run_name="stern_kind")
    sim = kind["SternSimulator"](kind["Spec"](sternness=4))
    user = sim.start(TEST_PROFILES["p1"], start_emotion=40)
    assert asyncio.run(user.judge("why?")).change == 6 and asyncio.run(user.judge("ok")).change == -4
