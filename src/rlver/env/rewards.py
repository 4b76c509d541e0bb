"""Rewards: what an episode is worth to the learner. Kept apart from the environment (the rubric idea
of *verifiers*): the same transcript can be re-scored under another reward without re-running it.

Modes:

* ``"final"`` — the published setting: final emotion / 100, given at the last assistant turn.
* ``"delta"`` — each appraisal's emotion change / 100, given to the assistant turn it judged (an
  unappraised final reply gets 0). Sums to (final - start) / 100: denser credit assignment.
* ``"mixed"`` — ``mixed_weight * final + (1 - mixed_weight) * delta``, turn by turn.

``format_penalty`` is subtracted once per assistant reply whose think block is not well-formed (only
for episodes run in think mode), on the turn that broke the format.

By construction ``sum(turn_rewards(ep, ...)) == episode_reward(ep, ...)`` for every mode.
"""

from __future__ import annotations

from typing import Literal

from rlver.env.thinking import split_think
from rlver.records import Episode

RewardMode = Literal["final", "delta", "mixed"]
REWARD_MODES: tuple[str, ...] = ("final", "delta", "mixed")


def _check(mode: str, mixed_weight: float) -> None:
    if mode not in REWARD_MODES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")
    if not 0.0 <= mixed_weight <= 1.0:
        raise ValueError(f"mixed_weight must be in [0, 1], got {mixed_weight}")


def format_flags(episode: Episode) -> list[bool]:
    """One flag per assistant reply: True when it broke the think format (think-mode episodes only).

    Recomputed from the raw replies, so it is verifiable from the transcript alone. Whether the
    episode ran in think mode comes from ``meta["think"]`` (falling back to ``format_errors > 0``).
    """
    replies = [m.content for m in episode.messages if m.role == "assistant"]
    think = episode.meta.get("think", episode.format_errors > 0)
    if not think:
        return [False] * len(replies)
    return [not split_think(r).well_formed for r in replies]


def delta_per_turn(episode: Episode) -> list[int]:
    """The emotion change each assistant reply caused (0 for an unappraised reply).

    The user turn after assistant reply ``i`` is ``user_turns[i + 1]`` (``user_turns[0]`` is the
    opening line). Uses after - before, i.e. what was actually applied after the value clamp.
    """
    n = episode.assistant_turns
    out = [0] * n
    for i in range(n):
        j = i + 1
        if j < len(episode.user_turns):
            appraisal = episode.user_turns[j].appraisal
            if appraisal is not None:
                out[i] = appraisal.emotion_after - appraisal.emotion_before
    return out


def turn_rewards(
    episode: Episode,
    mode: RewardMode | str = "final",
    format_penalty: float = 0.0,
    mixed_weight: float = 0.5,
) -> list[float]:
    """One reward per assistant turn, in order (empty for an episode without assistant replies)."""
    _check(mode, mixed_weight)
    n = episode.assistant_turns
    if n == 0:
        return []
    final = [0.0] * n
    final[-1] = max(episode.final_emotion, 0) / 100.0  # floored at 0 as published (url_environment.py:38)
    delta = [d / 100.0 for d in delta_per_turn(episode)]
    if mode == "final":
        rewards = final
    elif mode == "delta":
        rewards = delta
    else:
        rewards = [mixed_weight * f + (1.0 - mixed_weight) * d for f, d in zip(final, delta, strict=True)]
    if format_penalty:
        flags = format_flags(episode)
        rewards = [r - format_penalty * flag for r, flag in zip(rewards, flags, strict=True)]
    return rewards


def episode_reward(
    episode: Episode,
    mode: RewardMode | str = "final",
    format_penalty: float = 0.0,
    mixed_weight: float = 0.5,
) -> float:
    """The scalar reward of a whole episode (``final``: final emotion / 100, the published setting)."""
    _check(mode, mixed_weight)
    final = max(episode.final_emotion, 0) / 100.0  # an unfloored emotion may end below 0
    delta = sum(delta_per_turn(episode)) / 100.0
    if mode == "final":
        value = final
    elif mode == "delta":
        value = delta
    else:
        # Turn rewards put ``final`` on the last turn only when there is one.
        final_part = final if episode.assistant_turns else 0.0
        value = mixed_weight * final_part + (1.0 - mixed_weight) * delta
    if format_penalty:
        value -= format_penalty * sum(format_flags(episode))
    return value
