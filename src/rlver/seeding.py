"""One hashed seed for the whole package: a stable 31-bit integer from any parts.

Python's ``hash()`` is salted per process, so it cannot seed anything that must repeat across runs;
a sha256 of the parts can. Hashing (rather than adding offsets) gives nearby inputs unrelated streams.
31 bits because every server and sampler takes that range. Used for the agent's per-turn sampling
seed on both engines (:mod:`rlver.rollout.runner`, the verl agent loop) and calibrate's per-turn
simulator seed.
"""

from __future__ import annotations

import hashlib


def hashed_seed(*parts: object) -> int:
    """A stable 31-bit seed from ``parts`` (joined by ``:`` as text, then sha256)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF
