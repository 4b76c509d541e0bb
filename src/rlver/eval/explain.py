"""``rlver explain``: which settings of a run differ from the published protocol, and what that is known to do.

Users of the published code report scores that do not match the paper (a GPT-4o agent at 42.7 with a
DeepSeek-V3 judge against 79.9; a released checkpoint at 25.95 until its users learned the start is 40).
Every such gap starts with a setting that differs. This module reads a run's manifest (an ``rlver eval``
or ``rlver train`` transcript or folder) and compares each setting that moves a score with the
published value: the Sentient Benchmark (SAGE) for an evaluation, the published RLVER training run for a
training folder. Each difference names its row in docs/protocol.md ("What `rlver explain` compares"),
whose ids are the stable :data:`ROWS`, and the effect rlver has measured, where it has measured one
(figures quoted from the docs, with their place; the offline user's agreement from its own artefact, as
the run recorded it). A released SAGE result file is the published protocol itself. Reads only: nothing
is run.

Nothing is left out: a setting that does not move a score is listed in :data:`NOT_SCORED` with its
reason, and every other setting of a run at a non-default value gets a line (the test walks them all).
Names are compared exactly (judges after their aliases, profile sets by content), never by substring
or path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlver.env.dialogue import EnvConfig
from rlver.env.thinking import AGENT_PROMPTS, shown_to_user, system_prompt
from rlver.errors import InputError, Problem
from rlver.eval.config import EVAL_AGENT_MAX_TOKENS
from rlver.manifest import RunManifest
from rlver.migrate import recorded_max_quoted_chars, recorded_think_context
from rlver.profiles.download import DATA_FILES
from rlver.profiles.sets import PUBLISHED_SETS
from rlver.records import Episode
from rlver.rollout import failed_groups
from rlver.rules import EVALUATION, PUBLISHED_TRAINING, DialogueRules
from rlver.simulator.emotion import MAX_CHANGE
from rlver.simulator.llm.prompts.sage import SAGE_PROMPT_VERSION
from rlver.simulator.llm.protocols.base import PARSE_GUARD
from rlver.simulator.llm.protocols.sage import SageProtocol
from rlver.simulator.spec import SimulatorSpec
from rlver.transcripts.files import detect_format, transcript_path
from rlver.transcripts.native import read_transcript

#: The rows of docs/protocol.md's "What `rlver explain` compares" table (each is an anchor there).
ROWS = (
    "start-emotion",
    "turn-limit",
    "end-rules",
    "change-bound",
    "simulator",
    "simulator-options",
    "simulator-sampling",
    "user-behaviour",
    "language",
    "agent-prompt",
    "agent-sampling",
    "agent-max-tokens",
    "reply-chars",
    "think-context",
    "retries",
    "profiles",
    "held-out",
    "training-settings",
    "no-effect",
)

#: How a model is reached or run (a :class:`~rlver.llm.spec.ModelSpec`'s fields other than its model
#: and its sampling): not what it is asked.
_MODEL_SERVING = (
    "kind", "base_url", "api_key_env", "timeout_s", "max_attempts", "concurrency", "cache", "device",
    "dtype", "max_batch_size", "compile_decode",
)  # fmt: skip
#: Settings of an ``rlver eval`` run (paths into :class:`~rlver.eval.config.EvalConfig`, as its
#: ``--set`` takes them) that do not move a score, each with the reason. Every other setting that a
#: run sets to a value other than its default must be named by :func:`explain`:
#: ``tests/eval/test_explain.py::test_every_non_default_setting_is_named_or_listed`` walks them all, so
#: a setting added later fails that test until it gets an explain line or a line here. A path written
#: ``simulator(KIND).name`` holds for that simulator kind only.
NOT_SCORED: dict[str, str] = {
    "out": "where the files are written",
    "run_name": "a label",
    "report": "whether report.html is written",
    "concurrency": "simulator calls in flight; each dialogue's calls run in order",
    "batch_size": "dialogues per policy call: sampling is seeded per dialogue, never per batch (docs/benchmark.md)",
    "seed": "which random draws a run makes, not what the agent or the user is asked",
    "agent_tiny": "which model is under test: the model is what a score measures",
    "agent.model": "the model under test: what a score measures",
    **{f"agent.{name}": "how the model under test is reached or run" for name in _MODEL_SERVING},
    **{
        f"simulator.model.{name}": "how the judge is reached or run (its model is named)"
        for name in _MODEL_SERVING
    },
    "simulator.cache": "a cache of greedy judge answers: the same answers, not other ones",
    "simulator(offline).seed": "the offline user's random draws",
}

#: Effects rlver has measured, quoted from the docs with their place (no figure is made up here).
PROTOCOL_GAP = (
    "start and length together: the untrained tiny model scores 3.1 on the benchmark dialogue "
    "(10 replies from 40) and 13.5 on a 2-reply dialogue from 30, offline user, 8 profiles "
    '(docs/benchmark.md, "The benchmark score and a training run\'s held-out score")'
)
LEXICON_AGREEMENT = (
    "rlver-offline-v1's lexicon user agreed with the released SAGE judgements at per-turn Spearman "
    '-0.026 over 7,218 turns (docs/simulator.md, "How far the offline user agrees with SAGE"); '
    "this version's lexicon is not measured"
)

#: The published judges (the released files' folders, docs/protocol.md "Simulator prompts") by every
#: name rlver may record for them; a name is compared whole after :func:`judge_name`, so ``gpt-4o-mini``
#: is another judge.
PUBLISHED_JUDGES: dict[str, str] = {
    "deepseek-v3": "deepseek-v3",
    "deepseek-chat": "deepseek-v3",
    "gpt-4o-2024-08-06": "gpt-4o",
}
#: Undated names of a published judge that was dated: they name whatever snapshot the endpoint serves
#: today, not the one behind the released files (``gpt-4o`` moved on from 2024-08-06).
UNDATED_JUDGES: dict[str, str] = {"gpt-4o": "gpt-4o-2024-08-06"}
#: The published simulators, in words: SAGE's released files name two judges (their folders,
#: docs/protocol.md "Simulator prompts"); RLVER's training simulator was DeepSeek-V3 (its file is
#: ``hard_player_simulator_dsv3.py``, calling ``mode="dsv3"``).
BENCHMARK_JUDGES = "an LLM judge: DeepSeek-V3, or GPT-4o as gpt-4o-2024-08-06"
TRAINING_JUDGE = "DeepSeek-V3 (the published training simulator)"
#: Protocols whose requests are the published text itself (fetched at run time, not rlver's words).
PUBLISHED_PROTOCOLS = ("sage-published", "rlver-published")
#: The longest agent reply in the nine released files (characters): a quote cut below it cut replies.
LONGEST_RELEASED_REPLY = 4643
#: The published training's reply cap (``per_turn_length=5000`` tokens, train_rlver.sh:46 ``per_turn_length=5000``).
PUBLISHED_TRAINING_REPLY_TOKENS = 5000
#: :func:`~rlver.profiles.sets.profile_ids_sha256` of the published sets (their ids in file order);
#: ``tests/eval/test_explain.py`` checks them against ../shared/data.
PUBLISHED_PROFILE_IDS: dict[str, str] = {
    "sage-test": "0f1d63f06211e01988f572dff108a0a8d48ebb9b57704ff0677a095067a55797",
    "rlver-train": "84f08bc305449d777d8d3ab1a25d329b0a844d09eabc60629b4be85f98189f46",
}


def judge_name(model: str) -> str | None:
    """The published judge ``model`` names (``deepseek-chat`` -> ``deepseek-v3``), else None: compared
    whole, lower-cased, after a provider prefix (``deepseek-ai/DeepSeek-V3``)."""
    return PUBLISHED_JUDGES.get(model.strip().lower().rsplit("/", 1)[-1])


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
    #: The published files a run's requests were built from, one line per holder (simulator, agent).
    prompt_files: list[str] = field(default_factory=list)
    #: Settings the run set that its simulator never reads (warned of when it started).
    no_effect: list[Difference] = field(default_factory=list)

    def text(self) -> str:
        if self.published_file is not None:
            return f"{self.path}: {self.published_file}"
        if not self.differences:
            head = f"{self.path}: follows {self.reference} in every setting rlver explain checks"
        else:
            n = len(self.differences)
            head = f"{self.path}: {n} setting{'s' if n != 1 else ''} differ{'s' if n == 1 else ''} from {self.reference}"
        lines = [head] + [line for d in self.differences for line in d.lines()]
        lines += [f"  {line}" for line in self.prompt_files]
        if self.no_effect:
            lines.append("  set, but without effect in this run (docs/protocol.md row no-effect):")
            lines += [f"    {d.setting}: {d.run} ({d.published})" for d in self.no_effect]
        if self.unknown:
            lines.append("  not known from the published code (not a difference, not comparable):")
            lines += [f"    {d.setting}: {d.run} here (docs/protocol.md row {d.row})" for d in self.unknown]
        return "\n".join(lines)


def explain(path: Path) -> Explanation:
    """Compare the run at ``path`` (folder, transcript or released result file) with the published run."""
    file = transcript_path(path)
    if detect_format(file, strict=True) == "published":
        return Explanation(str(path), "", [], [], published_file=published_summary(file))
    transcript = read_transcript(file)
    return explain_manifest(_manifest_of(file, transcript.manifest), str(path), transcript.episodes)


def explain_manifest(
    manifest: RunManifest | dict[str, Any], where: str = "run", episodes: Sequence[Episode] = ()
) -> Explanation:
    """:func:`explain` of a manifest already read (``episodes``: the run's dialogues, where a
    difference shows only in what the agent wrote)."""
    manifest = RunManifest.read(manifest)
    training = manifest.kind == "train"
    checks = TRAINING_CHECKS if training else BENCHMARK_CHECKS
    found = [d for check in checks for d in check(manifest)]
    if not training and manifest.reply_layout is None:  # written before the layout was recorded
        found += _hidden_thoughts(manifest, episodes)
    differences = [d for d in found if d.published != "unknown"]
    unknown = [d for d in found if d.published == "unknown"]
    reference = "the published benchmark protocol (SAGE)"
    if training:
        preset = (manifest.published_run or {}).get("preset")
        reference = f"the published training run (RLVER{', preset ' + preset if preset else ''})"
    return Explanation(
        where,
        reference,
        differences,
        unknown,
        prompt_files=prompt_file_lines(manifest),
        no_effect=no_effect(manifest),
    )


def published_summary(file: Path) -> str:
    """A released SAGE result file is the published protocol; its folder names the simulator, in
    rlver's copy (``deepseek-v3-simulator``) or SAGE's own (``deepseek-v3_based_simulator``)."""
    folder = file.parent.name
    simulator = None
    for suffix in ("_based_simulator", "-based-simulator", "-simulator"):
        if folder.endswith(suffix) and len(folder) > len(suffix):
            simulator = folder.removesuffix(suffix)
            break
    agent = file.stem.removesuffix("_result")
    who = f"simulator {simulator}" if simulator else "simulator not named (a released file's folder names it)"
    return f"published protocol, {who}; a released SAGE result file (agent {agent})"


def prompt_file_lines(manifest: RunManifest) -> list[str]:
    """One line per holder of published prompt files: the simulator's ``published_files`` (name ->
    sha256, from its ``describe()``) and the agent's ``system_prompt_file`` (``file``, ``sha256``)."""
    lines = []
    files = (manifest.simulator or {}).get("published_files")
    if isinstance(files, dict) and files:
        listed = ", ".join(f"{name} sha256 {_short(sha)}" for name, sha in files.items())
        lines.append(f"simulator prompt files: {listed}")
    record = _agent_prompt_file(manifest)
    if record is not None:
        lines.append(f"agent prompt file: {record.get('file')} sha256 {_short(record.get('sha256'))}")
    return lines


