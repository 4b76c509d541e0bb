"""Replay trajectories, the second check of ``rlver calibrate --simulator replay``: the oracle
:class:`~rlver.simulator.replay.ReplaySimulator` plays back a released dialogue's recorded judgements
while rlver's :class:`~rlver.env.dialogue.DialogueEnv` runs free on its recorded agent replies under the
evaluation rules; its turns, emotions and end must come out as recorded (:func:`replay_trajectory`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlver.env.dialogue import DialogueEnv, EnvConfig
from rlver.fidelity.released import FileData, visible_dialogue
from rlver.records import Episode, fell_to_failure, reached_success
from rlver.rules import EVALUATION
from rlver.simulator.base import UserSimulator, user_end_reason
from rlver.simulator.emotion import tier_of
from rlver.simulator.replay import Recording, ReplaySimulator, says_goodbye


def recording_of(episode: Episode) -> Recording:
    replies = tuple(m.content for m in visible_dialogue(episode) if m.role == "assistant")
    return Recording(episode.profile_id, replies, tuple(episode.user_turns))


def recorded_end(episode: Episode, max_assistant_turns: int = EVALUATION.max_assistant_turns) -> str:
    """The end a released dialogue had, from its shape (the files do not store it); the turn limit
    defaults to the benchmark's (:data:`rlver.rules.EVALUATION`), which the released files ran."""
    roles = [m.role for m in episode.messages if m.role in ("user", "assistant")]
    final = episode.emotions[-1] if episode.emotions else episode.start_emotion
    if roles and roles[-1] == "assistant":
        return "turn_limit" if roles.count("assistant") >= max_assistant_turns else "unknown"
    if reached_success(final):
        return "emotion_high"
    if fell_to_failure(final):
        return "emotion_low"
    if episode.user_turns and says_goodbye(episode.user_turns[-1].text):
        return user_end_reason(tier_of(final))
    return "unknown"


@dataclass
class TrajectoryCheck:
    dialogue_id: str
    identical: bool
    problems: list[str]


async def replay_trajectory(fd: FileData, episode: Episode, config: EnvConfig) -> TrajectoryCheck:
    """Run the environment free on the recorded agent replies with the replay user; compare."""
    sim = ReplaySimulator({episode.profile_id: recording_of(episode)})
    env = DialogueEnv(sim, config)
    problems: list[str] = []
    await env.reset(fd.profiles[episode.profile_id])
    # each reply as the recorded user saw it: a released file keeps a reply's thoughts beside its
    # content, which is all SAGE's simulator was shown (rlver reads the two into one message)
    replies = [m.content for m in visible_dialogue(episode) if m.role == "assistant"]
    used = 0
    try:
        for raw in replies:
            if env.done:
                break
            await env.step(raw)
            used += 1
    except Exception as exc:  # the oracle refuses: the env asked for a turn that was never recorded
        problems.append(f"replay stopped at agent reply {used + 1}: {exc}")
    if not env.done and not problems:
        problems.append(f"the environment wanted more than the {len(replies)} recorded agent replies")
    if used != len(replies):
        problems.append(f"the environment used {used} of {len(replies)} recorded agent replies")
    got = env.episode
    if got.emotions != episode.emotions:
        problems.append(f"emotions {got.emotions} != recorded {episode.emotions}")
    if got.final_emotion != episode.final_emotion:
        problems.append(f"final emotion {got.final_emotion} != recorded emo_point {episode.final_emotion}")
    want = recorded_end(episode, config.rules.max_assistant_turns)
    have = got.end_reason
    if have != want:
        problems.append(f"end {have!r} != recorded {want!r}")
    return TrajectoryCheck(episode.episode_id, not problems, problems)


def replay_simulator_for(fd: FileData) -> UserSimulator:
    return ReplaySimulator({ep.profile_id: recording_of(ep) for ep in fd.episodes})
