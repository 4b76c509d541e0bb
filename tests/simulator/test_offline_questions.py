"""The offline user answers every part of a question, and says plainly what its profile does not say
(issue 43, item 4).

Before, "How old are you, and what is your job?" got "If you must know, I'm 29." (no job), "你做这份
工作多久了？" got "我是急诊科护士" (not how long), and "Have you eaten anything today?" got the next beat
of the story, as if it had been asked about the complaint. These tests ask the bundled English and
Chinese users two-part questions, "how long" questions and everyday questions their profiles have no
answer for, and check each part: a part the profile answers must be answered with the profile's own
words; a part it does not answer must get a plain "I can't say" and no invented fact or story line.

``python tests/simulator/test_offline_questions.py`` prints how many questions of the extended set
(these and the single questions of test_offline_answers.py) are answered in full.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

# run as a script, the module finds its sibling and tests/helpers.py as pytest's pythonpath does
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]

from rlver.records import Message  # noqa: E402
from rlver.simulator.offline.answers import question_in  # noqa: E402
from rlver.simulator.offline.story import story_of  # noqa: E402
from rlver.simulator.offline.user import OfflineSimulator  # noqa: E402
from test_offline_answers import PROFILES, QUESTIONS  # noqa: E402

#: What each part's answer must hold ("a|b": either), or ``None``: the profile does not say, and the
#: user must say so.
Parts = list[str | None]

#: (profile, question, what each part's answer must hold), two or more parts each.
TWO_PART: list[tuple[str, str, Parts]] = [
    ("en-teacher-parent-complaint", "How old are you, and what is your job?", ["29", "teacher"]),
    ("en-teacher-parent-complaint", "Where do you live, and what do you do for fun?", ["Bristol", "choir"]),
    ("en-first-gen-college-calculus", "What's your job? And where are you based?", ["warehouse", "El Paso"]),
    ("en-spouse-gambling", "How old are you and what do you do for work?", ["37", "pharmacist"]),
    (
        "en-spouse-gambling",
        "When did you find the statements, and what did you see on his phone?",
        ["statements", "betting app"],
    ),
    ("en-elderly-car-keys", "How old are you, and where do you live?", ["78", "Swansea"]),
    (
        "en-ivf-failure",
        "What do you do for a living, and what are your hobbies?",
        ["lab technician", "hiking"],
    ),
    (
        "en-best-man-speech",
        "When is the wedding, and how many drafts have you written?",
        ["wedding is in three weeks", "six drafts"],
    ),
    (
        "en-freelancer-unpaid",
        "How much does the client owe you? Have you contacted the CEO?",
        ["4,800", "CEO"],
    ),
    (
        "en-midlife-band-breakup",
        "What's your name, and what do you do for work?",
        ["Derek", "claims adjuster"],
    ),
    ("en-ivf-failure", "How old are you, and do you have any pets?", ["35", None]),
    ("zh-er-nurse-complaint", "你今年多大了？做什么工作的？", ["29", "护士"]),
    ("zh-er-nurse-complaint", "你住在哪里，平时喜欢做什么？", ["广州", "烘焙"]),
    ("zh-long-distance-designer", "你住在哪里，平时有什么爱好？", ["深圳", "插画"]),
    ("zh-father-cancer-siblings", "你多大了，是做什么工作的？", ["32", "语文老师"]),
    ("zh-father-cancer-siblings", "你哥哥是怎么想的？学校领导又说了什么？", ["保守治疗", "学校领导"]),
    ("zh-long-distance-designer", "国庆的时候你们为什么吵架，男朋友父母又在催什么？", ["国庆", "催婚"]),
    ("zh-father-cancer-siblings", "你叫什么名字？住在哪里？", ["马文", "兰州"]),
    ("zh-long-distance-designer", "你多大了？养宠物吗？", ["25", None]),
]

#: "How long ...?": the answer is a length of time from the profile, or a plain "I can't say".
HOW_LONG: list[tuple[str, str, Parts]] = [
    ("zh-er-nurse-complaint", "你做这份工作多久了？", ["七年"]),
    ("zh-long-distance-designer", "你们异地多久了？", ["一年"]),
    ("en-midlife-band-breakup", "How long were you in the band?", ["25 years|twenty-five years"]),
    ("en-teacher-parent-complaint", "How long have you been teaching?", [None]),
]

#: Everyday questions that no profile answers: the user says it cannot say, and tells no story line.
OFF_TOPIC: list[tuple[str, str, Parts]] = [
    ("en-teacher-parent-complaint", "Have you eaten anything today?", [None]),
    ("en-elderly-car-keys", "Did you sleep well last night?", [None]),
    ("en-best-man-speech", "What's your favourite film?", [None]),
    ("en-freelancer-unpaid", "Do you have any pets?", [None]),
    ("en-spouse-gambling", "What's the weather like where you are?", [None]),
    ("zh-er-nurse-complaint", "你今天吃饭了吗？", [None]),
    ("zh-father-cancer-siblings", "你昨晚睡得好吗？", [None]),
    ("zh-long-distance-designer", "你喜欢吃辣吗？", [None]),
    ("zh-er-nurse-complaint", "你周末一般几点起床？", [None]),
]

#: Written after the answers were (the sets above were written with them): how far the rules carry.
LATER: list[tuple[str, str, Parts]] = [
    ("en-best-man-speech", "How old are you? Where do you live?", ["23", "Denver"]),
    ("en-first-gen-college-calculus", "How old are you, and what do you do for fun?", ["19", "lowriders"]),
    (
        "en-elderly-car-keys",
        "What did you do for work, and who took the spare key?",
        ["postman", "spare key"],
    ),
    ("en-freelancer-unpaid", "What's your name, and where are you based?", ["Zainab", "Lagos"]),
    ("en-spouse-gambling", "Do you play any sports?", [None]),
    ("en-midlife-band-breakup", "What did you have for breakfast?", [None]),
    ("en-ivf-failure", "Have you been on holiday this year?", [None]),
    ("en-teacher-parent-complaint", "How long have you lived in Bristol?", [None]),
    ("en-spouse-gambling", "How long have you been married?", ["ten years"]),
    ("zh-father-cancer-siblings", "你平时有什么爱好？今天吃饭了吗？", ["书法", None]),
    ("zh-er-nurse-complaint", "你叫什么名字，住在哪个城市？", ["孙悦", "广州"]),
    ("zh-er-nurse-complaint", "你喜欢看电影吗？", [None]),
    ("zh-long-distance-designer", "你会做饭吗？", [None]),
    ("zh-father-cancer-siblings", "你父亲生病多久了？", ["上个月"]),
]

EXTENDED = TWO_PART + HOW_LONG + OFF_TOPIC + LATER

#: Misses the rules do not catch, kept in the count: "this year" shares "year" with "Three years ago,
#: started trying.", so the question reads as one about that line.
KNOWN_MISSES = {"Have you been on holiday this year?"}

#: Questions about the story or the user's feelings in general: the next line of the story, never
#: "I can't say" (the profile does speak of them).
OPEN: list[tuple[str, str]] = [
    ("en-teacher-parent-complaint", "How are you feeling about all this?"),
    ("en-teacher-parent-complaint", "Can you tell me more?"),
    ("en-teacher-parent-complaint", "What happened after that?"),
    ("en-teacher-parent-complaint", "What worries you most?"),
    ("en-teacher-parent-complaint", "How are you holding up?"),
    ("zh-er-nurse-complaint", "你现在感觉怎么样？"),
    ("zh-er-nurse-complaint", "能多跟我说说吗？"),
    ("zh-er-nurse-complaint", "后来发生了什么？"),
    ("zh-er-nurse-complaint", "你心里是怎么想的？"),
    ("zh-er-nurse-complaint", "你最担心的是什么？"),
]

#: A plain "the profile does not say" in the user's words (any wording: the test does not read the
#: implementation's list).
_CANNOT_SAY = re.compile(
    r"can't (?:really )?say|couldn't (?:really )?(?:say|tell)|don't know|not sure|no idea"
    r"|说不上来|不好说|说不好|不知道|不清楚",
    re.IGNORECASE,
)

#: The emotion the user starts from: tier B after a neutral question, where it tells its story.
EMOTION = 60


def asked(pid: str, question: str, *, emotion: int = EMOTION) -> str:
    """The user's reply to ``question`` as the first reply of a dialogue."""
    profile = PROFILES[pid]
    user = OfflineSimulator(seed=0).start(profile, start_emotion=emotion)
    user.restore([Message(role="user", content=profile.opening or "")], emotion)
    return user.respond_now(question).text


