"""The algorithm table both engines read: ``ALGORITHMS[name]`` is a small strategy class.

Adding an algorithm: write ``rlver/train/algos/<name>.py`` (a subclass of :class:`Algorithm`, see
``ppo.py``/``grpo.py``) and add one line below. ``algorithm.name`` in a config is validated against
this table, so an unknown name is a config error that lists the choices.
"""

from __future__ import annotations

from rlver.train.algos.base import AdvantageInputs, Advantages, Algorithm
from rlver.train.algos.grpo import GRPO
from rlver.train.algos.ppo import PPO

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


__all__ = ["ALGORITHMS", "AdvantageInputs", "Advantages", "Algorithm", "get_algorithm"]
