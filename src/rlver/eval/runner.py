"""``rlver eval``: run an agent against a profile set and write transcript, metrics and report.

The output folder holds::

    transcript.jsonl   manifest line + one line per dialogue, appended durably as each one ends
    config.json        the EvalConfig of the (first) run, for reproduction
    metrics.json       compute_metrics over the finished dialogues (written atomically at the end)
    report.html / .md  the report (``rlver report`` can rebuild it at any time)

Crash safety: a dialogue is appended (one ``write`` + fsync) the moment it ends, so Ctrl-C, a crash or a
SIGKILL loses only dialogues still in progress. ``resume=True`` reads the transcript, skips every
(profile, sample) that *finished* (failed ones are run again) and appends the rest to the same file.

The resume rule: a resume may extend the run's profile list (a larger ``--limit``) but never leave out
dialogues the transcript already holds (a smaller ``--limit``, another profile set): that is refused
with exit code 2. So ``metrics.json``, the report and ``rlver score`` are always computed from the same
transcript records. A run where no dialogue finished still writes its transcript (the errors, one
line each) and a ``metrics.json`` whose score is ``null``; the CLI then exits 1.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shutil
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlver.env.dialogue import EnvConfig
from rlver.env.thinking import PUBLISHED_AGENT_PROMPT_FILES, system_prompt
from rlver.errors import InputError, Problem
from rlver.eval.config import EvalConfig
from rlver.eval.metrics import Metrics, compute_metrics
from rlver.eval.report import write_report
from rlver.eval.runs import load_run
from rlver.io import atomic_write_json
from rlver.limits import check_dialogues
from rlver.llm.base import ChatModel, SamplingParams
from rlver.llm.factory import build_chat_model
from rlver.llm.spec import ModelSpec
from rlver.manifest import RunManifest
from rlver.migrate import upgrade_recorded_setting
from rlver.models.tiny import ensure_tiny_model
from rlver.profiles.published_code import published_digests
from rlver.profiles.schema import Profile
from rlver.profiles.sets import load_profile_set, profile_ids_sha256
from rlver.records import Episode
from rlver.redaction import redacted
from rlver.rollout.runner import RolloutConfig, run_rollouts, seeds_each_turn
from rlver.rules import protocol_label
from rlver.simulator.base import UserSimulator
from rlver.simulator.behaviours import resolve_behaviour
from rlver.simulator.factory import SimulatorSpec, build_simulator, refuse_unfit_profiles
from rlver.simulator.llm.published_calls import warn_off_format
from rlver.transcripts.files import TRANSCRIPT_NAME, dedupe_episodes, read_episodes
from rlver.transcripts.native import (
    EPISODE,
    TranscriptWriter,
    finished_keys,
    read_transcript,
)

log = logging.getLogger(__name__)

#: The run's metrics file in its output folder (written here; ``rlver score`` recomputes from the transcript).
METRICS_NAME = "metrics.json"

#: Manifest keys whose change between a run and its resumption makes the results incomparable.
_MUST_MATCH = ("agent_spec", "agent_sampling", "simulator_spec", "env", "profiles", "n_per_profile", "seed")


@dataclass
class EvalProgress:
    """What the progress display shows; updated as dialogues end."""

    total: int
    already_done: int
    finished: int = 0
    failed: int = 0
    emotion_sum: int = 0

    @property
    def mean_emotion(self) -> float | None:
        return self.emotion_sum / self.finished if self.finished else None


@dataclass
class EvalResult:
    out_dir: Path
    transcript: Path
    metrics: Metrics
    report: Path | None
    ran: int
    skipped: int
    #: The run's manifest (sampling caps, agent prompt, protocol) as written to the transcript.
    manifest: RunManifest = field(default_factory=RunManifest)


ProgressCallback = Callable[[EvalProgress], None]


def select_profiles(config: EvalConfig) -> list[Profile]:
    profiles = load_profile_set(config.profiles)
    if config.limit is not None:
        if config.limit > len(profiles):
            # a bound, as head -n is; said, so a run meant to be larger is not taken for one
            warnings.warn(
                f"--limit {config.limit}: {config.profiles} holds {len(profiles)} profiles; all "
                f"{len(profiles)} are evaluated",
                stacklevel=2,
            )
        profiles = profiles[: config.limit]
    if not profiles:
        raise InputError(Problem(config.profiles, None, None, "no profiles to evaluate"))
    ids = [p.id for p in profiles]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise InputError(Problem(config.profiles, None, "id", f"duplicate profile ids: {', '.join(dup[:5])}"))
    return profiles


def agent_spec(config: EvalConfig) -> ModelSpec:
    """The agent's ModelSpec; for ``agent_tiny`` the tiny local model is built into the run folder."""
    if config.agent is not None:
        return config.agent
    path = ensure_tiny_model(config.out_dir.resolve() / "tiny-agent", seed=config.seed)
    return ModelSpec(
        kind="local", model=str(path), api_key_env=None, device="cpu", sampling=config.agent_sampling()
    )


