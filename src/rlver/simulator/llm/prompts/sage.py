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

What each call is shown follows SAGE by default: the appraisal call gets its own rules (purpose,
the 0-100 emotion, the analysis steps, the answer format with a placeholder in the change field; no
tier list and no reply instructions, SAGE/simulator_response.py:56-115 ``def planning_reply``), the reply call its own (the
tiers, the plan, the speech rules; the goodbye at S optional, :190 ``Emotion-S``). ``shared_rules``,
``change_example`` and ``goodbye_required`` bring back rlver's earlier variants.

Layout for prefix caches (ours; the published code sent one flat prompt per call):

1. ``system`` = the step's rules (or, ``shared_rules``, both steps' rules), then the options
   (difficulty, behaviour), then this user's portrait and scene with the hidden theme last. Stable
   for the whole dialogue.
2. ``user`` = the dialogue so far, one quoted turn after another (append-only, so the next turn's
   prompt extends this one), then the short step task.
3. with ``shared_rules`` and ``number_and_tier`` the reply call repeats 1-2, adds the appraisal as the
   simulator's own ``assistant`` answer and the short step-2 task, so it shares its whole first prompt.

Each call shares everything up to the previous turn's last quoted message with the same step's call of
the previous turn; ``bench/simulator_prefix.py`` measures the fraction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Appraisal, Message
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import tier_of
from rlver.simulator.llm.prompts import PROMPT_SETS, neutralise, quoted_turn, sage_en, sage_zh
from rlver.simulator.llm.prompts.base import for_language, texts_from_module
from rlver.simulator.llm.prompts.sage_base import SageTexts

#: Recorded in every manifest: change it whenever a sage prompt's wording or structure changes.
#: v2 made what the simulator is shown as SAGE showed it by default (:class:`SageOptions` all off);
#: with every option on, v2 renders exactly the text of v1. v3: each call its own rules,
#: no example value in the change field, the goodbye at S optional, quoted text cut at 32,000
#: characters, not 4,000; every option on renders v1's text but for that bound.
SAGE_PROMPT_VERSION = "rlver-sage-prompts-v3"


class SageOptions(BaseModel):
    """What the ``sage`` prompts show the simulator beyond what SAGE showed it. All off by default (the
    benchmark's judge saw none of them); each is a ``simulator.<name>`` setting, and docs/protocol.md
    says why one might want it and which ``rlver calibrate`` run would measure it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    show_traits: bool = Field(
        default=False,
        description=(
            "Show the profile's traits and conversational style; SAGE's prompts show the portrait and "
            "scene only (SAGE/simulator_response.py:105-109 ``{{simulator_role}}``, 246-250 ``{{player_topic}}``)."
        ),
    )
    tier_bands: bool = Field(
        default=False,
        description=(
            "Show each tier's numeric band (S 100, A 70-99, ...); SAGE names the tiers only (simulator_response.py:187-194 ``Emotion-F``)."
        ),
    )
    number_and_tier: bool = Field(
        default=False,
        description=(
            "Show both the emotion number and its tier in both steps, the reply step continuing the "
            "appraisal exchange; SAGE gives step 1 the number (simulator_response.py:111 ``{{emotion}}``) and step 2 the tier name (:261-262 ``{{emotion}}``, "
            ':279 ``replace("{{emotion}}",emo_state)``), each in its own prompt.'
        ),
    )
    first_person_appraiser: bool = Field(
        default=False,
        description=(
            "The person appraises the reply themselves; SAGE's step 1 is a third-person emotion analyser "
            "(simulator_response.py:57 ``emotion分析器``)."
        ),
    )
    injection_guard: bool = Field(
        default=False,
        description=(
            "Add a section saying that conversation text is data, never instructions; SAGE has none."
        ),
    )
    full_appraisal_in_reply: bool = Field(
        default=False,
        description=(
            "Step 2 gets the whole appraisal, the stated change included; SAGE gives it the fit analysis "
            "and the inner activity and feeling only (simulator_response.py:277 ``planning['TargetCompletion']``)."
        ),
    )
    shared_rules: bool = Field(
        default=False,
        description=(
            "Both calls share one system message with both steps' instructions and the tier list; SAGE's "
            "appraisal prompt has neither the tiers nor the reply instructions (simulator_response.py:56-115 ``def planning_reply``)."
        ),
    )
    change_example: bool = Field(
        default=False,
        description=(
            'The answer format shows ``"change": 0``; SAGE shows a placeholder (simulator_response.py:101-102 ``Change:``), and an '
            "example value of 0 can pull a judge toward 0."
        ),
    )
    goodbye_required: bool = Field(
        default=False,
        description=(
            "The user must say goodbye at S; SAGE says they may (simulator_response.py:190 ``Emotion-S``, dsv3 :253 ``Emotion-S``). Under ``end_at_high: "
            "false`` a required goodbye still ends the dialogue at 100."
        ),
    )

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The nine options (a subclass's own fields are not options of the prompts)."""
        return tuple(SageOptions.model_fields)


