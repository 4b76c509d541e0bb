"""The prompt versions recorded in manifests name the rendered text exactly.

A manifest's ``prompt_version`` says which prompts a run's simulator saw, so a change to the rendered
text (a word, a newline, the order of parts) must come with a new version. This test renders every
prompt of both protocols in both languages for fixed inputs and pins a digest per version; when it
fails, either the change was unintended, or bump ``PROMPT_VERSION`` / ``SAGE_PROMPT_VERSION`` and pin
the new digest. Behaviour guidance is left out (cooperative: no extra text), so only the prompt
modules decide the result.
"""

from __future__ import annotations

import hashlib
import json

from rlver.profiles.schema import Profile
from rlver.records import Appraisal, Message
from rlver.simulator.sentient import prompts
from rlver.simulator.sentient.prompts import sage

#: Digests of the text rendered by the prompts as they were when each version was recorded.
PINNED = {
    "rlver-sentient-prompts-v1": "332244adb1bb1d15",
    "rlver-sage-prompts-v1": "358c530e3e4469cb",
    "rlver-sage-prompts-v2": "cea4adada536f79b",
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
                system = sage.system_message(
                    p, language=language, magnitude_rubric=rubric, difficulty=difficulty, options=options
                )
                step1 = sage.appraisal_messages(
                    system, HISTORY, "agent", 40, language=language, options=options
                )
                reply = sage.reply_messages(step1, APPRAISAL, language=language, options=options)
                out.append([(m.role, m.content) for m in step1])
                out.append([(m.role, m.content) for m in reply])
                opening = sage.opening_messages(system, 30, language=language, options=options)
                out.append([(m.role, m.content) for m in opening])
        out.append(sage.reask_message("bad", language).content)
    return out


def test_rendered_prompts_match_their_recorded_versions() -> None:
    found = {
        prompts.PROMPT_VERSION: _digest(_rlver_v1()),
        sage.SAGE_PROMPT_VERSION: _digest(_sage()),
        # every SageOption on renders the prompts as they were before the options existed
        "rlver-sage-prompts-v1": _digest(_sage(sage.ALL_ON)),
    }
    assert found == PINNED, (
        "the rendered simulator prompts changed: if intended, bump PROMPT_VERSION / SAGE_PROMPT_VERSION "
        f"and pin the new digests here ({found})"
    )
