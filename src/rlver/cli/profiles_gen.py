"""`rlver profiles generate` and `rlver profiles stats` (wired into the ``profiles`` group by
:func:`rlver.cli.profiles.register`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rlver.cli import checks
from rlver.errors import InputError, Problem
from rlver.tables import output_console

if TYPE_CHECKING:  # the command imports its modules lazily, so `rlver --help` stays fast
    from rich.console import Console

    from rlver.llm.base import ChatModel
    from rlver.profiles.generate import GenerateReport, GenerateSettings
    from rlver.profiles.generation_prompt import SeedTopic
    from rlver.profiles.schema import Profile


def generate_cmd(
    n: int = typer.Option(..., "--n", min=1, help="How many profiles the output should hold."),
    out: Path = typer.Option(
        ...,
        "--out",
        help="JSONL file to append profiles to (resumes if it exists).",
        parser=checks.output_path("--out", "file"),
    ),
    model: str = typer.Option(..., "--model", help="Model id on the OpenAI-compatible server."),
    base_url: str | None = typer.Option(
        None,
        "--base-url",
        help="OpenAI-compatible endpoint (vLLM, Ollama, OpenAI's https://api.openai.com/v1, ...); "
        "required: rlver has no default endpoint.",
        parser=checks.base_url("--base-url"),
    ),
    key_env: str | None = typer.Option(
        None,
        "--key-env",
        help="Name of the environment variable holding the API key ('' for none; default "
        "OPENAI_API_KEY, if set).",
        parser=checks.key_env("--key-env"),
    ),
    lang: str = typer.Option("en", "--lang", help="Language of the profiles: en or zh."),
    seed_topics: Path | None = typer.Option(
        None,
        "--seed-topics",
        help="Seed topics: JSONL {topic, openings} or text (one a line). Default: bundled.",
    ),
    with_opening: bool = typer.Option(False, "--with-opening", help="Also write each user's opening line."),
    seed: int = checks.seed_option(0, "Seed for topic order, style and need type per attempt."),
    similarity: str = typer.Option(
        "ngram", "--similarity", help="Near-duplicate test: ngram, tfidf or embed."
    ),
    max_similarity: float | None = typer.Option(
        None,
        "--max-similarity",
        min=0.0,
        max=1.0,
        help="Reject candidates at least this similar (default 0.5 ngram, 0.6 tfidf, 0.9 embed).",
    ),
    against: list[str] = typer.Option(
        [], "--against", help="Profile set or file new profiles must not duplicate (repeatable)."
    ),
    max_attempts: int | None = typer.Option(
        None, "--max-attempts", min=1, help="Model calls allowed in this run (default 3 x missing + 10)."
    ),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Model calls in flight at once."),
    temperature: float = checks.temperature_option(
        1.0, "Sampling temperature of the model that writes the profiles."
    ),
    max_tokens: int = typer.Option(
        2048, "--max-tokens", min=64, help="Most tokens the model may write for one profile (>= 64)."
    ),
    timeout_s: float = typer.Option(
        120.0,
        "--timeout",
        min=0.0,
        callback=checks.finite("--timeout", positive=True),
        help="Seconds per model call (> 0).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
) -> None:
    """Have an LLM write user profiles from seed topics (validated, de-duplicated, resumable)."""

    from rlver.llm.base import SamplingParams
    from rlver.llm.openai_client import OpenAIChatModel
    from rlver.profiles.generate import GenerateSettings
    from rlver.profiles.generation_prompt import bundled_seed_topics, load_seed_topics
    from rlver.profiles.sets import load_profile_set

    checks.endpoint_given("--model", model, "--base-url", base_url)
    assert base_url is not None  # endpoint_given: a model always has one
    key_env = "OPENAI_API_KEY" if key_env is None else key_env
    _check_options(lang, similarity, max_similarity, key_env)
    topics = load_seed_topics(seed_topics) if seed_topics else bundled_seed_topics(lang)
    others = [p for name in against for p in load_profile_set(name)]
    settings = GenerateSettings(  # what to write, how to ask the model, what counts as a duplicate
        n=n,
        language=lang,
        with_opening=with_opening,
        source=f"generated:{model}",
        seed=seed,
        sampling=SamplingParams(temperature=temperature, max_tokens=max_tokens),
        concurrency=concurrency,
        max_attempts=max_attempts,
        similarity=similarity,
        max_similarity=max_similarity,
    )
    err = output_console(stderr=True)

    def make_model() -> ChatModel:
        return OpenAIChatModel(
            base_url, model, api_key_env=key_env, timeout_s=timeout_s, concurrency=concurrency
        )

    report = asyncio.run(_run(make_model, topics, out, settings, others, _progress_printer(err)))
    _print_summary(report, as_json, err)


def _check_options(lang: str, similarity: str, max_similarity: float | None, key_env: str) -> None:
    """Bad option values fail before any model call, naming the option (exit code 2)."""
    from rlver.llm.spec import check_key_env_name
    from rlver.profiles.generate import DEFAULT_MAX_SIMILARITY

    if lang not in ("en", "zh"):
        raise InputError(Problem("--lang", None, None, f"expected en or zh, got {lang!r}"))
    if similarity not in DEFAULT_MAX_SIMILARITY:
        raise InputError(
            Problem("--similarity", None, None, f"expected ngram, tfidf or embed, got {similarity!r}")
        )
    if max_similarity is not None and not 0.0 < max_similarity <= 1.0:
        raise InputError(Problem("--max-similarity", None, None, "expected a number in (0, 1]"))
    try:
        check_key_env_name(key_env)
    except ValueError as exc:  # the message never repeats the value (it may be a pasted key)
        raise InputError(Problem("--key-env", None, None, str(exc))) from None


def _progress_printer(err: Console) -> Callable[[str, dict[str, Any]], None]:
    """One stderr line per attempt: ``+ id (topic)`` or ``- attempt n: kind: reason``."""

    def on_result(kind: str, record: dict[str, Any]) -> None:
        # Text, not markup: ids, topics and reasons come from the model (untrusted), while the
        # +/- marks are ours and coloured; markup=False on a markup string printed "[yellow]" raw.
        from rich.text import Text

        if kind == "accepted":
            line = Text.assemble(("+", "green"), f" {record['id']}  ({record['topic']})")
        else:
            line = Text.assemble(
                ("-", "yellow"), f" attempt {record['attempt']}: {record['kind']}: {record['reason'][:200]}"
            )
        err.print(line, highlight=False)

    return on_result


async def _run(
    make_model: Callable[[], ChatModel],
    topics: list[SeedTopic],
    out: Path,
    settings: GenerateSettings,
    others: list[Profile],
    on_result: Callable[[str, dict[str, Any]], None],
) -> GenerateReport:
    """Generate with a model made inside the event loop (its HTTP client belongs to that loop)."""
    from rlver.profiles.generate import generate_profiles

    llm = make_model()
    try:
        return await generate_profiles(llm, topics, out, settings, against=others, on_result=on_result)
    finally:
        await llm.aclose()


def _print_summary(report: GenerateReport, as_json: bool, err: Console) -> None:
    """The run's summary (JSON on stdout, or one line on stderr); an error if ``n`` was not reached."""
    from rlver.profiles.generate import raise_if_incomplete

    if as_json:
        typer.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
    else:
        rejected = ", ".join(f"{k} {v}" for k, v in report.rejected.most_common()) or "none"
        err.print(
            f"{report.total}/{report.target} profiles in {report.out} "
            f"({report.accepted} new, {report.existing} already there; {report.attempts} attempts; "
            f"rejected: {rejected})",
            highlight=False,
        )
    raise_if_incomplete(report)


def stats_cmd(
    source: list[str] = typer.Argument(..., help="Profile set names (en-train, sage, ...) or files."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    similarity: list[str] = typer.Option(
        ["ngram"], "--similarity", help="Diversity measure(s): ngram, tfidf, embed (repeatable)."
    ),
    max_pairs: int = typer.Option(50_000, "--max-pairs", min=1, help="Sample at most this many pairs."),
    top: int = typer.Option(15, "--top", min=1, help="Rows per distribution table."),
) -> None:
    """Coverage of a set of profiles: topics, traits, styles, needs, languages, lengths, diversity."""
    from rlver.profiles.similarity import METHODS
    from rlver.profiles.stats import profile_stats, render_stats

    for m in similarity:
        if m not in METHODS:
            raise InputError(
                Problem("--similarity", None, None, f"expected one of {', '.join(METHODS)}, got {m!r}")
            )
    from rlver.profiles.sets import load_profile_set

    profiles = [p for name in source for p in load_profile_set(name)]
    stats = profile_stats(profiles, methods=similarity, max_pairs=max_pairs)
    stats["sources"] = list(source)
    if as_json:
        typer.echo(json.dumps(stats, ensure_ascii=False, indent=2))
    else:
        render_stats(stats, top=top)
