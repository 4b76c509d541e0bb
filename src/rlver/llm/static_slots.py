"""Continuous batching on a static KV cache: fixed slots, each row at its own column, a freed slot
refilled at the next step, and a decode step whose inputs never move (what a CUDA graph replays).

Why a cache of our own: transformers' ``StaticCache`` writes step ``t``'s keys and values at one column
for every row (one ``cumulative_length``), so a row that joins later, at column 0 of its own prompt
while the others are at ``t``, cannot share it. Here:

* **A write position per row.** :class:`RowCache`'s layers scatter each row's new key and value at
  that row's own column, read from ``position`` (``[slots, 1]``, a device tensor). The same tensor is
  the row's rotary position, because a row's prompt starts at column 0 (no left padding).
* **A mask per row.** :func:`rlver.llm.graph_step.decode_step` computes the visible columns on the
  device, ``columns <= position[b]``: the row's own prompt and tokens, nothing of a former occupant.
* **A prefill into a slot.** A newcomer's prompt is run eagerly, outside the captured step, with the
  dynamic path's left-padded prefill (:meth:`rlver.llm.decoding.Decoder.join`); its keys and values are
  copied into its slot's rows at columns ``0..len-1``, and its position, step index and uniforms are
  written into the slot. Every tensor the step reads keeps its address.
* **A freed slot is reset by its position,** not zeroed: the mask hides the old columns and the next
  occupant overwrites them in order.

The step's ids and log-probs come back one step late (:class:`rlver.llm.graph_step.ReadBack`): step
``t``'s read is queued, step ``t + 1`` is launched, and only then does the host wait. So the host
learns that a row drew a stop id one step after the step that drew it, and that slot has decoded one
surplus step before it is refilled. A row that ends at its token budget costs nothing extra: the host
knows ahead which token is its last, and the slot takes its newcomer in the same turn that reads that
token (the read carries both, the leaving row's token and the newcomer's first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlver.heartbeat import activity
from rlver.llm.decoding import cache_layers
from rlver.llm.graph_step import ReadBack, decode_step
from rlver.llm.sampling import sample_tokens

if TYPE_CHECKING:
    import torch

    from rlver.llm.decoding import Decoder
    from rlver.llm.engine_request import Request, Sample

#: The static cache's length is a multiple of this (a compiled step is recorded once per length).
LENGTH_STEP = 256


class RowLayer:
    """One layer's keys and values, ``[slots, heads, length, dim]`` (allocated once, never moved)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        self.keys = keys
        self.values = values
        static_address(keys)
        static_address(values)


class RowCache:
    """The static KV cache of :class:`StaticSlots`: one :class:`RowLayer` per model layer, the shared
    ``position`` each row's new key and value are written at, and what the step's mask is computed
    from (``columns``).

    Why not a subclass of transformers' ``Cache``: the decoder layers call only :meth:`update`, and a
    prepared 4-D mask skips the model's own mask building (which is what reads a cache's lengths), so
    this class depends on one call of the model's and nothing of transformers' cache internals.
    """

    def __init__(self, like: list[Any], slots: int, length: int, position: torch.Tensor, mask: str) -> None:
        """``like``: the prefill's dynamic layers (their heads, head size, dtype and device);
        ``mask``: the model's attention implementation (``"sdpa"`` takes a boolean mask, ``"eager"``
        an additive one)."""
        import torch

        if mask not in ("sdpa", "eager"):
            raise TypeError(f"the static-cache path needs sdpa or eager attention, the model uses {mask!r}")
        self.layers = [
            RowLayer(
                d.keys.new_zeros((slots, d.keys.shape[1], length, d.keys.shape[3])),
                d.values.new_zeros((slots, d.values.shape[1], length, d.values.shape[3])),
            )
            for d in like
        ]
        self.position = position
        self.length = length
        self.columns = torch.arange(length, device=position.device)
        self.additive = mask == "eager"
        self.dtype = like[0].keys.dtype

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scatter each row's one new column at ``position[b]`` and return the layer's whole keys and
        values (a prefill never comes here: it is copied in by :meth:`StaticSlots.admit`)."""
        if key_states.shape[-2] != 1:
            raise ValueError("a row cache takes one token per row (prefills are copied in)")
        layer = self.layers[layer_idx]
        at = self.position.reshape(-1, 1, 1, 1)
        layer.keys.scatter_(2, at.expand(-1, key_states.shape[1], 1, key_states.shape[3]), key_states)
        layer.values.scatter_(2, at.expand(-1, value_states.shape[1], 1, value_states.shape[3]), value_states)
        return layer.keys, layer.values

    def attention_mask(self, position: torch.Tensor) -> torch.Tensor:
        """``[slots, 1, 1, length]``: row ``b`` sees its columns ``0..position[b]`` and nothing after
        (the former occupant's columns included)."""
        import torch

        visible = (self.columns.reshape(1, -1) <= position)[:, None, None, :]
        if not self.additive:
            return visible
        zero = torch.zeros((), dtype=self.dtype, device=visible.device)
        return torch.where(visible, zero, torch.finfo(self.dtype).min)


@dataclass
class Row:
    """A slot's occupant: its request and token budget, and its ids and log-probs read so far."""

    request: Request
    budget: int
    tokens: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)

    def ending(self) -> bool:
        """Whether the token in flight is its last by budget (known before it is read)."""
        return len(self.tokens) + 1 >= self.budget


