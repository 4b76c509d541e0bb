"""The simulator spec: the settings every kind shares, and how a spec block becomes its kind's own spec.

Each simulator kind declares its own spec class beside the kind (``offline_spec.OfflineSpec``,
``sentient.spec.LLMUserSpec``), a subclass of :class:`SimulatorSpec` holding the options only that
kind reads. ``SimulatorSpec`` itself stands for "one of them": validating a block with it (a config
field typed ``SimulatorSpec``, ``SimulatorSpec.model_validate(block)`` or ``SimulatorSpec(**block)``)
gives the spec of the kind the block names, and its JSON schema lists the kinds' specs as
alternatives told apart by ``kind``. The sentient user's prompt protocols are chosen the same way (by
``name``), so the mechanism is written once, in :class:`Variants`.

Older configs and run manifests wrote one flat block holding every kind's options. They still load:
a key that belongs to another variant (``embed`` under ``kind: llm``, ``show_traits`` under
``protocol: rlver-v1``) is accepted and ignored, as the flat spec did; a key no variant knows is an
error, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ModelWrapValidatorHandler,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from rlver.migrate import drop_keys_of_others
from rlver.profiles.schema import Difficulty
from rlver.registry import Entry, Registry
from rlver.seeding import Seed
from rlver.simulator.emotion import MAX_CHANGE


class Variants(BaseModel):
    """A base model that stands for its variants, told apart by the field named ``tag_field``.

    The base class sets ``tag_field`` (the field's default on the base is the default variant) and
    ``choices``, a :class:`~rlver.registry.Registry` whose entries name the variants lazily; a variant
    is a subclass with a ``Literal`` tag. Validating the base gives the variant the tag names (a bare string is read as
    the tag alone), a field typed as the base serialises the variant it holds, and the base's JSON
    schema is one of the variants' schemas. Used twice: simulator specs (``kind``) and sentient
    protocols (``name``).
    """

    #: the field whose value picks the variant; set by the base class only
    tag_field: ClassVar[str]
    #: A key of another variant set to anything but that variant's default is refused, not dropped
    #: (set where it cannot apply, it would silently do nothing). The sentient protocols say yes; the
    #: simulator kinds keep dropping them (a preset's LLM block under ``--set simulator.kind=offline``).
    refuses_keys_of_others: ClassVar[bool] = False
    #: the base's registry (set by the base class): each entry's settings class is the variant its
    #: name picks, or ``None`` for a name that is known but cannot be read from a block. Read when used
    #: (a registry may gain an entry at run time); its entries are lazy ``"module:attr"`` references,
    #: so this module imports none of the variants that import it.
    choices: ClassVar[Registry[Any]]

    @classmethod
    def from_blocks(cls) -> Registry[Any]:
        """The entries a block can name (those with a settings class), as a registry."""
        return cls.choices.only(lambda entry: entry.settings is not None)

    @classmethod
    def variants(cls) -> Mapping[str, type[Variants]]:
        """The variants a block can name, by tag."""
        return {e.name: e.settings_class() for e in cls.from_blocks().entries()}  # type: ignore[misc]

    @classmethod
    def _is_base(cls) -> bool:
        return "tag_field" in cls.__dict__

    @classmethod
    def accepted_keys(cls) -> set[str]:
        """The keys a variant reads from a block (its fields; more when it moves flat keys itself)."""
        return set(cls.model_fields)

    @classmethod
    def unknown_tag(cls, tag: object) -> str:
        """The registry's wording; a name known but not readable from a block says so (and where)."""
        readable = cls.from_blocks()
        if isinstance(tag, str) and tag in cls.choices:
            known = ", ".join(readable)
            hint = cls.not_from_block_hint(tag)
            return f"{cls.choices.what} {tag!r} cannot be built from a config{hint}; known: {known}"
        return readable.unknown_message(tag if isinstance(tag, str) else repr(tag))

    @classmethod
    def not_from_block_hint(cls, tag: str) -> str:
        return ""

    @classmethod
    def variant_for(cls, data: Mapping[str, Any]) -> type[Variants]:
        """The variant ``data``'s tag names (the default when it names none); ValueError otherwise."""
        tag = data.get(cls.tag_field, cls.model_fields[cls.tag_field].default)
        found = cls.variants().get(tag) if isinstance(tag, str) else None
        if found is None:
            raise ValueError(cls.unknown_tag(tag))
        return found

    def __new__(cls, *args: Any, **data: Any) -> Any:
        """``Base(**block)`` makes the named variant (an unknown tag fails in validation, named)."""
        if cls._is_base():
            try:
                return super().__new__(cls.variant_for(data))
            except ValueError:
                pass
        return super().__new__(cls)

    @model_validator(mode="wrap")
    @classmethod
    def _dispatch(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        if not cls._is_base() or isinstance(data, cls):
            return handler(data)
        if isinstance(data, str):
            data = {cls.tag_field: data}
        if not isinstance(data, Mapping):
            return handler(data)
        return cls.variant_for(data).model_validate(data)

    @model_validator(mode="before")
    @classmethod
    def _read_older_shapes(cls, data: Any) -> Any:
        """Old flat blocks: keys only other variants read are accepted and ignored (as before). With
        :attr:`refuses_keys_of_others`, only when they hold that variant's default (an older flat block
        wrote every variant's keys so); set to anything else, such a key is refused, naming its variants."""
        if cls._is_base() or not isinstance(data, Mapping):
            return data
        others = [v for v in cls.variants().values() if v is not cls]
        mine = cls.accepted_keys()
        for key, value in data.items() if cls.refuses_keys_of_others else ():
            owners = [v for v in others if key in v.model_fields and key not in mine]
            if any(value != v.model_fields[key].get_default(call_default_factory=True) for v in owners):
                raise ValueError(cls._not_mine(key, value, owners))
        return drop_keys_of_others(data, mine, set().union(*(v.accepted_keys() for v in others)))

    @classmethod
    def _not_mine(cls, key: str, value: object, owners: list[type[Variants]]) -> str:
        tag, what = cls.tag_field, cls.choices.what
        names = [str(v.model_fields[tag].default) for v in owners]
        mine = cls.model_fields[tag].default
        return (
            f"{key}={value!r} is a setting of {what} {', '.join(names)} and does nothing under {what} "
            f"{mine!r}: name the {what} it belongs to ({tag}: {names[0]}) or leave the key out"
        )

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """A field typed as the base serialises the variant it holds, with all its fields."""
        schema = handler(source)
        if cls._is_base():
            schema = {
                **schema,
                "serialization": core_schema.wrap_serializer_function_ser_schema(
                    lambda value, nxt: nxt(value), schema=core_schema.any_schema()
                ),
            }
        return schema

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The base's schema: one of the variants' schemas, told apart by the tag."""
        if not cls._is_base():
            return handler(schema)
        return {
            "oneOf": [handler(v.__pydantic_core_schema__) for v in cls.variants().values()],
            "discriminator": {"propertyName": cls.tag_field},
        }


@dataclass
class SimulatorKind(Entry[Any]):
    """One kind of simulated user: a registry entry whose target builds it from a spec
    (``build(spec, model: ChatModel | None) -> UserSimulator``) and whose settings class is its spec.

    Both are ``None`` for a kind that needs more than a spec (``replay``: recorded dialogues).
    What a kind can do is stated here, as attributes, so that no caller branches on its name:
    ``needs_model``: the spec must carry ``model`` (the CLI asks for ``--sim-model``);
    ``prompt_set``: its user is asked a set of prompt texts (its spec's ``protocol``), which the
    benchmark replaces by SAGE's own on SAGE's profiles (``TrainConfig.eval_simulator``,
    ``eval/config.published_benchmark``).
    """

    needs_model: bool = False
    prompt_set: bool = False

    @property
    def spec(self) -> type[SimulatorSpec] | None:
        return self.settings_class()

    @property
    def build(self) -> Any:
        """The builder (imported on first use), or ``None``."""
        return self.load()

    @property
    def options(self) -> tuple[str, ...]:
        """The spec fields only this kind reads (a command applies a kind-specific flag, e.g.
        ``rlver calibrate --sim-temperature``, only to a kind that reads it)."""
        spec = self.spec
        if spec is None:
            return ()
        return tuple(n for n in spec.model_fields if n not in SimulatorSpec.model_fields)


#: The simulator kinds, one line each (adding a kind: its module, then a line here). Lazy entries: the
#: kinds' specs subclass :class:`SimulatorSpec`, so naming them by ``"module:attr"`` makes no cycle, and
#: a command's ``--help`` lists the kinds without importing them.
KINDS: Registry[Any] = Registry(
    "simulator kind",
    [
        SimulatorKind("replay", "oracle: the recorded judgements of the files given", None),
        SimulatorKind(
            "offline",
            "no LLM: the deterministic proxy",
            "rlver.simulator.offline.spec:build",
            "rlver.simulator.offline.spec:OfflineSpec",
        ),
        SimulatorKind(
            "llm",
            "an LLM plays the user; needs --sim-model",
            "rlver.simulator.llm.spec:build",
            "rlver.simulator.llm.spec:LLMUserSpec",
            needs_model=True,
            prompt_set=True,
        ),
    ],
)


def simulator_kind(name: str) -> SimulatorKind:
    """The entry of ``name`` in :data:`KINDS`, or :class:`~rlver.registry.UnknownName`."""
    entry = KINDS.entry(name)
    assert isinstance(entry, SimulatorKind)  # every entry of KINDS is one
    return entry


def asks_prompt_set(kind: object) -> bool:
    """Whether the kind named ``kind`` asks its user a prompt set (:attr:`SimulatorKind.prompt_set`);
    ``False`` for a name that is no kind (a block not yet validated: its validation names the error)."""
    return isinstance(kind, str) and kind in KINDS and simulator_kind(kind).prompt_set


class SimulatorSpec(Variants):
    """Which simulated user a run talks to: the settings every kind shares.

    ``kind`` names an entry of :data:`KINDS` that can be built from a spec:
    ``"offline"`` (default; the deterministic, LLM-free proxy) or ``"llm"`` (the sentient user backed
    by a model). ``difficulty``/``behaviour`` of ``None`` follow each profile (then
    ``normal``/``cooperative``); ``prompt_language`` of ``None`` follows each profile's language.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    tag_field: ClassVar[str] = "kind"
    choices: ClassVar[Registry[Any]] = KINDS

    kind: str = Field(
        default="offline",
        description=(
            "Which simulated user: ``offline`` (default) or ``llm``, the kinds ``--simulator`` lists; "
            "``replay`` is built only by ``rlver calibrate --simulator replay``, from the files it reads."
        ),
    )
    difficulty: Difficulty | None = Field(
        default=None,
        description="How hard the user is to please; ``null`` follows each profile (then ``normal``).",
    )
    behaviour: str | None = Field(
        default=None,
        description=(
            "The user's behaviour (``cooperative``...); ``null`` follows each profile (then ``cooperative``)."
        ),
    )
    max_change: int = Field(
        default=MAX_CHANGE,
        ge=0,
        le=100,
        description="emotion points one appraisal may move (the scale is 0..100, so 100 is no bound at all)",
    )
    seed: Seed = Field(
        default=0,
        description="The simulator's seed (each dialogue's seed is hashed from it and the profile).",
    )
    prompt_language: Literal["en", "zh"] | None = Field(
        default=None,
        description="The language of the simulator's prompts; ``null`` follows each profile's language.",
    )

    @classmethod
    def not_from_block_hint(cls, tag: str) -> str:
        return f": only `rlver calibrate --simulator {tag}` builds it, from the files it reads"

    def inert_settings(self) -> dict[str, str]:
        """The settings this spec holds at a value other than their default that the chosen simulator
        never reads, each with the reason (by its dotted key under ``simulator.``; :meth:`setting`
        reads its value). The simulator's builder warns of each when a run starts, and ``rlver
        explain`` names each. Each kind says its own."""
        return {}

    def setting(self, key: str) -> Any:
        """The value of the dotted ``key`` (``model.retry_empty``) under this spec."""
        value: Any = self
        for part in key.split("."):
            value = getattr(value, part)
        return value