def _short(sha: object) -> str:
    return f"{str(sha)[:12]}…" if sha else "(no sha256 recorded)"


def _agent_prompt_file(manifest: RunManifest) -> dict[str, Any] | None:
    for holder in (manifest.agent_prompt, manifest.agent):
        record = (holder or {}).get("system_prompt_file")
        if isinstance(record, dict):
            return record
    return None


def _manifest_of(file: Path, raw: dict[str, Any] | None) -> RunManifest:
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


def _change_bound(manifest: RunManifest) -> list[Difference]:
    """``simulator.max_change``: the most the emotion moves in one turn (SAGE clamps at ±10)."""
    bound = manifest.max_change
    if bound is None or bound == MAX_CHANGE:
        return []
    return [Difference("change bound per turn", f"±{bound}", f"±{MAX_CHANGE}", "change-bound")]


# --------------------------------------------------------------------------------------- simulator
def _simulator_model(manifest: RunManifest) -> str | None:
    model = (manifest.simulator or {}).get("model")
    if isinstance(model, dict):
        model = model.get("model") or model.get("name")
    return str(model) if model else None


def _simulator(published: str, judges: tuple[str, ...]) -> Check:
    """The simulated user against the published ones (``judges``: :func:`judge_name`'s values that
    count as published here)."""

    def check(manifest: RunManifest) -> list[Difference]:
        return _simulator_differences(manifest, published, judges)

    return check


