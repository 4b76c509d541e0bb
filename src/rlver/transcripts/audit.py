"""Audit: re-derive every emotion number of a transcript from the start value and the recorded changes.

This is what makes the reward *verifiable*: anyone can check that each emotion value follows from the
appraisals, that the dialogue stopped when the rules say it must, and that the final emotion (hence
the reward and the benchmark score) is the one the chain of appraisals produces.

For each dialogue the audit walks the appraisals in order and checks

* ``change`` = clamp(``raw_change``, ±max_change) and |change| ≤ max_change;
* ``emotion_before`` = the previous value (the start value for the first appraisal);
* ``emotion_after`` = clamp(previous + change, 0, 100); ``tier`` = tier of ``emotion_after``;
* stop rules: nothing is appraised after the emotion reached ≥ 100 or fell below 10 (when the run
  stops on emotion), at most ``max_appraisals`` appraisals and ``max_assistant_turns`` replies;
* ``final_emotion`` (``emo_point``) = the last derived value; ``emotions`` = the appraisals' values;
* our transcripts: the start value, and the reward when the manifest says how it was computed.

When a recorded value disagrees, it is reported, and the walk continues from the *recorded* value, so
one wrong number gives one or two findings (the wrong value, and the next turn's ``emotion_before``
that no longer follows it) rather than a cascade through the rest of the dialogue.

Settings come from the transcript's manifest (:class:`rlver.manifest.RunManifest`: its dialogue
``rules``, the simulator's ``max_change`` and the ``reward``, whichever shape the file was written in) —
what the manifest does not say is not assumed (the recorded start is accepted, no turn limit).
Published files use the :data:`~rlver.rules.EVALUATION` rules (start 40, ±10, 10 replies, ≤ 9 appraisals). Options
override both.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from rlver.env.rewards import REWARD_MODES, RewardSpec, episode_reward
from rlver.errors import InputError, Problem, RlverError
from rlver.manifest import RunManifest
from rlver.records import Episode
from rlver.rules import EVALUATION, DialogueRules, rule_range
from rlver.simulator.emotion import MAX_CHANGE, EmotionRules, tier_of
from rlver.transcripts.files import detect_format
from rlver.transcripts.native import read_transcript
from rlver.transcripts.published import read_published
from rlver.transcripts.training import EpisodeKey, episode_key


@dataclass(frozen=True)
class AuditOptions:
    """What a consistent dialogue obeys: the dialogue's own :class:`DialogueRules`, plus what only the
    audit needs to know: the simulator's per-turn bound, and which of the rules the file states."""

    rules: DialogueRules = EVALUATION
    #: The bound on each change (``simulator.max_change`` of the run; the published ±10).
    max_change: int = MAX_CHANGE
    #: Check the recorded start against ``rules.start_emotion`` (off: a manifest that does not say).
    check_start: bool = True
    #: Check the turn and appraisal limits of ``rules`` (off: a manifest that does not say).
    check_turns: bool = True

    def but(self, **changes: Any) -> AuditOptions:
        """A copy with audit options or dialogue rules changed (``start_emotion=40`` checks the start)."""
        mine = {k: changes.pop(k) for k in ("max_change", "check_start", "check_turns") if k in changes}
        if "start_emotion" in changes:
            mine.setdefault("check_start", True)
        if "max_assistant_turns" in changes:
            mine.setdefault("check_turns", True)
        return replace(self, rules=self.rules.but(**changes) if changes else self.rules, **mine)


@dataclass
class Finding:
    """One inconsistency. ``turn`` is the 1-based assistant turn the appraisal judged (None: whole
    dialogue)."""

    path: str
    dialogue: str
    turn: int | None
    message: str

    def __str__(self) -> str:
        where = f"turn {self.turn}" if self.turn is not None else "dialogue"
        return f"{self.path}: {self.dialogue}: {where}: {self.message}"


@dataclass
class AuditReport:
    path: str
    format: str  # "rlver" or "published"
    #: finished dialogues; a failed record (an error, or a try a resume redid) is not one, but the
    #: appraisals it holds are checked too
    dialogues: int = 0
    failed: int = 0
    appraisals: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings


