"""`rlver chat` (registered on the root app by :func:`register`).

Two ways to get a feel for the environment by hand:

* default: **you are the assistant**. A simulated user (the offline simulator unless told otherwise,
  so it works with no set-up) opens the dialogue; after each of your replies you see their answer,
  their emotion and its tier, and why it moved.
* ``--play-user``: **you are the user**, talking to a model (``--model-base-url/--model`` for any
  OpenAI-compatible endpoint, or ``--local PATH`` for a transformers model folder).

Type ``/quit`` (or end input) to stop. ``--save PATH`` writes the dialogue as a transcript.

Both run through the environment that evaluation and training use
(:func:`rlver.rollout.interactive.play` over :class:`~rlver.env.dialogue.DialogueEnv`), so a dialogue
typed by hand follows the same rules; this module reads the lines and prints the turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from rlver.cli import checks
from rlver.cli import simulator_flags as sim_flags
from rlver.cli.run_agent import local_think
from rlver.cli.safe_text import clean
from rlver.errors import InputError, Problem
from rlver.extras import require_extra
from rlver.interrupt import Interrupted
from rlver.rules import EVALUATION
from rlver.simulator.emotion import tier_of
from rlver.simulator.factory import build_simulator, kinds

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from rlver.env.dialogue import EnvConfig, StepResult
    from rlver.llm.base import ChatModel, Completion
    from rlver.profiles.schema import Language, Profile
    from rlver.records import Episode, Message
    from rlver.simulator.base import UserSimulator

QUIT_WORDS = ("/quit", "/exit", "/q")


#: Whether a prompt (``You: ``) is on the screen with no line typed after it yet: a stop then starts
#: its message on a new line instead of after the prompt.
_prompt_open = threading.Event()


def _read_line(prompt: str) -> str | None:
    """One line from stdin (None at end of input); works with pipes as well as terminals."""
    _prompt_open.set()  # before the prompt shows: a stop in between still ends its line
    typer.echo(prompt, nl=False)
    line = sys.stdin.readline()
    _prompt_open.clear()
    if not line:
        typer.echo("")
        return None
    line = line.rstrip("\r\n")
    if not sys.stdin.isatty():  # piped input: show it, so the printed dialogue reads naturally
        typer.echo(line)
    return line


async def _read_in_background(prompt: str) -> str | None:
    """:func:`_read_line` in a daemon thread. Not ``asyncio.to_thread``: at Ctrl-C, ``asyncio.run``
    waits for its executor's threads, and this one waits on the keyboard; the command then hung until
    the interrupt watchdog ended it 30 s later."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str | None] = loop.create_future()

    def settle(result: str | None, error: BaseException | None) -> None:
        if answer.done():
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(result)

    def read() -> None:
        try:
            line, error = _read_line(prompt), None
        except Exception as exc:  # stdin closed under us: the loop gets it
            line, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: the command ended meanwhile
            loop.call_soon_threadsafe(settle, line, error)

    threading.Thread(target=read, name="rlver-chat-input", daemon=True).start()
    return await answer


async def _ask(prompt: str) -> str | None:
    """The next non-empty line, or None when the person quits or input ends."""
    while True:
        line = await _read_in_background(prompt)
        if line is None or line.strip().lower() in QUIT_WORDS:
            return None
        if line.strip():
            return line.strip()


def _pick_profile(profile_id: str | None, profile_file: Path | None, language: str) -> Profile:
    from rlver.profiles.loaders import load_profiles
    from rlver.profiles.sets import find_profile, load_profile_set

    if profile_file is not None:
        profiles = load_profiles(profile_file)
        if not profiles:
            raise InputError(Problem(str(profile_file), None, None, "no profiles in this file"))
        if profile_id is None:
            return profiles[0]
        for p in profiles:
            if p.id == profile_id:
                return p
        raise InputError(Problem(str(profile_file), None, "id", f"no profile with id {profile_id!r}"))
    if profile_id is not None:
        return find_profile(profile_id)
    return load_profile_set(f"{language}-test")[0]


def _build_simulator(
    kind: str | None,
    model_flags: tuple[str | None, str | None, str | None],
    difficulty: str | None,
    seed: int,
    sets: list[str],
) -> UserSimulator:
    """The simulated user the flags name; ``model_flags`` = (--sim-model, --sim-base-url, --sim-key-env)."""
    model, base_url, key_env = model_flags
    raw = sim_flags.simulator_block(kind, model=model, base_url=base_url, key_env=key_env)
    raw.update(difficulty=difficulty, seed=seed)
    raw = sim_flags.with_sets(raw, sets)
    return build_simulator(sim_flags.parse_simulator_spec(raw, "rlver chat"))


def _build_policy(
    base_url: str | None, model: str | None, local: Path | None, api_key_env: str | None
) -> ChatModel:
    from rlver.llm.factory import build_chat_model
    from rlver.llm.spec import ModelSpec

    if local is not None:
        require_extra("train", "--local")
        if local.is_dir():  # a training run or checkpoint folder: its latest policy
            from rlver.train.export import resolve_model_folder

            local = resolve_model_folder(local)
        return build_chat_model(ModelSpec(kind="local", model=str(local)))
    if model:
        return build_chat_model(
            ModelSpec(kind="openai", model=model, base_url=base_url, api_key_env=api_key_env)
        )
    raise InputError(
        Problem(
            "--play-user",
            None,
            None,
            "name the model to talk to: --model-base-url URL --model NAME, or --local PATH",
        )
    )


