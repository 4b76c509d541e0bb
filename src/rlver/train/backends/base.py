"""What a rollout backend is: the policy's sampler for one training run, and its lifecycle.

The trainer and ``rlver train`` know a backend only through this class; nothing above it imports a
sampler's module (``rlver.llm.hf_engine``, a vLLM wrapper) itself. A backend builds a
:class:`~rlver.llm.engine.TokenEngine` (token ids in, sampled ids, log-probs and a finish reason out);
this class puts the chat layer over it (:class:`~rlver.llm.engine_chat.EngineChatModel`: templates,
stop rules, think) and drives its lifecycle, as the trainer asks
(``rlver.train.trainer.Trainer.train_step``):

1. **build** (:meth:`RolloutBackend.build`, once): the engine, around the model being trained or a
   copy of it; :attr:`RolloutBackend.chat` is the chat layer every rollout and evaluation samples with;
2. the step's rollout samples with :attr:`RolloutBackend.chat`;
3. **release** (:meth:`RolloutBackend.release` → ``engine.release()``): the rollout is over, the
   update comes; a co-located engine frees what it holds on the device (its KV cache, its copy of the
   weights);
4. the update trains the policy;
5. **resume** (``engine.resume()``) takes that memory back, then **sync** (:meth:`RolloutBackend.sync`
   → ``engine.update_weights(named weights of the policy)``) loads the trained weights, before the
   evaluation and the next rollout sample from them.

This is verl's order for a co-located engine: ``BaseRollout.release`` before the update,
``resume`` and ``update_weights`` after it (verl/workers/rollout/base.py, ``BaseRollout``, commit
ad79d2b: ``resume(tags)``, ``update_weights(weights)``, ``release()``).

What a backend states without being built (class methods, read at config and preflight time):

* :attr:`RolloutBackend.settings_class`: its own knobs, a :class:`BackendSettings` subclass; the
  config's ``rollout.backend_settings`` is read with it (unknown keys refused, exit 2);
* :meth:`RolloutBackend.memory_bytes`: what it holds on the training device during the update, which
  the memory guard adds to the update's peak (``rlver.train.memory_guard``);
* :meth:`RolloutBackend.verl_refusals`: what ``--trainer verl`` would not honour (verl samples with its
  own engine), refused before anything is written.

And what it reports once built, each in the engine's own words (never a parent class's):
:meth:`RolloutBackend.describe` (the run manifest's ``agent``), :meth:`RolloutBackend.sampler`
(``sampling.json``'s ``sampler``: the engine's class and what it says it does) and
:meth:`RolloutBackend.sampling_settings` (every sampling setting it uses, explicitly).

Adding a backend = one module beside this one (a subclass whose ``build`` returns its engine, and its
settings class) + one line in :data:`rlver.train.backends.BACKENDS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from rlver.llm.base import ChatModel, SamplingParams
from rlver.llm.engine import TokenEngine
from rlver.llm.engine_chat import EngineChatModel, generation_eos
from rlver.llm.weights import named_weights
from rlver.train.backends.settings import BackendConfig, BackendSettings

if TYPE_CHECKING:
    import torch


S = TypeVar("S", bound=BackendSettings)


class RolloutBackend(Generic[S]):
    """The policy's sampler for one run. A subclass sets :attr:`settings_class` (when it has knobs)
    and :meth:`build` (its engine); the lifecycle calls reach the engine by default."""

    settings_class: ClassVar[type[BackendSettings]] = BackendSettings

    def __init__(
        self, config: BackendConfig, policy: torch.nn.Module, tokenizer: Any, device: torch.device
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
        self.engine: TokenEngine = self.build(policy, tokenizer, device)
        if not isinstance(self.engine, TokenEngine):
            raise TypeError(
                f"{type(self).__name__}.build returned a {type(self.engine).__name__}; "
                "a rollout backend builds a rlver.llm.engine.TokenEngine"
            )
        #: the chat layer the rollouts and evaluations call, over the engine
        self.chat: ChatModel = EngineChatModel(self.engine, tokenizer, eos_ids=generation_eos(policy))

    # -- lifecycle --------------------------------------------------------------------------------
    def build(self, policy: torch.nn.Module, tokenizer: Any, device: torch.device) -> TokenEngine:
        """The :class:`TokenEngine` the rollouts sample with (once, when the trainer starts)."""
        raise NotImplementedError(f"{type(self).__name__}.build")

    def sync(self, policy: torch.nn.Module) -> None:
        """After every update (and :meth:`resume`): the engine takes the trained weights by name (an
        engine on the trained module itself finds them in place and copies nothing)."""
        self.engine.update_weights(named_weights(policy))

    def release(self) -> None:
        """After the rollout, before the update: the engine frees the device memory it holds (KV
        cache; its own copy of the weights) for the update's peak."""
        self.engine.release()

    def resume(self) -> None:
        """After the update, before :meth:`sync`: the engine takes back what :meth:`release` freed."""
        self.engine.resume()

    # -- what it reports --------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The sampler's description for the manifest's ``agent``, with the backend's name."""
        return {**self.chat.describe(), "rollout_backend": self.name}

    def sampler(self) -> dict[str, Any]:
        """``sampling.json``'s ``sampler``: the engine's class, what the engine says it does beyond
        :class:`SamplingParams`, and the chat layer's stop ids."""
        return dict(self.chat.describe()["sampler"])

    def sampling_settings(self, sampling: SamplingParams) -> dict[str, Any]:
        """Every sampling setting the engine uses for ``sampling``, explicitly (run manifests)."""
        return self.engine.sampling_settings(sampling)

    # -- what it states before it is built --------------------------------------------------------
    @classmethod
    def memory_bytes(
        cls, settings: S, config: BackendConfig, arch: dict[str, Any], device_bytes: float
    ) -> float:
        """Bytes it holds on the training device while the update runs, beside the update's own
        tensors (``arch``: the model's config.json; ``device_bytes``: the device's total). The memory
        guard adds them to the update's peak. None by default: released or shared memory is free."""
        return 0.0

    @classmethod
    def verl_refusals(cls, settings: S, config: BackendConfig) -> list[str]:
        """The settings ``--trainer verl`` would not honour, each as one sentence. verl samples with its
        own engine (``verl.rollout_engine``), so by default the backend itself is refused."""
        return [
            f"rollout.backend={config.rollout.backend}: --trainer verl samples with its own engine "
            "(verl.rollout_engine), so this backend would not run; use rollout.backend=hf with "
            "--trainer verl, or train with --trainer local"
        ]