def audit_episode(
    episode: Episode, options: AuditOptions, *, path: str = "", reward: dict[str, Any] | None = None
) -> tuple[list[Finding], int]:
    """Check one episode; return its findings and how many appraisals were checked."""
    rules, max_change = options.rules, options.max_change
    dynamics = EmotionRules(max_change=max(max_change, 0), dialogue=rules)  # how the env moved it
    did = episode.episode_id or episode.profile_id
    if episode.sample_index and "#" not in did:
        did = f"{did}#{episode.sample_index}"
    findings: list[Finding] = []

    def bad(turn: int | None, message: str) -> None:
        findings.append(Finding(path, did, turn, message))

    if options.check_start and episode.start_emotion != rules.start_emotion:
        bad(None, f"start emotion is {episode.start_emotion}, expected {rules.start_emotion}")
    value = episode.start_emotion
    derived: list[int] = []
    stopped_at: int | None = None  # the turn whose appraisal ended the dialogue by emotion
    stop_value = value
    appraisals = 0
    for j, turn in enumerate(episode.user_turns[1:], start=1):  # user_turns[0] is the opening line
        a = turn.appraisal
        if a is None:
            if turn.extra.get("no_appraisal"):
                bad(j, "user turn has no recorded change or emotion value")
            continue
        appraisals += 1
        if stopped_at is not None and j == stopped_at + 1:
            bad(j, f"appraised, but the dialogue had to end at turn {stopped_at} (emotion {stop_value})")
        expected_change = dynamics.clamp_change(a.raw_change)
        if abs(a.change) > max_change and rules.bound_change:
            bad(j, f"change {a.change:+d} exceeds ±{max_change}")
        elif a.change != expected_change:
            bad(j, f"change {a.change:+d} but raw change {a.raw_change:+d} clamps to {expected_change:+d}")
        if a.emotion_before != value:
            bad(j, f"emotion before is {a.emotion_before}, expected {value}")
            value = a.emotion_before  # resync: the break in the chain is reported once
        applied = dynamics.clamp_change(a.change)
        expected_after = dynamics.bound(value + applied)
        if a.emotion_after != expected_after:
            bad(j, f"emotion {a.emotion_after} recorded, but {value} {applied:+d} gives {expected_after}")
        if a.tier != tier_of(a.emotion_after):
            bad(j, f"tier {a.tier} but emotion {a.emotion_after} is tier {tier_of(a.emotion_after)}")
        value = a.emotion_after  # resync on the recorded value (one finding per wrong number)
        derived.append(value)
        if stopped_at is None and rules.ends(value):
            stopped_at, stop_value = j, value

    n_assistant = episode.assistant_turns
    late_appraisal = stopped_at is not None and appraisals > len(
        [t for t in episode.user_turns[1 : stopped_at + 1] if t.appraisal is not None]
    )
    if stopped_at is not None and n_assistant > stopped_at and not late_appraisal:
        bad(
            stopped_at + 1,
            f"assistant replied after the emotion reached {stop_value} at turn {stopped_at}, "
            "where the dialogue must end",
        )
    if options.check_turns and appraisals > rules.max_appraisals:
        bad(None, f"{appraisals} appraisals, the protocol allows at most {rules.max_appraisals}")
    if options.check_turns and n_assistant > rules.reply_limit:
        bad(None, f"{n_assistant} assistant replies, the limit is {rules.reply_limit}")
    if episode.final_emotion != value:
        bad(None, f"final emotion {episode.final_emotion} recorded, the appraisals give {value}")
    if episode.emotions and episode.emotions != derived:
        bad(None, f"emotions list {episode.emotions} differs from the appraisals' values {derived}")
    if reward and episode.reward is not None and reward.get("mode") in REWARD_MODES:
        expected = episode_reward(episode, RewardSpec.model_validate(reward))
        if abs(expected - episode.reward) > 1e-6:
            bad(None, f"reward {episode.reward:.6g} recorded, the {reward['mode']} reward is {expected:.6g}")
    return findings, appraisals


def _rules_from_manifest(
    manifest: RunManifest | dict[str, Any], base: AuditOptions, source: str = "manifest"
) -> AuditOptions:
    """``base`` with what the manifest states: its dialogue rules (:attr:`RunManifest.rules`, read
    from whichever shape the file was written in) and the simulator's change bound. What it does not
    state stays as in ``base`` (a manifest that does not state its start, or its turn limit, leaves
    that check off); a stated value that is not a valid rule is an error naming the field."""
    m = RunManifest.read(manifest)
    stated: dict[str, Any] = m.stated_rules(source)
    if m.max_change is not None:
        stated["max_change"] = m.max_change
    return base.but(**stated)


def _reward_from_manifest(manifest: RunManifest | dict[str, Any]) -> dict[str, Any] | None:
    """The run's ``RewardSpec`` fields, None when the manifest does not say how it rewarded."""
    reward = RunManifest.read(manifest).reward
    return reward.model_dump() if reward is not None else None


_T = TypeVar("_T")

#: Valid ranges of the rule overrides (``rlver audit --start/--max-change/--max-assistant-turns``): the
#: dialogue rules' own bounds, read from :class:`~rlver.rules.DialogueRules`; ``max_change`` is the
#: simulator's and must be at least 1 for a bound to mean anything.
_OVERRIDE_RANGES = {
    "start_emotion": rule_range("start_emotion"),
    "max_change": (1, None),
    "max_assistant_turns": rule_range("max_assistant_turns"),
}


def _check_overrides(overrides: dict[str, Any]) -> None:
    """Reject rules that make every check meaningless (a negative bound, a start outside 0..100)."""
    for key, value in overrides.items():
        low, high = _OVERRIDE_RANGES.get(key, (None, None))
        if (
            not isinstance(value, int)
            or (low is not None and value < low)
            or (high is not None and value > high)
        ):
            want = f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}"
            raise InputError(Problem("audit options", None, key, f"got {value!r}, expected {want}"))


