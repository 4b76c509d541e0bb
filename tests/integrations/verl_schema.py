"""verl 0.9.1's config schema, walked by full dotted path: does a key rlver writes name a setting there?

What verl checks a run's config against (``python -m verl.trainer.main_ppo``): Hydra composes
``verl/trainer/config/ppo_trainer.yaml`` with its defaults list (``actor/``, ``critic/``, ``rollout/``...;
``_generated_ppo_trainer.yaml`` is the same tree flattened, "for reference and never used") in struct
mode, so an override of a key the tree lacks is refused unless written ``+key=value``; then a node with
a ``_target_`` becomes that dataclass (``verl.utils.config.omega_conf_to_dataclass``; the classes are in
``verl/workers/config/*.py`` and ``verl/trainer/config/*.py``), and the merge refuses a key that is not
one of its fields.

So the schema here is that tree composed with *no* overrides (so a key rlver adds with ``+`` cannot
vouch for itself, as it did when the walk read the composed run config), and a dotted path is in it
when every segment is a key of its parent node and, where the parent has a ``_target_``, a field of that
dataclass too. A leaf name proves nothing: ``lr``, ``enable`` and ``param_offload`` each live at several
places, and ``+trainer.enable=true`` composes without a word from Hydra.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

#: The keys rlver adds with ``+`` (not in verl's schema), each with where verl reads it.
PLUS_ADDITIONS: dict[str, str] = {
    "ray_kwargs.ray_init.address": (
        "trainer/main_ppo.py passes ray_kwargs.ray_init to ray.init(**...) as keyword arguments; verl's "
        "YAML lists only num_cpus and runtime_env there"
    ),
}


@functools.cache
def verl_schema() -> Any:
    """verl's ``ppo_trainer`` config tree as ``main_ppo`` composes it, before any override."""
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo_trainer")


def schema_problem(override_key: str, schema: Any) -> str | None:
    """Why ``override_key`` (the left of a Hydra override, ``+`` included) names no setting at that exact
    dotted path of ``schema``, or None when it does (or is a documented :data:`PLUS_ADDITIONS` key)."""
    key = override_key.removeprefix("+")
    problem = _path_problem(key, schema)
    if not override_key.startswith("+"):
        return problem
    if problem is None:
        return f"{override_key}: {key} is already in verl's schema; write it without '+'"
    if key not in PLUS_ADDITIONS:
        return f"{override_key}: not a documented addition ({sorted(PLUS_ADDITIONS)}), and {problem}"
    return _path_problem(key.rpartition(".")[0], schema)  # an addition still goes under a node verl has


def _path_problem(key: str, schema: Any) -> str | None:
    from omegaconf import DictConfig

    node, parts = schema, key.split(".")
    for depth, part in enumerate(parts):
        here = ".".join(parts[: depth + 1])
        keys = node.keys() if isinstance(node, DictConfig) else ()  # `in node` misses ??? values
        if part not in keys:
            where = places(part, schema)
            more = f" and {len(where) - 4} more" if len(where) > 4 else ""
            hint = f" ({part} is at {', '.join(where[:4])}{more})" if where else ""
            return f"{key}: verl's schema has no {here}{hint}"
        target = node.get("_target_")
        if target is not None and part not in _fields(target):
            # verl pops a few such keys off before it builds the dataclass (ref.log_prob_*); rlver
            # writes none of them, so the walk refuses them all
            return f"{key}: {here} is in verl's YAML but not a field of {target}, which verl builds from it"
        if depth < len(parts) - 1:
            node = node[part]  # resolves an interpolated node, as verl does when it reads one
    return None


@functools.cache
def _fields(target: str) -> frozenset[str]:
    from hydra.utils import get_class

    return frozenset(f.name for f in dataclasses.fields(get_class(target)))


def places(leaf: str, schema: Any, prefix: str = "") -> list[str]:
    """Every dotted path of ``schema`` that ends in ``leaf``, for the error message."""
    from omegaconf import DictConfig

    found = []
    for name in schema:
        path = f"{prefix}.{name}" if prefix else str(name)
        if name == leaf:
            found.append(path)
        child = schema._get_node(name)
        if isinstance(child, DictConfig):
            found += places(leaf, child, path)
    return found
