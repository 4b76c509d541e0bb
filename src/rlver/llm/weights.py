"""An engine's own copy of the weights: handed over by name, freed on release, taken back on resume.

Why a module of its own: freeing a transformers model's memory and getting the same model back is
easy to get subtly wrong, and nothing fails loudly when it is. Two traps, both seen in review:

* **Non-persistent buffers** (rotary embeddings' ``inv_freq`` and ``original_inv_freq``) are not in
  ``state_dict()``, so weights synced by name never carry them. An engine that rebuilds or re-creates
  its tensors on resume and then loads the trained weights by name keeps whatever the buffer held
  (nothing, or a recomputation in another dtype): the rollout log-prob gap went from 1e-7 to 2e-3.
* **Tied weights** (the embeddings and the LM head of a model with ``tie_word_embeddings``) are one
  tensor under two names. Loading by name into fresh tensors unties them: the tiny model went from
  1.0 MB to 1.5 MB of weights, and the two copies drift apart after the next update.

:class:`WeightSlots` therefore never replaces a tensor *object*: release points each unique tensor
at an empty storage (tied names share the tensor, so they stay one) and moves the non-persistent
buffers to the host; resume allocates each tensor again at its shape and copies those buffers back
exactly; :meth:`WeightSlots.load` copies the trained values in by ``state_dict`` name. Sampling before
every tensor was loaded again is refused (:meth:`WeightSlots.check_loaded`), so a sync that forgot a
name fails instead of sampling from uninitialised memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def named_weights(module: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """What a trainer hands an engine: ``(name, tensor)`` of ``module.state_dict()`` (parameters and
    persistent buffers; a tied weight under each of its names), as views, not copies."""
    yield from module.state_dict().items()


@dataclass
class _Freed:
    shape: tuple[int, ...]
    dtype: Any
    device: Any


class WeightSlots:
    """The tensors of ``module`` by ``state_dict`` name, which :meth:`free`, :meth:`allocate` and
    :meth:`load` act on in place."""

    def __init__(self, module: Any) -> None:
        self.module = module
        #: name -> the module's own tensor (a Parameter or a persistent buffer); tied names share one
        self.slots: dict[str, Any] = dict(module.state_dict(keep_vars=True))
        self._unique: dict[int, Any] = {id(t): t for t in self.slots.values()}
        self._freed: dict[int, _Freed] = {}
        self._host_buffers: list[tuple[Any, Any]] = []  # (the buffer, its values on the host)
        self._unloaded: set[int] = set()

    @property
    def released(self) -> bool:
        return bool(self._freed)

    def bytes(self) -> int:
        """Bytes the module's unique tensors (tied ones once) hold now."""
        return sum(t.numel() * t.element_size() for t in self._unique.values())

    def free(self) -> None:
        """Point every unique tensor at an empty storage and keep the non-persistent buffers on the
        host (their values, exactly); the tensor objects, and so the ties between names, stay."""
        import torch

        if self.released:
            return
        for key, tensor in self._unique.items():
            self._freed[key] = _Freed(tuple(tensor.shape), tensor.dtype, tensor.device)
            tensor.data = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
        seen: set[int] = set()  # one buffer object may sit under two names (one rotary's two inv_freq)
        for owner in self.module.modules():
            for name in sorted(getattr(owner, "_non_persistent_buffers_set", ())):
                buffer = owner._buffers.get(name)
                if buffer is None or id(buffer) in seen:
                    continue
                seen.add(id(buffer))
                self._host_buffers.append((buffer, buffer.detach().to("cpu", copy=True)))
                buffer.data = torch.empty(0, dtype=buffer.dtype, device=buffer.device)

    def allocate(self) -> None:
        """Give every freed tensor its storage back (uninitialised until :meth:`load`) and copy the
        non-persistent buffers back as they were."""
        import torch

        if not self.released:
            return
        for key, freed in self._freed.items():
            self._unique[key].data = torch.empty(freed.shape, dtype=freed.dtype, device=freed.device)
        for buffer, saved in self._host_buffers:
            buffer.data = saved.to(buffer.device, copy=True)
        self._unloaded = set(self._freed)
        self._freed.clear()
        self._host_buffers.clear()

    def load(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy each named tensor into the module's own; returns how many were copied. A tensor that
        already is the module's own storage (an engine on the trained module itself) is skipped."""
        import torch

        if self.released:
            raise RuntimeError("update_weights after release: resume() the engine first")
        copied = 0
        with torch.no_grad():
            for name, value in weights:
                slot = self.slots.get(name)
                if slot is None:
                    raise KeyError(f"update_weights: the engine's model has no weight named {name!r}")
                if tuple(value.shape) != tuple(slot.shape):
                    raise ValueError(
                        f"update_weights: {name} has shape {tuple(value.shape)}, "
                        f"the engine's is {tuple(slot.shape)}"
                    )
                self._unloaded.discard(id(slot))
                if slot.data_ptr() == value.data_ptr() and slot.device == value.device:
                    continue
                slot.data.copy_(value)
                copied += 1
        return copied

    def check_loaded(self) -> None:
        """Refuse to sample while released, or resumed with tensors no :meth:`load` has filled."""
        if self.released:
            raise RuntimeError("the engine is released: resume() it and load the weights before sampling")
        if self._unloaded:
            names = sorted(n for n, t in self.slots.items() if id(t) in self._unloaded)
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            raise RuntimeError(f"the engine resumed but update_weights never loaded {shown}")
