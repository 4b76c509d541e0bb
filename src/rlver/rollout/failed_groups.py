"""The one rule for a group of dialogues in which one failed: which of the step's dialogues are trained.

A dialogue fails when its policy or simulator call fails for good (``Episode.status == "failed"``); it
is never trained. For an algorithm that compares a dialogue with its group (``min_group_size > 1``:
GRPO, MAPO), the group's finished dialogues are dropped with it (``rollout/dropped_with_group``), so the
baseline is always the whole group's. Kept, the survivors would be a biased sample (a failure is not
independent of the replies: a reply that derails the simulated user is one of the group), and a lone
survivor would train on its raw score (``grpo_lone_sample: raw``, verl's rule for a group of one).

verl 0.9.1 does the same only when asked: a prompt whose sessions finished with at least one failure
has status ``failure`` (``verl/trainer/ppo/v1/replay_buffer.py:91``), and by default "failed groups
remain sampleable and missing trajectories are padded downstream" (``:111-113``), i.e. GRPO over the
survivors; ``trainer.v1.sampler.sync_refill_failed_groups`` evicts and refills only a failed group with
no trajectory left (``:331-333``). rlver's verl agent loop therefore fails every sibling once one fails
(``rlver.integrations.verl.agent_loop.GroupSettlement``) and turns the refill on, so both engines train
the same dialogues; verl then refills the group with a fresh prompt, the local trainer trains a smaller
batch. The published run never meets the case: its simulated user retries each call until it answers
(``hard_player_simulator_dsv3.py:204-225`` ``time.sleep(3)``, ``:364-372`` ``reply = call_api(prompt)``).

Lives in ``rollout`` (below ``train`` and ``eval``) so that the trainer applies it and ``rlver explain``
names it from one place.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlver.records import Episode


def drops_whole_groups(min_group_size: int) -> bool:
    """Whether an algorithm needing groups of ``min_group_size`` drops a group with a failed dialogue."""
    return min_group_size > 1


def trainable_episodes(episodes: Sequence[Episode], min_group_size: int) -> list[Episode]:
    """The finished dialogues of ``episodes`` a step trains: all of them, or (an algorithm that needs
    groups) those whose group (profile) has no failed dialogue."""
    finished = [ep for ep in episodes if ep.status == "finished"]
    if not drops_whole_groups(min_group_size):
        return finished
    broken = {ep.profile_id for ep in episodes if ep.status != "finished"}
    return [ep for ep in finished if ep.profile_id not in broken]


def rule(min_group_size: int) -> str:
    """The rule in one line, as ``rlver explain`` prints it for a training run."""
    if drops_whole_groups(min_group_size):
        return (
            "a dialogue whose policy or simulator call fails is not trained, nor is any dialogue of its "
            "group (rollout/dropped_with_group)"
        )
    return "a dialogue whose policy or simulator call fails is not trained; the others are"


#: what the published run does instead, with its file:line
PUBLISHED = "none fails: the published user sends each call again until it answers (hard_player_simulator_dsv3.py:204-225, :364-372)"
