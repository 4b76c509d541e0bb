"""What the env and the harness share during one rollout, on the trace's live state.

verifiers hands a harness the rollout's trace and nothing of the env; the trace's ``state`` is the
framework's place for live, unserialised per-rollout objects, so the env puts the dialogue there when
the interaction opens and the harness reads it (and leaves each reply) there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import verifiers.v1 as vf
from pydantic import ConfigDict, Field

from rlver.env.dialogue import DialogueEnv
from rlver.llm.base import Completion


@dataclass
class Exchange:
    """One dialogue: the env's rlver dialogue, the env's HTTP session (one for all its dialogues), what
    the agent's request bodies carry besides the messages, and the assistant's last reply as the
    harness got it."""

    dialogue: DialogueEnv
    http: aiohttp.ClientSession
    #: the sampling fields the agent's body carries for the sampling values set (the taskset's
    #: :meth:`~rlver_sentient.taskset.SentientTasksetConfig.agent_fields`: what ``rlver eval`` sends)
    agent_fields: Callable[[Mapping[str, Any]], dict[str, Any]]
    #: the sampling values the run set for the agent (verifiers' ``--sampling.*``), as the harness saw them
    stated: dict[str, Any] | None = None
    reply: Completion | None = None


class SentientState(vf.State):
    """A trace's live state: the exchange the env opened (never serialised)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    exchange: Any = Field(default=None, exclude=True)
