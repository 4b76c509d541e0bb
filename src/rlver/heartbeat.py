"""Plain progress lines for logs: what a run is doing, at least once a minute, when no bar can be seen.

Why: with output going to a file (a cluster job, ``nohup``, CI) a progress bar shows nothing until it
is done, and a single SmolLM2 training step on a CPU takes over 15 minutes. Commands therefore print a
line when a unit of work ends (a dialogue, a step) and, between those, a heartbeat from
:data:`activity`: the phase, the tokens generated so far and the time. The decode loop and the trainer
update :data:`activity`; nothing here imports them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: Prints one line (``typer.echo`` in a command); a test passes ``list.append``.
Say = Callable[[str], None]

#: Seconds between heartbeat lines when nothing else was printed.
HEARTBEAT_S = 60.0


@dataclass
class Activity:
    """What the process is doing now. Plain attribute writes from any thread: a reader may see a value
    one update old, which a progress line can afford."""

    phase: str = "starting"
    tokens: int = 0
    last_line: float = field(default_factory=time.monotonic)

    def set_phase(self, phase: str) -> None:
        self.phase = phase

    def add_tokens(self, n: int) -> None:
        self.tokens += n


activity = Activity()


def duration(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3 h 05 min``: coarse enough to read at a glance in a log."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


def eta(elapsed: float, done: int, total: int | None) -> str:
    """``, about 12 min left`` from the pace so far; empty before the first unit is done."""
    if not total or done <= 0 or done >= total:
        return ""
    return f", about {duration(elapsed / done * (total - done))} left"


@dataclass
class Pace:
    """The time left of work whose units end together, from the pace *between* endings.

    The first unit's end is where the count starts: it carries the loading of the model and, when
    every dialogue of a batch runs at once, nearly the whole run (they end close together). Dividing
    by it made ``rlver eval``'s first line say "about 52 min left" for a run that took 47 s.
    """

    first_at: float | None = None
    first_done: int = 0

    def left(self, done: int, total: int, now: float) -> str:
        """``, about N left`` once two units ended; empty at the first (it only starts the clock)."""
        if self.first_at is None:
            self.first_at, self.first_done = now, done
            return ""
        return eta(now - self.first_at, done - self.first_done, total - self.first_done)


def say_line(say: Say, line: str) -> None:
    """Print a progress line and note the time, so the heartbeat only fills silences."""
    activity.last_line = time.perf_counter()
    say(line)


@contextlib.contextmanager
def heartbeat(say: Say, started: float, every_s: float = HEARTBEAT_S) -> Iterator[None]:
    """While the block runs, print ``  still <phase>: N tokens generated (T)`` whenever ``every_s``
    seconds pass with no other progress line."""
    stop = threading.Event()
    activity.last_line = time.perf_counter()

    def beat() -> None:
        while not stop.wait(min(every_s, 5.0)):
            now = time.perf_counter()
            if now - activity.last_line >= every_s:
                tokens = f": {activity.tokens:,} tokens generated" if activity.tokens else ""
                say_line(say, f"  still {activity.phase}{tokens} ({duration(now - started)})")

    thread = threading.Thread(target=beat, name="rlver-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def step_reporter(
    say: Say,
    total: int | None,
    every: int,
    started: float,
    *,
    min_gap_s: float = 0.0,
    first_step: int = 0,
    with_eta: bool = False,
) -> Callable[[int, dict[str, Any]], None]:
    """A trainer ``on_step`` callback printing a plain line every ``every`` steps (and at the last)
    but at most one per ``min_gap_s`` seconds: step, training reward, the held-out score when one was
    taken, the elapsed time, and (``with_eta``) the time left at the pace since ``first_step``."""
    last = [float("-inf")]

    def on_step(step: int, metrics: dict[str, Any]) -> None:
        now = time.perf_counter()
        if step != total and (step % every or now - last[0] < min_gap_s):
            return
        last[0] = now
        of = f"/{total}" if total else ""
        line = f"  step {step}{of}  reward {metrics['rollout/reward_mean']:.3f}"
        if metrics.get("eval/score") is not None:
            line += f"  held-out {metrics['eval/score']:.1f}"
        left = eta(now - started, step - first_step, None if total is None else total - first_step)
        say_line(say, f"{line}  ({now - started:.0f} s{left if with_eta else ''})")

    return on_step
