"""Build the run's user simulator from a :class:`SimulatorSpec` (a config block or CLI flags).

The simulator kinds are declared once, in :data:`KINDS`: each :class:`SimulatorKind` has a name, a
one-line description, how to build it from a spec, and which options it needs. The config schema
(``SimulatorSpec.kind``) and every command's ``--simulator`` choices and help (``rlver eval``,
``chat``, ``probe``, ``calibrate``) are read from it, so they cannot disagree.

Adding a simulator kind takes one new file plus one registry line:

1. ``simulator/<kind>.py``: a :class:`~rlver.simulator.base.UserSimulator` subclass, its spec (a
   :class:`~rlver.simulator.spec.SimulatorSpec` subclass with ``kind: Literal["<kind>"]`` and the
   options only it reads) and a builder ``build(spec, model: ChatModel | None) -> UserSimulator``;
2. one line in :data:`KINDS`: ``SimulatorKind("<kind>", "what it is", Spec, build, needs_model=...)``.

Config blocks, ``SimulatorSpec.model_validate`` and the JSON schema find the spec through the
registry (see :mod:`rlver.simulator.spec`). A kind that cannot be built from a spec alone (``replay``
plays back recorded dialogues, so only ``rlver calibrate``, which reads them, can build it) has no
spec and no builder: configs and the other commands do not offer it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlver.errors import InputError, Problem
from rlver.llm.base import ChatModel
from rlver.simulator.base import UserSimulator
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.offline import spec as offline_spec
from rlver.simulator.sentient import spec as sentient_spec
from rlver.simulator.spec import SimulatorSpec, or_list

# The simulators themselves (offline: numpy and the lexicons; sentient: the model clients) are imported
# by their builders: every `rlver` command imports this module for the kinds' --help text.

__all__ = ["KINDS", "SimulatorKind", "SimulatorSpec", "build_simulator", "check_kind", "kind_names"]


def build_simulator(spec: SimulatorSpec, *, model: ChatModel | None = None) -> UserSimulator:
    """The simulator ``spec`` names. ``model`` (optional) replaces building one from ``spec.model``."""
    get_behaviour_checked(spec.behaviour)
    build = KINDS[spec.kind].build
    assert build is not None  # SimulatorSpec accepts only kinds built from a spec
    return build(spec, model)


# -- the registry -----------------------------------------------------------------------------------

#: Builds a kind's simulator from a spec; the model argument replaces building one from ``spec.model``.
Builder = Callable[[SimulatorSpec, ChatModel | None], UserSimulator]


@dataclass(frozen=True)
class SimulatorKind:
    """One kind of simulated user.

    ``spec`` and ``build`` are ``None`` for a kind that needs more than a spec (``replay``: recorded
    dialogues). ``needs_model``: the spec must carry ``model`` (the CLI asks for ``--sim-model``).
    """

    name: str
    description: str
    spec: type[SimulatorSpec] | None
    build: Builder | None
    needs_model: bool = False

    @property
    def options(self) -> tuple[str, ...]:
        """The spec fields only this kind reads (a command applies a kind-specific flag, e.g.
        ``rlver calibrate --sim-temperature``, only to a kind that reads it)."""
        if self.spec is None:
            return ()
        return tuple(n for n in self.spec.model_fields if n not in SimulatorSpec.model_fields)


KINDS: dict[str, SimulatorKind] = {
    k.name: k
    for k in (
        SimulatorKind("replay", "oracle: the recorded judgements of the files given", None, None),
        SimulatorKind(
            "offline", "no LLM: the deterministic proxy", offline_spec.OfflineSpec, offline_spec.build
        ),
        SimulatorKind(
            "llm",
            "an LLM plays the user; needs --sim-model",
            sentient_spec.SentientSpec,
            sentient_spec.build,
            needs_model=True,
        ),
    )
}


SimulatorSpec.read_registry(lambda: {k.name: k.spec for k in KINDS.values()})


def kind_names(*, from_spec: bool = True) -> tuple[str, ...]:
    """The kinds, in registry order; ``from_spec=False`` adds those a command builds itself (replay)."""
    return tuple(k.name for k in KINDS.values() if k.build is not None or not from_spec)


def kinds_help(*, from_spec: bool = True) -> str:
    """``--simulator`` help text: every kind with its description."""
    return "; ".join(f"{k} ({KINDS[k].description})" for k in kind_names(from_spec=from_spec)) + "."


def check_kind(name: str, *, flag: str = "--simulator", from_spec: bool = True) -> SimulatorKind:
    """The kind a command-line flag names, or an :class:`InputError` (exit code 2) listing the choices."""
    names = kind_names(from_spec=from_spec)
    if name not in names:
        raise InputError(Problem(flag, None, None, f"expected {or_list(names)}, got {name!r}"))
    return KINDS[name]


def get_behaviour_checked(name: str | None) -> None:
    """Fail at start-up, with the list of valid modes, on an unknown behaviour name."""
    get_behaviour(name)