@dataclass
class Turn:
    """What one turn did: the rows that finished (with their results), whether a decode step was
    launched, and how many rows that step fed that go on (the slots it used)."""

    finished: list[tuple[Request, Sample]]
    stepped: bool
    used: int


class StaticSlots:
    """``slots`` rows on one :class:`RowCache`, decoded by :func:`rlver.llm.graph_step.decode_step`
    (compiled with ``compile_decode``); driven by :class:`rlver.llm.scheduler.Scheduler`, one
    :meth:`turn` a decode step."""

    def __init__(self, decoder: Decoder, slots: int) -> None:
        self.decoder = decoder
        self.slots = slots
        self.device = decoder.device
        self.rows: list[Row | None] = [None] * slots
        self.cache: RowCache | None = None
        #: the last step's ids and log-probs (device tensors), not yet read
        self.prev: tuple[torch.Tensor, torch.Tensor] | None = None
        self.read = ReadBack(slots, self.device, lines=4)
        #: the rows' sampling settings (temperature, top-p, top-k) and whether they draw uniforms
        self.knobs: tuple[float, float, int] = (1.0, 1.0, 0)
        self.sampled = False
        self._buffers()

    # -- what the scheduler asks --------------------------------------------------------------------------
    def room(self) -> int:
        """Slots a newcomer may take this turn: empty ones, and those whose row reads its last token now."""
        return sum(row is None or row.ending() for row in self.rows)

    def key(self) -> tuple[float, float, int] | None:
        """The sampling settings the rows share (``None``: no row, any may come)."""
        return next((row.request.key for row in self.rows if row is not None), None)

    def idle(self) -> bool:
        return all(row is None for row in self.rows)

    def requests(self) -> list[Request]:
        return [row.request for row in self.rows if row is not None]

    def clear(self) -> None:
        """Forget the rows (a new busy period, or after a failure); the cache stays as it is."""
        self.rows = [None] * self.slots
        self.prev = None

    # -- one turn -----------------------------------------------------------------------------------------
    def turn(self, newcomers: list[Request]) -> Turn:
        """Admit ``newcomers`` into free slots, queue the read of the tokens in flight, launch the
        next decode step if any row goes on, then wait for the read and do the rows' bookkeeping."""
        free = [s for s, row in enumerate(self.rows) if row is None or row.ending()]
        if len(newcomers) > len(free):
            raise ValueError(f"{len(newcomers)} newcomers for {len(free)} free slots")
        placed = list(zip(free, newcomers, strict=False))
        leaving = {s: self.rows[s] for s, _ in placed if self.rows[s] is not None}
        fed_ids, fed_lps = self.admit(placed)
        prev_ids, prev_lps = self.prev if self.prev is not None else (fed_ids, fed_lps)
        self.read.queue(prev_ids, prev_lps, fed_ids, fed_lps)  # before the next step is launched
        stepped = any(row is not None and not row.ending() for row in self.rows)
        self.prev = self._launch(fed_ids) if stepped else None
        lines = self.read.wait()  # the turn's one host sync
        activity.add_tokens(len(leaving) + len(self.requests()))  # progress lines (rlver.heartbeat)
        finished: list[tuple[Request, Sample]] = []
        for s, old in leaving.items():
            assert old is not None
            self._take_token(old, lines[0][s], lines[1][s], finished)
        for s, row in enumerate(self.rows):
            if row is not None and self._take_token(row, lines[2][s], lines[3][s], finished):
                self.rows[s] = None
        return Turn(finished, stepped, sum(row is not None for row in self.rows) if stepped else 0)

    def _take_token(
        self, row: Row, token: float, logp: float, finished: list[tuple[Request, Sample]]
    ) -> bool:
        """Append a read token to its row; whether the row has ended (then it is in ``finished``)."""
        row.tokens.append(int(token))
        row.logps.append(float(logp))
        done = self.decoder.row_ends(row.request, row.tokens, row.budget)
        if done:
            finished.append((row.request, (row.tokens, row.logps)))
        return done

    def _launch(self, fed_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One decode step on the held buffers (their addresses never change)."""
        assert self.cache is not None
        self.ids.copy_(fed_ids)
        step = self.decoder.compiled_step if self.decoder.compiled_step is not None else decode_step
        if self.decoder.compiled_step is not None:
            mark_cuda_graph_step()
        ids, logps = step(
            self.decoder.model, self.decoder.cache_keyword, self.cache, self.ids, self.position,
            self.uniforms if self.sampled else None, self.steps, *self.knobs,
        )  # fmt: skip
        return ids, logps

    # -- admission ----------------------------------------------------------------------------------------
    def admit(self, placed: list[tuple[int, Request]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Prefill the newcomers (eager, left-padded among themselves), copy their keys and values into
        their slots at columns ``0..len-1``, set their positions, step indices and uniforms, and
        sample their first tokens: the ids and log-probs this turn feeds and reads, ``[slots]`` each
        (the previous step's, with the newcomers' first tokens in their slots)."""

        if not placed:
            assert self.prev is not None
            return self.prev
        fresh = self.decoder.join(None, [r for _, r in placed])
        self._fit(max(n + b for n, b in zip(fresh.lengths, fresh.budgets, strict=True)), fresh.cache)
        assert self.cache is not None
        index = self._on_device([s for s, _ in placed])
        lengths = self._on_device(fresh.lengths)
        self._copy_prompts(fresh.cache, index, lengths, fresh.width)
        self.position.index_copy_(0, index, (lengths - 1).reshape(-1, 1))
        self.steps.index_fill_(0, index, 1)  # the first uniform is the prefill's
        self.knobs = placed[0][1].key  # every row shares it (the scheduler's take)
        self.sampled = fresh.uniforms is not None
        if fresh.uniforms is not None:
            rows = fresh.uniforms.new_zeros((len(placed), self.cache.length))
            rows[:, : fresh.uniforms.shape[1]] = fresh.uniforms
            self.uniforms.index_copy_(0, index, rows)
        first_ids, first_lps = sample_tokens(fresh.logits, fresh.step_uniforms(), *self.knobs)
        for (slot, request), budget in zip(placed, fresh.budgets, strict=True):
            self.rows[slot] = Row(request, budget)
        if self.prev is None:
            base_ids, base_lps = self.ids.new_zeros(self.slots), first_lps.new_zeros(self.slots)
        else:
            base_ids, base_lps = self.prev
        return base_ids.index_copy(0, index, first_ids), base_lps.index_copy(
            0, index, first_lps.to(base_lps.dtype)
        )

    def _on_device(self, values: list[int]) -> torch.Tensor:
        """Host integers on the device without waiting for the step in flight (a blocking copy from
        pageable memory would wait for it): from pinned memory, not blocking, on CUDA."""
        import torch

        host = torch.tensor(values, dtype=torch.long)
        if self.device.type == "cuda":
            return host.pin_memory().to(self.device, non_blocking=True)
        return host.to(self.device)

    def _copy_prompts(self, dynamic: Any, index: torch.Tensor, lengths: torch.Tensor, width: int) -> None:
        """Each newcomer's keys and values, right-aligned in the prefill's left-padded cache, into its
        slot at columns ``0..len-1`` (the columns after are left as they are: the mask hides them)."""
        import torch

        assert self.cache is not None
        columns = torch.arange(width, device=self.device).reshape(1, -1)
        source = (columns + (width - lengths).reshape(-1, 1)).clamp(max=width - 1)  # [rows, width]
        for mine, theirs in zip(self.cache.layers, cache_layers(dynamic), strict=True):
            for into, keys in ((mine.keys, theirs.keys), (mine.values, theirs.values)):
                at = source[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
                into[index, :, :width] = keys.gather(2, at).to(into.dtype)

    # -- the held tensors -----------------------------------------------------------------------------------
    def _buffers(self) -> None:
        """The step's inputs that live as long as this object (a captured graph reads them in place)."""
        import torch

        self.ids = torch.zeros(self.slots, dtype=torch.long, device=self.device)
        self.position = torch.zeros((self.slots, 1), dtype=torch.long, device=self.device)
        self.steps = torch.zeros(self.slots, dtype=torch.long, device=self.device)
        self.uniforms = torch.zeros((self.slots, 1), dtype=torch.float32, device=self.device)
        for t in (self.ids, self.position, self.steps):
            static_address(t)

    def _fit(self, need: int, like: Any) -> None:
        """A cache of at least ``need`` columns (a multiple of :data:`LENGTH_STEP`): made on the first
        prefill (its layers give the heads, head size and dtype), grown when a newcomer needs more (the
        rows' columns copied over; a compiled step is recorded again for the new length)."""
        import torch

        if self.cache is not None and need <= self.cache.length:
            return
        old = self.cache
        length = -(-need // LENGTH_STEP) * LENGTH_STEP
        mask = str(getattr(self.decoder.model.config, "_attn_implementation", "sdpa") or "sdpa")
        self.cache = RowCache(cache_layers(like), self.slots, length, self.position, mask)
        if old is not None:
            for new, was in zip(self.cache.layers, old.layers, strict=True):
                new.keys[:, :, : old.length] = was.keys
                new.values[:, :, : old.length] = was.values
        uniforms = torch.zeros((self.slots, length), dtype=torch.float32, device=self.device)
        uniforms[:, : self.uniforms.shape[1]] = self.uniforms
        self.uniforms = uniforms
        static_address(self.uniforms)
        static_address(self.cache.columns)


def held_slots(decoder: Decoder, slots: int) -> StaticSlots:
    """The decoder's held :class:`StaticSlots` for ``slots`` rows, cleared (a compiled step stays
    valid for its tensors), or a new one; the old one is let go first."""
    held = decoder.held_static
    if isinstance(held, StaticSlots) and held.slots == slots:
        held.clear()
        return held
    decoder.held_static = None
    decoder.held_static = StaticSlots(decoder, slots)
    return decoder.held_static


def static_address(t: torch.Tensor) -> None:
    """Tell dynamo the tensor keeps its address (a CUDA graph may read it in place)."""
    import torch

    torch._dynamo.mark_static_address(t)


def mark_cuda_graph_step() -> None:
    """A compiled step's outputs are overwritten by its next replay (CUDA graphs): say where a new
    step begins."""
    import torch

    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()


def static_decode_steps(lengths: list[int], slots: int, *, known_ends: bool) -> int:
    """The decode steps :class:`StaticSlots` takes for replies of ``lengths`` tokens admitted in this
    order, first in first out: a reply that ends at its budget (``known_ends``) holds its slot for
    ``len - 1`` steps (the newcomer joins the step of the turn that reads its last token); one that
    ends by a drawn stop holds it for ``len`` steps (the last one surplus: its stop is read one step
    late), and if the last reply of all ends so, the busy period's last step is that surplus one.
    What the static path's occupancy is measured against (its tests, bench/engine_speed.py)."""
    queue, rows, steps = list(lengths), [0] * slots, 0  # per slot: the tokens it has still to read
    while queue or any(rows):
        for s in range(slots):
            if queue and (rows[s] == 0 or (known_ends and rows[s] == 1)):
                rows[s] = queue.pop(0)
        steps += any(r > 1 or (r == 1 and not known_ends) for r in rows)
        rows = [max(r - 1, 0) for r in rows]
    return steps
