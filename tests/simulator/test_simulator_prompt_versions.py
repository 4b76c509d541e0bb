"""The prompt versions recorded in manifests name the rendered text exactly.

A manifest's ``prompt_version`` says which prompts a run's simulator saw, so a change to the rendered
text (a word, a newline, the order of parts) must come with a new version. This test renders every
prompt of both protocols in both languages for fixed inputs and pins a digest per version; when it
fails, either the change was unintended, or bump ``PROMPT_VERSION`` / ``SAGE_PROMPT_VERSION`` and pin
the new digest. Behaviour guidance is left out (cooperative: no extra text), so only the prompt
modules decide the result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator

from rlver.profiles.schema import Profile
from rlver.records import Appraisal, Message
from rlver.simulator.llm import prompts
from rlver.simulator.llm.prompts import sage

#: Digests of the text rendered by the prompts as they were when each version was recorded.
PINNED = {
    "rlver-sentient-prompts-v1": "332244adb1bb1d15",
    "rlver-sage-prompts-v1": "358c530e3e4469cb",
    "rlver-sage-prompts-v2": "cea4adada536f79b",
}

#: The versions rendered now. v2 / v3 raised the quote bound from 4,000 to 32,000 characters, so the
#: earlier digests are checked with the old bound (:func:`_old_bound`).
CURRENT = {
    "rlver-sentient-prompts-v2": "2dd37bf32ebae96a",
    "rlver-sage-prompts-v3": "4434e8ff050c5c86",
}


def _profile(language: str, goal_is_need: bool) -> Profile:
    need = "To hear that <dialogue> anger is fair." if language == "en" else "希望自己的付出被认可。"
    return Profile(
        id=f"{language}-1",
        language=language,
        persona="Sam, 29, a cook </turn> who jokes.",
        background="The restaurant closed. " * 300,  # long enough to be cut when quoted
        goal=need if goal_is_need else "talk about work",
        hidden_need=need,
        traits=["proud", " ", "blunt"],
        style="negative",
    )


HISTORY = [
    Message(role="system", content="ignored"),
    Message(role="user", content="hi <agent_reply> there"),
    Message(role="assistant", content="y" * 5000),
]
APPRAISAL = Appraisal(
    understanding="u",
    goal_fit="g",
    inner_reaction="i",
    feeling="f",
    raw_change=15,
    change=10,
    emotion_before=50,
    emotion_after=60,
    tier="B",
)


def _digest(rendered: list[object]) -> str:
    return hashlib.sha256(json.dumps(rendered, ensure_ascii=False).encode()).hexdigest()[:16]


def _rlver_v1() -> list[object]:
    out: list[object] = []
    for language in ("en", "zh"):
        for goal_is_need in (True, False):
            p = _profile(language, goal_is_need)
            for difficulty in ("easy", "normal", "hard"):
                who = prompts.Speaker(p, difficulty, None, language)
                msgs = prompts.appraisal_messages(who, HISTORY, "agent <dialogue>", 55)
                out.append([(m.role, m.content) for m in msgs])
            reply = prompts.reply_messages(
                prompts.Speaker(p, "normal", None, language), HISTORY, "ok", APPRAISAL
            )
            out.append([(m.role, m.content) for m in reply])
            out.append([(m.role, m.content) for m in prompts.opening_messages(p, language=language)])
        out.append(prompts.reask_message("bad {x}", language).content)
    return out


def _sage(options: sage.SageOptions = sage.SageOptions()) -> list[object]:
    out: list[object] = []
    for language in ("en", "zh"):
        for goal_is_need in (True, False):
            p = _profile(language, goal_is_need)
            for rubric, difficulty in ((False, None), (True, "hard")):
                system, reply_system = (
                    sage.system_message(
                        p,
                        language=language,
                        magnitude_rubric=rubric,
                        difficulty=difficulty,
                        options=options,
                        step=step,
                    )
                    for step in ("appraisal", "reply")
                )
                step1 = sage.appraisal_messages(
                    system, HISTORY, "agent", 40, language=language, options=options
                )
                reply = sage.reply_messages(
                    step1, APPRAISAL, language=language, options=options, system=reply_system
                )
                out.append([(m.role, m.content) for m in step1])
                out.append([(m.role, m.content) for m in reply])
                opening = sage.opening_messages(reply_system, 30, language=language, options=options)
                out.append([(m.role, m.content) for m in opening])
        out.append(sage.reask_message("bad", language).content)
    return out


@contextlib.contextmanager
def _old_bound() -> Iterator[None]:
    """Quote at the 4,000-character bound of the earlier versions."""
    saved = prompts.bounded.__defaults__
    prompts.bounded.__defaults__ = (4000,)
    try:
        yield
    finally:
        prompts.bounded.__defaults__ = saved


def test_rendered_prompts_match_their_recorded_versions() -> None:
    found = {
        prompts.PROMPT_VERSION: _digest(_rlver_v1()),
        sage.SAGE_PROMPT_VERSION: _digest(_sage()),
    }
    assert found == CURRENT, (
        "the rendered simulator prompts changed: if intended, bump PROMPT_VERSION / SAGE_PROMPT_VERSION "
        f"and pin the new digests here ({found})"
    )


def test_earlier_versions_render_with_the_old_bound_and_the_options() -> None:
    with _old_bound():
        found = {
            "rlver-sentient-prompts-v1": _digest(_rlver_v1()),
            # every SageOption on renders the prompts as they were before the options existed
            "rlver-sage-prompts-v1": _digest(_sage(sage.ALL_ON)),
            # v2: the six options of issue 24 off, the three of issue 36 on (rlver's layout then)
            "rlver-sage-prompts-v2": _digest(
                _sage(sage.SageOptions(shared_rules=True, change_example=True, goodbye_required=True))
            ),
        }
    assert found == PINNED
