"""The algorithm registry both engines read: ``ALGORITHMS.get(name)`` is a small strategy class.

One file per algorithm (``ppo.py``, ``grpo.py``: read each top to bottom), holding the algorithm and its
own settings class; the interface and the shared settings in ``base.py``, the shared tensor maths in
``core.py``. Adding an algorithm, with or without settings of its own: write
``rlver/train/algorithms/<name>.py`` (a subclass of :class:`~rlver.train.algorithms.base.Algorithm`, and
of :class:`~rlver.train.algorithms.base.AlgorithmSettings` named by its ``settings_class``) and add one
line below (:func:`lazy`). ``ALGORITHMS`` is a :class:`~rlver.registry.Registry` of lazy entries: this
module imports no algorithm, so an algorithm's module may import this package, and a config imports
only the algorithm it names. ``algorithm.name`` in a config is checked against it, so an unknown name is
a config error in the registry's one wording ("unknown algorithm 'gpro'; did you mean 'grpo'? known:
ppo, grpo, dr_grpo, mapo, mica, ctc_grpo"), and the rest of the ``algorithm:`` block is read with that entry's settings class
(:func:`settings_for`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from rlver.migrate import drop_other_algorithms_keys, drop_retired_algorithm_keys
from rlver.registry import Entry, Registry
from rlver.train.algorithms.base import Algorithm, AlgorithmSettings


def lazy(name: str, description: str, module: str, cls: str) -> Entry[type[Algorithm[Any]]]:
    """The registry line of class ``cls`` in ``rlver.train.algorithms.<module>`` (its ``name`` is
    ``name``), and of its ``settings_class``; both imported when the algorithm is first asked for."""
    ref = f"rlver.train.algorithms.{module}:{cls}"
    return Entry(name, description, ref, f"{ref}.settings_class")


def entry(algorithm: type[Algorithm[Any]], description: str) -> Entry[type[Algorithm[Any]]]:
    """The registry row of an algorithm class at hand (one registered at run time): its ``name``, and
    its ``settings_class`` as the settings."""
    return Entry(algorithm.name, description, algorithm, algorithm.settings_class)


ALGORITHMS: Registry[type[Algorithm[Any]]] = Registry(
    "algorithm",
    [
        lazy("ppo", "a critic, per-token rewards, GAE advantages", "ppo", "PPO"),
        lazy("grpo", "no critic; each dialogue's score against its group's", "grpo", "GRPO"),
        lazy(
            "dr_grpo",
            "GRPO without the std division, each sample's token sum over a constant (Dr. GRPO)",
            "dr_grpo",
            "DrGRPO",
        ),
        lazy(
            "mapo",
            "no critic; each turn's return, normalised within the turn and over the batch",
            "mapo",
            "MAPO",
        ),
        lazy(
            "mica",
            "MAPO with MICA's scopes: each turn's reward within the turn, its return over the batch",
            "mica",
            "MICA",
        ),
        lazy(
            "ctc_grpo",
            "GRPO's outcome advantage plus each turn's centred emotion change (CTC-GRPO)",
            "ctc_grpo",
            "CTCGRPO",
        ),
    ],
)


def get_algorithm(name: str) -> Algorithm[Any]:
    """The strategy for ``name``; :class:`~rlver.registry.UnknownName` otherwise (config validation
    refuses an unknown name first)."""
    return ALGORITHMS.get(name)()


class _Name(BaseModel):
    """The ``name`` of an ``algorithm:`` block alone, checked against the registry (which the settings
    classes, imported by it, cannot see)."""

    model_config = ConfigDict(extra="ignore")
    name: str = AlgorithmSettings.model_fields["name"].default

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        return ALGORITHMS.check(name)


def settings_for(data: Any) -> Any:
    """An ``algorithm:`` block (mapping or settings object) as the settings class of the algorithm it
    names; anything else is returned for pydantic to refuse.

    Configs written before each algorithm had its own settings class (run folders' ``config.yaml``,
    for ``--resume``) hold every algorithm's keys flat: a key of another registered algorithm's settings
    is dropped, with a warning naming its class when it was set to anything but that class's default
    (it never did anything for this algorithm).
    """
    if isinstance(data, AlgorithmSettings):
        if data.name in ALGORITHMS and type(data) is ALGORITHMS.settings_class(data.name):
            return data
        data = {**data.model_dump(exclude_unset=True), "name": data.name}
    if not isinstance(data, dict):
        return data
    name = _Name.model_validate(data).name  # an unknown name is refused here, naming the choices
    cls = ALGORITHMS.settings_class(name)
    assert cls is not None and issubclass(cls, AlgorithmSettings)  # every entry names one (entry())
    # an older flat block's keys of other algorithms: rlver.migrate
    data = drop_retired_algorithm_keys(data)
    return cls.model_validate(
        drop_other_algorithms_keys(data, name, set(cls.model_fields), _others_keys(cls))
    )


def _others_keys(cls: type[AlgorithmSettings]) -> dict[str, tuple[str, Any]]:
    """Each key of another registered algorithm's settings: who owns it, and its default. A key two
    algorithms share (``dr_grpo``'s settings extend ``grpo``'s) belongs to the first registered."""
    out: dict[str, tuple[str, Any]] = {}
    for _, other in ALGORITHMS.items():
        for key, field in other.settings_class.model_fields.items():
            if key not in cls.model_fields:
                owner = f"{other.name} ({other.settings_class.__name__}, {other.__module__})"
                out.setdefault(key, (owner, field.default))
    return out
