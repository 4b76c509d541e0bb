"""Build the run's user simulator from a :class:`SimulatorSpec` (a config block or CLI flags).

The simulator kinds are declared once, in :data:`~rlver.simulator.spec.KINDS` (a
:class:`~rlver.registry.Registry` of :class:`~rlver.simulator.spec.SimulatorKind` entries: a name, a
one-line description, the kind's spec class, its builder, whether it needs a model). The config schema
(``SimulatorSpec.kind``) and every command's ``--simulator`` choices and help (``rlver eval``,
``chat``, ``probe``, ``calibrate``) are read from it, so they cannot disagree, and an unknown kind is
refused in the registry's one wording.

Adding a simulator kind takes one new file plus one registry line:

1. ``simulator/<kind>.py``: a :class:`~rlver.simulator.base.UserSimulator` subclass, its spec (a
   :class:`~rlver.simulator.spec.SimulatorSpec` subclass with ``kind: Literal["<kind>"]`` and the
   options only it reads) and a builder ``build(spec, model: ChatModel | None) -> UserSimulator``;
2. one line in :data:`~rlver.simulator.spec.KINDS`:
   ``SimulatorKind("<kind>", "what it is", "rlver.simulator.<kind>:build", "rlver.simulator.<kind>:Spec",
   needs_model=...)``. The entry is lazy (``"module:attr"``), so the spec module, which imports
   :mod:`rlver.simulator.spec`, is imported when a block names it, with no import cycle.

A kind that cannot be built from a spec alone (``replay`` plays back recorded dialogues, so only
``rlver calibrate``, which reads them, can build it) has no spec and no builder: configs and the
other commands do not offer it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from rlver.llm.base import ChatModel
from rlver.registry import Registry
from rlver.simulator.base import UserSimulator
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.spec import KINDS, SimulatorKind, SimulatorSpec, simulator_kind

# The simulators themselves (offline: numpy and the lexicons; sentient: the model clients) are imported
# by their builders, and the kinds' modules when first named: every `rlver` command imports this
# module for the kinds' --help text.

__all__ = [
    "KINDS",
    "SimulatorKind",
    "SimulatorSpec",
    "build_simulator",
    "kind_names",
    "kinds",
    "refuse_unfit_profiles",
    "simulator_kind",
]

#: Builds a kind's simulator from a spec; the model argument replaces building one from ``spec.model``.
Builder = Callable[[SimulatorSpec, ChatModel | None], UserSimulator]


def build_simulator(spec: SimulatorSpec, *, model: ChatModel | None = None) -> UserSimulator:
    """The simulator ``spec`` names. ``model`` (optional) replaces building one from ``spec.model``.

    A setting the chosen simulator never reads (``SimulatorSpec.inert_settings``) is warned of here, as
    the run starts: it was set for a reason, and the run will not do what it says.
    """
    get_behaviour_checked(spec.behaviour)
    for key, why in spec.inert_settings().items():
        warnings.warn(
            f"simulator.{key}={spec.setting(key)!r} has no effect with this simulator ({spec.kind}): {why}",
            stacklevel=2,
        )
    build: Builder | None = KINDS.get(spec.kind)
    assert build is not None  # SimulatorSpec accepts only kinds built from a spec
    return build(spec, model)


def kinds(*, from_spec: bool = True) -> Registry[Any]:
    """The kinds a command offers: those built from a spec, or (``from_spec=False``) every kind,
    including those a command builds itself (replay). ``kinds().check_flag(name, "--simulator")``
    refuses an unknown one (exit 2) in the registry's wording; ``kinds().help()`` is the flag's help."""
    return SimulatorSpec.from_blocks() if from_spec else KINDS


def kind_names(*, from_spec: bool = True) -> tuple[str, ...]:
    """The kinds, in registry order; ``from_spec=False`` adds those a command builds itself (replay)."""
    return kinds(from_spec=from_spec).names()


def get_behaviour_checked(name: str | None) -> None:
    """Fail at start-up, with the list of valid modes, on an unknown behaviour name."""
    get_behaviour(name)


def refuse_unfit_profiles(spec: SimulatorSpec, profiles: Any, where: str) -> None:
    """Refuse before any work (ConfigError, exit 2) a profile set the spec's protocol cannot play, e.g.
    a published prompt set on profiles not in the published format (``where``: the set, as the user
    named it). Kinds without a protocol play any profile."""
    protocol = getattr(spec, "prompts", None)
    if protocol is not None and hasattr(protocol, "refuse_unfit_profiles"):
        protocol.refuse_unfit_profiles(profiles, getattr(spec, "prompt_language", None), where)