async def _closing(simulator: UserSimulator, body: Coroutine[Any, Any, None]) -> None:
    """Run ``body``, then close the simulator's model connections (an LLM simulator holds a session)."""
    try:
        await body
    finally:
        closer = getattr(simulator, "aclose", None)
        if closer is not None:
            await closer()


async def _play_assistant(
    profile: Profile,
    simulator: UserSimulator,
    *,
    think: bool,
    start: int | None,
    max_turns: int,
    seed: int,
    save: Path | None,
) -> None:
    """You are the agent: each reply is a line you type, sent through the environment like a model's."""
    from rlver.env.dialogue import DialogueEnv, EnvConfig
    from rlver.rollout.interactive import play

    rules = EVALUATION.but(max_assistant_turns=max_turns, appraise_final_reply=True)
    config = EnvConfig(rules=rules if start is None else rules.but(start_emotion=start), think=think)
    first_line = (
        profile.persona.strip().splitlines()[0].lstrip("-* ") if profile.persona.strip() else profile.id
    )
    typer.echo(f"Profile {profile.id} ({profile.language}): {first_line}")
    if profile.topic:
        typer.echo(f"Topic: {profile.topic}")
    typer.echo(f"You are the assistant. Up to {max_turns} replies; /quit to stop.\n")
    ep = await play(
        DialogueEnv(simulator, config),
        profile,
        _typed_reply,
        seed=seed,
        on_open=_show_opening,
        on_step=_show_answer,
    )
    reason = ep.end_reason or "ended by you"
    typer.echo(
        f"\nDialogue over ({reason}). Final emotion {ep.final_emotion} · tier {tier_of(ep.final_emotion)}."
    )
    if save is not None:
        # the assistant was typed by a person
        human = {"name": "human", "class": "terminal"}
        _save_transcript(save, agent=human, simulator=simulator.describe(), config=config, seed=seed, ep=ep)


def _save_transcript(
    save: Path, *, agent: dict[str, Any], simulator: dict[str, Any], config: EnvConfig, seed: int, ep: Episode
) -> None:
    """Write the dialogue as a transcript with a ``chat`` manifest, whichever side the person played, so
    ``rlver inspect`` / ``audit`` / ``score`` read it like any run's."""
    from rlver.manifest import RunManifest
    from rlver.transcripts.native import TranscriptWriter

    manifest = RunManifest.create(kind="chat", agent=agent, simulator=simulator, env=config, seed=seed)
    save.parent.mkdir(parents=True, exist_ok=True)
    TranscriptWriter(save, manifest).append(ep)
    typer.echo(f"Saved to {save}")


async def _typed_reply(_context: list[Message]) -> Completion | None:
    """The agent's reply when you are the agent: your next line (``None``: you ended the dialogue)."""
    from rlver.llm.base import Completion

    reply = await _ask("You: ")
    if reply is None:
        typer.echo("(you ended the dialogue)")
        return None
    return Completion(text=reply)


def _show_opening(opening: str, emotion: int) -> None:
    typer.echo(f"User: {clean(opening)}")
    typer.echo(f"  [emotion {emotion} · tier {tier_of(emotion)}]")


def _show_answer(result: StepResult) -> None:
    """The simulated user's answer to your reply and how their emotion moved."""
    appraisal = result.info.get("appraisal")
    if result.user_message is not None:
        typer.echo(f"User: {clean(result.user_message)}")
    if appraisal is not None:
        typer.echo(
            f"  [emotion {appraisal.emotion_after} ({appraisal.change:+d}) · tier {appraisal.tier}]"
            + (f" {appraisal.feeling}" if appraisal.feeling else "")
        )


async def _play_user(
    policy: ChatModel,
    *,
    think: bool,
    language: str,
    max_turns: int,
    temperature: float,
    show_thoughts: bool,
    save: Path | None,
) -> None:
    """You are the user: each of your lines is the user's turn, and the model answers through the
    environment (its system prompt, think handling and turn limit)."""
    from rlver.env.dialogue import DialogueEnv, EnvConfig
    from rlver.llm.base import SamplingParams
    from rlver.rollout.interactive import PersonAsUser, person_profile, play

    sampling = SamplingParams(temperature=temperature, max_tokens=1024)

    async def model_reply(context: list[Message]) -> Completion:
        completion = await policy.complete(context, sampling)
        _show_reply(completion.text, show_thoughts)
        return completion

    # The coaching prompt, as `rlver chat --play-user` has always used; the turn limit counts replies.
    rules = EVALUATION.but(max_assistant_turns=max_turns)
    config = EnvConfig(rules=rules, think=think, agent_prompt="coaching")
    env = DialogueEnv(PersonAsUser(lambda: _ask("You: ")), config)
    typer.echo(f"You are the user, talking to {policy.name}. Up to {max_turns} turns; /quit to stop.\n")
    try:
        ep = await play(env, person_profile(cast("Language", language)), model_reply)
    finally:
        await policy.aclose()
    if save is not None:
        _save_transcript(
            save, agent=policy.describe(), simulator=env.simulator.describe(), config=config, seed=0, ep=ep
        )


