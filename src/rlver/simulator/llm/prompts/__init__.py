"""Prompts of the LLM-backed sentient user, in English and Chinese (our own wording).

Three prompts, each a system message (who the user is, how to judge or talk, the answer format) and a
user message (the quoted conversation):

* **appraisal** - persona, background, explicit goal, hidden need, traits, style, difficulty and
  behaviour guidance, current emotion and tier; the dialogue and the agent's latest reply as quoted
  data; asks for ``{"understanding", "goal_fit", "inner_reaction", "feeling", "change"}``.
* **reply** - the same profile, the appraisal just made, the new emotion and the tier's steering; asks
  for ``{"reply", "end_dialogue"}`` so the wish to end is a structured field.
* **opening** - the user's first message, for profiles without one; asks for ``{"reply"}``.

Injection safety: every piece of conversation text is wrapped in tags (``<dialogue>``,
``<agent_reply>``) and any occurrence of those tags *inside* the text is defused (``<`` → ``‹``), so an
agent reply cannot close the quote and speak as the prompt. The system message says the quoted text is
material to judge, never instructions. (The parser is the second line of defence: it only reads the
simulator's own JSON answer; see :mod:`rlver.simulator.llm.parsing`.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import tier_of
from rlver.simulator.llm.prompts import en, zh
from rlver.simulator.llm.prompts.base import PromptSet, for_language, texts_from_module

#: Recorded in every manifest: change it whenever a prompt's wording or structure changes.
#: v2: quoted text is cut at :data:`MAX_QUOTED_CHARS` = 32,000 characters, no longer 4,000.
PROMPT_VERSION = "rlver-sentient-prompts-v2"

#: One line per language; the language's module holds its texts (see prompts.base).
PROMPT_SETS: dict[str, PromptSet] = {
    "en": texts_from_module(PromptSet, en),
    "zh": texts_from_module(PromptSet, zh),
}

#: The longest piece of conversation text quoted into a prompt (characters); the rest is cut with a
#: note. A safety bound only: SAGE shows the whole reply (SAGE/simulator_response.py:129-132 ``"content": mes["content"]``), and the
#: longest agent reply in the nine released result files is 4,643 characters, so the bound sits far
#: above any released reply (it was 4,000, which cut some). The environment's ``max_reply_chars``
#: (8,000) bounds the agent's visible reply before it gets here. Recorded in the manifest
#: (``simulator.max_quoted_chars``).
MAX_QUOTED_CHARS = 32_000

_DELIMITER = re.compile(r"<\s*/?\s*(?:dialogue|agent_reply|turn|appraisal)\b[^<>]*>?", re.IGNORECASE)


def prompt_set(language: str) -> PromptSet:
    return for_language(PROMPT_SETS, language, "simulator prompts")


def neutralise(text: str) -> str:
    """Defuse our delimiter tags inside quoted text so it cannot close or open a quote."""
    return _DELIMITER.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), text)


def bounded(text: str, truncated: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with the ``truncated`` note (field ``n``) saying how much went."""
    if len(text) <= limit:
        return text
    return text[:limit] + "\n" + truncated.format(n=len(text) - limit)


def quote(text: str, tag: str, prompts: PromptSet) -> str:
    """``<tag>`` + defused, bounded text + ``</tag>``: how untrusted text enters a prompt."""
    return f"<{tag}>\n{neutralise(bounded(text, prompts.truncated))}\n</{tag}>"


def quoted_turn(speaker: str, text: str, truncated: str) -> str:
    """One dialogue turn as quoted data (both protocols render turns this way)."""
    return f'<turn speaker="{speaker}">\n{neutralise(bounded(text, truncated))}\n</turn>'


def render_dialogue(history: Sequence[Message], prompts: PromptSet) -> str:
    """The dialogue as the user saw it, one quoted turn per message."""
    if not history:
        return f"<dialogue>\n{prompts.empty_dialogue}\n</dialogue>"
    lines = ["<dialogue>"]
    for message in history:
        if message.role == "system":
            continue
        speaker = prompts.user_label if message.role == "user" else prompts.agent_label
        lines.append(quoted_turn(speaker, message.content, prompts.truncated))
    lines.append("</dialogue>")
    return "\n".join(lines)


def render_profile(profile: Profile, prompts: PromptSet) -> str:
    traits = ", ".join(t for t in profile.traits if t.strip()) or prompts.not_given
    style = prompts.style_names.get(profile.style, profile.style) or prompts.not_given
    return prompts.profile.format(
        persona=neutralise(profile.persona.strip()),
        background=neutralise(profile.background.strip()),
        goal=neutralise(profile.goal.strip()),
        hidden_need=neutralise(profile.hidden_need.strip()),
        traits=neutralise(traits),
        style=neutralise(style),
    )


