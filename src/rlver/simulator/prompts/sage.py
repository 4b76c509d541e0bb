"""Prompts of the ``sage`` protocol: the published simulator's structure and inputs, in our own words.

Structure (facts with file:line in docs/protocol.md ("Simulator prompts")):

* two calls per agent reply: an **appraisal** (what the agent meant, fit with the hidden theme, inner
  activity, feeling, a signed change with *no* imposed scale) and a **reply** that is given the
  appraisal and plans stance -> aim -> tone, writes a draft, rewrites it for realism and gives the
  final words;
* the hidden need is shown once, as hidden, at the end of the scene after the hidden-theme heading.
  A profile's ``goal`` is shown only when it differs from the hidden need (published profiles set
  ``task`` equal to it, and the published simulator never puts ``task`` in a prompt);
* garbled or incoherent agent text feels very bad (the published training simulator's rule).

Layout for prefix caches (ours; the published code sent one flat prompt per call):

1. ``system`` = the rules shared by every dialogue, then the options (difficulty, behaviour), then
   this user's portrait and scene with the hidden theme last. Stable for the whole dialogue.
2. ``user`` = the dialogue so far, one quoted turn after another (append-only, so the next turn's
   prompt extends this one), then the short step-1 task with the current emotion.
3. the reply call repeats 1-2, adds the appraisal as the simulator's own ``assistant`` answer
   (re-rendered from the parsed fields) and the short step-2 task.

So a turn's second call shares its whole first prompt, and each turn shares everything up to the
previous turn's last quoted message; ``bench/simulator_prefix.py`` measures the fraction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import tier_of
from rlver.simulator.prompts import PROMPT_SETS, neutralise, quoted_turn, sage_en, sage_zh
from rlver.simulator.prompts.base import for_language, texts_from_module
from rlver.simulator.prompts.sage_base import SageTexts

#: Recorded in every manifest: change it whenever a sage prompt's wording or structure changes.
SAGE_PROMPT_VERSION = "rlver-sage-prompts-v1"

#: One line per language; the language's module holds its texts (see prompts.base).
SAGE_TEXTS: dict[str, SageTexts] = {
    "en": texts_from_module(SageTexts, sage_en),
    "zh": texts_from_module(SageTexts, sage_zh),
}


def sage_texts(language: str) -> SageTexts:
    return for_language(SAGE_TEXTS, language, "sage simulator prompts")


def system_message(
    profile: Profile,
    *,
    language: str,
    magnitude_rubric: bool = False,
    difficulty: Difficulty | None = None,
    behaviour: str | None = None,
) -> Message:
    """Rules, options, then the portrait and the scene with the hidden theme at its end (shown once).

    ``difficulty`` adds the ``rlver-v1`` difficulty paragraph (an option; the published benchmark
    simulator has none); ``None`` leaves it out.
    """
    t = sage_texts(language)
    parts = [t.rules.format(rubric=t.rubric if magnitude_rubric else "")]
    if difficulty is not None:
        parts.append(f"{t.difficulty_heading}\n{PROMPT_SETS[t.language].difficulty[difficulty]}")
    guidance = get_behaviour(behaviour)
    behaviour_text = "\n".join(
        g.get(t.language, "").strip()
        for g in (guidance.appraisal_guidance, guidance.reply_guidance)
        if g.get(t.language, "").strip()
    )
    if behaviour_text:
        parts.append(f"{t.behaviour_heading}\n{behaviour_text}")
    traits = ", ".join(x for x in profile.traits if x.strip()) or t.not_given
    portrait = [t.portrait_heading, neutralise(profile.persona.strip())]
    portrait.append(
        t.traits_line.format(traits=neutralise(traits), style=neutralise(profile.style or t.not_given))
    )
    parts.append("\n".join(portrait))
    scene = [t.scene_heading, neutralise(profile.background.strip())]
    goal, need = profile.goal.strip(), profile.hidden_need.strip()
    if goal and goal != need and need not in goal:
        scene.append(t.stated_topic_line.format(goal=neutralise(goal)))
    scene += [t.hidden_heading, neutralise(need)]
    parts.append("\n".join(scene))
    return Message(role="system", content="\n\n".join(parts))


def render_turns(history: Sequence[Message], t: SageTexts) -> str:
    """The dialogue as quoted, append-only turns: a later turn's rendering extends an earlier one's."""
    lines = [t.dialogue_intro, "<dialogue>"]
    shown = [m for m in history if m.role != "system"]
    if not shown:
        lines.append(t.empty_dialogue)
    for message in shown:
        speaker = t.user_label if message.role == "user" else t.agent_label
        lines.append(quoted_turn(speaker, message.content, t.truncated))
    lines.append("</dialogue>")
    return "\n".join(lines)


def appraisal_messages(
    system: Message, history: Sequence[Message], agent_reply: str, emotion: int, *, language: str
) -> list[Message]:
    """Step 1: ``history`` excludes ``agent_reply``; the reply is quoted as the dialogue's last turn."""
    t = sage_texts(language)
    turns = render_turns([*history, Message(role="assistant", content=agent_reply)], t)
    task = t.appraisal_task.format(emotion=emotion, tier=tier_of(emotion))
    return [system, Message(role="user", content=f"{turns}\n\n{task}")]


def render_appraisal(appraisal: Appraisal) -> str:
    """The appraisal as the simulator's own answer (parsed fields only, so nothing else is echoed)."""
    body = {
        "understanding": appraisal.understanding,
        "goal_fit": appraisal.goal_fit,
        "inner_reaction": appraisal.inner_reaction,
        "feeling": appraisal.feeling,
        "change": appraisal.raw_change,
    }
    return neutralise(json.dumps(body, ensure_ascii=False))


def reply_messages(
    appraisal_prompt: Sequence[Message], appraisal: Appraisal, *, language: str
) -> list[Message]:
    """Step 2: the step-1 prompt, the appraisal as the simulator's answer, then the short step-2 task."""
    t = sage_texts(language)
    task = t.reply_task.format(emotion=appraisal.emotion_after, tier=tier_of(appraisal.emotion_after))
    return [
        *appraisal_prompt,
        Message(role="assistant", content=render_appraisal(appraisal)),
        Message(role="user", content=task),
    ]


def opening_messages(system: Message, emotion: int, *, language: str) -> list[Message]:
    """The first message, for profiles without one: step 2 with no appraisal yet (published order)."""
    t = sage_texts(language)
    task = t.opening_task.format(emotion=emotion, tier=tier_of(emotion))
    return [system, Message(role="user", content=f"{render_turns([], t)}\n\n{task}")]


def reask_message(error: str, language: str) -> Message:
    return Message(role="user", content=sage_texts(language).reask.format(error=error))
