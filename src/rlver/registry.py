"""One registry type for every name a user may choose: algorithms, simulator kinds, model kinds,
rollout backends, prompt protocols, reward modes and commands.

Why one type: the seven tables were built six ways, broke their spec <-> registry import loops three
ways and refused a typo in four wordings. A :class:`Registry` holds :class:`Entry` rows (a name, a
one-line description, the settings class the entry reads, and the thing itself) and answers the
questions every caller asks the same way: is the name known (:meth:`Registry.check`, one wording for
every table), what does it build (:meth:`Registry.get`), what are the choices (:meth:`Registry.names`,
:meth:`Registry.help`).

An entry's target and settings class may be given lazily as ``"package.module:attr"``: the string is
imported on first use. So a table may name a built-in entry that lives in a module importing the
table's own module (a settings class that validates against the table, say) without an import cycle,
and listing the choices in ``--help`` imports nothing heavy. The error is a ``ValueError`` subclass, so a
pydantic validator that calls :meth:`Registry.check` reports it under the field's path (exit 2 through
the config loader); :meth:`Registry.check_flag` gives the same message as a command-line
:class:`~rlver.errors.InputError` (exit 2) naming the flag.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rlver.errors import InputError, Problem, nearest

T = TypeVar("T")


class UnknownName(ValueError):
    """A name no entry of a registry has: ``unknown X 'y'; did you mean 'z'? known: a, b``."""


def resolve(ref: Any) -> Any:
    """``ref`` itself, or the attribute a ``"module:attr"`` string names (imported now)."""
    if not isinstance(ref, str):
        return ref
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"a lazy registry entry is 'package.module:attribute', got {ref!r}")
    value: Any = importlib.import_module(module)
    for part in attr.split("."):
        value = getattr(value, part)
    return value


@dataclass
class Entry(Generic[T]):
    """One choice: its name, what it is in one line, the settings class it reads (if any), and its
    target (the class, function or object the registry hands out), each possibly ``"module:attr"``.
    A string target is always such a reference: a registry hands out objects, never plain strings."""

    name: str
    description: str
    target: T | str
    settings: type | str | None = None
    _resolved: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def load(self) -> T:
        """The target, imported on first use when it was given as ``"module:attr"``."""
        if "target" not in self._resolved:
            self._resolved["target"] = resolve(self.target)
        return self._resolved["target"]  # type: ignore[no-any-return]

    def settings_class(self) -> type | None:
        """The settings class, imported on first use when given as ``"module:attr"``."""
        if "settings" not in self._resolved:
            self._resolved["settings"] = resolve(self.settings)
        return self._resolved["settings"]  # type: ignore[no-any-return]


class Registry(Generic[T]):
    """The entries of one kind of choice (``what``: "algorithm", "rollout backend", ...), in the order
    they were added (the order ``--help`` lists them in)."""

    def __init__(self, what: str, entries: Iterable[Entry[T]] = ()) -> None:
        self.what = what
        self._entries: dict[str, Entry[T]] = {}
        for entry in entries:
            self.add_entry(entry)

    # -- adding -----------------------------------------------------------------------------------
    def add_entry(self, entry: Entry[T]) -> Entry[T]:
        """Add (or replace: a plugin may override a built-in) the entry under its name."""
        if not entry.name or entry.name != entry.name.strip():
            raise ValueError(f"a {self.what} needs a name without surrounding spaces, got {entry.name!r}")
        self._entries[entry.name] = entry
        return entry

    def add(
        self, name: str, target: T | str, description: str, settings: type | str | None = None
    ) -> Entry[T]:
        """Add (or replace) ``name``; ``target`` and ``settings`` may be ``"module:attr"``."""
        return self.add_entry(Entry(name, description, target, settings))

    def remove(self, name: str) -> None:
        """Drop ``name`` (for tests that register an entry for their own run only)."""
        self._entries.pop(self.check(name))

    # -- asking -----------------------------------------------------------------------------------
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> tuple[Entry[T], ...]:
        return tuple(self._entries.values())

    def items(self) -> tuple[tuple[str, T], ...]:
        """``(name, target)`` for every entry, in order (importing the lazy ones)."""
        return tuple((e.name, e.load()) for e in self._entries.values())

    def only(self, keep: Callable[[Entry[T]], bool]) -> Registry[T]:
        """The entries ``keep`` accepts, as a registry of the same ``what`` (the simulator kinds a
        config may name, say): its check lists only those, in the same wording."""
        return Registry(self.what, [e for e in self._entries.values() if keep(e)])

    def unknown_message(self, name: str) -> str:
        """The one wording every registry refuses a name in."""
        near = nearest(name, self._entries)
        hint = f"; did you mean {near!r}?" if near else ";"
        known = ", ".join(self._entries) or "(none)"
        return f"unknown {self.what} {name!r}{hint} known: {known}"

    def check(self, name: str) -> str:
        """``name`` if an entry has it, else :class:`UnknownName` (a ``ValueError``, for validators)."""
        if name not in self._entries:
            raise UnknownName(self.unknown_message(name))
        return name

    def check_flag(self, name: str, flag: str) -> str:
        """:meth:`check` for a command-line flag: the same message as an :class:`InputError` (exit 2)."""
        if name not in self._entries:
            raise InputError(Problem(flag, None, None, self.unknown_message(name)))
        return name

    def entry(self, name: str) -> Entry[T]:
        return self._entries[self.check(name)]

    def get(self, name: str) -> T:
        """The target of ``name`` (imported on first use), or :class:`UnknownName`."""
        return self.entry(name).load()

    def settings_class(self, name: str) -> type | None:
        return self.entry(name).settings_class()

    def description(self, name: str) -> str:
        return self.entry(name).description

    def help(self) -> str:
        """``a (what a is); b (what b is).``: the choices for a ``--help`` line, importing nothing."""
        return "; ".join(f"{e.name} ({e.description})" for e in self._entries.values()) + "."
