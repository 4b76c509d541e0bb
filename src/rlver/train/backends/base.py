"""What a rollout backend is: the policy's sampler for one training run, and its lifecycle.

The trainer and ``rlver train`` know a backend only through this class; nothing above it imports a
sampler's module (``rlver.llm.local``, a vLLM wrapper) itself. The lifecycle, as the trainer drives it
(``rlver.train.trainer.Trainer.train_step``):

1. **build** (:meth:`RolloutBackend.build`, once): the :class:`~rlver.llm.base.ChatModel` every rollout
   and evaluation samples with, around the model being trained;
2. the step's rollout samples with :attr:`RolloutBackend.chat`;
3. **release** (:meth:`RolloutBackend.release`): the rollout is over, the update comes; a co-located
   engine frees what it holds on the device (its KV cache, its copy of the weights);
4. the update trains the policy;
5. **resume** (:meth:`RolloutBackend.resume`) takes that memory back, then **sync**
   (:meth:`RolloutBackend.sync`) loads the trained weights, before the evaluation and the next rollout
   sample from them.

This is verl's order for a co-located engine: ``BaseRollout.release`` before the update,
``resume`` and ``update_weights`` after it (verl/workers/rollout/base.py, ``BaseRollout``, commit
ad79d2b: ``resume(tags)``, ``update_weights(weights)``, ``release()``).

What a backend states without being built (class methods, read at config and preflight time):

* :attr:`RolloutBackend.settings_class`: its own knobs, a :class:`BackendSettings` subclass; the
  config's ``rollout.backend_settings`` is read with it (unknown keys refused, exit 2);
* :meth:`RolloutBackend.memory_bytes`: what it holds on the training device during the update, which
  the memory guard adds to the update's peak (``rlver.train.memory_guard``);
* :meth:`RolloutBackend.verl_refusals`: what ``--engine verl`` would not honour (verl samples with its
  own engine), refused before anything is written.

And what it reports once built: :meth:`RolloutBackend.describe` (the run manifest's ``agent``),
:meth:`RolloutBackend.sampler` (``sampling.json``'s ``sampler``: empty for a chat model that says
nothing about it, never a KeyError) and :meth:`RolloutBackend.sampling_settings` (every sampling
setting it uses, explicitly).

Adding a backend = one module beside this one (a subclass and its settings class) + one line in
:data:`rlver.train.backends.BACKENDS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from rlver.llm.base import ChatModel, SamplingParams

if TYPE_CHECKING:
    import torch

    from rlver.train.config import TrainConfig


class BackendSettings(BaseModel):
    """A backend's own knobs (``rollout.backend_settings``). A subclass adds fields with defaults; an
    unknown key is a config error naming its path."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


S = TypeVar("S", bound=BackendSettings)


class RolloutBackend(Generic[S]):
    """The policy's sampler for one run. A subclass sets :attr:`settings_class` (when it has knobs)
    and :meth:`build`; an engine with its own copy of the weights also :meth:`sync`,
    :meth:`release`, :meth:`resume` and :meth:`memory_bytes`."""

    settings_class: ClassVar[type[BackendSettings]] = BackendSettings

    def __init__(
        self, config: TrainConfig, policy: torch.nn.Module, tokenizer: Any, device: torch.device
    ) -> None:
        self.config = config
        #: the registry name it runs under (``rollout.backend``), as the manifest records it
        self.name: str = config.rollout.backend
        self.settings: S = config.rollout.backend_settings  # type: ignore[assignment]
        if not isinstance(self.settings, self.settings_class):
            raise TypeError(
                f"rollout.backend_settings is a {type(self.settings).__name__}, "
                f"but {type(self).__name__} reads {self.settings_class.__name__}"
            )
        self.chat: ChatModel = self.build(policy, tokenizer, device)

    # -- lifecycle --------------------------------------------------------------------------------
    def build(self, policy: torch.nn.Module, tokenizer: Any, device: torch.device) -> ChatModel:
        """The :class:`ChatModel` the rollouts call (once, when the trainer starts)."""
        raise NotImplementedError(f"{type(self).__name__}.build")

    def sync(self, policy: torch.nn.Module) -> None:
        """After every update (and :meth:`resume`), with the trained model: an engine with its own copy
        of the weights loads the new ones here. A sampler on the policy itself has nothing to do."""

    def release(self) -> None:
        """After the rollout, before the update: a co-located engine frees the device memory it holds
        (KV cache, weights) for the update's peak. Nothing to free by default."""

    def resume(self) -> None:
        """After the update, before :meth:`sync`: take back what :meth:`release` freed."""

    # -- what it reports --------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The sampler's description for the manifest's ``agent``, with the backend's name."""
        return {**self.chat.describe(), "rollout_backend": self.name}

    def sampler(self) -> dict[str, Any]:
        """What the sampler does beyond :class:`SamplingParams` (``sampling.json``'s ``sampler``);
        empty when the chat model does not say."""
        sampler = self.chat.describe().get("sampler")
        return dict(sampler) if isinstance(sampler, dict) else {}

    def sampling_settings(self, sampling: SamplingParams) -> dict[str, Any]:
        """Every sampling setting the backend uses for ``sampling``, explicitly (run manifests). By
        default the parameters as given; a sampler with fixed choices of its own states them."""
        return sampling.model_dump(mode="json", exclude={"model_default"})

    # -- what it states before it is built --------------------------------------------------------
    @classmethod
    def memory_bytes(
        cls, settings: S, config: TrainConfig, arch: dict[str, Any], device_bytes: float
    ) -> float:
        """Bytes it holds on the training device while the update runs, beside the update's own
        tensors (``arch``: the model's config.json; ``device_bytes``: the device's total). The memory
        guard adds them to the update's peak. None by default: released or shared memory is free."""
        return 0.0

    @classmethod
    def verl_refusals(cls, settings: S, config: TrainConfig) -> list[str]:
        """The settings ``--engine verl`` would not honour, each as one sentence. verl samples with its
        own engine (``verl.rollout_engine``), so by default the backend itself is refused."""
        return [
            f"rollout.backend={config.rollout.backend}: --engine verl samples with its own engine "
            "(verl.rollout_engine), so this backend would not run; use rollout.backend=hf with "
            "--engine verl, or train with --engine local"
        ]
