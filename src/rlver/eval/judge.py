"""Capability analysis: an LLM judge reads each dialogue and rates the agent.

The Sentient Benchmark's score says *how much* a simulated user was helped; the judge says *how*. For
every dialogue it rates the agent 1–5 on five capabilities (with a one-paragraph justification each)
and places the agent's manner on two axes of a "social cognition coordinate" (following the SAGE
paper's analysis, Zhang et al. 2025, arXiv:2505.02847):

- ``orientation``: -1 = empathy-oriented (stays with feelings) … +1 = solution-oriented (fixes things);
- ``style``: -1 = structured (lists, frameworks, steps) … +1 = creative (metaphor, story, play).

A run's position is the mean over its dialogues. The judge's answer must be one JSON object; it is
parsed strictly (every capability present, integer scores 1–5, coordinates in [-1, 1], bounded text).
An invalid answer is re-asked once with the validation error; a second failure is a
:class:`JudgeParseError` for that dialogue only. Calls go through :class:`rlver.llm.cache.CachedChatModel`
so re-running ``rlver judge`` on the same run costs nothing and gives the same ratings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlver.env.thinking import visible_text
from rlver.errors import RlverError
from rlver.io import append_jsonl, atomic_write_json, atomic_write_text, dumps_strict, iter_jsonl
from rlver.llm.base import ChatModel, SamplingParams
from rlver.llm.cache import CachedChatModel
from rlver.llm.factory import build_chat_model
from rlver.llm.spec import ModelSpec
from rlver.llm.structured import ReaskFailed, Strictness, ask_structured, parse_structured
from rlver.records import Episode, Message
from rlver.transcripts.files import read_episodes, run_name

CAPABILITIES: tuple[str, ...] = (
    "empathic_depth",
    "core_insight",
    "solution_crafting",
    "dialogue_guidance",
    "style_adaptability",
)
CAPABILITY_LABELS: dict[str, str] = {
    "empathic_depth": "Empathic depth",
    "core_insight": "Core insight",
    "solution_crafting": "Solution crafting",
    "dialogue_guidance": "Dialogue guidance",
    "style_adaptability": "Style adaptability",
}
MAX_ANSWER_CHARS = 20_000
MAX_JUSTIFICATION_CHARS = 1_200
MAX_TURN_CHARS = 4_000  # a dialogue turn longer than this is cut before it reaches the judge
JUDGE_PROMPT_VERSION = "judge-v1"
# The judge's files in a run folder; the judge names them, the report reads them (rlver.eval.runs).
JUDGE_JSONL = "judge.jsonl"
JUDGE_SUMMARY = "judge.json"
JUDGE_CACHE = "judge_cache.sqlite"


class JudgeParseError(RlverError):
    """The judge's answer was not the requested JSON, twice."""

    kind = "judge_parse"


class CapabilityRating(BaseModel):
    model_config = ConfigDict(extra="forbid")

    score: int = Field(ge=1, le=5)
    justification: str = Field(min_length=1)

    @field_validator("score", mode="before")
    @classmethod
    def _integer(cls, value: Any) -> Any:
        # Reject 3.5 or "4/5" rather than silently rounding: the prompt asks for an integer.
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("must be an integer from 1 to 5")
        return value

    @field_validator("justification")
    @classmethod
    def _bounded(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be blank")
        return value[:MAX_JUSTIFICATION_CHARS]


class Coordinate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    orientation: float = Field(ge=-1.0, le=1.0, description="-1 empathy-oriented … +1 solution-oriented")
    style: float = Field(ge=-1.0, le=1.0, description="-1 structured … +1 creative")


class Judgement(BaseModel):
    """The judge's verdict on one dialogue, exactly as parsed from its JSON answer."""

    model_config = ConfigDict(extra="forbid")

    ratings: dict[str, CapabilityRating]
    coordinate: Coordinate
    summary: str = ""

    @field_validator("ratings")
    @classmethod
    def _all_capabilities(cls, value: dict[str, CapabilityRating]) -> dict[str, CapabilityRating]:
        missing = [c for c in CAPABILITIES if c not in value]
        extra = [k for k in value if k not in CAPABILITIES]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing)}")
            if extra:
                parts.append(f"unknown {', '.join(extra)}")
            raise ValueError("; ".join(parts) + f" (expected exactly: {', '.join(CAPABILITIES)})")
        return {c: value[c] for c in CAPABILITIES}

    @field_validator("summary")
    @classmethod
    def _short(cls, value: str) -> str:
        return value.strip()[:MAX_JUSTIFICATION_CHARS]


class JudgedDialogue(BaseModel):
    """One line of ``judge.jsonl``."""

    profile_id: str
    sample_index: int = 0
    final_emotion: int
    judgement: Judgement | None = None
    error: str | None = None
    attempts: int = 1


class JudgeSummary(BaseModel):
    """A run's capability profile: written to ``judge.json`` and drawn in the report."""

    run: str
    judge_model: str
    prompt_version: str = JUDGE_PROMPT_VERSION
    n_judged: int
    n_errors: int
    #: Means are ``None`` (JSON ``null``) when no dialogue was judged: no number, and never NaN.
    capabilities: dict[str, float | None]  # mean score 1–5
    capability_std: dict[str, float | None]
    orientation: float | None  # mean position, -1 empathy … +1 solution
    style: float | None  # mean position, -1 structured … +1 creative


