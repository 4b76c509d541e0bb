"""What a real ``--trainer verl`` launch checks before Ray starts.

A launch that fails inside verl costs a Ray start, a model load on every worker and a cluster
allocation before the first error, and the error is a traceback from a worker. What can be known on
the launching machine is checked here instead, each failure one :class:`~rlver.errors.ConfigError`
(one ``error:`` line, exit 2), and nothing is written:

* the simulator's key: every LLM endpoint of the config (the training simulator, the in-training
  evaluation's) whose ``api_key_env`` names a variable that is unset or empty. Ray workers inherit
  the launcher's environment (or the node's ``ray start`` environment), so a key missing here fails
  every dialogue on every worker;
* the GPUs: without ``verl.ray_address`` the launch starts a one-node Ray on this machine, which
  offers the GPUs torch sees (``CUDA_VISIBLE_DEVICES`` applied); ``verl.nnodes > 1`` or more
  ``verl.gpus_per_node`` than that cannot be placed and verl would wait for them. With an address the
  cluster is not asked (that would start a Ray client): verl places the workers;
* the model: a folder that is not there, or a hub id that is neither cached nor fetchable because the
  hub is switched off (``HF_HUB_OFFLINE``).

A dry run checks none of these: it is for machines without GPUs, keys or weights.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from pydantic import BaseModel

from rlver.errors import ConfigError
from rlver.integrations.verl.config import VerlTrainConfig
from rlver.llm.spec import ModelSpec
from rlver.models.reference import resolve_reference


def check_launch(cfg: VerlTrainConfig, *, visible_gpus: int | None = None) -> None:
    """Refuse a launch that cannot start (see the module docstring). ``visible_gpus``: what this
    machine offers Ray; asked from torch when ``None``."""
    check_simulator_keys(cfg)
    check_model(cfg.model.path)
    check_gpus(cfg, visible_gpus if visible_gpus is not None else _torch_gpus())


def _llm_specs(node: object, where: str) -> Iterator[tuple[str, ModelSpec]]:
    """Every :class:`ModelSpec` inside ``node`` with its dotted config key."""
    if isinstance(node, ModelSpec):
        yield where, node
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            yield from _llm_specs(getattr(node, name), f"{where}.{name}")


def check_simulator_keys(cfg: VerlTrainConfig) -> None:
    """An endpoint whose key variable is unset or empty is refused, naming the variable and the key."""
    for where, spec in [*_llm_specs(cfg.simulator, "simulator"), *_llm_specs(cfg.eval_simulator(), "eval")]:
        name = spec.api_key_env
        if spec.kind == "openai" and name and not os.environ.get(name):
            raise ConfigError(
                f"{where}.api_key_env: the environment variable {name} is not set or is empty, so every "
                f"simulator call would fail on every Ray worker; export {name}=... before the launch (on "
                f"a cluster, before `ray start` on every node), or set {where}.api_key_env '' for an "
                f"endpoint that needs no key"
            )


def check_model(path: str) -> None:
    """A local folder must be here; a hub id must be cached when the hub is switched off."""
    ref = resolve_reference(path)  # a fetchable name not fetched is refused there, naming the fetch
    if ref.kind == "folder" and not (ref.folder and ref.folder.is_dir()):
        raise ConfigError(
            f"model.path {path}: no such folder on this machine; give a model folder (the same path on "
            f"every node) or a Hugging Face id"
        )
    if ref.kind == "hub" and os.environ.get("HF_HUB_OFFLINE") == "1" and ref.config_file() is None:
        raise ConfigError(
            f"model.path {path}: not in the Hugging Face cache and HF_HUB_OFFLINE=1 stops verl's workers "
            f"downloading it; download it first (huggingface-cli download {path}) or give a model folder"
        )


def check_gpus(cfg: VerlTrainConfig, visible: int) -> None:
    """Without ``verl.ray_address``, the one-node Ray this launch starts must hold every GPU asked for."""
    v = cfg.verl
    if v.ray_address:
        return
    if v.nnodes > 1:
        raise ConfigError(
            f"verl.nnodes={v.nnodes} without verl.ray_address: the launch would start a one-node Ray on "
            f"this machine; start the cluster (`ray start`) and set verl.ray_address=auto, or set "
            f"verl.nnodes=1"
        )
    if v.gpus_per_node > visible:
        fix = (
            f"set verl.gpus_per_node={visible} or fewer (the batch sizes must divide by it)"
            if visible
            else "launch on a machine with GPUs, or join a cluster with verl.ray_address"
        )
        raise ConfigError(
            f"verl.gpus_per_node={v.gpus_per_node}, but this machine shows Ray {visible} GPU(s) (torch, "
            f"CUDA_VISIBLE_DEVICES applied): {fix}"
        )


def _torch_gpus() -> int:
    """The CUDA devices torch sees here (0 without CUDA): what a local ``ray.init`` offers as GPUs."""
    import torch  # the [verl] extra brings it; imported where it computes

    return torch.cuda.device_count()  # 0 without CUDA
