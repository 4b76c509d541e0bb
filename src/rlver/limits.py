"""The sizes rlver accepts: how long one text field may be, and how many dialogues one run may hold.

Why bounds at all: a request far beyond what a run can do was accepted and failed late. ``rlver eval
--n-per-profile 100000000 --limit 1`` spent four minutes listing its dialogues, grew to 7.6 GB and then
needed two minutes to exit after SIGTERM; a 2 MB persona was accepted and would have been quoted into
every simulator prompt. Each bound here is checked before any model loads or folder is made, and its
message says the limit and where it comes from (docs/reliability.md, "Limits").

- :data:`MAX_TEXT_CHARS`: one text field (a profile's persona, background, goal, hidden need, opening
  line; an agent's system prompt, inline or ``@file``). The longest field of the 600 published
  profiles is 2,265 characters (a training profile's ``scene``); the bound is about nine times that.
- :func:`max_dialogues`: the dialogues one run holds in memory at once (an evaluation's whole run, a
  training step). Each is about :data:`BYTES_PER_DIALOGUE` while it runs and after (measured below);
  a run may take :data:`MEMORY_SHARE` of the machine's memory. On a 24 GiB machine that is about
  98,000 dialogues (the Sentient Benchmark is 100).
"""

from __future__ import annotations

from rlver.errors import ConfigError

#: The longest text one field may hold, in characters (module docstring: why this number).
MAX_TEXT_CHARS = 20_000

#: Memory one dialogue takes in a run: the 600 released SAGE dialogues of the DeepSeek-V3 simulator
#: (10 turns, every appraisal) take 58 KB each as rlver's records (78 KB at the peak of reading them;
#: tracemalloc, 2026-11-28), and an evaluation holds each twice at its end (the dialogues it ran and
#: the transcript it reads back for the metrics): about 128 KiB.
BYTES_PER_DIALOGUE = 128 * 1024

#: The share of the machine's memory one run's dialogues may take; the rest is the model's, the
#: simulator's and everything else's.
MEMORY_SHARE = 0.5


def meminfo_bytes(field: str) -> float | None:
    """One field of ``/proc/meminfo`` (``MemTotal``, ``MemAvailable``) in bytes, or None where there is
    no such file or field (not Linux)."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def machine_memory_bytes() -> float | None:
    """The machine's memory (``MemTotal``; psutil where there is no /proc), or None when unknown.

    The total, not what is free now: a bound that moved with whatever else runs would refuse the same
    request on a busy afternoon and accept it at night.
    """
    total = meminfo_bytes("MemTotal")
    if total is not None:
        return total
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError:
        return None
    return float(psutil.virtual_memory().total)


#: The bound where the machine's memory cannot be read: what a 16 GiB machine gives.
_UNKNOWN_MEMORY = 16 * 2**30


def max_dialogues(memory_bytes: float | None = None) -> int:
    """How many dialogues one run may hold on a machine with ``memory_bytes`` (default: this one's)."""
    memory = memory_bytes if memory_bytes is not None else machine_memory_bytes() or _UNKNOWN_MEMORY
    return max(1, int(memory * MEMORY_SHARE // BYTES_PER_DIALOGUE))


def check_dialogues(count: int, request: str, fix: str, *, memory_bytes: float | None = None) -> None:
    """Refuse a run of ``count`` dialogues that this machine cannot hold (a :class:`ConfigError`, exit 2).

    ``request`` says where the count comes from (``--n-per-profile 100000000 x 1 profile``), ``fix``
    what to change; the message gives the limit and how it is reached.
    """
    limit = max_dialogues(memory_bytes)
    if count <= limit:
        return
    memory = memory_bytes if memory_bytes is not None else machine_memory_bytes() or _UNKNOWN_MEMORY
    raise ConfigError(
        f"{request} = {count:,} dialogues: more than one run holds on this machine (at most {limit:,}: "
        f"about {BYTES_PER_DIALOGUE // 1024} KiB each, in {MEMORY_SHARE:.0%} of its "
        f"{memory / 2**30:.1f} GiB); {fix}"
    )


def text_too_long(length: int) -> str | None:
    """Why a text of ``length`` characters is refused (None: it is not)."""
    if length <= MAX_TEXT_CHARS:
        return None
    return f"{length:,} characters; a text field holds at most {MAX_TEXT_CHARS:,}"