# -- prompt ---------------------------------------------------------------------------------------

JUDGE_SYSTEM = """You are an experienced counsellor who reviews recorded support conversations.
You will read one conversation between a person who reached out for support ("User") and an AI
assistant ("Assistant"). Judge only the Assistant. The User is played by an actor; do not judge them.

Rate the Assistant from 1 (poor) to 5 (excellent) on each capability:
- empathic_depth: does it notice and reflect the feelings under the words, without sounding scripted?
- core_insight: does it grasp what the person really needs, including what they do not say outright?
- solution_crafting: when help is wanted, are its ideas concrete, fitting and realistic for this person?
- dialogue_guidance: does it steer the conversation well (pacing, good questions, not lecturing)?
- style_adaptability: does its tone, length and register fit this person as the conversation changes?

Then place the Assistant's overall manner on two axes, each a number from -1.0 to 1.0:
- orientation: -1.0 = purely empathy-oriented (stays with feelings), 1.0 = purely solution-oriented
  (moves to fixing the problem), 0 = balanced;
- style: -1.0 = highly structured (lists, frameworks, numbered steps), 1.0 = highly creative
  (metaphor, story, playful or unconventional moves), 0 = neither.

Answer with ONE JSON object and nothing else, in exactly this shape:
{"ratings": {"empathic_depth": {"score": <1-5 integer>, "justification": "<one or two sentences>"},
             "core_insight": {...}, "solution_crafting": {...}, "dialogue_guidance": {...},
             "style_adaptability": {...}},
 "coordinate": {"orientation": <-1.0..1.0>, "style": <-1.0..1.0>},
 "summary": "<one sentence on the Assistant's overall approach>"}"""


def render_dialogue(episode: Episode) -> str:
    """The conversation as the judge reads it: visible turns only, each bounded in length."""
    lines: list[str] = []
    for msg in episode.messages:
        if msg.role == "system":
            continue
        text = visible_text(msg.content) if msg.role == "assistant" else msg.content
        text = text.strip()
        if len(text) > MAX_TURN_CHARS:
            text = text[:MAX_TURN_CHARS] + " […]"
        lines.append(f"{'User' if msg.role == 'user' else 'Assistant'}: {text}")
    return "\n\n".join(lines)


def judge_messages(episode: Episode) -> list[Message]:
    context = ""
    need = episode.meta.get("hidden_need") if isinstance(episode.meta, dict) else None
    if isinstance(need, str) and need.strip():
        context = f"(For your information, the person's unspoken need was: {need.strip()[:500]})\n\n"
    return [
        Message(role="system", content=JUDGE_SYSTEM),
        Message(role="user", content=f"{context}Conversation:\n\n{render_dialogue(episode)}"),
    ]


# -- parsing --------------------------------------------------------------------------------------

#: A short preamble or one code fence around the object; nothing after an unfenced object.
STRICTNESS = Strictness.PREAMBLE


def parse_judgement(text: str) -> Judgement:
    """Parse the judge's answer strictly. Raises ``ValueError`` with a message fit to send back."""
    return parse_structured(text, Judgement, strictness=STRICTNESS, max_chars=MAX_ANSWER_CHARS)


def _reask(problem: str) -> Message:
    return Message(
        role="user",
        content=f"That answer could not be used: {problem}. Reply again with only the JSON object, "
        "in exactly the requested shape.",
    )


async def judge_episode(
    model: ChatModel, episode: Episode, sampling: SamplingParams
) -> tuple[Judgement, int]:
    """Ask the judge about one dialogue; one re-ask on an invalid answer. Returns (judgement, attempts)."""
    try:
        judgement, result = await ask_structured(
            model,
            judge_messages(episode),
            sampling,
            Judgement,
            strictness=STRICTNESS,
            reask=_reask,
            max_chars=MAX_ANSWER_CHARS,
        )
    except ReaskFailed as exc:
        raise JudgeParseError(
            f"dialogue {episode.profile_id}: the judge's answer was invalid twice: {exc.problem}"
        ) from None
    return judgement, result.attempts


# -- a whole run ----------------------------------------------------------------------------------


def _key(profile_id: str, sample_index: int) -> str:
    return f"{profile_id}#{sample_index}"


def read_judged(path: Path) -> list[JudgedDialogue]:
    """The rows of ``judge.jsonl``, one per dialogue.

    A rerun retries the dialogues whose row is an error, so the file may (until the run compacts it,
    or if it was killed before) hold an error row and a later row for one dialogue: a judged row beats
    an error row, a later row an earlier one.
    """
    if not path.exists():
        return []
    chosen: dict[str, JudgedDialogue] = {}
    for _, obj in iter_jsonl(path):
        row = JudgedDialogue.model_validate(obj)
        key = _key(row.profile_id, row.sample_index)
        old = chosen.pop(key, None)
        # pop + insert keeps the file order of the latest row
        chosen[key] = old if old is not None and old.judgement is not None and row.judgement is None else row
    return list(chosen.values())


