"""The sentient user's spec and builder (``kind: llm``): the model, its sampling and cache, the prompts.

A config block names the prompt set and its options (``prompts: {name: sage, show_traits: true}``);
older blocks (``protocol: sage`` beside ``show_traits: true``) still load:
:func:`rlver.migrate.renamed` and :func:`rlver.migrate.nest_protocol_options` move them into ``prompts``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from rlver.llm.base import ChatModel, SamplingParams
from rlver.llm.cache import CachedChatModel
from rlver.llm.factory import build_chat_model
from rlver.llm.sampling import is_greedy
from rlver.llm.spec import ModelSpec
from rlver.migrate import nest_protocol_options, renamed
from rlver.simulator.base import UserSimulator
from rlver.simulator.emotion import EmotionRules
from rlver.simulator.llm.protocols import PROTOCOLS, LLMUserPrompts
from rlver.simulator.llm.protocols.base import PublishedTextProtocol
from rlver.simulator.llm.protocols.sage import SageProtocol
from rlver.simulator.spec import SimulatorSpec


def _protocol_option_keys() -> set[str]:
    """Every option of every protocol (a flat block may carry them beside ``protocol``)."""
    return set().union(*(set(p.model_fields) - {"name"} for _, p in PROTOCOLS.items()))


class LLMUserSpec(SimulatorSpec):
    """An LLM plays the user. ``sampling``: the keys given (here, else in the model spec's own
    ``sampling``) on top of the simulator's defaults (temperature 0.7); once read, it states the whole
    sampling the simulator uses (:func:`simulator_sampling`)."""

    kind: Literal["llm"] = Field(default="llm", description="``llm``: an LLM plays the user.")
    model: ModelSpec = Field(
        description=(
            "The model that plays the user (needs ``model`` and, for ``kind: openai``, ``base_url``)."
        )
    )
    sampling: SamplingParams | None = Field(
        default=None,
        description=(
            "The simulator's sampling: the keys given, on top of the simulator's defaults (temperature "
            "0.7); written out in full once read."
        ),
    )
    cache: str | None = Field(
        default="auto",
        description=(
            'cache answers of a greedy (temperature 0) simulator in this sqlite file; ``"auto"`` = '
            "``$RLVER_CACHE_DIR/simulator.sqlite`` (default ``~/.cache/rlver``), ``None`` = off."
        ),
    )
    prompts: LLMUserPrompts = Field(
        default_factory=SageProtocol,
        description=(
            "the prompts and their options: ``sage`` (default) follows the published simulator's "
            "structure; ``rlver-v1`` is our earlier prompt set (-10..+10 rubric, difficulty paragraph, "
            "one-JSON reply)."
        ),
    )

    @classmethod
    def accepted_keys(cls) -> set[str]:
        # ``protocol``: the older name of ``prompts``, so an old flat block read as another kind drops it
        return super().accepted_keys() | _protocol_option_keys() | {"protocol"}

    @model_validator(mode="after")
    def _sampling_in_full(self) -> LLMUserSpec:
        """The sampling the simulator will use (:func:`simulator_sampling`), stated in full: a spec
        written out (``config.yaml``, a manifest) reloads to the same sampling. Left to the model's
        block, a written default (temperature 1.0) would read as stated and replace 0.7 on resume."""
        self.sampling = simulator_sampling(self)
        return self

    def inert_settings(self) -> dict[str, str]:
        found = {}
        if self.seed != SimulatorSpec.model_fields["seed"].default:
            found["seed"] = "the LLM user does not read it (simulator.sampling.seed seeds its calls)"
        unread = self.prompts.unread_settings()
        found.update({key: why for key, why in unread.items() if getattr(self, key) is not None})
        if self.model.retry_empty and not self.prompts.reads_empty_answers:
            found["model.retry_empty"] = (
                f"prompts {self.prompts.name} take no empty answer: the client asks again anyway"
            )
        return found

    @model_validator(mode="before")
    @classmethod
    def _read_older_block(cls, data: Any) -> Any:
        """The older key ``protocol`` reads as ``prompts`` and a flat block's prompt options move into
        it (rlver.migrate); a missing model is named. (Not
        named ``_read_older_shapes``: that would replace the base's validator of the same name.)"""
        if not isinstance(data, Mapping):
            return data
        if data.get("model") is None:
            raise ValueError("kind 'llm' needs a 'model' (a model spec with at least 'model: NAME')")
        default = LLMUserPrompts.model_fields["name"].default
        data = renamed(data, "protocol", "prompts", where="simulator.")
        return nest_protocol_options(data, _protocol_option_keys(), default)  # rlver.migrate


def default_cache_path() -> Path:
    root = os.environ.get("RLVER_CACHE_DIR") or str(Path.home() / ".cache" / "rlver")
    return Path(root) / "simulator.sqlite"


#: What the published simulators' calls send of the sampling fields: nothing (SAGE's ``call_llm`` and
#: RLVER's ``call_api`` take the prompt alone, simulator_response.py:24 ``def call_llm(prompt)``, dsv3 :35 ``def call_api(prompt``), so the endpoint's
#: own defaults apply; recorded as "server default".
PUBLISHED_SAMPLING = SamplingParams(model_default=True, max_tokens=None)


def sends_as_published(spec: LLMUserSpec) -> bool:
    """Whether the simulator's requests are the published ones, sampling fields included: a published
    prompt set on an OpenAI-compatible endpoint (a local model has no server default to fall back on)."""
    return isinstance(spec.prompts, PublishedTextProtocol) and spec.model.kind == "openai"


def simulator_sampling(spec: LLMUserSpec) -> SamplingParams:
    """The sampling the LLM simulator will use (see :class:`LLMUserSpec`): the keys a ``sampling``
    block states (``simulator.sampling``, else ``simulator.model.sampling``), each on top of the
    simulator's defaults (temperature 0.7, its own high reply cap). A block that states only
    ``max_tokens`` leaves the temperature at 0.7, not at ``SamplingParams``' own 1.0. Under a
    published prompt set on an endpoint the defaults are the published calls' (:data:`PUBLISHED_SAMPLING`:
    nothing sent), and only what a block states is sent."""
    from rlver.simulator.llm.user import DEFAULT_SAMPLING

    chosen = spec.sampling
    if chosen is None and "sampling" in spec.model.model_fields_set:
        chosen = spec.model.sampling
    base = PUBLISHED_SAMPLING if sends_as_published(spec) else DEFAULT_SAMPLING
    if chosen is None:
        return base
    stated = {name: getattr(chosen, name) for name in chosen.model_fields_set}
    if {"temperature", "top_p"} & stated.keys() and "model_default" not in stated:
        stated["model_default"] = False  # a temperature set under a published protocol is sent
    return base.model_copy(update=stated)


def build(spec: SimulatorSpec, model: ChatModel | None) -> UserSimulator:
    """The sentient user on ``model`` (default: built from ``spec.model``, cached when greedy)."""
    from rlver.simulator.llm.user import LLMSimulator

    assert isinstance(spec, LLMUserSpec)
    sampling = simulator_sampling(spec)
    if model is None:
        model = build_chat_model(spec.model)
        if spec.cache and not spec.model.cache and is_greedy(sampling.temperature):
            path = default_cache_path() if spec.cache == "auto" else Path(spec.cache)
            model = CachedChatModel(model, path)
    return LLMSimulator(
        model,
        sampling=sampling,
        difficulty=spec.difficulty,
        behaviour=spec.behaviour,
        rules=EmotionRules(max_change=spec.max_change),
        prompt_language=spec.prompt_language,
        protocol=spec.prompts,
    )
