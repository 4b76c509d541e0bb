"""Build the run's user simulator from a :class:`SimulatorSpec` (a config block or CLI flags).

The simulator kinds are declared once, in :data:`KINDS`: each :class:`SimulatorKind` has a name, a
one-line description, how to build it from a spec, and which options it needs. The config schema
(``SimulatorSpec.kind``) and every command's ``--simulator`` choices and help (``rlver eval``,
``chat``, ``probe``, ``calibrate``) are read from it, so they cannot disagree.

Adding a simulator kind takes one new file plus one registry line:

1. ``simulator/<kind>.py``: a :class:`~rlver.simulator.base.UserSimulator` subclass and a builder
   ``build(spec: SimulatorSpec, model: ChatModel | None) -> UserSimulator`` that reads what it needs
   from the spec (``spec.model`` when the kind talks to an LLM);
2. one line in :data:`KINDS`: ``SimulatorKind("<kind>", "what it is", build, needs_model=...)``.

A kind that cannot be built from a spec alone (``replay`` plays back recorded dialogues, so only
``rlver calibrate``, which reads them, can build it) has ``build=None``: configs and the other
commands do not offer it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rlver.errors import ConfigError, InputError, Problem
from rlver.llm.base import ChatModel, SamplingParams
from rlver.llm.cache import CachedChatModel
from rlver.llm.factory import build_chat_model
from rlver.llm.spec import ModelSpec
from rlver.profiles.schema import Difficulty
from rlver.simulator.base import UserSimulator
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import MAX_CHANGE, EmotionRules

# The simulators themselves (offline: numpy and the lexicons; sentient: the prompt sets) are imported
# by their builders: every `rlver` command imports this module for the kinds' --help text.


class SimulatorSpec(BaseModel):
    """Which simulated user a run talks to.

    ``kind`` names an entry of :data:`KINDS` that can be built from a spec: ``"offline"``, the
    deterministic, LLM-free proxy (default for the demo and CI), or ``"llm"``, the sentient user
    backed by ``model``. ``difficulty``/``behaviour`` of ``None``
    follow each profile (then ``normal``/``cooperative``). ``sampling`` overrides the simulator's
    sampling (default: the model spec's sampling when set explicitly, else temperature 0.7).
    """

    model_config = ConfigDict(extra="forbid")

    #: a kind of :data:`KINDS` built from a spec (the schema lists them as an enum)
    kind: str = Field(
        default="offline", json_schema_extra=lambda schema: schema.update(enum=list(kind_names()))
    )
    model: ModelSpec | None = None
    difficulty: Difficulty | None = None
    behaviour: str | None = None
    max_change: int = Field(default=MAX_CHANGE, ge=0)
    seed: int = 0
    sampling: SamplingParams | None = None
    prompt_language: Literal["en", "zh"] | None = None
    #: offline only: use the packaged MiniLM sentence embedder (needs the ``[embed]`` extra).
    embed: bool = False
    #: offline only: Chinese profiles use the learned appraisal fitted on released SAGE judgements
    #: (``false``: the lexicon appraisal for every language, as before).
    learned: bool = True
    #: llm only: cache answers of a greedy (temperature 0) simulator in this sqlite file;
    #: ``"auto"`` = ``$RLVER_CACHE_DIR/simulator.sqlite`` (default ``~/.cache/rlver``), ``None`` = off.
    cache: str | None = "auto"
    #: llm only: the prompts. ``sage`` (default) follows the published simulator's structure;
    #: ``rlver-v1`` is our earlier prompt set (-10..+10 rubric, difficulty paragraph, one-JSON reply).
    protocol: Literal["sage", "rlver-v1"] = "sage"
    #: llm + sage only: add the -10..+10 magnitude rubric (the published prompt states no scale).
    magnitude_rubric: bool = False
    #: llm + sage only: add the difficulty paragraph (the published benchmark simulator has none).
    difficulty_paragraph: bool = False
    # llm + sage only: what the simulator is shown beyond what SAGE showed it; all off, as SAGE
    # (rlver.simulator.sentient.prompts.sage.SageOptions; docs/protocol.md says why one might want each).
    #: the profile's traits and conversational style
    show_traits: bool = False
    #: each tier's numeric band (S 100, A 70-99, ...)
    tier_bands: bool = False
    #: the emotion number and tier in both steps, the reply continuing the appraisal exchange
    number_and_tier: bool = False
    #: the person appraises the reply (off: a third-person emotion analyst, as SAGE)
    first_person_appraiser: bool = False
    #: a section telling the simulator that conversation text is data, never instructions
    injection_guard: bool = False
    #: the whole appraisal, the stated change included, in the reply step
    full_appraisal_in_reply: bool = False

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        names = kind_names()
        if value not in names:
            if value in KINDS:
                raise ValueError(
                    f"kind {value!r} cannot be built from a config: only `rlver calibrate --simulator "
                    f"{value}` builds it, from the files it reads; expected {_or_list(names)}"
                )
            raise ValueError(f"expected {_or_list(names)}, got {value!r}")
        return value

    @model_validator(mode="after")
    def _model_for_llm(self) -> SimulatorSpec:
        if KINDS[self.kind].needs_model and self.model is None:
            raise ValueError(f"kind {self.kind!r} needs a 'model' (a model spec with at least 'model: NAME')")
        return self


def default_cache_path() -> Path:
    root = os.environ.get("RLVER_CACHE_DIR") or str(Path.home() / ".cache" / "rlver")
    return Path(root) / "simulator.sqlite"


def simulator_sampling(spec: SimulatorSpec) -> SamplingParams:
    """The sampling the LLM simulator will use (see :class:`SimulatorSpec`)."""
    from rlver.simulator.sentient.user import DEFAULT_SAMPLING, SIMULATOR_MAX_TOKENS

    chosen = DEFAULT_SAMPLING
    if spec.sampling is not None:
        chosen = spec.sampling
    elif spec.model is not None and "sampling" in spec.model.model_fields_set:
        chosen = spec.model.sampling
    if "max_tokens" in chosen.model_fields_set:
        return chosen
    # No cap stated: the simulator's own high cap, not SamplingParams' 512 (see SIMULATOR_MAX_TOKENS).
    return chosen.model_copy(update={"max_tokens": SIMULATOR_MAX_TOKENS})


def build_simulator(spec: SimulatorSpec, *, model: ChatModel | None = None) -> UserSimulator:
    """The simulator ``spec`` names. ``model`` (optional) replaces building one from ``spec.model``."""
    get_behaviour_checked(spec.behaviour)
    build = KINDS[spec.kind].build
    assert build is not None  # SimulatorSpec accepts only kinds built from a spec
    return build(spec, model)


def _build_offline(spec: SimulatorSpec, model: ChatModel | None) -> UserSimulator:
    """The offline proxy; ``model`` is unused (it talks to no LLM)."""
    from rlver.simulator.offline import OfflineSimulator, load_minilm_embedder

    embedder = None
    if spec.embed:
        try:
            embedder = load_minilm_embedder()
        except ConfigError as exc:
            raise ConfigError(f"simulator.embed: {exc} (or set simulator.embed=false)") from None
    return OfflineSimulator(
        seed=spec.seed,
        difficulty=spec.difficulty,
        behaviour=spec.behaviour,
        rules=EmotionRules(max_change=spec.max_change),
        embedder=embedder,
        learned=spec.learned,
    )


def _build_llm(spec: SimulatorSpec, model: ChatModel | None) -> UserSimulator:
    """The sentient user on ``model`` (default: built from ``spec.model``, cached when greedy)."""
    from rlver.simulator.sentient.user import SentientSimulator

    sampling = simulator_sampling(spec)
    if model is None:
        assert spec.model is not None  # checked by the validator
        model = build_chat_model(spec.model)
        if spec.cache and not spec.model.cache and sampling.temperature == 0.0:
            path = default_cache_path() if spec.cache == "auto" else Path(spec.cache)
            model = CachedChatModel(model, path)
    return SentientSimulator(
        model,
        sampling=sampling,
        difficulty=spec.difficulty,
        behaviour=spec.behaviour,
        rules=EmotionRules(max_change=spec.max_change),
        prompt_language=spec.prompt_language,
        protocol=spec.protocol,
        magnitude_rubric=spec.magnitude_rubric,
        difficulty_paragraph=spec.difficulty_paragraph,
        sage_options=sage_options(spec),
    )


def sage_options(spec: SimulatorSpec) -> Any:
    """The spec's :class:`~rlver.simulator.sentient.prompts.sage.SageOptions` (one field each, same names)."""
    from rlver.simulator.sentient.prompts.sage import SageOptions

    return SageOptions(**{name: getattr(spec, name) for name in SageOptions.names()})


# -- the registry -----------------------------------------------------------------------------------

#: The SimulatorSpec fields that are SageOptions (kept here so the registry needs no prompt import).
SAGE_OPTION_NAMES = (
    "show_traits",
    "tier_bands",
    "number_and_tier",
    "first_person_appraiser",
    "injection_guard",
    "full_appraisal_in_reply",
)

#: Builds a kind's simulator from a spec; the model argument replaces building one from ``spec.model``.
Builder = Callable[[SimulatorSpec, ChatModel | None], UserSimulator]


@dataclass(frozen=True)
class SimulatorKind:
    """One kind of simulated user.

    ``build`` is ``None`` for a kind that needs more than a spec (``replay``: recorded dialogues).
    ``needs_model``: the spec must carry ``model`` (the CLI asks for ``--sim-model``). ``options``:
    the :class:`SimulatorSpec` fields only this kind reads (the spec accepts them with any kind; a
    command applies a kind-specific flag, e.g. ``rlver calibrate --sim-temperature``, only to a kind
    that reads it).
    """

    name: str
    description: str
    build: Builder | None
    needs_model: bool = False
    options: tuple[str, ...] = ()


KINDS: dict[str, SimulatorKind] = {
    k.name: k
    for k in (
        SimulatorKind("replay", "oracle: the recorded judgements of the files given", None),
        SimulatorKind(
            "offline", "no LLM: the deterministic proxy", _build_offline, options=("embed", "learned")
        ),
        SimulatorKind(
            "llm",
            "an LLM plays the user; needs --sim-model",
            _build_llm,
            needs_model=True,
            options=(
                "model",
                "sampling",
                "cache",
                "protocol",
                "magnitude_rubric",
                "difficulty_paragraph",
                *SAGE_OPTION_NAMES,
            ),
        ),
    )
}


def kind_names(*, from_spec: bool = True) -> tuple[str, ...]:
    """The kinds, in registry order; ``from_spec=False`` adds those a command builds itself (replay)."""
    return tuple(k.name for k in KINDS.values() if k.build is not None or not from_spec)


def _or_list(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def kinds_help(*, from_spec: bool = True) -> str:
    """``--simulator`` help text: every kind with its description."""
    return "; ".join(f"{k} ({KINDS[k].description})" for k in kind_names(from_spec=from_spec)) + "."


def check_kind(name: str, *, flag: str = "--simulator", from_spec: bool = True) -> SimulatorKind:
    """The kind a command-line flag names, or an :class:`InputError` (exit code 2) listing the choices."""
    names = kind_names(from_spec=from_spec)
    if name not in names:
        raise InputError(Problem(flag, None, None, f"expected {_or_list(names)}, got {name!r}"))
    return KINDS[name]


def get_behaviour_checked(name: str | None) -> None:
    """Fail at start-up, with the list of valid modes, on an unknown behaviour name."""
    get_behaviour(name)
