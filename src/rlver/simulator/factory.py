"""Build the run's user simulator from a :class:`SimulatorSpec` (a config block or CLI flags)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlver.errors import ConfigError
from rlver.llm.base import ChatModel, SamplingParams
from rlver.llm.spec import ModelSpec
from rlver.profiles.schema import Difficulty
from rlver.simulator.base import UserSimulator
from rlver.simulator.emotion import MAX_CHANGE, EmotionRules


class SimulatorSpec(BaseModel):
    """Which simulated user a run talks to.

    ``kind="offline"``: the deterministic, LLM-free proxy (default for the demo and CI).
    ``kind="llm"``: the sentient user backed by ``model``. ``difficulty``/``behaviour`` of ``None``
    follow each profile (then ``normal``/``cooperative``). ``sampling`` overrides the simulator's
    sampling (default: the model spec's sampling when set explicitly, else temperature 0.7).
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["offline", "llm"] = "offline"
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

    @model_validator(mode="after")
    def _model_for_llm(self) -> SimulatorSpec:
        if self.kind == "llm" and self.model is None:
            raise ValueError("kind 'llm' needs a 'model' (a model spec with at least 'model: NAME')")
        return self


def default_cache_path() -> Path:
    root = os.environ.get("RLVER_CACHE_DIR") or str(Path.home() / ".cache" / "rlver")
    return Path(root) / "simulator.sqlite"


def simulator_sampling(spec: SimulatorSpec) -> SamplingParams:
    """The sampling the LLM simulator will use (see :class:`SimulatorSpec`)."""
    from rlver.simulator.sentient import DEFAULT_SAMPLING

    if spec.sampling is not None:
        return spec.sampling
    if spec.model is not None and "sampling" in spec.model.model_fields_set:
        return spec.model.sampling
    return DEFAULT_SAMPLING


def build_simulator(spec: SimulatorSpec, *, model: ChatModel | None = None) -> UserSimulator:
    """The simulator ``spec`` names. ``model`` (optional) replaces building one from ``spec.model``."""
    get_behaviour_checked(spec.behaviour)
    rules = EmotionRules(max_change=spec.max_change)
    if spec.kind == "offline":
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
            rules=rules,
            embedder=embedder,
            learned=spec.learned,
        )

    from rlver.simulator.sentient import SentientSimulator

    sampling = simulator_sampling(spec)
    if model is None:
        from rlver.llm.factory import build_chat_model

        assert spec.model is not None  # checked by the validator
        model = build_chat_model(spec.model)
        if spec.cache and not spec.model.cache and sampling.temperature == 0.0:
            from rlver.llm.cache import CachedChatModel

            path = default_cache_path() if spec.cache == "auto" else Path(spec.cache)
            model = CachedChatModel(model, path)
    return SentientSimulator(
        model,
        sampling=sampling,
        difficulty=spec.difficulty,
        behaviour=spec.behaviour,
        rules=rules,
        prompt_language=spec.prompt_language,
        protocol=spec.protocol,
        magnitude_rubric=spec.magnitude_rubric,
        difficulty_paragraph=spec.difficulty_paragraph,
    )


def get_behaviour_checked(name: str | None) -> None:
    """Fail at start-up, with the list of valid modes, on an unknown behaviour name."""
    from rlver.simulator.behaviours import get_behaviour

    get_behaviour(name)