def _simulator_differences(
    manifest: RunManifest, published: str, judges: tuple[str, ...]
) -> list[Difference]:
    kind = manifest.simulator_kind
    if kind == "offline":
        described = manifest.simulator or {}
        run = f"the offline user ({described.get('version', 'version not recorded')}, relevance {described.get('relevance', 'lexical')})"
        return [Difference("simulator", run, published, "simulator", offline_agreement(described))]
    if kind == "replay":
        return [Difference("simulator", "replay of recorded judgements", published, "simulator")]
    model = _simulator_model(manifest)
    if model is None or judge_name(model) in judges:
        return []
    dated = UNDATED_JUDGES.get(model.strip().lower().rsplit("/", 1)[-1])
    note = f" (an undated name: today's snapshot, not {dated} behind the released files)" if dated else ""
    return [Difference("simulator", f"LLM {model}{note}", published, "simulator")]


def offline_agreement(described: dict[str, Any]) -> str:
    """How far the offline user that ran agrees with SAGE, per language, read from its own description
    (the learned appraisal's artefact carries its validation, as ``rlver demo`` reads it)."""
    appraisal = described.get("appraisal") or {}
    parts = []
    learned = described.get("learned") or {}
    lmo = ((learned.get("validation") or {}).get("leave_model_out") or {}).get("overall") or {}
    if appraisal.get("zh") == "learned" and lmo:
        parts.append(
            "Chinese profiles: the learned appraisal, per-turn Spearman "
            f"{lmo.get('spearman')}, sign agreement {lmo.get('sign_agreement')}, model-ranking Spearman "
            f"{lmo.get('model_ranking_spearman')} with the released SAGE judgements on agent models it "
            f"never saw ({learned.get('artefact', 'its artefact')})"
        )
    transfer = described.get("transfer") or {}
    tmo = ((transfer.get("validation") or {}).get("leave_model_out") or {}).get("overall") or {}
    if str(appraisal.get("en", "")).startswith("transfer") and tmo:
        parts.append(
            "English profiles: the transfer appraisal, fitted on the Chinese judgements (there: per-turn "
            f"Spearman {tmo.get('spearman')}), never measured in English"
        )
    lexicon = [lang for lang, how in appraisal.items() if str(how).startswith("lexicon")]
    if lexicon or not parts:
        which = "/".join(lexicon) if lexicon else "every language"
        parts.append(f"{which}: the lexicon appraisal; {LEXICON_AGREEMENT}")
    return "the offline user is a proxy, not a judge: " + "; ".join(parts)


