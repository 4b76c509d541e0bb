"""The rollout-backend registry: what ``rollout.backend`` may name, and the questions asked of it.

One module per backend (``hf.py``: read it top to bottom), holding the backend and its own settings
class; the interface and its lifecycle in ``base.py``. Adding a backend (vLLM, SGLang): write
``rlver/train/backends/<name>.py`` (a :class:`~rlver.train.backends.base.RolloutBackend` subclass and,
for its own knobs, a :class:`~rlver.train.backends.base.BackendSettings` subclass named by its
``settings_class``) and add one line to :data:`BACKENDS`.

The entries are lazy (``"module:attr"``): this module imports no backend, so a backend module may
import the package (or ``base``) without an import cycle, and reading a config imports only the named
backend's module. The questions the config, the trainer, the memory guard and the verl launcher ask
are the functions below; each looks the backend up here and asks its class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlver.registry import Entry, Registry

if TYPE_CHECKING:
    import torch

    from rlver.train.backends.base import RolloutBackend
    from rlver.train.backends.settings import BackendConfig

#: The backends ``rollout.backend`` may name, by name.
BACKENDS: Registry[type[RolloutBackend[Any]]] = Registry(
    "rollout backend",
    [
        Entry(
            "hf",
            "the local sampler on the trained model itself (transformers, this process)",
            "rlver.train.backends.hf:HFBackend",
        ),
    ],
)


def settings_for(name: str, data: Any) -> Any:
    """``rollout.backend_settings`` (a mapping, or settings of another class) read with the settings
    class of backend ``name``; anything else is returned for pydantic to refuse."""
    cls = BACKENDS.get(name).settings_class
    if type(data) is cls:
        return data
    if hasattr(data, "model_dump") and not isinstance(data, type):
        data = data.model_dump(exclude_unset=True)
    return cls.model_validate(data) if isinstance(data, dict) else data


def build_rollout_backend(
    config: BackendConfig, policy: torch.nn.Module, tokenizer: Any, device: torch.device
) -> RolloutBackend[Any]:
    """The backend ``config.rollout.backend`` names, built around ``policy``."""
    return BACKENDS.get(config.rollout.backend)(config, policy, tokenizer, device)


def memory_bytes(config: BackendConfig, arch: dict[str, Any], device_bytes: float) -> float:
    """What the configured backend holds on the training device during the update (the memory guard)."""
    r = config.rollout
    return float(BACKENDS.get(r.backend).memory_bytes(r.backend_settings, config, arch, device_bytes))


def verl_refusals(config: BackendConfig) -> list[str]:
    """What ``--trainer verl`` would not honour of the configured backend and its settings."""
    r = config.rollout
    return list(BACKENDS.get(r.backend).verl_refusals(r.backend_settings, config))