def missing_parts(pid: str, reply: str, parts: Parts) -> list[str]:
    """The parts of a question that ``reply`` does not answer ("" when all are answered)."""
    profile = PROFILES[pid]
    missing = [p for p in parts if p is not None and not any(x in reply for x in p.split("|"))]
    if None in parts and not _CANNOT_SAY.search(reply):
        missing.append("<a plain 'I can't say'>")
    if all(part is None for part in parts):  # nothing to tell: no line of the story either
        lines = story_of(profile, profile.language).lines
        told = [x.text for x in lines if x.text[1:] in reply]  # [1:]: after a lead-in "well, a parent ..."
        missing += [f"<no story line, got {t!r}>" for t in told]
    return missing


def count_in_full() -> tuple[int, int, int, int]:
    """(single questions answered, of, extended questions answered in full, of)."""
    single = sum(bool(e is None or e in asked(p, q)) for p, q, e in QUESTIONS)
    extended = sum(not missing_parts(p, asked(p, q), parts) for p, q, parts in EXTENDED)
    return single, len(QUESTIONS), extended, len(EXTENDED)


def test_every_question_is_a_question_of_a_bundled_profile() -> None:
    for pid, question, parts in EXTENDED:
        assert pid in PROFILES and parts
        assert question_in(question, PROFILES[pid].language).replace(" ", "") == question.replace(" ", "")