def _simulator_options(published_text: str, wanted: str) -> Check:
    """The simulator's prompts: the published text (a protocol that fetched it), or rlver's own."""

    def check(manifest: RunManifest) -> list[Difference]:
        described = manifest.simulator or {}
        protocol = described.get("prompts")
        if protocol is None:
            return []
        if protocol in PUBLISHED_PROTOCOLS or described.get("published_files"):
            return _published_differences(described, protocol, wanted, published_text)
        if protocol != "sage":
            return [
                Difference(
                    "simulator prompts",
                    f"{protocol} (rlver's own prompts)",
                    published_text,
                    "simulator-options",
                )
            ]
        return _sage_differences(described, published_text)

    return check


def _published_differences(
    described: dict[str, Any], protocol: str, wanted: str, published_text: str
) -> list[Difference]:
    """A protocol that sends published text: the other run's text (training vs benchmark), or the
    prompt carried in a system message instead of a user message."""
    found = []
    if protocol != wanted:
        found.append(
            Difference(
                "simulator prompts",
                f"{protocol}: published text of the other run",
                published_text,
                "simulator-options",
            )
        )
    if protocol == "rlver-published" and described.get("appraisal_emotion") == "current":
        found.append(
            Difference(
                "appraisal prompt's emotion",
                "the emotion at that turn (simulator.prompts.appraisal_emotion: current)",
                "the dialogue's start emotion, every turn (the role's emo_point is never updated, dsv3 :85, :178)",
                "simulator-options",
            )
        )
    if described.get("prompt_role", "user") != "user":
        found.append(
            Difference(
                "simulator prompt message",
                f"the prompt as one {described.get('prompt_role')} message",
                "one user message (SAGE's call_llm(prompt) leaves the role open; rlver's reading)",
                "simulator-options",
            )
        )
    return found


def _sage_differences(described: dict[str, Any], published_text: str) -> list[Difference]:
    """rlver's ``sage``: its own words, its JSON answer format, then its options (defaults: all off)."""
    row = "simulator-options"
    found = [
        Difference("simulator prompts", "sage: rlver's paraphrase of SAGE's prompts, not the published text", published_text, row),
        Difference(
            "simulator answer format",
            'JSON with "end_dialogue": false pre-filled in the reply format',
            "SAGE's own fields, no end flag: a goodbye is found by its words (SAGE test_npc.py:107)",
            row,
        ),
    ]  # fmt: skip
    on = [name for name in SageProtocol.option_names() if described.get(name) is True]
    if on:
        found.append(Difference("simulator options", ", ".join(on) + " on", "all off", row))
    version = described.get("prompt_version")
    if version not in (None, SAGE_PROMPT_VERSION):
        found.append(Difference("simulator prompt version", str(version), SAGE_PROMPT_VERSION, row))
    quoted = recorded_max_quoted_chars(described)
    if isinstance(quoted, int) and quoted < LONGEST_RELEASED_REPLY:
        found.append(
            Difference("agent reply shown to the simulator", f"cut at {quoted} characters", "whole", row)
        )
    return found


