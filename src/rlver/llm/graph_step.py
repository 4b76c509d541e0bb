"""A decode step a CUDA graph can hold: forward, sampling and the step's bookkeeping in one function
with fixed shapes and no host work, and the read-back of its ids one step late.

Why: a compiled step (``torch.compile(mode="reduce-overhead")``: CUDA graphs) is replayed without the
host only when nothing in it asks the host anything. So each row's key and value are written at its
own column (a device tensor of positions, :class:`rlver.llm.static_slots.RowCache`), each row's mask is
computed on the device from that position, each row's uniform for the step is gathered at its own step
index (a device tensor), and the position and step index advance in place. The host then reads the step's ids and log-probs once, through :class:`ReadBack`, queued before
the next step is launched, so that the host's bookkeeping of step ``t`` overlaps the device's
``t + 1``. ``tests/llm/test_graph_step.py`` compiles :func:`decode_step` with ``fullgraph=True`` on
the CPU (no graph break) and counts the host syncs of a step (one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlver.llm.sampling import sample_tokens

if TYPE_CHECKING:
    import torch


def decode_step(
    model: Any,
    cache_keyword: str,
    cache: Any,
    ids: torch.Tensor,
    position: torch.Tensor,
    uniforms: torch.Tensor | None,
    steps: torch.Tensor,
    temperature: float,
    top_p: float,
    top_k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Feed ``ids`` (``[rows]``), each row at its own next column, and sample every row's next token:
    ``(ids, log-probs)``, both ``[rows]`` on the device.

    ``cache`` is a :class:`rlver.llm.static_slots.RowCache`: it writes row ``b``'s key and value at
    ``position[b]`` (``[rows, 1]``, advanced in place before the forward: the column and the rotary
    position are one number, since a row's prompt starts at column 0), and the mask lets row ``b`` see
    its columns ``0..position[b]`` alone. ``steps`` (``[rows]``, the index of each row's next uniform)
    advances in place. Both are clamped to the cache's length, so a free slot, which runs along
    unread, never indexes past it (a live row never gets there: its prompt and budget fit)."""
    position.add_(1).clamp_(max=cache.length - 1)
    out = model(
        input_ids=ids.reshape(-1, 1),
        attention_mask=cache.attention_mask(position),
        position_ids=position,
        use_cache=True,
        **{cache_keyword: cache},
    )
    u = None if uniforms is None else uniforms.gather(1, steps.reshape(-1, 1)).squeeze(1)
    next_ids, logps = sample_tokens(out.logits[:, -1, :], u, temperature, top_p, top_k)
    steps.add_(1).clamp_(max=cache.length - 1)
    return next_ids, logps


class ReadBack:
    """A step's ``lines`` rows of values to the host (ids and log-probs): queued with :meth:`queue`
    (into pinned memory on CUDA, without waiting), waited for with :meth:`wait`, the one host sync of
    a step."""

    def __init__(self, rows: int, device: torch.device, lines: int = 2) -> None:
        import torch

        self.cuda = device.type == "cuda"
        self.buffer = torch.empty((lines, rows), dtype=torch.float32, pin_memory=self.cuda)
        self.event: Any = torch.cuda.Event() if self.cuda else None
        self.packed: torch.Tensor | None = None

    def queue(self, *lines: torch.Tensor) -> None:
        """Start the copy (ids below 2**24 are exact in float32)."""
        import torch

        packed = torch.stack([line.to(torch.float32) for line in lines])
        if self.cuda:
            self.buffer.copy_(packed, non_blocking=True)
            self.event.record()
        else:
            self.packed = packed

    def wait(self) -> list[list[float]]:
        """Wait for the queued copy and return its lines as host lists."""
        if self.cuda:
            self.event.synchronize()
            return self.buffer.tolist()  # type: ignore[no-any-return]
        assert self.packed is not None
        return self.packed.tolist()  # type: ignore[no-any-return]