def _compact(path: Path) -> None:
    """Rewrite ``judge.jsonl`` with one row per dialogue (see :func:`read_judged`), atomically."""
    if path.exists():
        rows = read_judged(path)
        atomic_write_text(path, "".join(dumps_strict(r.model_dump(mode="json")) + "\n" for r in rows))


async def judge_episodes(
    model: ChatModel,
    episodes: Sequence[Episode],
    out_jsonl: Path,
    *,
    sampling: SamplingParams | None = None,
    concurrency: int = 8,
    on_done: Callable[[JudgedDialogue], None] | None = None,
) -> list[JudgedDialogue]:
    """Judge every finished episode not yet in ``out_jsonl``; each verdict is appended as it arrives.

    Errors (an API failure, two invalid answers) are recorded per dialogue and retried on the next run.
    """
    sampling = sampling or SamplingParams(temperature=0.0, max_tokens=1500)
    done = {_key(j.profile_id, j.sample_index): j for j in read_judged(out_jsonl) if j.judgement is not None}
    todo = [
        ep for ep in episodes if ep.status == "finished" and _key(ep.profile_id, ep.sample_index) not in done
    ]
    sem = asyncio.Semaphore(max(1, concurrency))
    results: dict[str, JudgedDialogue] = dict(done)

    async def one(ep: Episode) -> None:
        async with sem:
            try:
                judgement, attempts = await judge_episode(model, ep, sampling)
                row = JudgedDialogue(
                    profile_id=ep.profile_id,
                    sample_index=ep.sample_index,
                    final_emotion=ep.final_emotion,
                    judgement=judgement,
                    attempts=attempts,
                )
            except RlverError as exc:
                row = JudgedDialogue(
                    profile_id=ep.profile_id,
                    sample_index=ep.sample_index,
                    final_emotion=ep.final_emotion,
                    error=str(exc)[:500],
                    attempts=2,
                )
        append_jsonl(out_jsonl, row.model_dump(mode="json"))
        results[_key(ep.profile_id, ep.sample_index)] = row
        if on_done is not None:
            on_done(row)

    await asyncio.gather(*(one(ep) for ep in todo))
    # Retried dialogues replace their error rows: a rerun never piles up duplicates.
    _compact(out_jsonl)
    order = [_key(ep.profile_id, ep.sample_index) for ep in episodes if ep.status == "finished"]
    return [results[k] for k in order if k in results]


def summarise(run: str, judge_model: str, judged: Iterable[JudgedDialogue]) -> JudgeSummary:
    import numpy as np

    rows = list(judged)
    ok = [j.judgement for j in rows if j.judgement is not None]
    caps = {c: [float(j.ratings[c].score) for j in ok] for c in CAPABILITIES}
    return JudgeSummary(
        run=run,
        judge_model=judge_model,
        n_judged=len(ok),
        n_errors=sum(1 for j in rows if j.judgement is None),
        capabilities={c: float(np.mean(v)) if v else None for c, v in caps.items()},
        capability_std={c: float(np.std(v)) if v else None for c, v in caps.items()},
        orientation=float(np.mean([j.coordinate.orientation for j in ok])) if ok else None,
        style=float(np.mean([j.coordinate.style for j in ok])) if ok else None,
    )


def write_summary(path: Path, summary: JudgeSummary) -> None:
    atomic_write_json(path, summary.model_dump(mode="json"))


def read_summary(path: Path) -> JudgeSummary | None:
    if not path.exists():
        return None
    return JudgeSummary.model_validate_json(path.read_text(encoding="utf-8"))


def run_judge(
    run_dir: Path,
    *,
    model: str,
    base_url: str | None = None,
    api_key_env: str | None = "OPENAI_API_KEY",
    concurrency: int = 8,
    temperature: float = 0.0,
    limit: int | None = None,
    cache: bool = True,
    chat_model: ChatModel | None = None,
) -> JudgeSummary:
    """Judge a run folder: appends to ``judge.jsonl``, writes ``judge.json``; returns the summary.

    ``chat_model`` replaces the endpoint (tests, or a local judge); it is still wrapped in the cache.
    """
    _, manifest, all_episodes = read_episodes(run_dir)
    inner = chat_model
    if inner is None:
        spec = ModelSpec(
            kind="openai", model=model, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency
        )
        inner = build_chat_model(spec)
    judge: ChatModel = CachedChatModel(inner, run_dir / JUDGE_CACHE, policy="always") if cache else inner
    episodes = all_episodes[:limit] if limit is not None else all_episodes
    sampling = SamplingParams(temperature=temperature, max_tokens=1500)

    async def go() -> list[JudgedDialogue]:
        try:
            return await judge_episodes(
                judge, episodes, run_dir / JUDGE_JSONL, sampling=sampling, concurrency=concurrency
            )
        finally:
            await judge.aclose()

    judged = asyncio.run(go())
    summary = summarise(run_name(run_dir, manifest), model, judged)
    write_summary(run_dir / JUDGE_SUMMARY, summary)
    return summary
