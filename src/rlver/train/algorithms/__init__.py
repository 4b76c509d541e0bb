"""The algorithm registry both engines read: ``ALGORITHMS[name]`` is a small strategy class.

One file per algorithm (``ppo.py``, ``grpo.py``: read each top to bottom), the interface in ``base.py``
and the shared tensor maths in ``core.py``. Adding an algorithm: write
``rlver/train/algorithms/<name>.py`` (a subclass of :class:`~rlver.train.algorithms.base.Algorithm`) and
add one line below. ``algorithm.name`` in a config is validated against this table, so an unknown name is
a config error that lists the choices.
"""

from __future__ import annotations

from rlver.train.algorithms.base import Algorithm
from rlver.train.algorithms.grpo import GRPO
from rlver.train.algorithms.ppo import PPO

ALGORITHMS: dict[str, type[Algorithm]] = {
    "ppo": PPO,
    "grpo": GRPO,
}


def get_algorithm(name: str) -> Algorithm:
    """The strategy for ``name``; ``KeyError`` names the choices (config validation catches it first)."""
    try:
        return ALGORITHMS[name]()
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; choices: {', '.join(sorted(ALGORITHMS))}") from None