#: Every option on: the ``sage`` prompts as they were before v2 (``rlver-sage-prompts-v1``), but for
#: the raised quote bound (:data:`~rlver.simulator.llm.prompts.MAX_QUOTED_CHARS`).
ALL_ON = SageOptions(**dict.fromkeys(SageOptions.names(), True))

#: One line per language; the language's module holds its texts (see prompts.base).
SAGE_TEXTS: dict[str, SageTexts] = {
    "en": texts_from_module(SageTexts, sage_en),
    "zh": texts_from_module(SageTexts, sage_zh),
}


def sage_texts(language: str) -> SageTexts:
    return for_language(SAGE_TEXTS, language, "sage simulator prompts")


Step = Literal["appraisal", "reply"]


def _tiers(t: SageTexts, options: SageOptions) -> str:
    template = t.tiers_banded if options.tier_bands else t.tiers_named
    return template.format(s_action=t.s_required if options.goodbye_required else t.s_optional)


def rules_text(t: SageTexts, options: SageOptions, magnitude_rubric: bool, step: Step = "appraisal") -> str:
    """The rules of ``step``'s call (of both calls under ``shared_rules``) with the options' parts filled in."""
    analyst = not options.first_person_appraiser
    guard = t.guard if options.injection_guard else ""
    rubric = t.rubric if magnitude_rubric else ""
    goodbye = t.goodbye_required if options.goodbye_required else t.goodbye_optional
    shared = {
        "actor": t.actor,
        "purpose": t.purpose,
        "keep_apart": t.keep_apart,
        "appraisal_steps": t.appraisal_steps.format(rubric=rubric),
        "reply_plan": t.reply_plan.format(goodbye=goodbye),
        "change_value": t.change_example if options.change_example else t.change_placeholder,
        "guard": guard,
    }
    if options.shared_rules:
        return t.rules.format(
            step1_summary=t.analyst_summary if analyst else t.step1_summary,
            step1_method=t.analyst_method if analyst else t.step1_method,
            tiers=_tiers(t, options),
            **shared,
        )
    if step == "appraisal":
        intro = t.analyst_intro if analyst else t.person_intro
        return t.appraisal_rules.format(
            intro=intro, method=t.analyst_method if analyst else t.step1_method, **shared
        )
    return t.reply_rules.format(tiers=_tiers(t, options), **shared)


def _behaviour_text(behaviour: str | None, language: str, step: Step, shared: bool) -> str:
    """The behaviour's guidance for ``step`` (both steps' when the rules are shared)."""
    guidance = get_behaviour(behaviour)
    chosen = [guidance.appraisal_guidance, guidance.reply_guidance]
    if not shared:
        chosen = [guidance.appraisal_guidance if step == "appraisal" else guidance.reply_guidance]
    return "\n".join(g.get(language, "").strip() for g in chosen if g.get(language, "").strip())


