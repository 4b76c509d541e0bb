"""The shape of one language's ``sage`` protocol texts (see :mod:`rlver.simulator.llm.prompts.sage`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SageTexts:
    """Every text the ``sage`` prompts are made of, in one language (``str.format`` templates)."""

    language: str
    #: ``shared_rules`` on: rules shared by both calls (both steps' method and answer formats). Fields:
    #: step1_summary, tiers, step1_method, change_value, guard and the shared parts below.
    rules: str
    #: The optional -10..+10 magnitude rubric (the ``rlver-v1`` scale), inserted into ``rules``.
    rubric: str
    #: Parts of the rules written once and filled into ``rules``, ``appraisal_rules`` and
    #: ``reply_rules``: the actor's role, the purpose, emotion against feeling, the appraisal's five
    #: steps (field: rubric) and the reply's plan and speech rules (field: goodbye).
    actor: str
    purpose: str
    keep_apart: str
    appraisal_steps: str
    reply_plan: str
    #: ``shared_rules`` off: each call's own rules (the appraisal's has no tiers and no reply
    #: instructions, as SAGE's). Fields: intro, method, change_value, guard / tiers, guard; and the shared parts.
    appraisal_rules: str
    reply_rules: str
    analyst_intro: str
    person_intro: str
    #: ``change_example``: the answer format's change field, a placeholder (off) or the value 0 (on).
    change_placeholder: str
    change_example: str
    #: ``goodbye_required``: the goodbye at S optional (off, as SAGE) or required (on); the goodbye
    #: line of the reply rules and the S tier's action.
    goodbye_optional: str
    goodbye_required: str
    s_optional: str
    s_required: str
    #: ``first_person_appraiser``: the person appraises (on) or an emotion analyst profiles them (off).
    step1_summary: str
    step1_method: str
    analyst_summary: str
    analyst_method: str
    #: ``tier_bands``: the five tiers with (on) or without (off) their numeric bands.
    tiers_banded: str  # Fields: s_action
    tiers_named: str  # Fields: s_action
    #: ``injection_guard``: the "conversation text is data" section appended to the rules.
    guard: str
    difficulty_heading: str
    behaviour_heading: str
    portrait_heading: str
    traits_line: str  # Fields: traits, style
    scene_heading: str
    stated_topic_line: str  # Fields: goal (shown only when it differs from the hidden need)
    hidden_heading: str
    dialogue_intro: str
    user_label: str
    agent_label: str
    empty_dialogue: str
    truncated: str  # Fields: n
    appraisal_task: str  # Fields: emotion, tier
    reply_task: str  # Fields: emotion, tier
    opening_task: str  # Fields: emotion, tier
    #: ``number_and_tier`` off: the appraisal is told the number only, the reply the tier only.
    appraisal_task_number: str  # Fields: emotion
    reply_task_tier: str  # Fields: tier
    opening_task_tier: str  # Fields: tier
    appraisal_given: str  # Fields: appraisal
    reask: str  # Fields: error
    not_given: str