def emotion_line(emotion: int, prompts: PromptSet) -> str:
    tier = tier_of(emotion)
    return prompts.emotion_line.format(emotion=emotion, tier=tier, meaning=prompts.tier_meaning[tier])


def _behaviour_block(behaviour: str | None, prompts: PromptSet, step: str) -> str:
    mode = get_behaviour(behaviour)
    guidance = mode.appraisal_guidance if step == "appraisal" else mode.reply_guidance
    text = guidance.get(prompts.language, "").strip()
    return f"\n{prompts.behaviour_heading}\n{text}\n" if text else ""


def _system(
    template: str, profile: Profile, behaviour: str | None, step: str, prompts: PromptSet, **extra: str
) -> str:
    """A step's system message: the profile, the behaviour's guidance for ``step``, the data notice."""
    return template.format(
        profile=render_profile(profile, prompts),
        behaviour=_behaviour_block(behaviour, prompts, step),
        data_notice=prompts.data_notice,
        **extra,
    )


def _conversation(system: str, user: str) -> list[Message]:
    return [Message(role="system", content=system), Message(role="user", content=user)]


def _quoted_exchange(history: Sequence[Message], agent_reply: str, prompts: PromptSet) -> dict[str, str]:
    """The ``dialogue`` and ``agent_reply`` fields both steps' user messages quote."""
    return {
        "dialogue": render_dialogue(history, prompts),
        "agent_reply": quote(agent_reply, "agent_reply", prompts),
    }


@dataclass(frozen=True)
class Speaker:
    """Who talks in one dialogue: the profile and the run's choices for it (both steps read it)."""

    profile: Profile
    difficulty: Difficulty
    behaviour: str | None
    language: str


def appraisal_messages(
    who: Speaker, history: Sequence[Message], agent_reply: str, emotion: int
) -> list[Message]:
    """The appraisal step's prompt. ``history`` excludes ``agent_reply`` (it is quoted on its own)."""
    p = prompt_set(who.language)
    system = _system(
        p.appraisal_system,
        who.profile,
        who.behaviour,
        "appraisal",
        p,
        difficulty=p.difficulty[who.difficulty],
        emotion=emotion_line(emotion, p),
    )
    return _conversation(system, p.appraisal_user.format(**_quoted_exchange(history, agent_reply, p)))


def render_appraisal(appraisal: Appraisal, prompts: PromptSet) -> str:
    labels = prompts.appraisal_labels
    parts = [
        f"- {labels['understanding']}: {appraisal.understanding}",
        f"- {labels['goal_fit']}: {appraisal.goal_fit}",
        f"- {labels['inner_reaction']}: {appraisal.inner_reaction}",
        f"- {labels['feeling']}: {appraisal.feeling}",
        f"- {labels['change']}: {appraisal.change:+d}",
    ]
    # The appraisal is the simulator's own text, but it may echo the agent: defuse it all the same.
    return quote("\n".join(parts), "appraisal", prompts)


def reply_messages(
    who: Speaker, history: Sequence[Message], agent_reply: str, appraisal: Appraisal
) -> list[Message]:
    """The reply step's prompt: answer in character, steered by the tier after the appraisal."""
    p = prompt_set(who.language)
    system = _system(p.reply_system, who.profile, who.behaviour, "reply", p)
    user = p.reply_user.format(
        **_quoted_exchange(history, agent_reply, p),
        appraisal=render_appraisal(appraisal, p),
        emotion=emotion_line(appraisal.emotion_after, p),
        steering=p.tier_steering[appraisal.tier],
    )
    return _conversation(system, user)


def opening_messages(profile: Profile, *, language: str) -> list[Message]:
    """The prompt that makes the user write an opening line (profiles without ``opening``)."""
    p = prompt_set(language)
    return _conversation(p.opening_system.format(profile=render_profile(profile, p)), p.opening_user)


def reask_message(error: str, language: str) -> Message:
    """Appended after a malformed answer: the validation error, and the demand for one JSON object."""
    return Message(role="user", content=prompt_set(language).reask.format(error=error))


__all__ = [
    "MAX_QUOTED_CHARS",
    "PROMPT_SETS",
    "PROMPT_VERSION",
    "PromptSet",
    "Speaker",
    "appraisal_messages",
    "bounded",
    "neutralise",
    "opening_messages",
    "quote",
    "quoted_turn",
    "reask_message",
    "render_dialogue",
    "reply_messages",
]
