"""``rlver explain``: which settings of a run differ from the published protocol, and what that is known to do.

Users of the published code report scores that do not match the paper (a GPT-4o agent at 42.7 with a
DeepSeek-V3 judge against 79.9; a released checkpoint at 25.95 until its users learned the start is 40).
Every such gap starts with a setting that differs. This module reads a run's manifest (an ``rlver eval``
or ``rlver train`` transcript or folder) and compares each setting that moves a score with the
published value: the Sentient Benchmark (SAGE) for an evaluation, the published RLVER training run for a
training folder. Each difference names its row in docs/protocol.md ("What `rlver explain` compares"),
whose ids are the stable :data:`ROWS`, and the effect rlver has measured, where it has measured one
(figures quoted from the docs, with their place). A released SAGE result file is the published protocol
itself. Reads only: nothing is run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlver.env.thinking import system_prompt
from rlver.errors import InputError, Problem
from rlver.manifest import RunManifest
from rlver.protocol import EVALUATION, PUBLISHED_TRAINING, DialogueRules
from rlver.simulator.sentient.prompts.sage import SAGE_PROMPT_VERSION
from rlver.simulator.sentient.protocols.sage import SageProtocol
from rlver.transcripts.files import detect_format, transcript_path
from rlver.transcripts.native import read_transcript

#: The rows of docs/protocol.md's "What `rlver explain` compares" table (each is an anchor there).
ROWS = (
    "start-emotion",
    "turn-limit",
    "end-rules",
    "simulator",
    "simulator-options",
    "simulator-sampling",
    "agent-prompt",
    "agent-sampling",
    "agent-max-tokens",
    "think-context",
    "profiles",
)

#: Effects rlver has measured, quoted from the docs with their place (no figure is made up here).
PROTOCOL_GAP = (
    "start and length together: the untrained tiny model scores 3.1 on the benchmark dialogue "
    "(10 replies from 40) and 13.5 on a 2-reply dialogue from 30, offline user, 8 profiles "
    '(docs/benchmark.md, "The benchmark score and a training run\'s held-out score")'
)
OFFLINE_AGREEMENT = (
    "the offline user is a proxy, not a judge: its lexicon version agreed with the released SAGE "
    "judgements at per-turn Spearman -0.026, sign agreement 0.552, over 7,218 turns (docs/simulator.md, "
    '"How far the offline user agrees with SAGE", where later versions are measured too)'
)

#: The published judges of the released result files (docs/protocol.md, "Simulator prompts").
PUBLISHED_SIMULATORS = ("deepseek-v3", "deepseek-chat", "gpt-4o")
#: The longest agent reply in the nine released files (characters): a quote cut below it cut replies.
LONGEST_RELEASED_REPLY = 4643
#: The published training's reply cap (``per_turn_length=5000`` tokens, train_rlver.sh:46).
PUBLISHED_TRAINING_REPLY_TOKENS = 5000


@dataclass(frozen=True)
class Difference:
    """One setting that differs: what the run used, what was published, where the docs say more."""

    setting: str
    run: str
    published: str
    row: str
    effect: str | None = None

    def lines(self) -> list[str]:
        out = [f"  {self.setting}: {self.run} (published: {self.published}); docs/protocol.md row {self.row}"]
        if self.effect:
            out.append(f"      measured: {self.effect}")
        return out


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` found for one run."""

    path: str
    reference: str  # "the published benchmark protocol (SAGE)" / "the published training run (RLVER)"
    differences: list[Difference]
    unknown: list[Difference]
    published_file: str | None = None  # the summary line of a released result file

    def text(self) -> str:
        if self.published_file is not None:
            return f"{self.path}: {self.published_file}"
        if not self.differences:
            head = f"{self.path}: follows {self.reference} in every setting rlver explain checks"
        else:
            n = len(self.differences)
            head = f"{self.path}: {n} setting{'s' if n != 1 else ''} differ{'s' if n == 1 else ''} from {self.reference}"
        lines = [head] + [line for d in self.differences for line in d.lines()]
        if self.unknown:
            lines.append("  not known from the published code (not a difference, not comparable):")
            lines += [f"    {d.setting}: {d.run} here (docs/protocol.md row {d.row})" for d in self.unknown]
        return "\n".join(lines)


def explain(path: Path) -> Explanation:
    """Compare the run at ``path`` (folder, transcript or released result file) with the published run."""
    file = transcript_path(path)
    if detect_format(file, strict=True) == "published":
        return Explanation(str(path), "", [], [], published_file=published_summary(file))
    manifest = _manifest_of(file)
    if manifest.kind == "train":
        found, unknown = _compare(manifest, TRAINING_CHECKS)
        return Explanation(str(path), "the published training run (RLVER)", found, unknown)
    found, unknown = _compare(manifest, BENCHMARK_CHECKS)
    return Explanation(str(path), "the published benchmark protocol (SAGE)", found, unknown)


