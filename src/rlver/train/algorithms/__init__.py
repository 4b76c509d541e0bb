"""The algorithm registry both engines read: ``ALGORITHMS[name]`` is a small strategy class.

One file per algorithm (``ppo.py``, ``grpo.py``: read each top to bottom), holding the algorithm and its
own settings class; the interface and the shared settings in ``base.py``, the shared tensor maths in
``core.py``. Adding an algorithm, with or without settings of its own: write
``rlver/train/algorithms/<name>.py`` (a subclass of :class:`~rlver.train.algorithms.base.Algorithm`, and
of :class:`~rlver.train.algorithms.base.AlgorithmSettings` named by its ``settings_class``) and add one
line below. ``algorithm.name`` in a config is validated against this table, so an unknown name is a
config error that lists the choices, and the rest of the ``algorithm:`` block is read with that
algorithm's settings class (:func:`settings_for`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from rlver.config import registered
from rlver.migrate import drop_other_algorithms_keys
from rlver.train.algorithms.base import Algorithm, AlgorithmSettings
from rlver.train.algorithms.grpo import GRPO
from rlver.train.algorithms.ppo import PPO

ALGORITHMS: dict[str, type[Algorithm[Any]]] = {
    "ppo": PPO,
    "grpo": GRPO,
}


def get_algorithm(name: str) -> Algorithm[Any]:
    """The strategy for ``name``; ``KeyError`` names the choices (config validation catches it first)."""
    try:
        return ALGORITHMS[name]()
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; choices: {', '.join(sorted(ALGORITHMS))}") from None


class _Name(BaseModel):
    """The ``name`` of an ``algorithm:`` block alone, checked against the registry (which the settings
    classes, imported by it, cannot see)."""

    model_config = ConfigDict(extra="ignore")
    name: str = AlgorithmSettings.model_fields["name"].default

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        return registered(name, ALGORITHMS, "algorithm")


def settings_for(data: Any) -> Any:
    """An ``algorithm:`` block (mapping or settings object) as the settings class of the algorithm it
    names; anything else is returned for pydantic to refuse.

    Configs written before each algorithm had its own settings class (run folders' ``config.yaml``,
    for ``--resume``) hold every algorithm's keys flat: a key of another registered algorithm's settings
    is dropped, with a warning naming its class when it was set to anything but that class's default
    (it never did anything for this algorithm).
    """
    if isinstance(data, AlgorithmSettings):
        algo = ALGORITHMS.get(data.name)
        if algo is not None and type(data) is algo.settings_class:
            return data
        data = {**data.model_dump(exclude_unset=True), "name": data.name}
    if not isinstance(data, dict):
        return data
    name = _Name.model_validate(data).name  # an unknown name is refused here, naming the choices
    cls = ALGORITHMS[name].settings_class
    # an older flat block's keys of other algorithms: rlver.migrate
    return cls.model_validate(
        drop_other_algorithms_keys(data, name, set(cls.model_fields), _others_keys(cls))
    )


def _others_keys(cls: type[AlgorithmSettings]) -> dict[str, tuple[str, Any]]:
    """Each key of another registered algorithm's settings: who owns it, and its default."""
    return {
        key: (f"{other.name} ({other.settings_class.__name__}, {other.__module__})", field.default)
        for other in ALGORITHMS.values()
        for key, field in other.settings_class.model_fields.items()
        if key not in cls.model_fields
    }