def _sampling_text(sampling: dict[str, Any]) -> str:
    """Every sampling setting a call sends, in words."""
    if sampling.get("model_default"):
        parts = ["the model's own temperature and top_p"]
    else:
        parts = [f"temperature {sampling.get('temperature')}", f"top_p {sampling.get('top_p')}"]
    cap = sampling.get("max_tokens")
    parts.append("no max_tokens (the server's limit)" if cap is None else f"max_tokens {cap}")
    parts += [f"{key} {sampling[key]}" for key in ("seed", "stop", "extra") if sampling.get(key)]
    return ", ".join(parts)


def _simulator_sampling(manifest: RunManifest) -> list[Difference]:
    sampling = (manifest.simulator or {}).get("sampling")
    if manifest.simulator_kind in ("offline", "replay") or not isinstance(sampling, dict):
        return []
    sent = [key for key in ("seed", "stop", "extra") if sampling.get(key)]
    if sampling.get("model_default") and sampling.get("max_tokens") is None and not sent:
        return []  # nothing sent, as the published calls send nothing
    return [Difference("simulator sampling", _sampling_text(sampling), "unknown", "simulator-sampling")]


def _chosen(value: object) -> str | None:
    """A run-wide setting the simulator describes, or None where each profile's own applies."""
    return str(value) if value and not str(value).startswith("per-profile") else None


def _user_behaviour(manifest: RunManifest) -> list[Difference]:
    """``--behaviour`` and ``--difficulty``: SAGE's user is cooperative and has no difficulty."""
    described = manifest.simulator or {}
    found = []
    behaviour = _chosen(described.get("behaviour"))
    if behaviour is not None and behaviour != "cooperative":
        found.append(Difference("user behaviour", behaviour, "cooperative", "user-behaviour"))
    difficulty = _chosen(described.get("difficulty"))
    if difficulty is not None and difficulty != "normal":
        shown = described.get("prompts") != "sage" or described.get("difficulty_paragraph") is True
        note = "" if shown else " (the sage prompts show it only with difficulty_paragraph)"
        found.append(Difference("user difficulty", difficulty + note, "none (normal)", "user-behaviour"))
    return found


def _languages(manifest: RunManifest) -> list[Difference]:
    """``env.language`` and ``simulator.prompt_language``: SAGE's prompts follow its (Chinese) profiles."""
    published = "each profile's own (SAGE: Chinese prompts, Chinese profiles)"
    found = []
    agent = (manifest.env or {}).get("language")
    if (
        agent
        and _prompt_name(manifest)[0] not in PUBLISHED_PROTOCOLS
        and agent != _profiles_language(manifest)
    ):
        found.append(Difference("agent prompt language", f"{agent} for every profile", published, "language"))
    described = manifest.simulator or {}
    if (
        manifest.simulator_kind not in ("offline", "replay")
        and described.get("prompts") not in PUBLISHED_PROTOCOLS
    ):
        user = _chosen(described.get("prompt_language"))
        if user is not None and user != _profiles_language(manifest):
            found.append(
                Difference("simulator prompt language", f"{user} for every profile", published, "language")
            )
    return found


def _profiles_language(manifest: RunManifest) -> str | None:
    """The one language of the run's profiles where it is known: the published sets are Chinese."""
    given = str(manifest.profiles)
    if given in PUBLISHED_SETS or any(_same_set(manifest, name) for name in ("sage", "rlver-train")):
        return "zh"
    return None


# ------------------------------------------------------------------------------------------ agent
def _prompt_name(manifest: RunManifest) -> tuple[str | None, dict[str, Any]]:
    record = manifest.agent_prompt or {}
    env = manifest.env or {}
    name = record.get("name") or ("custom" if env.get("system_prompt") else env.get("agent_prompt"))
    return (str(name) if name else None), dict(record.get("sha256") or {})


def _agent_prompt(wanted: str) -> Check:
    """The agent's system prompt: its name, its wording, and the think instruction ``--think`` adds to
    a prompt that has no think version of its own (``published`` has one, as the published code)."""

    def check(manifest: RunManifest) -> list[Difference]:
        name, shas = _prompt_name(manifest)
        if name is None:
            return []
        think = bool(manifest.think)
        added = think and _gets_think_instruction(name)
        run = f"{name} + rlver's think instruction (--think)" if added else name
        if name != wanted or added:
            published = f"{wanted}, no think instruction" if added and name == wanted else wanted
            return [Difference("agent prompt", run, published, "agent-prompt")]
        if _agent_prompt_file(manifest) is not None:
            return []  # the fetched text, checked against its pinned sha256 when the run read it
        now = {lang: hashlib.sha256(system_prompt(think, lang, wanted).encode()).hexdigest() for lang in shas}
        if shas and shas != now:
            return [
                Difference("agent prompt", f"{name}, an earlier wording", f"{name} as now", "agent-prompt")
            ]
        return []

    return check