def published_summary(file: Path) -> str:
    """A released SAGE result file is the published protocol; its folder names the simulator."""
    folder = file.parent.name
    simulator = folder.removesuffix("-simulator") if folder.endswith("-simulator") else None
    agent = file.stem.removesuffix("_result")
    who = f"simulator {simulator}" if simulator else "simulator not named (a released file's folder names it)"
    return f"published protocol, {who}; a released SAGE result file (agent {agent})"


def _manifest_of(file: Path) -> RunManifest:
    raw = read_transcript(file).manifest
    if not raw:
        raise InputError(
            Problem(
                str(file),
                1,
                None,
                "no manifest line: rlver explain compares a run's recorded settings, and this transcript "
                "records none (written by rlver eval or rlver train? a released result file?)",
            )
        )
    return RunManifest.read(raw)


Check = Callable[[RunManifest], list[Difference]]


def _compare(manifest: RunManifest, checks: tuple[Check, ...]) -> tuple[list[Difference], list[Difference]]:
    """Run every check; a difference whose ``published`` is ``unknown`` goes to the second list."""
    found = [d for check in checks for d in check(manifest)]
    return [d for d in found if d.published != "unknown"], [d for d in found if d.published == "unknown"]


# ------------------------------------------------------------------------------------------- rules
def _start(reference: DialogueRules, effect: str | None) -> Check:
    def check(manifest: RunManifest) -> list[Difference]:
        start = manifest.stated_rules().get("start_emotion")
        if start is None or start == reference.start_emotion:
            return []
        return [
            Difference("start emotion", str(start), str(reference.start_emotion), "start-emotion", effect)
        ]

    return check


def _limit_text(rules: dict[str, Any]) -> str:
    parts = [f"{rules.get('max_assistant_turns')} replies ({rules.get('turn_limit_rule')})"]
    parts.append("the last appraised" if rules.get("appraise_final_reply") else "the last not appraised")
    return ", ".join(parts)


def _turns(reference: DialogueRules, effect: str | None) -> Check:
    keys = ("max_assistant_turns", "turn_limit_rule", "appraise_final_reply")

    def check(manifest: RunManifest) -> list[Difference]:
        rules = manifest.stated_rules()
        ref = reference.model_dump()
        if all(rules.get(k, ref[k]) == ref[k] for k in keys):
            return []
        given = {k: rules.get(k, ref[k]) for k in keys}
        return [Difference("turn limit", _limit_text(given), _limit_text(ref), "turn-limit", effect)]

    return check


def _ends(reference: DialogueRules) -> Check:
    keys = ("stop_on_emotion", "end_at_high", "end_below", "bound_change", "floor_emotion", "shared_opening")

    def check(manifest: RunManifest) -> list[Difference]:
        rules, ref = manifest.stated_rules(), reference.model_dump()
        changed = [k for k in keys if k in rules and rules[k] != ref[k]]
        if not changed:
            return []
        run = ", ".join(f"{k} {rules[k]}" for k in changed)
        published = ", ".join(f"{k} {ref[k]}" for k in changed)
        return [Difference("end rules and dynamics", run, published, "end-rules")]

    return check


# --------------------------------------------------------------------------------------- simulator
def _simulator_model(manifest: RunManifest) -> str | None:
    model = (manifest.simulator or {}).get("model")
    if isinstance(model, dict):
        model = model.get("model") or model.get("name")
    return str(model) if model else None


def _simulator(manifest: RunManifest) -> list[Difference]:
    kind = manifest.simulator_kind
    published = "an LLM judge (DeepSeek-V3 or GPT-4o)"
    if kind == "offline":
        return [Difference("simulator", "the offline user", published, "simulator", OFFLINE_AGREEMENT)]
    if kind == "replay":
        return [Difference("simulator", "replay of recorded judgements", published, "simulator")]
    model = _simulator_model(manifest)
    if model is None or any(name in model.lower() for name in PUBLISHED_SIMULATORS):
        return []
    return [Difference("simulator", f"LLM {model}", published, "simulator")]


def _simulator_options(manifest: RunManifest) -> list[Difference]:
    described = manifest.simulator or {}
    if "protocol" not in described:
        return []
    found: list[Difference] = []
    if described.get("protocol") != "sage":
        found.append(Difference("simulator prompts", str(described["protocol"]), "sage", "simulator-options"))
    on = [name for name in SageProtocol.option_names() if described.get(name) is True]
    if on and described.get("protocol") == "sage":
        found.append(Difference("simulator options", ", ".join(on) + " on", "all off", "simulator-options"))
    version = described.get("prompt_version")
    if described.get("protocol") == "sage" and version not in (None, SAGE_PROMPT_VERSION):
        found.append(
            Difference("simulator prompt version", str(version), SAGE_PROMPT_VERSION, "simulator-options")
        )
    quoted = described.get("max_quoted_chars", 4000)  # manifests before issue 36 cut at 4,000
    if isinstance(quoted, int) and quoted < LONGEST_RELEASED_REPLY:
        found.append(
            Difference(
                "agent reply shown to the simulator",
                f"cut at {quoted} characters",
                "whole",
                "simulator-options",
            )
        )
    return found


