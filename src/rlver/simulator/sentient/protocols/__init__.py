"""The sentient user's prompt protocols, declared once: one line each in :data:`PROTOCOLS`.

See :mod:`rlver.simulator.sentient.protocols.base` for what a protocol is and how to add one.
"""

from __future__ import annotations

from rlver.errors import ConfigError
from rlver.simulator.sentient.protocols.base import ProtocolDialogue, ReplyStep, SentientProtocol
from rlver.simulator.sentient.protocols.rlver_published import RlverPublishedProtocol
from rlver.simulator.sentient.protocols.sage import SageProtocol
from rlver.simulator.sentient.protocols.sage_published import SagePublishedProtocol
from rlver.simulator.sentient.protocols.v1 import V1Protocol

#: ``sage``: the published simulator's structure in rlver's words; ``sage-published``: SAGE's own text,
#: fetched; ``rlver-published``: the published training simulator's text, fetched; ``rlver-v1``: our
#: earlier prompts.
PROTOCOLS: dict[str, type[SentientProtocol]] = {
    "sage": SageProtocol,
    "sage-published": SagePublishedProtocol,
    "rlver-published": RlverPublishedProtocol,
    "rlver-v1": V1Protocol,
}
SentientProtocol.read_registry(lambda: PROTOCOLS)


def protocol_named(name: str) -> SentientProtocol:
    """The protocol ``name`` with its default options, or a ConfigError listing the protocols."""
    if name not in PROTOCOLS:
        raise ConfigError(f"simulator protocol {name!r}: choose one of {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]()


__all__ = ["PROTOCOLS", "ProtocolDialogue", "ReplyStep", "SentientProtocol", "protocol_named"]
