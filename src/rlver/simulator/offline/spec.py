"""The offline user's spec and builder (``kind: offline``): the options only that kind reads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlver.errors import ConfigError
from rlver.llm.base import ChatModel
from rlver.simulator.base import UserSimulator
from rlver.simulator.emotion import EmotionRules
from rlver.simulator.spec import SimulatorSpec


class OfflineSpec(SimulatorSpec):
    """The deterministic, LLM-free proxy (default for the demo and CI)."""

    kind: Literal["offline"] = Field(
        default="offline", description="``offline``: the deterministic, LLM-free user."
    )
    embed: bool = Field(
        default=False, description="use the packaged MiniLM sentence embedder (needs the ``[embed]`` extra)."
    )
    learned: bool = Field(
        default=True,
        description=(
            "Chinese profiles use the learned appraisal fitted on released SAGE judgements (``false``: "
            "the lexicon appraisal for every language, as before)."
        ),
    )

    def inert_settings(self) -> dict[str, str]:
        if self.prompt_language is not None:
            return {"prompt_language": "the offline user sends no prompts"}
        return {}


def build(spec: SimulatorSpec, model: ChatModel | None) -> UserSimulator:
    """The offline proxy; ``model`` is unused (it talks to no LLM). Imported here: numpy, lexicons."""
    from rlver.simulator.offline.user import OfflineSimulator, load_minilm_embedder

    assert isinstance(spec, OfflineSpec)
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
