"""Token sampling for a whole batch at once, on the model's device.

Why a module of its own: the local sampler (:mod:`rlver.llm.local`) used to copy the log-softmax of
every row (``[rows, vocab]`` floats) to the host each decode step and draw per row in Python. On a GPU
that copy and the per-row loop cost more than the forward itself. Here temperature, top-k and top-p act
on all rows together where the logits are, and only the chosen ids and their log-probs leave.

The randomness contract: each row owns a CPU ``torch.Generator`` seeded with its own seed. Before a
generation, :func:`row_uniforms` draws one uniform per row per possible step from that generator, and
step ``t`` of a row uses its ``t``-th uniform to invert the cumulative distribution of the filtered
probabilities. So a row's tokens depend only on its prompt and its seed, never on which rows share its
batch, on the batch size, or on when other rows stop. (The same seed draws different tokens than the
older per-row ``torch.multinomial`` did; only the distribution is the same.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from rlver.llm.base import SamplingParams


def is_greedy(temperature: float) -> bool:
    """Whether ``temperature`` asks for greedy decoding — the one definition of what 0 means.

    Temperature 0 (``SamplingParams.temperature`` is ``>= 0``) does not divide the logits by zero: it
    takes the argmax of every step, draws no randomness, and so gives the same text for the same
    prompt (what the answer cache and verl's ``do_sample`` key on). Its tokens are *scored* at
    temperature 1 (:func:`scoring_temperature`).
    """
    return temperature <= 0


def scoring_temperature(temperature: float) -> float:
    """The temperature a token sampled at ``temperature`` is scored at: itself, and 1 for greedy.

    The sampler reports a greedy token's log-prob under the plain softmax (``log_softmax(logits)``), so
    the trainer's ratio and the rollout-vs-trainer check must score it there too; a sampled token is
    scored under the tempered softmax it was drawn from.
    """
    return 1.0 if is_greedy(temperature) else temperature


#: What a token engine's filters mean, for every engine that draws by :func:`sample_tokens`' rule.
LOGPROB_CONVENTION = "log_softmax(logits / temperature), before top-p/top-k filtering"


def explicit_settings(
    sampling: SamplingParams, *, extra_keys: frozenset[str], engine: str, **fixed: Any
) -> dict[str, Any]:
    """Every setting a token engine samples ``sampling`` with, stated explicitly: the one home of what
    an engine records (``TokenEngine.sampling_settings`` of every engine calls it), so that greedy
    decoding and ``top_k`` read the same on all of them.

    Greedy (:func:`is_greedy`) takes the argmax, so no filter acts: ``top_p`` 1 and ``top_k`` 0 are
    recorded whatever was asked. ``top_k`` comes from ``sampling.extra`` (0 = off). ``extra_keys``:
    the ``extra`` keys the engine honours; any other is refused (``ValueError`` naming ``engine``), as
    a silently ignored setting would make the recorded sampling differ from what was sampled.
    ``fixed``: what the engine always does beyond them (``repetition_penalty=1.0``...), recorded after.
    """
    unknown = sorted(set(sampling.extra) - extra_keys)
    if unknown:
        raise ValueError(f"sampling.extra: {engine} supports only {sorted(extra_keys)}, got {unknown}")
    top_k = int(sampling.extra.get("top_k", 0) or 0)
    if top_k < 0:
        raise ValueError(f"sampling.extra.top_k must be >= 0 (0 = off), got {top_k}")
    greedy = is_greedy(sampling.temperature)  # no filter: the argmax is taken
    return {
        "temperature": sampling.temperature,
        "top_p": 1.0 if greedy else sampling.top_p,
        "top_k": 0 if greedy else top_k,
        "max_tokens": sampling.max_tokens,
        "seed": sampling.seed,
        "stop": list(sampling.stop or []),
        **fixed,
    }


def row_uniforms(generators: Sequence[torch.Generator], steps: int, device: torch.device) -> torch.Tensor:
    """``[rows, steps]`` float32 uniforms in [0, 1); row ``r`` drawn from ``generators[r]`` alone.

    Drawn on the CPU (where the generators live) and moved once per generation, so the decode loop
    never goes back to the host for randomness.
    """
    import torch

    if not generators:
        return torch.empty((0, steps), dtype=torch.float32, device=device)
    drawn = torch.stack([torch.rand(steps, generator=g, dtype=torch.float32) for g in generators])
    return drawn.to(device)


def sample_tokens(
    logits: torch.Tensor,
    uniforms: torch.Tensor | None,
    temperature: float,
    top_p: float = 1.0,
    top_k: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row, and its log-prob, both ``[rows]`` tensors on the logits' device.

    The log-prob is taken under ``log_softmax(logits / temperature)`` *before* filtering: the trainer
    scores the plain tempered softmax, and the rollout-vs-trainer check compares like with like.
    ``temperature`` 0 is greedy (argmax, ``uniforms`` unused). Otherwise ``top_k`` (0 = off) keeps the
    ``k`` most likely tokens, then ``top_p`` keeps the smallest most-likely prefix whose mass reaches
    ``top_p`` (the most likely token always stays), and ``uniforms[r]`` picks a token of what is left.
    """
    import torch

    logits = logits.float()
    if is_greedy(temperature):
        logp = torch.log_softmax(logits, dim=-1)
        ids = logp.argmax(dim=-1)
        return ids, logp.gather(-1, ids[:, None]).squeeze(-1)
    if uniforms is None:
        raise ValueError("sample_tokens: temperature > 0 needs one uniform per row")
    logp = torch.log_softmax(logits / temperature, dim=-1)
    probs = logp.exp()
    vocab = probs.shape[-1]
    if 0 < top_k < vocab:
        kept, order = torch.topk(probs, top_k, dim=-1, sorted=True)
    elif top_p < 1.0:
        kept, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    else:
        ids = inverse_cdf(probs, uniforms)  # no filter: vocab order, no sort at all
        return ids, logp.gather(-1, ids[:, None]).squeeze(-1)
    if top_p < 1.0:
        kept = nucleus(kept, top_p)
    ids = order.gather(-1, inverse_cdf(kept, uniforms)[:, None]).squeeze(-1)
    return ids, logp.gather(-1, ids[:, None]).squeeze(-1)


def nucleus(sorted_probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero every token after the smallest most-likely prefix whose (renormalised) mass reaches
    ``top_p``; ``sorted_probs`` is descending per row. The first token is always kept."""
    total = sorted_probs.sum(dim=-1, keepdim=True)
    mass_before = (sorted_probs.cumsum(dim=-1) - sorted_probs) / total
    drop = mass_before >= top_p
    drop[..., 0] = False
    return sorted_probs.masked_fill(drop, 0.0)


def inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Per row, the index ``i`` with ``cdf[i-1] <= u * total < cdf[i]`` of non-negative ``weights``.

    Why it cannot pick a zero-weight (filtered-out) index: a zero weight leaves the running sum
    unchanged, so no target falls strictly between it and its predecessor; the target is held strictly
    below the row's total, so the index never runs past the vocabulary. A last guard replaces any
    zero-weight pick (rounding in a device's parallel cumsum) with the row's heaviest index.
    """
    import torch

    cdf = weights.cumsum(dim=-1)
    total = cdf[:, -1:]
    below_total = torch.nextafter(total, torch.zeros_like(total))
    target = torch.minimum(uniforms[:, None].to(cdf.dtype) * total, below_total)
    index = torch.searchsorted(cdf, target, right=True).clamp(max=weights.shape[-1] - 1)
    picked = weights.gather(-1, index)
    index = torch.where(picked > 0, index, weights.argmax(dim=-1, keepdim=True))
    return index.squeeze(-1)


def to_host(ids: torch.Tensor, logps: torch.Tensor) -> tuple[list[int], list[float]]:
    """The step's only device-to-host copy: ``[2, rows]`` float32 (ids below 2**24 are exact)."""
    import torch

    packed = torch.stack([ids.to(torch.float32), logps.to(torch.float32)]).tolist()
    return [int(t) for t in packed[0]], [float(v) for v in packed[1]]