def _gets_think_instruction(name: str) -> bool:
    """Whether think mode adds rlver's think instruction to the agent prompt ``name``
    (:func:`rlver.env.thinking.system_prompt`: the published prompts have their own think version)."""
    return name in AGENT_PROMPTS or name == "sage-published"


def _agent_sampling(manifest: RunManifest) -> list[Difference]:
    sampling = manifest.agent_sampling or {}
    sent = {k: sampling.get(k) for k in ("seed", "stop", "extra") if sampling.get(k)}
    if not sampling or (sampling.get("model_default") and not sent):
        return []
    run = _sampling_text({**sampling, "max_tokens": None}).replace(", max_tokens None", "") + " sent"
    return [Difference("agent sampling", run, "none sent (the model's own defaults)", "agent-sampling")]


def _agent_max_tokens(published: int | None, said: str) -> Check:
    """The agent's reply cap, named whenever it is not the published one (``None``: SAGE sends none,
    so every cap rlver sends is named, its default 8,192 included)."""

    def check(manifest: RunManifest) -> list[Difference]:
        cap = manifest.agent_max_tokens
        if cap is None or cap == published:
            return []
        return [Difference("agent reply cap", f"{cap:,} tokens sent", said, "agent-max-tokens")]

    return check


def _reply_chars(manifest: RunManifest) -> list[Difference]:
    """``env.max_reply_chars``: where the environment cuts a reply before the simulator reads it (a
    published-text protocol quotes it uncut: then the setting has no effect, :func:`no_effect`)."""
    cut = (manifest.env or {}).get("max_reply_chars")
    default = EnvConfig.model_fields["max_reply_chars"].default
    if not isinstance(cut, int) or cut == default or _uncut(manifest):
        return []
    published = f"whole (the longest released reply has {LONGEST_RELEASED_REPLY:,} characters; rlver's default cut is {default:,})"
    return [
        Difference(
            "agent reply shown to the simulator", f"cut at {cut:,} characters", published, "reply-chars"
        )
    ]


def _uncut(manifest: RunManifest) -> bool:
    """Whether the run showed the simulator each reply uncut (the published-text protocols)."""
    return manifest.reply_layout is not None and manifest.reply_layout.get("cut_at") is None


def _think_context(manifest: RunManifest) -> list[Difference]:
    """A think run against the published think rollout (the training reference): later turns see
    only the visible text (``vllm_rollout_spmd_think.py:555-556`` ``"content":extracted_content_1``)."""
    if not manifest.think:
        return []
    context = recorded_think_context(manifest.env)
    if context == "visible":
        return []
    return [
        Difference(
            "think context", f"{context} (earlier thoughts shown)", "visible text only", "think-context"
        )
    ]


#: SAGE's loop: the agent's answer goes whole into the one history both sides read (test_npc.py:113-115 ``call_npc(player["history"])``,
#: npc_response.py:16-20 ``mes["content"]``); SAGE has no think mode.
_SAGE_LAYOUT = (
    "the whole reply, the same text for the simulator and the agent's later turns (SAGE has no think mode)"
)


def _think_layout(manifest: RunManifest) -> list[Difference]:
    """Each way a think run's reply layout departs from SAGE's loop (the benchmark reference): what
    the simulator is shown, and what the agent's later turns see (``EnvConfig.reply_layout``)."""
    layout = manifest.reply_layout
    if layout is None:  # an older manifest: its think context is compared as before
        return _think_context(manifest)
    found = []
    if layout.get("simulator") == "after_think":
        run = "the text after the last </think> (--think, the published think rollout's rule; a reply without it whole)"
        found.append(Difference("reply shown to the simulator", run, _SAGE_LAYOUT, "think-context"))
    history = layout.get("agent_history")
    if manifest.think and history == "after_think":
        run = (
            "the text after </think> of its earlier replies (think_context visible, as the simulator saw it)"
        )
        found.append(Difference("the agent's earlier replies", run, _SAGE_LAYOUT, "think-context"))
    elif manifest.think and history == "whole":
        run = "its earlier replies whole, thoughts included, which the simulator did not see (think_context full)"
        found.append(Difference("the agent's earlier replies", run, _SAGE_LAYOUT, "think-context"))
    return found