def build_agent(spec: ModelSpec) -> ChatModel:
    """The model under test. An empty reply (after the client's retries) is its answer and is
    appraised, as SAGE did, instead of failing the dialogue."""
    agent = build_chat_model(spec)
    agent.accept_empty = True
    return agent


def agent_prompt_record(env: Any) -> dict[str, Any]:
    """Which agent system prompt the run used: its name and, per language, the SHA-256 and text.

    A reader can tell a neutral (leaderboard-comparable) run from a coached one at a glance.
    """
    if env.system_prompt:
        texts = {"any": env.system_prompt}
        name = "custom"
    else:
        texts = {lang: system_prompt(env.think, lang, env.agent_prompt) for lang in ("en", "zh")}
        name = env.agent_prompt
    record: dict[str, Any] = {
        "name": name,
        "sha256": {k: hashlib.sha256(v.encode()).hexdigest() for k, v in texts.items()},
        "text": texts,
    }
    if not env.system_prompt and env.agent_prompt in PUBLISHED_AGENT_PROMPT_FILES:
        file = PUBLISHED_AGENT_PROMPT_FILES[env.agent_prompt]
        record["system_prompt_file"] = {"file": file, "sha256": published_digests((file,))[file]}
    return record


def agent_seeding(sampling: SamplingParams, run_seed: int, agent: ChatModel | None = None) -> dict[str, Any]:
    """How the agent's sampling was seeded (see ``rollout.runner.agent_seed``), for the manifest."""
    if agent is not None and not seeds_each_turn(agent, sampling):
        return {
            "agent_seed": None,
            "per_dialogue": "none sent (an endpoint gets a seed only when sampling.seed is set)",
        }
    return {
        "agent_seed": sampling.seed if sampling.seed is not None else run_seed,
        "per_dialogue": "agent_seed(agent_seed, dialogue seed, turn): independent of batch size and resume",
    }


def eval_manifest(
    config: EvalConfig, spec: ModelSpec, agent: ChatModel, simulator: Any, n_profiles: int, profile_ids: str
) -> RunManifest:
    """The run's manifest: every resolved setting (``rlver explain`` compares them with the published
    protocol, and its test walks them). The profile set is recorded by name and by content
    (``profile_ids``: :func:`~rlver.profiles.sets.profile_ids_sha256` of the whole set)."""
    return RunManifest.create(
        kind="eval",
        run_name=config.run_name or config.out_dir.resolve().name,
        agent=agent.describe(),
        agent_spec=redacted(spec.model_dump(mode="json")),
        agent_sampling=config.agent_sampling().model_dump(mode="json"),
        agent_seeding=agent_seeding(config.agent_sampling(), config.seed, agent),
        simulator=simulator.describe(),
        simulator_spec=redacted(config.simulator.model_dump(mode="json")),
        env=config.env.model_dump(mode="json"),
        reply_layout=config.env.reply_layout(cut=getattr(simulator, "cuts_reply", True)),
        dialogue=protocol_label(config.env.rules),
        agent_prompt=agent_prompt_record(config.env),
        profiles=config.profiles,
        limit=config.limit,
        n_profiles=n_profiles,
        profile_ids_sha256=profile_ids,
        n_per_profile=config.n_per_profile,
        seed=config.seed,
        concurrency=config.concurrency,
        requests=requests_record(config),
    )


