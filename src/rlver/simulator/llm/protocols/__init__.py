"""The sentient user's prompt protocols, declared once: one line each in :data:`PROTOCOLS` (a
:class:`~rlver.registry.Registry` of lazy entries, kept in :mod:`.base` beside the class it lists, so that
each protocol's module can import the base without an import cycle).

See :mod:`rlver.simulator.llm.protocols.base` for what a protocol is and how to add one.
"""

from __future__ import annotations

from rlver.errors import ConfigError
from rlver.registry import UnknownName
from rlver.simulator.llm.protocols.base import (
    PROTOCOLS,
    DialogueStart,
    LLMUserPrompts,
    ProtocolDialogue,
    ReplyStep,
)


def protocol_named(name: str) -> LLMUserPrompts:
    """The protocol ``name`` with its default options, or a :class:`~rlver.errors.ConfigError` (exit 2)
    in the registry's wording."""
    try:
        protocol: LLMUserPrompts = PROTOCOLS.get(name)()
    except UnknownName as exc:
        raise ConfigError(str(exc)) from None
    return protocol


__all__ = [
    "PROTOCOLS",
    "DialogueStart",
    "LLMUserPrompts",
    "ProtocolDialogue",
    "ReplyStep",
    "protocol_named",
]
