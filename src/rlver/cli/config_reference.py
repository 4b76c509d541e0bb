"""docs/config.md, written from the pydantic models: every key of a training config and an evaluation
config, its type and bounds, its default and its description.

The models are the one home of each key; this page is their printout, so it cannot drift from them.
``make config-docs`` rewrites it (``python -m rlver.cli.config_reference docs/config.md``), and
``tests/test_config_reference.py`` fails when it is out of date or a field has no description.

A block whose class depends on a name (``algorithm`` on ``algorithm.name``, ``simulator`` on
``simulator.kind``, ``simulator.prompts`` on its ``name``, ``rollout.backend_settings`` on
``rollout.backend``) is printed once per registered choice, each with the keys only it adds.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from rlver.io import atomic_write_text

HEADER = """# Configuration reference

Every key of the two config files rlver reads, generated from the pydantic models
(`make config-docs`; do not edit by hand). A training config is what `rlver train --config FILE`
reads (presets in `src/rlver/train/presets/`); an evaluation config is what `rlver eval --config FILE`
reads. Any key can also be set on the command line with `--set key.path=value`. Unknown keys are
refused, naming their path. `rlver config show` prints a resolved config.
"""


@dataclass(frozen=True)
class Variant:
    """A block whose class is chosen by a name: where it sits, the key that names it, and each
    registered name with its class."""

    base: type[BaseModel]
    tag: str
    choices: Callable[[], list[tuple[str, type[BaseModel]]]]


def _algorithms() -> list[tuple[str, type[BaseModel]]]:
    from rlver.train.algorithms import ALGORITHMS

    return [(name, ALGORITHMS.settings_class(name)) for name in ALGORITHMS.names()]  # type: ignore[misc]


def _backends() -> list[tuple[str, type[BaseModel]]]:
    from rlver.train.backends import BACKENDS

    return [(name, BACKENDS.get(name).settings_class) for name in BACKENDS.names()]


def _simulator_kinds() -> list[tuple[str, type[BaseModel]]]:
    from rlver.simulator.spec import KINDS, simulator_kind

    return [(name, spec) for name in KINDS.names() if (spec := simulator_kind(name).spec) is not None]


def _protocols() -> list[tuple[str, type[BaseModel]]]:
    from rlver.simulator.llm.protocols import PROTOCOLS

    return list(PROTOCOLS.items())


def variants() -> list[Variant]:
    from rlver.simulator.llm.protocols import LLMUserPrompts
    from rlver.simulator.spec import SimulatorSpec
    from rlver.train.algorithms.base import AlgorithmSettings
    from rlver.train.backends.settings import BackendSettings

    return [
        Variant(AlgorithmSettings, "name", _algorithms),
        Variant(BackendSettings, "backend", _backends),
        Variant(SimulatorSpec, "kind", _simulator_kinds),
        Variant(LLMUserPrompts, "name", _protocols),
    ]


def roots() -> list[tuple[str, type[BaseModel]]]:
    """The two files a user writes, by the title of their part of the page."""
    from rlver.eval.config import EvalConfig
    from rlver.integrations.verl.config import VerlTrainConfig

    return [("Training config", VerlTrainConfig), ("Evaluation config", EvalConfig)]


# -- one field ------------------------------------------------------------------------------------------
def type_text(annotation: Any) -> str:
    """A field's type as a reader writes it in YAML (``int``, ``one of a, b``, ``list of str``...)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" if a is not None else "`null`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [type_text(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or `null`" if type(None) in args else "")
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin in (list, tuple, set, frozenset) or (origin and getattr(origin, "__name__", "") == "Sequence"):
        return f"list of {type_text(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {type_text(args[0])} to {type_text(args[1])}" if args else "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"block ({annotation.__name__})"
    if origin is not None and getattr(origin, "__name__", "") == "SerializeAsAny":
        return type_text(args[0])
    name = getattr(annotation, "__name__", None)
    return {"str": "text", "bool": "true/false", "float": "number", "int": "integer"}.get(
        name or "", name or str(annotation)
    )