def requests_record(config: EvalConfig) -> dict[str, Any]:
    """What each endpoint's request bodies carried of the sampling fields, ``"server default"`` for a
    field left out (SAGE's calls send none: docs/protocol.md, "Request bodies"); a local model sends
    no request and has no entry."""
    record: dict[str, Any] = {}
    if config.agent is not None and config.agent.kind == "openai":
        record["agent"] = config.agent_sampling().sent()
    sampling = getattr(config.simulator, "sampling", None)
    model = getattr(config.simulator, "model", None)
    if isinstance(sampling, SamplingParams) and getattr(model, "kind", None) == "openai":
        record["simulator"] = sampling.sent()
    return record


def _check_resume(existing: RunManifest | dict[str, Any], new: RunManifest | dict[str, Any]) -> list[str]:
    """Settings that differ between the transcript's manifest and this invocation (those it records);
    each recorded one read as this version writes it (older shapes: ``rlver.migrate``)."""
    existing, new = RunManifest.read(existing), RunManifest.read(new)
    now = EnvConfig().think_context
    return [
        k
        for k in _MUST_MATCH
        if (old := getattr(existing, k)) is not None
        and upgrade_recorded_setting(k, old, _READ_NOW, now) != getattr(new, k)
    ]


#: How this version reads each recorded block it compares on resume (validated, dumped as JSON).
_READ_NOW: dict[str, Callable[[Any], Any]] = {
    "env": lambda value: EnvConfig.model_validate(value).model_dump(mode="json"),
    "agent_sampling": lambda value: SamplingParams.model_validate(value).model_dump(mode="json"),
    "simulator_spec": lambda value: redacted(SimulatorSpec.model_validate(value).model_dump(mode="json")),
}


def _enrich(episode: Episode, profile: Profile | None, config: EvalConfig) -> Episode:
    """Add what the report and breakdowns need (topic, behaviour, difficulty) to ``episode.meta``."""
    meta = dict(episode.meta)
    if profile is not None:
        meta.setdefault("topic", profile.topic)
        meta.setdefault("style", profile.style)
        meta.setdefault("hidden_need", profile.hidden_need)
        # The environment records the behaviour and difficulty the user ran with; these are
        # fallbacks for episodes that failed before the user was created.
        behaviour = resolve_behaviour(profile.behaviour, config.simulator.behaviour).name
        difficulty = config.simulator.difficulty or profile.difficulty
        meta.setdefault("behaviour", behaviour)
        if difficulty:
            meta.setdefault("difficulty", difficulty)
    return episode.model_copy(update={"meta": meta})


async def run_eval_async(
    config: EvalConfig,
    *,
    resume: bool = False,
    on_progress: ProgressCallback | None = None,
    on_start: Callable[[EvalProgress], None] | None = None,
) -> EvalResult:
    """Run the benchmark described by ``config`` (see the module docstring for files and resume)."""
    out_dir = config.out_dir
    transcript = out_dir / TRANSCRIPT_NAME
    if transcript.exists() and transcript.stat().st_size > 0 and not resume:
        raise InputError(
            Problem(
                str(transcript),
                None,
                None,
                "a transcript already exists here; pass --resume to finish that run, or choose another --out",
            )
        )
    profiles = select_profiles(config)
    refuse_unfit_profiles(config.simulator, profiles, f"--profiles {config.profiles}")
    # before the list of dialogues is built: a request of 10^8 took minutes and gigabytes to list
    check_dialogues(
        len(profiles) * config.n_per_profile,
        f"{len(profiles)} profile(s) x --n-per-profile {config.n_per_profile}",
        "split it into several runs (fewer profiles with --limit, or a smaller --n-per-profile), "
        "each with its own --out",
    )
    by_id = {p.id: p for p in profiles}
    wanted = {(p.id, k) for p in profiles for k in range(config.n_per_profile)}
    if resume:
        _check_same_or_larger(transcript, wanted, config)
    created = not out_dir.exists()
    try:
        return await _run_in(
            config, out_dir, transcript, profiles, by_id, wanted, resume, on_progress, on_start
        )
    except (KeyboardInterrupt, asyncio.CancelledError):
        # The user's stop (Ctrl-C arrives as KeyboardInterrupt here, or as the cancellation
        # asyncio.run sends its tasks when the signal landed in the loop): the folder stays once it
        # holds the run's manifest (what --resume checks); stopped while loading, it goes.
        if created and out_dir.is_dir() and not transcript.exists():
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    except BaseException:
        # A run that failed before its first dialogue (bad model path, unreachable hub) must not leave
        # a folder behind that looks like a run: remove it if we made it.
        if created and out_dir.is_dir() and not _has_dialogues(transcript):
            shutil.rmtree(out_dir, ignore_errors=True)
        raise