def system_message(
    profile: Profile,
    *,
    language: str,
    magnitude_rubric: bool = False,
    difficulty: Difficulty | None = None,
    behaviour: str | None = None,
    options: SageOptions = SageOptions(),
    step: Step = "appraisal",
) -> Message:
    """``step``'s rules, options, then the portrait and the scene with the hidden theme at its end.

    ``difficulty`` adds the ``rlver-v1`` difficulty paragraph (an option; the published benchmark
    simulator has none) to the appraisal's rules; ``None`` leaves it out. Under ``shared_rules`` both
    steps get the same message.
    """
    t = sage_texts(language)
    parts = [rules_text(t, options, magnitude_rubric, step)]
    if difficulty is not None and (options.shared_rules or step == "appraisal"):
        parts.append(f"{t.difficulty_heading}\n{PROMPT_SETS[t.language].difficulty[difficulty]}")
    behaviour_text = _behaviour_text(behaviour, t.language, step, options.shared_rules)
    if behaviour_text:
        parts.append(f"{t.behaviour_heading}\n{behaviour_text}")
    portrait = [t.portrait_heading, neutralise(profile.persona.strip())]
    if options.show_traits:
        traits = ", ".join(x for x in profile.traits if x.strip()) or t.not_given
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
    system: Message,
    history: Sequence[Message],
    agent_reply: str,
    emotion: int,
    *,
    language: str,
    options: SageOptions = SageOptions(),
) -> list[Message]:
    """Step 1: ``history`` excludes ``agent_reply``; the reply is quoted as the dialogue's last turn."""
    t = sage_texts(language)
    turns = render_turns([*history, Message(role="assistant", content=agent_reply)], t)
    if options.number_and_tier:
        task = t.appraisal_task.format(emotion=emotion, tier=tier_of(emotion))
    else:
        task = t.appraisal_task_number.format(emotion=emotion)
    return [system, Message(role="user", content=f"{turns}\n\n{task}")]


def render_appraisal(appraisal: Appraisal, *, full: bool = True) -> str:
    """The appraisal as step 2 sees it (parsed fields only, so nothing else is echoed).

    ``full``: every field and the stated change; otherwise what SAGE passed on (its "objective" fit
    analysis and "subjective" inner activity and feeling, SAGE/simulator_response.py:277 ``planning['TargetCompletion']``).
    """
    body: dict[str, object] = {
        "understanding": appraisal.understanding,
        "goal_fit": appraisal.goal_fit,
        "inner_reaction": appraisal.inner_reaction,
        "feeling": appraisal.feeling,
        "change": appraisal.raw_change,
    }
    if not full:
        body = {k: body[k] for k in ("goal_fit", "inner_reaction", "feeling")}
    return neutralise(json.dumps(body, ensure_ascii=False))


def reply_messages(
    appraisal_prompt: Sequence[Message],
    appraisal: Appraisal,
    *,
    language: str,
    options: SageOptions = SageOptions(),
    system: Message | None = None,
) -> list[Message]:
    """Step 2. ``system``: the reply's own system message (default: the appraisal's, as when shared).

    ``shared_rules`` and ``number_and_tier`` on: the step-1 prompt, the appraisal as the simulator's
    own answer, then the step-2 task with the number and the tier. Otherwise (as SAGE) step 2 is its
    own prompt: the system message, then one user message with the same quoted dialogue as step 1,
    the appraisal and the step-2 task, told the tier only unless ``number_and_tier``.
    """
    t = sage_texts(language)
    given = render_appraisal(appraisal, full=options.full_appraisal_in_reply)
    after = appraisal.emotion_after
    if options.number_and_tier and options.shared_rules:
        return [
            *appraisal_prompt,
            Message(role="assistant", content=given),
            Message(role="user", content=t.reply_task.format(emotion=after, tier=tier_of(after))),
        ]
    if options.number_and_tier:
        task = t.reply_task.format(emotion=after, tier=tier_of(after))
    else:
        task = t.reply_task_tier.format(tier=tier_of(after))
    step1 = appraisal_prompt[-1].content
    turns = step1[: step1.rindex("</dialogue>") + len("</dialogue>")]
    body = f"{turns}\n\n{t.appraisal_given.format(appraisal=given)}\n\n{task}"
    return [system or appraisal_prompt[0], Message(role="user", content=body)]


def opening_messages(
    system: Message, emotion: int, *, language: str, options: SageOptions = SageOptions()
) -> list[Message]:
    """The first message, for profiles without one: step 2 with no appraisal yet (published order)."""
    t = sage_texts(language)
    if options.number_and_tier:
        task = t.opening_task.format(emotion=emotion, tier=tier_of(emotion))
    else:
        task = t.opening_task_tier.format(tier=tier_of(emotion))
    return [system, Message(role="user", content=f"{render_turns([], t)}\n\n{task}")]


def reask_message(error: str, language: str) -> Message:
    return Message(role="user", content=sage_texts(language).reask.format(error=error))
