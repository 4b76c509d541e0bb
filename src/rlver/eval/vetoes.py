"""How many appraised replies a hard veto refused, and the one line a run prints when most were.

Why a module of its own: the demo prints the counts beside its scores, and ``rlver eval`` must say
them when they explain the score. An eval whose every reply was vetoed for the wrong language scored
3.0 with 100/100 failures and no hint why; the count per veto, read from the appraisals' recorded
features (a hard flag is recorded as a feature of that name), is the hint.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rlver.records import Episode
from rlver.simulator.offline.scoring import hard_flags_of
from rlver.transcripts.native import read_transcript

#: Above this share of vetoed replies the veto, not the agent's content, sets the score: say so.
MOST = 0.5


def veto_counts(episodes: list[Episode]) -> tuple[int, int, dict[str, int]]:
    """Appraised replies, how many tripped a hard veto, and the count per veto (most frequent first).

    A tiny model's score can rise by trading an expensive veto for a cheaper one without ever writing
    a reply the user would accept; printing the counts beside the score keeps that visible.
    """
    counts: Counter[str] = Counter()
    replies = vetoed = 0
    for ep in episodes:
        for turn in ep.user_turns:
            if turn.appraisal is None:
                continue
            flags = hard_flags_of(turn.appraisal.features)
            replies += 1
            vetoed += bool(flags)
            counts.update(flags)
    return replies, vetoed, dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def most_vetoed_line(episodes: list[Episode]) -> str | None:
    """``most replies were vetoed: ...`` when more than half of the appraised replies were, else None."""
    replies, vetoed, by_flag = veto_counts(episodes)
    if not replies or vetoed / replies <= MOST:
        return None
    detail = ", ".join(f"{flag} {n}" for flag, n in by_flag.items())
    top = next(iter(by_flag))
    return (
        f"most replies were vetoed: {vetoed}/{replies} ({detail}): the simulated user refused them "
        f"before judging their content, so the score says more about `{top}` than about the agent "
        f"(docs/simulator.md lists the vetoes)"
    )


def print_veto_line(console: Any, path: Path) -> None:
    """Print :func:`most_vetoed_line` of the transcript at ``path`` (what ``rlver eval`` just wrote) on
    ``console`` (a rich console), if there is one."""
    line = most_vetoed_line(read_transcript(path).episodes)
    if line:
        console.print(line, style="yellow", markup=False, soft_wrap=True)