def _has_dialogues(transcript: Path) -> bool:
    try:
        with transcript.open("rb") as fh:
            return any(f'"type": "{EPISODE}"'.encode() in line for line in fh)
    except OSError:
        return False


def _check_same_or_larger(transcript: Path, wanted: set[tuple[str, int]], config: EvalConfig) -> None:
    """The resume rule: a resumed run may extend its profile list (a larger ``--limit``), never shrink it.

    Every output (``metrics.json``, the report, ``rlver score``) is computed from the same transcript
    records, so a resume whose profile list leaves out dialogues the transcript already holds would
    either report fewer than the files contain or silently ignore the new ``--limit``. It is refused.
    """
    if not transcript.exists() or transcript.stat().st_size == 0:
        return
    recorded = {(ep.profile_id, ep.sample_index) for ep in read_transcript(transcript).episodes}
    extra = recorded - wanted
    if not extra:
        return
    n_recorded = len({pid for pid, _ in recorded})
    example = ", ".join(f"{pid}#{k}" for pid, k in sorted(extra)[:3])
    raise InputError(
        Problem(
            str(transcript),
            None,
            "limit" if config.limit is not None else "profiles",
            f"this run already holds {len(extra)} dialogue(s) outside the profiles now selected "
            f"(e.g. {example}); it covers {n_recorded} profile(s): a resume may extend --limit, never "
            "shrink it or change --profiles/--n-per-profile; use the run's settings or another --out",
        )
    )


async def _run_in(
    config: EvalConfig,
    out_dir: Path,
    transcript: Path,
    profiles: list[Profile],
    by_id: dict[str, Profile],
    wanted: set[tuple[str, int]],
    resume: bool,
    on_progress: ProgressCallback | None,
    on_start: Callable[[EvalProgress], None] | None,
) -> EvalResult:
    """Run the dialogues not yet finished, appending each to the transcript, then write the metrics."""
    out_dir.mkdir(parents=True, exist_ok=True)
    skip, progress = _resume_progress(transcript, wanted, resume)
    spec = agent_spec(config)
    agent = build_agent(spec)
    simulator = build_simulator(config.simulator)
    try:
        ids = profile_ids_sha256(load_profile_set(config.profiles))  # the whole set, before --limit
        manifest = eval_manifest(config, spec, agent, simulator, len(profiles), ids)
        writer = _open_writer(transcript, manifest, config)
        if on_start is not None:
            on_start(progress)
        on_episode = _episode_sink(writer, progress, by_id, config, on_progress)
        ran = await _run_batches(agent, simulator, profiles, config, wanted, skip, on_episode)
    finally:
        await agent.aclose()
        closer = getattr(simulator, "aclose", None)
        if closer is not None:
            await closer()

    # The very records `rlver score` and the report read (the resume rule keeps them == ``wanted``).
    _, _, episodes = read_episodes(transcript)
    warn_off_format(episodes)
    metrics = compute_metrics(episodes, expected=len(wanted))
    atomic_write_json(
        out_dir / METRICS_NAME, {"run_name": manifest.run_name, **metrics.model_dump(mode="json")}
    )
    report_path = write_run_report(out_dir) if config.report else None
    return EvalResult(
        out_dir=out_dir,
        transcript=transcript,
        metrics=metrics,
        report=report_path,
        ran=len(ran),
        skipped=len(skip),
        manifest=manifest,
    )


