"""The ``rlver-published`` protocol: the published RLVER training simulator's requests, byte for byte.

The simulator the published training runs talked to is ``PlayerSimulator`` in RLVER's
``hard_player_simulator_dsv3.py``. Its prompts differ from SAGE's benchmark simulator: its own
appraisal layout (the user as an actor, a ``Reason:`` field where SAGE has ``TargetCompletion:``,
the history split into earlier context and latest exchange in both calls), its own target text
(``target_prompt["eq"]``, the one ``generate_role("eq")`` picks, dsv3 :68 ``self.generate_role("eq")``), and a reply call that is
shown only the ``reason`` and ``analyse`` fields (line 335-336). Its parser differs too: fields lose
their blank lines, and the change is the first (or, when it mentions 变化, the last) line after
``Change:``, read with ``int()``, with no clamp (lines 208-219). The text is read from the fetched file
(:func:`rlver.simulator.llm.published_text.training_texts`); the building order of each prompt
follows the published ``str.replace`` chains (dsv3 lines 178-193 ``replace("{{new_history}}",new_his_str)``, 331-353 ``replace("{{player_type}}",player_data["player"])``).

The training dynamics (no clamp, no floor, no end at 100) are the dialogue rules'
(:data:`rlver.rules.PUBLISHED_TRAINING`), not this protocol's. The published training loop ends a
dialogue on the goodbye words its reply prompt tells the user to say (RLVER ``vllm_rollout_spmd.py:521`` ``or player_simulators[i].emo_point<=0``
checks the same two words); they are read from the reply template's Emotion-F line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from rlver.errors import ConfigError
from rlver.records import Appraisal, Message
from rlver.simulator.llm import published_text
from rlver.simulator.llm.parsing import AppraisalAnswer
from rlver.simulator.llm.protocols.base import PublishedTextProtocol
from rlver.simulator.llm.published_calls import (
    MAX_PUBLISHED_CHANGE,
    PublishedPlayer,
    PublishedReplyAnswer,
    PublishedSimulator,
    fill_history,
    planning_text,
    published_reply,
)

#: The files this protocol reads (recorded with their sha256 in every manifest).
FILES = ("rlver/hard_player_simulator_dsv3.py",)
_QUOTED = re.compile(r"“([^”]+)”")


def _field(text: str, name: str, until: str) -> str:
    """The training parser's field split: SAGE's, with blank lines folded (dsv3 lines 210-213 ``replace("\\n\\n","\\n")``)."""
    return text.split(name)[-1].split(until)[0].strip("\n").strip("[").strip("]").replace("\n\n", "\n")


def read_training_appraisal(text: str) -> AppraisalAnswer:
    """An appraisal read as ``PlayerSimulator.planning_reply`` reads it; ``ValueError`` where its
    ``int()`` raises, so the caller re-asks as the published loop does."""
    reply = text.replace("：", ":").replace("*", "")
    change_text = reply.split("Change:")[-1].strip("\n")
    lines = change_text.split("\n")
    line = lines[-1] if "变化" in change_text else lines[0]
    change = int(line.strip("[").strip("]").strip("“").strip("”"))
    if abs(change) > MAX_PUBLISHED_CHANGE:  # the published code would apply it; no scale is that long
        raise ValueError(f"a change of {change} is beyond ±{MAX_PUBLISHED_CHANGE}")
    return AppraisalAnswer.model_construct(
        understanding=_field(reply, "Content:", "Reason:\n"),
        goal_fit=_field(reply, "Reason:", "Activity:\n"),
        inner_reaction=_field(reply, "Activity:", "Analyse:\n"),
        feeling=_field(reply, "Analyse:", "Change:\n"),
        change=change,
    )


def read_training_reply(text: str, goodbye_words: Sequence[str]) -> PublishedReplyAnswer:
    """The user's reply as ``player_reply`` reads it (dsv3 lines 374-375 ``split("Response:")``)."""
    thinking = (
        text.split("Response:")[0]
        .split("Thinking:\n")[-1]
        .strip("\n")
        .strip("[")
        .strip("]")
        .replace("\n\n", "\n")
    )
    return published_reply(text, thinking, goodbye_words)


