"""Reward functions, checked against hand-computed values."""

from __future__ import annotations

import pytest

from helpers import add_for_test
from rlver.env.rewards import REWARD_MODES, RewardSpec, episode_reward, turn_rewards
from rlver.records import Appraisal, Episode, Message, UserTurn
from rlver.registry import Entry
from rlver.simulator.emotion import tier_of


def make_episode(
    start: int, afters: list[int | None], replies: list[str] | None = None, *, think: bool = False
) -> Episode:
    """An episode whose i-th assistant reply moved the emotion to ``afters[i]`` (None: unappraised)."""
    replies = replies or [f"reply {i}" for i in range(len(afters))]
    messages = [Message(role="system", content="sys"), Message(role="user", content="hi")]
    turns = [UserTurn(text="hi")]
    value = start
    emotions = []
    for reply, after in zip(replies, afters, strict=True):
        messages.append(Message(role="assistant", content=reply))
        if after is None:
            continue
        a = Appraisal(
            raw_change=after - value,
            change=after - value,
            emotion_before=value,
            emotion_after=after,
            tier=tier_of(after),
        )
        turns.append(UserTurn(text="ok", appraisal=a))
        messages.append(Message(role="user", content="ok"))
        value = after
        emotions.append(after)
    return Episode(
        profile_id="p",
        messages=messages,
        user_turns=turns,
        start_emotion=start,
        final_emotion=value,
        emotions=emotions,
        meta={"think": think},
        format_errors=sum(1 for r in replies if not r.startswith("<think>")) if think else 0,
    )


def test_final_reward_is_final_emotion_over_100_on_the_last_turn() -> None:
    ep = make_episode(40, [45, 55, 50, None])  # eval protocol: last reply unappraised
    assert episode_reward(ep) == pytest.approx(0.50)
    assert turn_rewards(ep) == pytest.approx([0.0, 0.0, 0.0, 0.50])


def test_delta_reward_per_turn() -> None:
    ep = make_episode(40, [45, 55, 50, None])
    assert turn_rewards(ep, RewardSpec(mode="delta")) == pytest.approx([0.05, 0.10, -0.05, 0.0])
    assert episode_reward(ep, RewardSpec(mode="delta")) == pytest.approx(0.10)


def test_delta_uses_the_applied_change_at_the_ceiling() -> None:
    ep = make_episode(95, [100])
    ep.user_turns[1].appraisal.raw_change = 10  # type: ignore[union-attr]
    ep.user_turns[1].appraisal.change = 10  # type: ignore[union-attr]
    assert turn_rewards(ep, RewardSpec(mode="delta")) == pytest.approx([0.05])


def test_mixed_reward_blends() -> None:
    ep = make_episode(30, [40, 35])
    # final: [0, 0.35], delta: [0.10, -0.05]; w = 0.25 -> [0.075, 0.25*0.35 + 0.75*-0.05]
    expected = [0.075, 0.0875 - 0.0375]
    assert turn_rewards(ep, RewardSpec(mode="mixed", mixed_weight=0.25)) == pytest.approx(expected)
    assert episode_reward(ep, RewardSpec(mode="mixed", mixed_weight=0.25)) == pytest.approx(sum(expected))


def test_format_penalty_hits_the_broken_turn_only() -> None:
    replies = ["<think>a</think>fine", "forgot to think", "<think>b</think>good"]
    ep = make_episode(40, [50, 55, 60], replies, think=True)
    assert ep.format_errors == 1
    assert turn_rewards(ep, RewardSpec(format_penalty=0.1)) == pytest.approx([0.0, -0.1, 0.60])
    assert episode_reward(ep, RewardSpec(format_penalty=0.1)) == pytest.approx(0.50)


def test_format_penalty_ignored_outside_think_mode() -> None:
    ep = make_episode(40, [50], ["no think block"], think=False)
    assert episode_reward(ep, RewardSpec(format_penalty=0.5)) == pytest.approx(0.50)


@pytest.mark.parametrize("mode", sorted(REWARD_MODES))
def test_turn_rewards_sum_to_episode_reward(mode: str) -> None:
    replies = ["<think>a</think>x", "y", "<think>c</think>z", "w"]
    ep = make_episode(30, [38, 28, 36, None], replies, think=True)
    spec = RewardSpec(mode=mode, format_penalty=0.2, mixed_weight=0.7)
    assert len(turn_rewards(ep, spec)) == ep.assistant_turns  # every mode: one value per reply
    assert sum(turn_rewards(ep, spec)) == pytest.approx(episode_reward(ep, spec))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown reward mode"):
        RewardSpec(mode="median")
    with pytest.raises(ValueError, match="mixed_weight"):
        RewardSpec(mode="mixed", mixed_weight=1.5)
    with pytest.raises(ValueError, match="format_penalty"):
        RewardSpec(format_penalty=-0.1)
    with pytest.raises(ValueError, match="extra"):
        RewardSpec.model_validate({"mode": "final", "weight": 0.5})
    assert turn_rewards(make_episode(40, [])) == []


@pytest.mark.parametrize("mode", ["final", "delta", "mixed"])
def test_an_episode_without_replies_is_worth_nothing(mode: str) -> None:
    """Its user never got a reply (it failed to open): 0 in every mode, as the turn rewards say."""
    assert episode_reward(make_episode(55, []), RewardSpec(mode=mode)) == 0.0


def test_a_new_mode_is_one_function_and_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def last_turn_only(ep: Episode, spec: RewardSpec) -> list[float]:
        return [0.0] * (ep.assistant_turns - 1) + [1.0]

    add_for_test(monkeypatch, REWARD_MODES, Entry("last", "a test's mode", last_turn_only))
    ep = make_episode(40, [50, 60])
    spec = RewardSpec.model_validate({"mode": "last", "format_penalty": 0.0})
    assert turn_rewards(ep, spec) == [0.0, 1.0]
    assert episode_reward(ep, spec) == 1.0


def test_sample_rewards_per_layout() -> None:
    """What one training sample earns: the turn rewards (the lost turns' folded onto the last kept one),
    or for a turn sample the reward from its turn on, never the turns before it."""
    from rlver.env.rewards import place_on_tokens, sample_rewards

    ep = make_episode(30, [40, 35, 60], ["<think>a</think>x", "no think", "<think>c</think>z"], think=True)
    spec = RewardSpec(mode="delta", format_penalty=0.1)
    per_turn = turn_rewards(ep, spec)
    assert per_turn == pytest.approx([0.10, -0.05 - 0.1, 0.25])
    assert sample_rewards(ep, spec) == pytest.approx(per_turn)
    assert sample_rewards(ep, spec, kept_turns=2) == pytest.approx([0.10, -0.15 + 0.25])
    # turn samples: the penalty on turn 1 is charged to turns 0 and 1, not to turn 2
    assert [sample_rewards(ep, spec, turn=k)[0] for k in range(3)] == pytest.approx([0.20, 0.10, 0.25])
    assert place_on_tokens([0.5, 0.25], [1, 4], 6) == [0.0, 0.5, 0.0, 0.0, 0.25, 0.0]