def _resume_progress(
    transcript: Path, wanted: set[tuple[str, int]], resume: bool
) -> tuple[set[tuple[str, int]], EvalProgress]:
    """The dialogues to skip (finished in the transcript being resumed) and the progress they count."""
    skip = finished_keys(transcript) if resume else set()
    skip &= wanted
    progress = EvalProgress(total=len(wanted), already_done=len(skip))
    if resume and transcript.exists():
        for ep in dedupe_episodes(read_transcript(transcript).episodes):
            if (ep.profile_id, ep.sample_index) in skip:
                progress.emotion_sum += ep.final_emotion
                progress.finished += 1
    return skip, progress


def _open_writer(transcript: Path, manifest: RunManifest, config: EvalConfig) -> TranscriptWriter:
    """Open (or resume) the transcript; a resume with different settings is refused (exit 2).

    A new run also gets its ``config.json`` for reproduction; a resumed run keeps the first one.
    """
    writer = TranscriptWriter(transcript, manifest)
    if writer.resumed_manifest is None:
        atomic_write_json(config.out_dir / "config.json", redacted(config.model_dump(mode="json")))
        return writer
    changed = _check_resume(writer.manifest, writer.resumed_manifest)
    if changed:
        raise InputError(
            Problem(
                str(transcript),
                1,
                ", ".join(changed),
                "settings differ from the run being resumed; use the same settings or another --out",
            )
        )
    return writer


def _episode_sink(
    writer: TranscriptWriter,
    progress: EvalProgress,
    by_id: dict[str, Profile],
    config: EvalConfig,
    on_progress: ProgressCallback | None,
) -> Callable[[Episode], None]:
    """What happens the moment a dialogue ends: enrich it, append it durably, update the progress."""

    def on_episode(ep: Episode) -> None:
        ep = _enrich(ep, by_id.get(ep.profile_id), config)
        writer.append(ep)
        if ep.status == "finished":
            progress.finished += 1
            progress.emotion_sum += ep.final_emotion
        else:
            progress.failed += 1
        if on_progress is not None:
            on_progress(progress)

    return on_episode


async def _run_batches(
    agent: ChatModel,
    simulator: UserSimulator,
    profiles: list[Profile],
    config: EvalConfig,
    wanted: set[tuple[str, int]],
    skip: set[tuple[str, int]],
    on_episode: Callable[[Episode], None],
) -> list[Episode]:
    """Run every wanted dialogue not in ``skip``, ``config.batch_size`` at a time (all at once if unset)."""
    rollout_config = RolloutConfig(
        n_per_profile=config.n_per_profile,
        simulator_concurrency=config.concurrency,
        env=config.env,
        seed=config.seed,
    )
    todo = [(p.id, k) for p in profiles for k in range(config.n_per_profile) if (p.id, k) not in skip]
    step = config.batch_size or max(1, len(todo))
    ran: list[Episode] = []
    for start in range(0, len(todo), step):
        batch = set(todo[start : start + step])
        # The full profile list goes in every time (only ``batch`` is run) so each dialogue keeps
        # the simulator seed of its position in the set, whatever the batching or resumption.
        ran += await run_rollouts(
            agent,
            simulator,
            profiles,
            rollout_config,
            config.agent_sampling(),
            seed=config.seed,
            on_episode=on_episode,
            skip=wanted - batch,
        )
    return ran


def write_run_report(run_dir: Path) -> Path:
    html, _ = write_report([load_run(run_dir)], run_dir / "report.html")
    return html


def run_eval(config: EvalConfig, **kwargs: Any) -> EvalResult:
    """Synchronous entry point (the CLI's, and a notebook's).

    ``asyncio.run`` refuses to start inside a running event loop, which is where Jupyter runs every
    cell. There the run goes to a worker thread with its own loop and this call waits for it, so
    ``run_eval(cfg)`` works the same in a script and a notebook (``await run_eval_async(cfg)`` is the
    non-blocking alternative in a notebook).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_eval_async(config, **kwargs))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlver-eval") as pool:
        return pool.submit(asyncio.run, run_eval_async(config, **kwargs)).result()