def _strictly(path: Path, read: Callable[[], _T]) -> _T:
    """Run a reader with its warnings turned into errors.

    The readers are lenient for ``score`` and ``resume`` (a torn last line, left by a crash, is skipped
    with a warning); an audit is a check, so anything skipped is a problem of the file, reported as
    such instead of a raw ``UserWarning`` line on stderr.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = read()
    problems = []
    for w in caught:
        text = str(w.message).removeprefix(f"{path}")
        where = re.match(r"^:(\d+): ", text)
        line = int(where.group(1)) if where else None
        message = text[where.end() :] if where else text.lstrip(": ")
        message = message.replace("skipped incomplete trailing line", "not valid JSON (a torn last line?)")
        problems.append(Problem(str(path), line, None, message))
    if problems:
        raise InputError(problems, summary=f"{path}: cannot be audited as it is")
    return result


def _check_duplicates(path: Path, episodes: list[Episode]) -> None:
    """The same finished dialogue twice would be audited and scored twice: refuse it.

    A failed line followed by a finished one for the same (profile, sample) is what a resumed run
    writes, so only finished dialogues count as duplicates.
    """
    seen: dict[EpisodeKey, int] = {}
    for ep in episodes:
        if ep.status == "finished":
            key = episode_key(ep)  # a training transcript meets a user again at later steps
            seen[key] = seen.get(key, 0) + 1
    dups = [
        f"{pid}" + (f"#{k}" if k else "") + (f"@{step}" if step is not None else "") + f" ({n} times)"
        for (pid, k, step, _), n in seen.items()
        if n > 1
    ]
    if dups:
        shown = ", ".join(dups[:5]) + (f" and {len(dups) - 5} more" if len(dups) > 5 else "")
        raise InputError(Problem(str(path), None, "id", f"duplicated dialogue(s): {shown}"))


def audit_file(path: str | os.PathLike[str], *, overrides: dict[str, Any] | None = None) -> AuditReport:
    """Audit one transcript (ours or published). ``overrides`` set ``start_emotion``, ``max_change``
    or ``max_assistant_turns`` (``rlver audit --start/--max-change/--max-assistant-turns``)."""
    p = Path(path)
    fmt = detect_format(p)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    _check_overrides(overrides)
    reward = None
    if fmt == "published":  # the published files ran the benchmark: EVALUATION, the default
        options = AuditOptions().but(**overrides)
        start = options.rules.start_emotion
        episodes = _strictly(p, lambda: read_published(p, start_emotion=start))
    else:
        transcript = _strictly(p, lambda: read_transcript(p))
        # Without settings in the manifest, accept the recorded start and do not assume a turn limit.
        lenient = AuditOptions(check_start=False, check_turns=False)
        manifest = transcript.run_manifest
        options = _rules_from_manifest(manifest, lenient, str(p)).but(**overrides)
        episodes = transcript.episodes
        reward = _reward_from_manifest(manifest)
    if not episodes:
        raise InputError(Problem(str(p), None, None, "no dialogues in this file: nothing to audit"))
    _check_duplicates(p, episodes)
    report = AuditReport(path=str(p), format=fmt)
    for ep in episodes:
        findings, n = audit_episode(ep, options, path=str(p), reward=reward)
        if ep.status == "finished":
            report.dialogues += 1
        else:
            report.failed += 1
        report.appraisals += n
        report.findings.extend(findings)
    return report


def report_to_json(reports: list[AuditReport]) -> str:
    return json.dumps(
        [
            {
                "path": r.path,
                "format": r.format,
                "dialogues": r.dialogues,
                "failed": r.failed,
                "appraisals": r.appraisals,
                "findings": [
                    {"dialogue": f.dialogue, "turn": f.turn, "message": f.message} for f in r.findings
                ],
            }
            for r in reports
        ],
        ensure_ascii=False,
        indent=2,
    )


__all__ = [
    "AuditOptions",
    "AuditReport",
    "Finding",
    "audit_episode",
    "audit_file",
    "report_to_json",
]


def audit_hint(path: str | os.PathLike[str]) -> str | None:
    """A one-line warning for ``rlver score`` when ``path``'s emotion arithmetic does not add up, or None.

    Why: ``rlver score`` recomputes the metrics from the final emotions a transcript records, so a
    transcript edited by hand scores what the edit says, silently. The audit is cheap (no model) and
    is the check that would catch it; score runs it and points to ``rlver audit`` for the details.
    Only our own transcripts: unreadable files are left to the score itself, and released files
    follow their authors' rules, which ``rlver audit`` reports on when asked.
    """
    try:
        report = audit_file(path)
    except RlverError:
        return None
    if report.ok or report.format != "rlver":  # released files follow their own rules: audit says so
        return None
    dialogues = len({f.dialogue for f in report.findings})
    return (
        f"{path}: {dialogues} dialogue(s) whose emotion arithmetic does not add up (edited, or "
        f"written by other rules?); the score above is what the file says: rlver audit {path} shows where"
    )