def _hidden_thoughts(manifest: RunManifest, episodes: Sequence[Episode]) -> list[Difference]:
    """A run written before the reply layout was recorded (no ``reply_layout``): without ``--think``
    its simulator was still shown only the text after a reply's last ``</think>``; SAGE shows the
    whole reply (test_npc.py:113-115 ``call_npc(player["history"])``), as rlver now does. Named when a reply of the run held such a
    block (otherwise the two are the same)."""
    if manifest.think is not False or (manifest.simulator or {}).get("shown_reply") == "whole":
        return []  # sage-published shows the whole reply, as SAGE
    replies = [m.content for ep in episodes for m in ep.messages if m.role == "assistant"]
    cut = sum(shown_to_user(text) != text.strip() for text in replies)
    if not cut:
        return []
    run = f"{cut} of {len(replies)} replies held </think>: the simulator saw only the text after it (no --think)"
    return [Difference("reply shown to the simulator", run, "the whole reply", "think-context")]


def _profiles(name: str, count: int, per_profile: int | None) -> Check:
    """The profile set, its size and (``per_profile``; ``None``: compared with the published preset
    of the run's algorithm, row training-settings) the dialogues per profile."""

    def check(manifest: RunManifest) -> list[Difference]:
        found: list[Difference] = []
        if manifest.profiles is not None and not _same_set(manifest, name):
            ids = manifest.profile_ids_sha256
            run = f"{manifest.profiles} (profile ids sha256 {_short(ids)})" if ids else str(manifest.profiles)
            found.append(Difference("profile set", run, name, "profiles"))
        elif manifest.n_profiles is not None and manifest.n_profiles != count:
            found.append(Difference("profile count", str(manifest.n_profiles), str(count), "profiles"))
        if per_profile is not None and (manifest.n_per_profile or 1) != per_profile:
            found.append(
                Difference("dialogues per profile", str(manifest.n_per_profile), str(per_profile), "profiles")
            )
        return found

    return check


def _retries(manifest: RunManifest) -> list[Difference]:
    """How an empty or malformed answer is asked again. SAGE calls its agent and its judge once
    (npc_response.py:22 ``call_llm(history)``; an empty answer is read as it is) and re-sends a prompt whose answer does
    not parse until one does (simulator_response.py:135-161 ``time.sleep(3)``; dsv3 :204-225 ``time.sleep(3)``)."""
    found = []
    if (manifest.agent_spec or {}).get("retry_empty"):
        found.append(
            Difference(
                "agent's empty reply",
                "asked again, up to its max_attempts",
                "one call, the empty reply appraised",
                "retries",
            )
        )
    described = manifest.simulator or {}
    spec = (manifest.simulator_spec or {}).get("model") or {}
    if "parse_attempts" in described and spec.get("retry_empty"):
        found.append(
            Difference(
                "simulator's empty answer", "asked again, up to its max_attempts", "read as it is", "retries"
            )
        )
    attempts = described.get("parse_attempts")
    if isinstance(attempts, int) and 0 < attempts < PARSE_GUARD:  # the default guard: the published loop
        run = f"sent at most {attempts} times, then the turn fails (simulator.prompts.parse_attempts)"
        found.append(
            Difference("simulator answer that does not parse", run, "sent again until one parses", "retries")
        )
    return found


def _failed_dialogue(manifest: RunManifest) -> list[Difference]:
    """What a training run does with a failed dialogue and its group (``rlver.rollout.failed_groups``,
    recorded in ``published_run``); the published user retries each call until it answers, so none
    fails there. Runs written before the rule was recorded name nothing."""
    rule = (manifest.published_run or {}).get("failed_dialogue")
    if not rule:
        return []
    return [Difference("a failed dialogue", str(rule), failed_groups.PUBLISHED, "retries")]


def _held_out(manifest: RunManifest) -> list[Difference]:
    """How a training run's held-out score was measured; the published run validated once, after
    the last step, on the training environment (train_rlver.sh:73 ``val_before_train=False``, :78 ``test_freq=999999``; ray_trainer.py:1184-1189)."""
    held = manifest.held_out
    if not held:
        return []
    parts = [f"{held.get('dialogue')} on {held.get('profiles')}"]
    if held.get("limit"):
        parts.append(f"the first {held['limit']}")
    if "simulator_prompts" in held:
        user = held.get("simulator_prompts") or held.get("simulator")
        prompt = str(held.get("agent_prompt"))
        if held.get("think") and _gets_think_instruction(prompt):
            prompt += " + rlver's think instruction (rollout.think)"
        parts += [f"user {user}", f"agent prompt {prompt}"]
        parts.append(
            f"{held.get('samples_per_profile')} dialogue(s) a profile at temperature {held.get('temperature')}"
        )
        parts.append(f"seed {held.get('seed')}")
        when = f"every {held['every']} steps and at the end" if held.get("every") else "at the end"
        parts.append(when + (", and before training" if held.get("at_start") else ""))
    published = "one validation after the last step, on the training dialogue and simulator"
    return [Difference("in-training evaluation", "; ".join(parts), published, "held-out")]


