"""Rewards: what an episode is worth to the learner. Kept apart from the environment (the rubric idea
of *verifiers*): the same transcript can be re-scored under another reward without re-running it.

A :class:`RewardSpec` names the reward; it is the one object both training engines (the local trainer
and verl's agent loop) and the auditor pass around. Modes, one function each in :data:`REWARD_MODES`:

* ``"final"`` — the published setting: final emotion / 100, given at the last assistant turn.
* ``"delta"`` — each appraisal's emotion change / 100, given to the assistant turn it judged (an
  unappraised final reply gets 0). Sums to (final - start) / 100: denser credit assignment.
* ``"mixed"`` — ``mixed_weight * final + (1 - mixed_weight) * delta``, turn by turn.

``format_penalty`` is subtracted once per assistant reply whose think block is not well-formed (only
for episodes run in think mode), on the turn that broke the format.

The episode reward is *defined* as the sum of the turn rewards, so the two cannot disagree. An episode
without an assistant reply (its user failed to open) is worth 0 in every mode.

Adding a mode: write ``def my_mode(episode, spec) -> list[float]`` (one value per assistant turn), here
or in a module of its own, and add one line to :data:`REWARD_MODES` (a lazy
:class:`~rlver.registry.Registry`: ``_mode("my_mode", "what it is", "my_mode", module=...)``); configs
can then say ``reward: {mode: my_mode}``, and an unknown mode is refused in the registry's one wording.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlver.env.thinking import split_think
from rlver.records import Episode
from rlver.registry import Entry, Registry


class RewardSpec(BaseModel):
    """Which reward an episode earns: the mode and its parameters (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    mode: str = Field(default="final", description="a key of rlver.env.rewards.REWARD_MODES")
    format_penalty: float = Field(
        default=0.0,
        ge=0.0,
        description=(
            "Subtracted once per assistant reply whose think block is not well-formed (think mode only)."
        ),
    )
    mixed_weight: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description=(
            "``mixed`` mode only: the weight of the final reward; 1 - this weights the turn-by-turn delta."
        ),
    )

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        return REWARD_MODES.check(mode)


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


def final_rewards(episode: Episode, spec: RewardSpec) -> list[float]:
    """``final``: final emotion / 100 on the last assistant turn, 0 on the others."""
    rewards = [0.0] * episode.assistant_turns
    if rewards:
        # floored at 0 as published (url_environment.py:38 ``np.maximum(reward_batched, 0)``): an unfloored emotion may end below 0
        rewards[-1] = max(episode.final_emotion, 0) / 100.0
    return rewards


def delta_rewards(episode: Episode, spec: RewardSpec) -> list[float]:
    """``delta``: the emotion change each reply caused / 100."""
    return [d / 100.0 for d in delta_per_turn(episode)]


def mixed_rewards(episode: Episode, spec: RewardSpec) -> list[float]:
    """``mixed``: ``mixed_weight`` × final + (1 − ``mixed_weight``) × delta, turn by turn."""
    w = spec.mixed_weight
    final, delta = final_rewards(episode, spec), delta_rewards(episode, spec)
    return [w * f + (1.0 - w) * d for f, d in zip(final, delta, strict=True)]


def _mode(name: str, description: str, function: str, module: str = "rlver.env.rewards") -> Entry[Any]:
    """A reward mode's registry line, its function named lazily (``module:function``): a mode in a
    module of its own (which imports this one for :class:`RewardSpec`) is one line here, no import."""
    return Entry(name, description, f"{module}:{function}")


#: Reward mode → its per-turn function (one value per assistant turn, before the format penalty).
REWARD_MODES: Registry[Callable[[Episode, RewardSpec], list[float]]] = Registry(
    "reward mode",
    [
        _mode("final", "final emotion / 100 on the last reply (published)", "final_rewards"),
        _mode("delta", "each appraisal's emotion change / 100 on the reply it judged", "delta_rewards"),
        _mode("mixed", "mixed_weight x final + (1 - mixed_weight) x delta, turn by turn", "mixed_rewards"),
    ],
)


def turn_rewards(episode: Episode, spec: RewardSpec | None = None) -> list[float]:
    """One reward per assistant turn, in order (empty for an episode without assistant replies)."""
    spec = spec or RewardSpec()
    rewards = REWARD_MODES.get(spec.mode)(episode, spec)
    if spec.format_penalty:
        flags = format_flags(episode)
        rewards = [r - spec.format_penalty * flag for r, flag in zip(rewards, flags, strict=True)]
    return rewards


def episode_reward(episode: Episode, spec: RewardSpec | None = None) -> float:
    """The scalar reward of a whole episode: the sum of its turn rewards (``final``: final emotion / 100)."""
    return float(sum(turn_rewards(episode, spec)))


def sample_rewards(
    episode: Episode,
    spec: RewardSpec | None = None,
    *,
    kept_turns: int | None = None,
    turn: int | None = None,
) -> list[float]:
    """The rewards one *training sample* carries, one per assistant-turn end it holds, in order.

    The one function both engines place on tokens (the local trainer on its shifted grid, verl's agent
    loop in ``rm_scores``), so the two train on the same per-token rewards and hence the same returns:

    * a whole dialogue (``turn=None``): :func:`turn_rewards`, each on its turn's last token. When
      ``kept_turns`` (the turns that fit the token budget) is fewer than the dialogue's, what the lost
      turns earned lands on the last kept turn, so the sample still earns the episode's reward;
    * one assistant turn ``turn`` of the thought-free layout (``think_context: visible``, one sample per
      turn as published, RLVER ``vllm_rollout_spmd_think.py:683-691`` ``for _ in range(dialogue_turns[i])``): one value, the reward from that
      turn on, ``sum(turn_rewards[turn:])``. With γ = 1 that is exactly the return the turn's tokens
      get in the whole-dialogue layout; a format penalty on turn 3 is charged to turns 0-3, never to
      turns after it. (γ < 1 discounts within a sample's tokens only, not across turns.)
    """
    rewards = turn_rewards(episode, spec)
    if turn is not None:
        return [float(sum(rewards[turn:]))]
    if kept_turns is not None and 0 < kept_turns < len(rewards):
        k = kept_turns
        rewards = [*rewards[: k - 1], float(sum(rewards[k - 1 :]))]
    return rewards


def place_on_tokens(rewards: list[float], turn_ends: list[int], length: int) -> list[float]:
    """A per-token reward row of ``length``: ``rewards[k]`` on index ``turn_ends[k]``, 0 elsewhere."""
    row = [0.0] * length
    for r, end in zip(rewards, turn_ends, strict=True):
        row[end] += r
    return row