def bounds_text(field: FieldInfo) -> str:
    """The field's numeric and length bounds (``≥ 1``, ``≤ 100``, ``1 to 1000 characters``...)."""
    parts: list[str] = []
    for rule in field.metadata:
        for kind, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(rule, kind, None)
            if value is not None and isinstance(rule, annotated_types.BaseMetadata):
                parts.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value}")
        if isinstance(rule, annotated_types.MinLen):
            parts.append(f"at least {rule.min_length:,} long")
        if isinstance(rule, annotated_types.MaxLen):
            parts.append(f"at most {rule.max_length:,} long")
    return ", ".join(parts)


def default_text(field: FieldInfo) -> str:
    """The default as YAML would state it; a block's default is its own section's defaults."""
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "its defaults"
    return f"`{json.dumps(value, ensure_ascii=False, default=str)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# -- the page --------------------------------------------------------------------------------------------
def _nested(annotation: Any) -> Iterator[type[BaseModel]]:
    """The model classes a field's type holds (through ``X | None``, ``SerializeAsAny[X]``...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _nested(arg)


def _variant_of(model: type[BaseModel]) -> Variant | None:
    return next((v for v in variants() if v.base is model), None)


@dataclass
class Page:
    """The page as it is written: its parts, and where each block class was first printed."""

    parts: list[str]
    printed: dict[type[BaseModel], str]
    #: ``Model.field`` of each printed field without a description
    missing: list[str] = field(default_factory=list)

    def block(self, path: str, model: type[BaseModel], heading: str | None = None) -> None:
        """``model``'s table at ``path`` (or a pointer to where it was printed), then its blocks."""
        shown = f"`{path}`" if path else "top level"
        if model in self.printed:
            self.parts.append(f"### {shown}\n\nThe keys of `{self.printed[model]}` above.\n")
            return
        self.printed[model] = path
        variant = _variant_of(model)
        skip: set[str] = set()
        if variant is not None:
            shown += f" (every `{variant.tag}`)"
        nested = self.table(heading or shown, model, path, skip)
        if variant is not None:
            for name, cls in variant.choices():
                own = [k for k in cls.model_fields if k not in model.model_fields]
                if own:
                    where = f"`{path}` with `{variant.tag}: {name}`"
                    nested += self.table(where, cls, path, set(model.model_fields))
        for key, inner in nested:
            self.block(key, inner)

    def table(
        self, heading: str, model: type[BaseModel], path: str, skip: set[str]
    ) -> list[tuple[str, type[BaseModel]]]:
        """One table: a row per field not in ``skip``; returns the blocks its fields hold."""
        doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())
        # the heading's own line is the table's caption: no blank line after it (a page of ~45 tables
        # stays within the docs' 500-line cap with room for the settings an addition brings)
        rows = [f"### {heading}", *([f"{_cell(doc)}\n"] if doc else [])]
        rows += ["| key | type | default | description |", "|---|---|---|---|"]
        nested: list[tuple[str, type[BaseModel]]] = []
        for name, info in model.model_fields.items():
            if name in skip:
                continue
            key = f"{path}.{name}" if path else name
            bounds = bounds_text(info)
            kind = type_text(info.annotation) + (f" ({bounds})" if bounds else "")
            description = (info.description or "").strip()
            if not description:
                owner = next(c for c in model.__mro__ if name in getattr(c, "__annotations__", {}))
                self.missing.append(f"{owner.__module__}.{owner.__qualname__}.{name}")
            rows.append(f"| `{key}` | {_cell(kind)} | {_cell(default_text(info))} | {_cell(description)} |")
            nested += [(key, inner) for inner in _nested(info.annotation)]
        self.parts.append("\n".join(rows) + "\n")
        return nested


def render() -> str:
    """The whole page."""
    page = Page([HEADER], {})
    for title, root in roots():
        page.parts.append(f"## {title}\n")
        page.block("", root)
    return "\n".join(page.parts)


def missing_descriptions() -> list[str]:
    """``Model.field`` of every field the page prints without a description."""
    page = Page([], {})
    for _, root in roots():
        page.block("", root)
    return sorted(set(page.missing))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if not args:
        sys.stdout.write(text)
    else:
        atomic_write_text(Path(args[0]), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