def _show_reply(raw: str, show_thoughts: bool) -> None:
    """The model's visible reply, and its thought when asked for."""
    from rlver.env.thinking import split_think

    split = split_think(raw)
    if show_thoughts and split.thought:
        typer.echo(f"  (thinking: {clean(split.thought)})")
    typer.echo(f"Assistant: {clean(split.visible)}")


def chat_command(
    profile: str | None = typer.Option(None, "--profile", help="Profile id (bundled or downloaded sets)."),
    profile_file: Path | None = typer.Option(None, "--profile-file", help="Read profiles from this file."),
    language: str = typer.Option(
        "en", "--language", help="Bundled set to pick from when no profile is named: en or zh."
    ),
    simulator: str | None = sim_flags.simulator_option(),
    sim_base_url: str | None = sim_flags.SIM_BASE_URL,
    sim_model: str | None = sim_flags.SIM_MODEL,
    sim_key_env: str | None = sim_flags.SIM_KEY_ENV,
    difficulty: str | None = sim_flags.DIFFICULTY,
    set_: list[str] = sim_flags.SET,
    start: int | None = typer.Option(None, "--start", help="Start emotion (default 40)."),
    max_assistant_turns: int | None = checks.max_assistant_turns_option(
        "Most assistant replies (default 10)."
    ),
    max_turns_old: int | None = checks.OLD_MAX_TURNS,
    seed: int = checks.seed_option(0, "Seed of the simulated user's replies (its sampling and its choices)."),
    think: bool | None = typer.Option(
        None,
        "--think/--no-think",
        help="Think-then-say mode (default off; with --local RUN, the training run's own mode).",
    ),
    play_user: bool = typer.Option(False, "--play-user", help="You play the user against a model."),
    model_base_url: str | None = typer.Option(
        None,
        "--model-base-url",
        help="With --play-user: endpoint URL.",
        parser=checks.base_url("--model-base-url"),
    ),
    model: str | None = typer.Option(None, "--model", help="With --play-user: model name at the endpoint."),
    local: Path | None = typer.Option(
        None, "--local", help="With --play-user: a local transformers model folder."
    ),
    api_key_env: str | None = typer.Option(
        None,
        "--api-key-env",
        help="Env variable holding the key ('' for none; default OPENAI_API_KEY, if set).",
        parser=checks.key_env("--api-key-env"),
    ),
    temperature: float = checks.temperature_option(
        0.7, "With --play-user: the model's sampling temperature."
    ),
    show_thoughts: bool = typer.Option(
        False, "--show-thoughts", help="With --play-user: print the model's <think>."
    ),
    save: Path | None = typer.Option(
        None,
        "--save",
        help="Write the dialogue to this transcript file (a folder: FOLDER/transcript.jsonl); checked first.",
        parser=checks.transcript_file("--save"),
    ),
) -> None:
    """Talk to a simulated user as the assistant (default), or to a model as the user (--play-user)."""
    if language not in ("en", "zh"):
        raise InputError(Problem("--language", None, None, f"expected en or zh, got {language!r}"))
    if start is not None and not 0 <= start <= 100:
        # Refused, as `rlver eval` refuses env.start_emotion: clamping hid the typo.
        raise InputError(Problem("--start", None, None, f"the emotion runs from 0 to 100, got {start}"))
    if simulator is not None:
        kinds().check_flag(simulator, "--simulator")
    max_turns = checks.turn_limit(max_assistant_turns, max_turns_old) or EVALUATION.max_assistant_turns
    if play_user and set_:
        raise InputError(
            Problem("--set", None, None, "sets the simulated user's options; --play-user has none")
        )
    if play_user:
        checks.endpoint_given("--model", model, "--model-base-url", model_base_url)
        key_env = "OPENAI_API_KEY" if api_key_env is None else (api_key_env or None)
        think = local_think(local, think)
        policy = _build_policy(model_base_url, model, local, key_env)
        dialogue = _play_user(
            policy,
            think=think,
            language=language,
            max_turns=max_turns,
            temperature=temperature,
            show_thoughts=show_thoughts,
            save=save,
        )
    else:
        chosen = _pick_profile(profile, profile_file, language)
        sim = _build_simulator(simulator, (sim_model, sim_base_url, sim_key_env), difficulty, seed, set_)
        dialogue = _closing(
            sim,
            _play_assistant(
                chosen, sim, think=bool(think), start=start, max_turns=max_turns, seed=seed, save=save
            ),
        )
    try:
        asyncio.run(dialogue)
    except KeyboardInterrupt:
        if _prompt_open.is_set():  # "You: ^C": the message goes on a line of its own
            typer.echo("")
        raise Interrupted("interrupted: the dialogue ended here" + (", not saved" if save else "")) from None


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("chat")(chat_command)
