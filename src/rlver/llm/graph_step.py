"""A decode step a CUDA graph can hold: forward, sampling and the step's bookkeeping in one function
with fixed shapes and no host work, and the read-back of its ids one step late.

Why: a compiled step (``torch.compile(mode="reduce-overhead")``: CUDA graphs) is replayed without the
host only when nothing in it asks the host anything. So the static KV cache writes at its own device
counter, the new column of the attention mask is set from that counter, each row's uniform for the
step is gathered at its own step index (a device tensor), and the position and step index advance in
place. The host then reads the step's ids and log-probs once, through :class:`ReadBack`, queued before
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
    attention: torch.Tensor,
    position: torch.Tensor,
    uniforms: torch.Tensor | None,
    steps: torch.Tensor,
    temperature: float,
    top_p: float,
    top_k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Feed ``ids`` (``[rows]``) at the static cache's next column and sample the next token of every
    row: ``(ids, log-probs)``, both ``[rows]`` on the device. ``attention`` (``[rows, cache length]``),
    ``position`` (``[rows, 1]``: each row's last position, advanced before the forward) and ``steps`` (``[rows]``, the index of each row's next uniform) are
    updated in place."""
    column = cache.layers[0].cumulative_length.reshape(1)  # where this step's keys go (a device tensor)
    attention.index_fill_(1, column, 1)
    position.add_(1)
    out = model(
        input_ids=ids.reshape(-1, 1),
        attention_mask=attention,
        position_ids=position,
        use_cache=True,
        **{cache_keyword: cache},
    )
    u = None if uniforms is None else uniforms.gather(1, steps.reshape(-1, 1)).squeeze(1)
    next_ids, logps = sample_tokens(out.logits[:, -1, :], u, temperature, top_p, top_k)
    steps.add_(1)
    return next_ids, logps


class ReadBack:
    """A step's ids and log-probs to the host: queued with :meth:`queue` (into pinned memory on CUDA,
    without waiting), waited for with :meth:`wait`, the one host sync of a step."""

    def __init__(self, rows: int, device: torch.device) -> None:
        import torch

        self.cuda = device.type == "cuda"
        self.buffer = torch.empty((2, rows), dtype=torch.float32, pin_memory=self.cuda)
        self.event: Any = torch.cuda.Event() if self.cuda else None
        self.packed: torch.Tensor | None = None

    def queue(self, ids: torch.Tensor, logps: torch.Tensor) -> None:
        """Start the copy (ids below 2**24 are exact in float32)."""
        import torch

        packed = torch.stack([ids.to(torch.float32), logps.to(torch.float32)])
        if self.cuda:
            self.buffer.copy_(packed, non_blocking=True)
            self.event.record()
        else:
            self.packed = packed

    def wait(self) -> tuple[list[int], list[float]]:
        """Wait for the queued copy and return it as host lists."""
        if self.cuda:
            self.event.synchronize()
            rows = self.buffer.tolist()
        else:
            assert self.packed is not None
            rows = self.packed.tolist()
        return [int(t) for t in rows[0]], [float(v) for v in rows[1]]