def _training_settings(manifest: RunManifest) -> list[Difference]:
    """The settings that differ from the published preset of the run's algorithm and think mode, as
    the run recorded them (``train/published_run.py``): model, batch size, steps, max_length, ..."""
    record = manifest.published_run or {}
    preset = record.get("preset")
    found = []
    for path, values in (record.get("differences") or {}).items():
        found.append(
            Difference(
                path,
                _value(values.get("run")),
                f"{_value(values.get('published'))}, preset {preset}",
                "training-settings",
            )
        )
    return found


def _value(value: object) -> str:
    return "not set" if value is None else str(value)


def no_effect(manifest: RunManifest) -> list[Difference]:
    """The settings of the run that its simulator never read (``SimulatorSpec.inert_settings``, as the
    run warned when it started), and a reply cut that a published-text protocol does not make."""
    found = []
    spec = manifest.simulator_spec
    if isinstance(spec, dict):
        try:
            parsed = SimulatorSpec.model_validate(spec)
        except ValueError:  # a spec this version cannot read: nothing to say about it
            parsed = None
        if parsed is not None:
            found += [
                Difference(f"simulator.{key}", repr(parsed.setting(key)), why, "no-effect")
                for key, why in parsed.inert_settings().items()
            ]
    language = (manifest.env or {}).get("language")
    prompt = _prompt_name(manifest)[0]
    if language and prompt in PUBLISHED_PROTOCOLS:
        why = f"the {prompt} agent prompt is the published text, the same in every language"
        found.append(Difference("env.language", str(language), why, "no-effect"))
    described = manifest.simulator or {}
    user = _chosen(described.get("prompt_language"))
    if user is not None and described.get("prompts") in PUBLISHED_PROTOCOLS:
        why = f"the {described['prompts']} prompts are the published Chinese text"
        found.append(Difference("simulator.prompt_language", user, why, "no-effect"))
    cut = (manifest.env or {}).get("max_reply_chars")
    if _uncut(manifest) and isinstance(cut, int) and cut != EnvConfig.model_fields["max_reply_chars"].default:
        found.append(
            Difference(
                "env.max_reply_chars",
                str(cut),
                "the published-text protocol quotes each reply uncut",
                "no-effect",
            )
        )
    return found


def _same_set(manifest: RunManifest, name: str) -> bool:
    """Whether the run's profiles are the published set ``name``, by content: the ids it recorded, else
    a file's sha256 when the run named one that is here; a name only when nothing else is known."""
    data = PUBLISHED_SETS[name]
    if manifest.profile_ids_sha256 is not None:
        return manifest.profile_ids_sha256 == PUBLISHED_PROFILE_IDS[data]
    given = str(manifest.profiles)
    if given in PUBLISHED_SETS:
        return PUBLISHED_SETS[given] == data
    file = Path(given).expanduser()
    if file.is_file():
        return hashlib.sha256(file.read_bytes()).hexdigest() == DATA_FILES[data].sha256
    return False


BENCHMARK_CHECKS: tuple[Check, ...] = (
    _start(EVALUATION, PROTOCOL_GAP),
    _turns(EVALUATION, PROTOCOL_GAP),
    _ends(EVALUATION),
    _change_bound,
    _simulator(BENCHMARK_JUDGES, ("deepseek-v3", "gpt-4o")),
    _simulator_options("SAGE's own text (prompts sage-published)", "sage-published"),
    _simulator_sampling,
    _user_behaviour,
    _languages,
    _agent_prompt("sage-published"),
    _agent_sampling,
    _agent_max_tokens(
        None, f"none sent (SAGE's call_npc sets no max_tokens; rlver's default is {EVAL_AGENT_MAX_TOKENS:,})"
    ),
    _reply_chars,
    _think_layout,
    _retries,
    _profiles("sage", 100, 1),
)

TRAINING_CHECKS: tuple[Check, ...] = (
    _start(PUBLISHED_TRAINING, None),
    _turns(PUBLISHED_TRAINING, None),
    _ends(PUBLISHED_TRAINING),
    _change_bound,
    _simulator(TRAINING_JUDGE, ("deepseek-v3",)),
    _simulator_options(
        "the published training simulator's own text (prompts rlver-published)", "rlver-published"
    ),
    _simulator_sampling,
    _user_behaviour,
    _languages,
    _agent_prompt("rlver-published"),
    _agent_max_tokens(PUBLISHED_TRAINING_REPLY_TOKENS, f"{PUBLISHED_TRAINING_REPLY_TOKENS} tokens"),
    _reply_chars,
    _think_context,
    _retries,
    _failed_dialogue,
    _profiles("rlver-train", 500, None),
    _held_out,
    _training_settings,
)

__all__ = [
    "NOT_SCORED",
    "ROWS",
    "Difference",
    "Explanation",
    "explain",
    "explain_manifest",
    "judge_name",
    "no_effect",
    "offline_agreement",
    "published_summary",
]
