"""One hashed seed for the whole package: a stable 31-bit integer from any parts.

Python's ``hash()`` is salted per process, so it cannot seed anything that must repeat across runs;
a sha256 of the parts can. Hashing (rather than adding offsets) gives nearby inputs unrelated streams.
31 bits because every server and sampler takes that range. Used for the agent's per-turn sampling
seed on both engines (:mod:`rlver.rollout.runner`, the verl agent loop) and calibrate's per-turn
simulator seed.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

from pydantic import Field

#: The largest seed a setting takes. What rlver does with one: ``random.seed`` (any integer),
#: ``np.random.seed`` (0 .. 2**32-1), ``np.random.default_rng([seed, epoch])`` (no negative number),
#: ``torch.manual_seed`` (up to 2**64-1; the trainer's step seed ``run.seed * 1_000_003 + step`` must
#: stay under it) and an OpenAI-compatible server's ``seed`` (a 64-bit integer). numpy's range is the
#: narrowest, so it is every seed's: ``--seed 99999999999999999999999999`` is refused before any work
#: instead of overflowing inside ``torch.manual_seed`` after the model loaded.
MAX_SEED = 2**32 - 1

#: A seed setting: an integer from 0 to :data:`MAX_SEED` (the one home of that range).
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]


def hashed_seed(*parts: object) -> int:
    """A stable 31-bit seed from ``parts`` (joined by ``:`` as text, then sha256)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF
