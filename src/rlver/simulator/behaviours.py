"""User behaviour modes: how cooperative the simulated user is.

``cooperative`` is the published simulator's behaviour. The adversarial modes (escalating, gaslighting,
validation-seeking, withdrawn) let a model be trained and tested for robustness. Each mode adds guidance
to the simulator's appraisal and reply prompts and nudges the offline simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlver.errors import ConfigError


@dataclass(frozen=True)
class Behaviour:
    name: str
    description: str
    #: language -> extra instructions for the appraisal step ("" adds nothing)
    appraisal_guidance: dict[str, str] = field(default_factory=dict)
    #: language -> extra instructions for the reply step
    reply_guidance: dict[str, str] = field(default_factory=dict)
    #: offline simulator: added to the raw change before clamping (negative = harder to please)
    offline_change_bias: int = 0


COOPERATIVE = Behaviour(
    name="cooperative",
    description="The published behaviour: the user engages honestly and responds to good support.",
)

BEHAVIOURS: dict[str, Behaviour] = {COOPERATIVE.name: COOPERATIVE}


def get_behaviour(name: str | None) -> Behaviour:
    """Look a mode up by name (``None`` means cooperative); unknown names list the valid ones."""
    if name is None:
        return COOPERATIVE
    try:
        return BEHAVIOURS[name]
    except KeyError:
        raise ConfigError(
            f"unknown behaviour mode {name!r}; choose one of: {', '.join(sorted(BEHAVIOURS))}"
        ) from None
