"""What happens when a dialogue does not fit in ``model.max_length``: the same rule on both engines.

verl's agent loop stops a dialogue when its token budget is spent (``end_reason="context_full"``) and
scores the episode as it stands then. The local rollout runs every dialogue to its natural end, and the
tokeniser then keeps the leading assistant turns that fit. :func:`cut_to_turns` makes the local episode
what verl would have produced: the dialogue cut after the last kept reply (and the user's reaction to
it), marked ``context_full``, so its reward (final emotion, deltas, format flags) counts only what the
trained tokens did. Without it a cut dialogue would be credited with emotion moved by replies that are
not in the trained sequence.
"""

from __future__ import annotations

from rlver.records import Episode

CONTEXT_FULL = "context_full"


def cut_to_turns(episode: Episode, kept_turns: int) -> Episode:
    """``episode`` ended after its first ``kept_turns`` assistant replies (unchanged if it has no more).

    ``user_turns[0]`` is the opening line and ``user_turns[i]`` the reaction to reply ``i``; emotions
    are recorded once per appraisal, so the cut episode keeps the appraisals of the kept replies only.
    """
    if kept_turns >= episode.assistant_turns:
        return episode
    if kept_turns < 1:
        raise ValueError(f"kept_turns must be >= 1, got {kept_turns}")
    messages, seen = [], 0
    for m in episode.messages:
        if m.role == "assistant":
            if seen == kept_turns:
                break
            seen += 1
        messages.append(m)
    user_turns = episode.user_turns[: kept_turns + 1]
    appraised = [t.appraisal for t in user_turns if t.appraisal is not None]
    final = appraised[-1].emotion_after if appraised else episode.start_emotion
    last = user_turns[-1].model_copy(update={"ends_dialogue": True, "end_reason": CONTEXT_FULL})
    return episode.model_copy(
        update={
            "messages": messages,
            "user_turns": [*user_turns[:-1], last],
            "emotions": episode.emotions[: len(appraised)],
            "final_emotion": final,
            "end_reason": CONTEXT_FULL,
            "reward": None,
            "timings": episode.timings[:kept_turns],
            "meta": {**episode.meta, "cut_from_turns": episode.assistant_turns},
        }
    )