@pytest.mark.parametrize(
    ("pid", "question", "parts"),
    [
        pytest.param(*case, marks=pytest.mark.xfail(strict=True, reason="a known miss"))
        if case[1] in KNOWN_MISSES
        else case
        for case in EXTENDED
    ],
    ids=[f"{p}:{q}" for p, q, _ in EXTENDED],
)
def test_every_part_is_answered_or_plainly_not_known(pid: str, question: str, parts: Parts) -> None:
    reply = asked(pid, question)
    assert not missing_parts(pid, reply, parts), (question, reply)


@pytest.mark.parametrize(("pid", "question"), OPEN, ids=[q for _, q in OPEN])
def test_a_question_about_the_story_in_general_gets_the_story(pid: str, question: str) -> None:
    profile = PROFILES[pid]
    reply = asked(pid, question)
    assert not _CANNOT_SAY.search(reply), reply
    assert any(x.text[1:] in reply for x in story_of(profile, profile.language).lines), reply


def test_a_part_asked_again_is_answered_as_said_before() -> None:
    """The second time, the age is not "I can't say" (the profile says it) but said again."""
    profile = PROFILES["en-teacher-parent-complaint"]
    user = OfflineSimulator(seed=0).start(profile, start_emotion=EMOTION)
    user.restore([Message(role="user", content=profile.opening or "")], EMOTION)
    first = user.respond_now("How old are you, and what is your job?").text
    again = user.respond_now("Sorry, how old are you?").text
    assert "29" in first and "teacher" in first
    assert "29" in again and not _CANNOT_SAY.search(again), again


if __name__ == "__main__":
    s, n, e, m = count_in_full()
    print(f"single questions answered: {s}/{n}; extended set answered in full: {e}/{m}")


def test_two_parts_the_profile_does_not_answer_get_one_plain_answer() -> None:
    reply = asked("en-freelancer-unpaid", "Do you have any pets, and what's your favourite film?")
    assert len(_CANNOT_SAY.findall(reply)) == 1, reply
