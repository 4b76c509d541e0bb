"""What a rollout backend reads of a training config, declared here so the backends need nothing of
``rlver.train.config``.

``train/config.py`` reads :class:`BackendSettings` (``rollout.backend_settings``) and asks the backend
registry to validate it, so the config depends on the backends. The backends take the config the other
way round only through :class:`BackendConfig`, a protocol that ``TrainConfig`` satisfies by shape:
this leaf imports nothing of rlver, so the two never import each other. A backend that needs another
field of the config names it here.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict


class BackendSettings(BaseModel):
    """A backend's own knobs (``rollout.backend_settings``). A subclass adds fields with defaults; an
    unknown key is a config error naming its path."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RolloutView(Protocol):
    """The ``rollout:`` block as a backend sees it."""

    @property
    def backend(self) -> str: ...

    @property
    def backend_settings(self) -> BackendSettings: ...


class ModelView(Protocol):
    """The ``model:`` block as a backend sees it."""

    @property
    def generation_batch_size(self) -> int | None: ...

    @property
    def max_length(self) -> int: ...


class BackendConfig(Protocol):
    """A training config as a backend sees it (``rlver.train.config.TrainConfig`` is one)."""

    @property
    def rollout(self) -> RolloutView: ...

    @property
    def model(self) -> ModelView: ...