def goodbye_words() -> tuple[str, ...]:
    """The words in “quotes” on the reply template's last tier line (Emotion-F: say goodbye with …)."""
    texts = published_text.training_texts()
    last_tier = texts.tiers[-1][0][:-1] + "F"
    for line in texts.reply_template.splitlines():
        if line.startswith(last_tier):
            words = tuple(_QUOTED.findall(line))
            if words:
                return words
    raise ConfigError(
        f"published_code/{texts.file}: no goodbye words on the {last_tier} line of the reply template"
    )


def training_appraisal_prompt(who: PublishedPlayer, emotion: int, history: Sequence[Message]) -> str:
    """``planning_reply``'s prompt (dsv3 lines 178-193 ``replace("{{new_history}}",new_his_str)``), ``history`` ending with the agent's reply."""
    texts, player, scene = who.texts, who.player, who.scene
    prompt = (
        texts.appraisal_template.replace("{{emotion}}", str(emotion))
        .replace("{{player_type}}", player)
        .replace("{{player_topic}}", scene)
        .replace("{{target}}", texts.target)
    )
    return fill_history(prompt, texts, history)


def training_reply_prompt(
    who: PublishedPlayer, state: str, history: Sequence[Message], appraisal: Appraisal | None
) -> str:
    """``player_reply``'s prompt (dsv3 lines 331-353 ``replace("{{player_type}}",player_data["player"])``): here the profile goes in after the history."""
    texts, player, scene = who.texts, who.player, who.scene
    prompt = texts.reply_template.replace("{{planning}}", planning_text(texts, appraisal))
    prompt = prompt.replace("{{target}}", texts.target)
    prompt = prompt.replace("{{emotion}}", state)
    prompt = fill_history(prompt, texts, history)
    return prompt.replace("{{player_type}}", player).replace("{{player_topic}}", scene)


RLVER_TRAINING = PublishedSimulator(
    owner="RLVER's",
    texts=published_text.training_texts,
    files=FILES,
    appraisal_prompt=training_appraisal_prompt,
    reply_prompt=training_reply_prompt,
    read_appraisal=read_training_appraisal,
    read_reply=read_training_reply,
    goodbye_words=goodbye_words,
)


class RlverPublishedProtocol(PublishedTextProtocol):
    """``rlver-published``: the published training simulator's prompts and parsing, fetched."""

    name: Literal["rlver-published"] = Field(
        default="rlver-published",
        description="``rlver-published``: the published training simulator's prompts and parsing, fetched.",
    )
    appraisal_emotion: Literal["start", "current"] = Field(
        default="start",
        description=(
            "The emotion each appraisal prompt shows. ``start`` (the published behaviour): the value the "
            "dialogue started at, every turn. The published rollout hands ``reply`` its ``self.role``, "
            'whose ``emo_point`` is set once by ``generate_role`` (dsv3 :85 ``"emo_point": self.emo_point``) and never updated: '
            '``planning_reply`` moves ``self.emo_point`` and a deep copy of the role (dsv3 :97 ``copy.deepcopy(player_data)``, :219 ``self.emo_point+=int(planning["change"])``, '
            ":235 ``player_data['emo_point'] = self.emo_point``), so the prompt's number (dsv3 :178 ``replace(\"{{emotion}}\",str(emo_point))``) stays the start. ``current``: the emotion at that "
            "turn, as SAGE shows it."
        ),
    )

    prompt_version: ClassVar[str] = "rlver-published"
    simulator: ClassVar[PublishedSimulator] = RLVER_TRAINING

    def appraisal_emotion_shown(self, start_emotion: int) -> int | None:
        return start_emotion if self.appraisal_emotion == "start" else None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "appraisal_emotion": self.appraisal_emotion}