def _simulator_sampling(manifest: RunManifest) -> list[Difference]:
    sampling = (manifest.simulator or {}).get("sampling")
    if manifest.simulator_kind in ("offline", "replay") or not isinstance(sampling, dict):
        return []
    return [
        Difference("simulator temperature", str(sampling.get("temperature")), "unknown", "simulator-sampling")
    ]


# ------------------------------------------------------------------------------------------ agent
def _prompt_name(manifest: RunManifest) -> tuple[str | None, dict[str, Any]]:
    record = manifest.agent_prompt or {}
    env = manifest.env or {}
    name = record.get("name") or ("custom" if env.get("system_prompt") else env.get("agent_prompt"))
    return (str(name) if name else None), dict(record.get("sha256") or {})


def _agent_prompt(wanted: str) -> Check:
    def check(manifest: RunManifest) -> list[Difference]:
        name, shas = _prompt_name(manifest)
        if name is None:
            return []
        if name != wanted:
            return [Difference("agent prompt", name, wanted, "agent-prompt")]
        think = bool(manifest.think)
        now = {lang: hashlib.sha256(system_prompt(think, lang, wanted).encode()).hexdigest() for lang in shas}
        if shas and shas != now:
            return [
                Difference("agent prompt", f"{name}, an earlier wording", f"{name} as now", "agent-prompt")
            ]
        return []

    return check


def _agent_sampling(manifest: RunManifest) -> list[Difference]:
    sampling = manifest.agent_sampling or {}
    if not sampling or sampling.get("model_default"):
        return []
    run = f"temperature {sampling.get('temperature')}, top_p {sampling.get('top_p')} sent"
    return [Difference("agent sampling", run, "none sent (the model's own defaults)", "agent-sampling")]


def _agent_max_tokens(floor: int, published: str) -> Check:
    def check(manifest: RunManifest) -> list[Difference]:
        cap = manifest.agent_max_tokens
        if cap is None or cap >= floor:
            return []
        return [Difference("agent reply cap", f"{cap} tokens", published, "agent-max-tokens")]

    return check


def _think_context(manifest: RunManifest) -> list[Difference]:
    if not manifest.think:
        return []
    context = (manifest.env or {}).get("think_context", "full")  # "full" was the default before issue 36
    if context == "visible":
        return []
    return [
        Difference(
            "think context", f"{context} (earlier thoughts shown)", "visible text only", "think-context"
        )
    ]


def _profiles(name: str, count: int) -> Check:
    def check(manifest: RunManifest) -> list[Difference]:
        found: list[Difference] = []
        if manifest.profiles is not None and manifest.profiles != name:
            found.append(Difference("profile set", str(manifest.profiles), name, "profiles"))
        elif manifest.n_profiles is not None and manifest.n_profiles != count:
            found.append(Difference("profile count", str(manifest.n_profiles), str(count), "profiles"))
        if (manifest.n_per_profile or 1) != 1:
            found.append(Difference("dialogues per profile", str(manifest.n_per_profile), "1", "profiles"))
        return found

    return check


BENCHMARK_CHECKS: tuple[Check, ...] = (
    _start(EVALUATION, PROTOCOL_GAP),
    _turns(EVALUATION, PROTOCOL_GAP),
    _ends(EVALUATION),
    _simulator,
    _simulator_options,
    _simulator_sampling,
    _agent_prompt("neutral"),
    _agent_sampling,
    _agent_max_tokens(8192, "no cap (rlver: 8,192 tokens)"),
    _think_context,
    _profiles("sage", 100),
)

TRAINING_CHECKS: tuple[Check, ...] = (
    _start(PUBLISHED_TRAINING, None),
    _turns(PUBLISHED_TRAINING, None),
    _ends(PUBLISHED_TRAINING),
    _simulator,
    _simulator_options,
    _simulator_sampling,
    _agent_prompt("published"),
    _agent_max_tokens(PUBLISHED_TRAINING_REPLY_TOKENS, f"{PUBLISHED_TRAINING_REPLY_TOKENS} tokens"),
    _think_context,
    _profiles("rlver-train", 500),
)

__all__ = ["ROWS", "Difference", "Explanation", "explain", "published_summary"]
