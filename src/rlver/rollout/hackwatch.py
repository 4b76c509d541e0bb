"""A live reward-hacking watch: what the policy's own replies trip, every training step.

Whichever simulated user gives the reward (an LLM, SAGE's prompts, the offline user), the policy can
learn to please it with text no person would accept: broken characters, keyword salad, a phrase loop,
the wrong language. The offline user already detects these as *hard flags* (``rlver.simulator.offline.scoring``,
its vetoes) in microseconds, with no model call, so the trainer runs those detectors on every visible
reply of every step and logs the rates beside the reward (``hack/*`` in metrics.jsonl, TensorBoard and
W&B through :class:`rlver.train.logger.MetricsLogger`). A reward that rises while ``hack/veto_rate``
rises is a simulator being gamed, not a better policy.

Metrics (shares of the step's assistant replies, 0 to 1, unless said otherwise):

* ``hack/veto_rate``: replies with any hard flag; ``hack/<flag>`` for each flag in
  :data:`rlver.simulator.offline.scoring.HARD_FLAGS` (``hack/broken_text``, ``hack/keyword_salad``, ...);
* ``hack/reply_chars_mean``: mean visible reply length in characters;
* ``hack/repeated_phrase_rate``: replies that loop on a phrase (Chinese: the offline user's
  ``zh_phrase_loop``; other languages: some three-word phrase said three times or more);
* ``hack/language_mismatch_rate``: replies not in the profile's language (the ``wrong_language`` flag).

The detectors see the reply as the user sees it (think blocks removed) and the dialogue before it (so
``parrots_user`` and ``repeats_itself`` work as in the offline user).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rlver.env.thinking import split_think
from rlver.profiles.schema import Profile
from rlver.records import Episode
from rlver.simulator.offline.lexicon import TextView
from rlver.simulator.offline.scoring import HARD_FLAGS, hard_flags_of, score_reply, zh_phrase_loop
from rlver.simulator.offline.user import OfflineSimulator

#: Rates the report marks on the reward curve when they first pass this share of replies.
HACK_THRESHOLD = 0.2
#: The metrics the report watches for :data:`HACK_THRESHOLD` (the headline rates).
WATCHED = ("hack/veto_rate", "hack/repeated_phrase_rate", "hack/language_mismatch_rate")


def repeats_a_phrase(text: str, language: str) -> bool:
    """Whether ``text`` loops on a phrase: Chinese by the offline user's measure, else a three-word
    phrase said three times or more (natural replies of SAGE's length practically never do)."""
    view = TextView.of(text)
    if language == "zh":
        return zh_phrase_loop(view.cjk_chars)
    words = view.words
    grams = Counter(tuple(words[i : i + 3]) for i in range(len(words) - 2))
    return bool(grams) and max(grams.values()) >= 3


class HackWatch:
    """The detectors, with the per-profile features cached (built once per run)."""

    def __init__(self, profiles: Sequence[Profile]) -> None:
        # the lexicon user only: the learned appraisal's model is not needed to flag text
        self._sim = OfflineSimulator(learned=False)
        self._profiles = {p.id: p for p in profiles}

    def reply_flags(self, episode: Episode) -> list[tuple[str, list[str], bool]]:
        """Per assistant reply: its visible text, its hard flags, and whether it loops on a phrase."""
        profile = self._profiles.get(episode.profile_id)
        if profile is None:
            return []
        pf = self._sim.profile_features(profile)
        out: list[tuple[str, list[str], bool]] = []
        replies: list[str] = []
        users: list[str] = []
        for message in episode.messages:
            if message.role == "user":
                users.append(message.content)
            elif message.role == "assistant":
                text = split_think(message.content).visible.strip()
                scored = score_reply(
                    text, pf, previous_replies=replies, user_messages=users, difficulty="normal"
                )
                out.append((text, hard_flags_of(scored.flags), repeats_a_phrase(text, pf.language)))
                replies.append(text)
        return out

    def __call__(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """The ``hack/*`` metrics of one step's finished dialogues (all 0 when there is no reply)."""
        rows = [row for ep in episodes for row in self.reply_flags(ep)]
        n = max(len(rows), 1)
        counts: Counter[str] = Counter(flag for _, flags, _ in rows for flag in set(flags))
        metrics = {f"hack/{flag}": counts[flag] / n for flag in HARD_FLAGS}
        metrics["hack/veto_rate"] = sum(1 for _, flags, _ in rows if flags) / n
        metrics["hack/reply_chars_mean"] = sum(len(text) for text, _, _ in rows) / n
        metrics["hack/repeated_phrase_rate"] = sum(1 for _, _, loop in rows if loop) / n
        metrics["hack/language_mismatch_rate"] = counts["wrong_language"] / n
        return metrics


def first_crossing(
    history: Sequence[dict[str, float]], threshold: float = HACK_THRESHOLD
) -> tuple[int, str] | None:
    """The first ``(step, metric)`` at which a watched rate exceeds ``threshold`` (rows carry ``step``)."""
    for row in history:
        for key in WATCHED:
            value = row.get(key)
            if isinstance(value, int | float) and value > threshold:
                return int(row["step"]), key
    return None
