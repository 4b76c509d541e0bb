"""``rlver eval``: run the benchmark (or a training-dialogue evaluation) against simulated users.

The commands that only read finished runs (``score``, ``report``, ``judge``) are in
:mod:`rlver.cli.results_cmd`; the progress display and the closing summary in :mod:`rlver.cli.eval_progress`.

Heavy imports (torch, transformers, the report's plots, numpy) happen inside the command functions so that
``rlver --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rlver.cli import checks
from rlver.cli.eval_progress import run_with_progress
from rlver.cli.run_agent import evaluated_as_run, run_agent, run_training_env
from rlver.cli.simulator_flags import (
    BEHAVIOUR,
    DIFFICULTY,
    SIM_BASE_URL,
    SIM_KEY_ENV,
    SIM_MODEL,
    simulator_block,
    simulator_option,
)
from rlver.config import ConfigLayer, deep_merge, load_layers, read_yaml_mapping
from rlver.errors import EXIT_CODES_HELP, ConfigError, InputError, Problem, did_you_mean
from rlver.extras import require_extra
from rlver.migrate import deprecated_flag
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.llm.protocols import PROTOCOLS


def _text_arg(value: str | None) -> str | None:
    """``@file`` reads the text from a file (handy for long system prompts): UTF-8, not empty, within
    the text bound (:func:`rlver.io.read_text_file`)."""
    if value is not None and value.startswith("@"):
        from rlver.io import read_text_file

        return read_text_file(value[1:])
    return value


# -- `rlver eval` flags: one help text a flag, so the signature below reads one line a flag ------------

_EVAL_HELP: dict[str, str] = {
    "--agent-base-url": "OpenAI-compatible endpoint of the agent.",
    "--agent-model": "Model id of the agent on that endpoint.",
    "--agent-key-env": "Environment variable holding the agent's API key (never the key itself).",
    "--agent-local": "Local transformers model folder, hub id, or a training run/checkpoint folder "
    "(latest policy).",
    "--agent-tiny": "Use the tiny built-in test model (offline smoke run).",
    "--agent-temperature": "Agent sampling temperature.",
    "--agent-max-tokens": "Agent max tokens per reply.",
    "--agent-sampling": "explicit (default: send temperature and top_p, 1.0 unless set) or model-default "
    "(send neither, so the endpoint samples with the model's own defaults, as SAGE did; an "
    "OpenAI-compatible agent only). Recorded in the manifest (agent_sampling).",
    "--system-prompt": "Agent system prompt (text or @file).",
    "--agent-prompt": "Agent system prompt: coaching (scores not leaderboard-comparable; our empathy "
    "coaching), sage-published (default with --profiles sage and an LLM user: SAGE's "
    "own, fetched), neutral (default otherwise; the published benchmark's plain high-EQ chat partner "
    "in our words), rlver-published / published (the published training prompt: fetched / in our "
    "words) or FILE.",
    "--think/--no-think": "Think-then-say: <think>…</think> is hidden from the user.",
    "--sim-prompts": "LLM simulator prompts: sage-published (default with --profiles sage: SAGE's own "
    "text, byte for byte, from the files `rlver data download sage-test` fetched), sage (default "
    "otherwise: the published structure in rlver's words, English and Chinese), rlver-published (the "
    "published training simulator's text) or rlver-v1 (our earlier prompts with a -10..+10 rubric).",
    "--dialogue": "benchmark (default: start 40, 10 replies, the last unappraised; the leaderboard's) or "
    "training (the training dialogue: start 30, 8 replies; with --agent-local RUN the dialogue that "
    "run's held-out evaluation used). The two scores are not comparable (docs/benchmark.md).",
    "--profiles": "sage, en-test, zh-test, bundled-test, ... or a file.",
    "--limit": "Evaluate only the first N profiles.",
    "--n-per-profile": "Dialogues per profile.",
    "--concurrency": "Simulator calls in flight.",
    "--batch-size": "Dialogues run together (default: all); bounds a local model's memory.",
    "--resume": "Continue the run in --out, skipping finished dialogues; with nothing there to "
    "resume, start a new run (and say so), as rlver train --resume does.",
    "--set": "Override a config key, e.g. --set env.rules.max_assistant_turns=4.",
    "--seed": "Run seed.",
    "--out": "Output folder.",
    "--config": "EvalConfig YAML file.",
    "--no-report": "Skip the HTML/Markdown report.",
}


#: The config key each numeric flag sets, so an out-of-range value is blamed on the flag the user typed.
EVAL_FLAGS = {
    "limit": "--limit",
    "n_per_profile": "--n-per-profile",
    "concurrency": "--concurrency",
    "batch_size": "--batch-size",
    "seed": "--seed",
    "sampling.temperature": "--agent-temperature",
    "sampling.max_tokens": "--agent-max-tokens",
    "env.system_prompt": "--system-prompt",
}


def _opt(flag: str, default: Any = None, **kwargs: Any) -> Any:
    """A ``rlver eval`` option whose help is in :data:`_EVAL_HELP`."""
    return typer.Option(default, flag, help=_EVAL_HELP[flag], **kwargs)


def eval_command(
    agent_base_url: str | None = _opt("--agent-base-url", parser=checks.base_url("--agent-base-url")),
    agent_model: str | None = _opt("--agent-model"),
    agent_key_env: str | None = _opt("--agent-key-env", parser=checks.key_env("--agent-key-env")),
    agent_local: str | None = _opt("--agent-local"),
    agent_tiny: bool = _opt("--agent-tiny", False),
    agent_temperature: float | None = _opt("--agent-temperature"),
    agent_max_tokens: int | None = _opt("--agent-max-tokens"),
    agent_sampling: str | None = _opt("--agent-sampling"),
    system_prompt: str | None = _opt("--system-prompt"),
    agent_prompt: str | None = _opt("--agent-prompt"),
    think: bool | None = _opt("--think/--no-think"),
    simulator: str | None = simulator_option(),
    sim_base_url: str | None = SIM_BASE_URL,
    sim_model: str | None = SIM_MODEL,
    sim_key_env: str | None = SIM_KEY_ENV,
    sim_prompts: str | None = _opt("--sim-prompts"),
    behaviour: str | None = BEHAVIOUR,
    difficulty: str | None = DIFFICULTY,
    dialogue: str | None = _opt("--dialogue"),
    profiles: str | None = _opt("--profiles"),
    limit: int | None = _opt("--limit", min=1),
    n_per_profile: int | None = _opt("--n-per-profile", min=1),
    concurrency: int | None = _opt("--concurrency", min=1),
    batch_size: int | None = _opt("--batch-size", min=1),
    seed: int | None = _opt("--seed"),
    out: Path | None = _opt("--out", parser=checks.output_path("--out")),
    resume: bool = _opt("--resume", False),
    config: Path | None = _opt("--config"),
    set_: list[str] = _opt("--set", []),
    no_report: bool = _opt("--no-report", False),
    old_protocol: str | None = typer.Option(None, "--protocol", hidden=True),
    old_sim_protocol: str | None = typer.Option(None, "--sim-protocol", hidden=True),
) -> None:
    """Run an agent on the Sentient Benchmark (or any profile set) and write transcript, metrics, report."""
    from rlver.eval.config import EvalConfig

    data: dict[str, Any] = read_yaml_mapping(config) if config is not None else {}
    flags: dict[str, Any] = {}
    dialogue = _renamed_flag("--protocol", old_protocol, dialogue)
    sim_prompts = _renamed_flag("--sim-protocol", old_sim_protocol, sim_prompts)
    if agent_tiny and (agent_local or agent_base_url or agent_model):
        raise ConfigError("give one agent: --agent-tiny, --agent-local or --agent-base-url/--agent-model")
    checks.endpoint_given(
        "--agent-model", agent_model, "--agent-base-url", agent_base_url or _in(data, "agent", "base_url")
    )
    agent = _agent_block(agent_local, agent_base_url, agent_model, agent_key_env)
    if agent:
        flags["agent"] = agent
    sampling = _sampling_block(
        data, agent, agent_tiny, agent_temperature, agent_max_tokens, _sampling_choice(agent_sampling)
    )
    if sampling is not None:
        flags["sampling"] = sampling
    if agent_tiny:
        flags["agent_tiny"] = True
    env = _env_block(system_prompt, agent_prompt, think)
    if dialogue is not None:
        flags["dialogue"] = _dialogue_choice(dialogue)
        if dialogue == "training" and agent_local:
            env = {**run_training_env(Path(agent_local)), **env}
    if env:
        flags["env"] = env
    sim = simulator_block(
        simulator,
        model=sim_model,
        base_url=sim_base_url,
        key_env=sim_key_env,
        config_base_url=_in(data, "simulator", "model", "base_url"),
    )
    sim.update(_user_block(sim_prompts, behaviour, difficulty))
    if sim:
        flags["simulator"] = sim
    for key, value in (
        ("profiles", profiles),
        ("limit", limit),
        ("n_per_profile", n_per_profile),
        ("concurrency", concurrency),
        ("batch_size", batch_size),
        ("seed", seed),
        ("out", None if out is None else str(out)),
    ):
        if value is not None:
            flags[key] = value
    if no_report:
        flags["report"] = False
    if flags.get("agent") and data.get("agent_tiny"):
        data.pop("agent_tiny")
    layers = [ConfigLayer(str(config), data, config)] if config is not None else []
    layers.append(ConfigLayer("flags", flags, flags=EVAL_FLAGS))
    cfg = load_layers(EvalConfig, layers, set_)
    run = run_agent(Path(agent_local)) if agent_local else None
    if run is not None:  # a training run: its think mode and agent prompt beneath every flag
        cfg = evaluated_as_run(
            run, cfg, lambda base: load_layers(EvalConfig, [base, *layers], set_), "--agent-local"
        )
    _check_prompt_file(cfg, run)
    _check_out(cfg.out_dir)
    if cfg.agent is None:  # agent_tiny: the tiny model, built and run in this process
        require_extra("train", "--agent-tiny")
    if cfg.agent is not None and cfg.agent.kind == "local":
        require_extra("train", "--agent-local" if agent_local else f"agent.model {cfg.agent.model!r}")
        from rlver.llm.factory import check_model_source

        cfg.agent.model = _local_model(cfg.agent.model)
        check_model_source(cfg.agent.model, "--agent-local" if agent_local else "agent.model")
    transcript = cfg.out_dir / "transcript.jsonl"
    if resume and not (transcript.is_file() and transcript.stat().st_size > 0):
        checks.nothing_to_resume(cfg.out_dir)
    run_with_progress(cfg, resume=resume)


def _check_prompt_file(cfg: Any, run: Any) -> None:
    """Refuse, before any model loads, an agent prompt read from a fetched file that is not here.

    With a user that is asked no prompt set (offline, replay) only that one file is named: such a run
    needs the profiles and the prompt the agent is sent, not the simulator's published code of the same
    download set. An LLM user may read those too, so every missing file of the set is named at once.
    A training run's own prompt (what ``--dialogue training`` evaluates it with) says where it came
    from and how to use another."""
    from rlver.env.thinking import absent_prompt_file
    from rlver.profiles.download import candidate_dirs, offline_fixes
    from rlver.profiles.published_code import CODE_OF_SET, FOLDER, missing_error, missing_from_set
    from rlver.simulator.spec import asks_prompt_set

    name = cfg.env.agent_prompt
    file = None if cfg.env.system_prompt else absent_prompt_file(name)
    if file is None:
        return
    fetch = next(s for s, names in CODE_OF_SET.items() if file in names)
    if asks_prompt_set(cfg.simulator.kind):  # an LLM user may read the set's other files: all at once
        raise missing_error(fetch, missing_from_set(fetch))
    origin = (
        f"the prompt of the training run {run.folder}"
        if run is not None
        else "this evaluation's agent prompt"
    )
    caveat = " (the score is then not the run's logged eval/score)" if run is not None else ""
    looked = ", ".join(str(d) for d in candidate_dirs())
    raise InputError(
        Problem(
            "env.agent_prompt",
            None,
            None,
            f"{name} ({origin}) is read from {FOLDER}/{file}, which is not here (looked in {looked}); run "
            f"`rlver data download {fetch}`, or {offline_fixes(fetch)}; or pass --agent-prompt neutral "
            f"to send rlver's own prompt instead{caveat}",
        )
    )


def _in(data: Any, *keys: str) -> Any:
    """``data[k1][k2]...`` of a config file's mapping, None where a level is missing or no mapping."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _check_out(out_dir: Path) -> None:
    """The output folder may be new or an evaluation's, never a file or a training run's folder."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir}: a file is there; the output must be a new or existing folder")
    checks.refuse_other_run(out_dir, "eval")


def _agent_block(
    local: str | None, base_url: str | None, model: str | None, key_env: str | None
) -> dict[str, Any]:
    """The ``agent`` block of --agent-local or --agent-base-url/--agent-model (``{}`` for neither)."""
    if local and (base_url or model):
        raise ConfigError("give either --agent-local or --agent-base-url/--agent-model, not both")
    if local:
        require_extra("train", "--agent-local")
        # A local folder is recorded by its absolute path: the manifest must name the model whatever
        # the working directory of a later --resume or reader (a hub id stays as given). A training
        # run's folder becomes its latest policy once every value is checked (_local_model).
        path = Path(local).expanduser()
        model_ref = str(path.resolve()) if path.exists() else local
        return {"kind": "local", "model": model_ref, "api_key_env": None}
    if not (base_url or model):
        return {}
    if not model:
        raise ConfigError("--agent-base-url needs --agent-model (the model id on that endpoint)")
    agent: dict[str, Any] = {"kind": "openai", "model": model}
    if base_url is not None:  # left out: the config file's stays
        agent["base_url"] = base_url
    if key_env is not None:
        agent["api_key_env"] = key_env or None
    return agent


def _local_model(model: str) -> str:
    """A local agent's model: a training run or checkpoint folder becomes its latest policy's folder
    (absolute), anything else stays as given. Called after the config is validated: reading a run's
    checkpoints imports torch, which a refused value should not wait for."""
    path = Path(model).expanduser()
    if not path.is_dir():
        return model
    from rlver.train.export import resolve_model_folder

    resolved = resolve_model_folder(path)
    return model if resolved == path else str(resolved.resolve())


def _sampling_block(
    data: dict[str, Any],
    agent: dict[str, Any],
    agent_tiny: bool,
    temperature: float | None,
    max_tokens: int | None,
    model_default: bool = False,
) -> dict[str, Any] | None:
    """--agent-temperature/--agent-max-tokens/--agent-sampling on top of the agent's own sampling
    (None: none given).

    The base is the config file's ``agent.sampling``, or the tiny model's default when the tiny model
    is the agent.
    """
    sampling: dict[str, Any] = {}
    if temperature is not None:
        sampling["temperature"] = temperature
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    if model_default:
        if temperature is not None:
            raise ConfigError("--agent-sampling model-default sends no temperature: drop --agent-temperature")
        sampling["model_default"] = True
    if not sampling:
        return None
    from rlver.eval.config import TINY_AGENT_SAMPLING

    own = (data.get("agent") or {}).get("sampling") if isinstance(data.get("agent"), dict) else None
    if agent.get("sampling") is None and own is None and not agent and (agent_tiny or data.get("agent_tiny")):
        own = TINY_AGENT_SAMPLING.model_dump(mode="json")
    base = dict(own or {})
    if model_default:  # the flag replaces the file's (or the tiny model's) temperature and top_p
        base = {k: v for k, v in base.items() if k not in ("temperature", "top_p")}
    return deep_merge(base, sampling)


def _sampling_choice(value: str | None) -> bool:
    """Whether ``--agent-sampling`` asks for the model's own defaults (``model-default``)."""
    if value is None or value == "explicit":
        return False
    if value == "model-default":
        return True
    raise ConfigError(f"--agent-sampling {value!r}: expected explicit or model-default")


def _env_block(system_prompt: str | None, agent_prompt: str | None, think: bool | None) -> dict[str, Any]:
    """The ``env`` block of --system-prompt, --agent-prompt and --think/--no-think."""
    env: dict[str, Any] = {}
    if system_prompt is not None:
        env["system_prompt"] = _text_arg(system_prompt)
    if agent_prompt is not None:
        from rlver.env.thinking import AGENT_PROMPT_NAMES

        if agent_prompt in AGENT_PROMPT_NAMES:
            env["agent_prompt"] = agent_prompt
        elif system_prompt is not None:
            raise ConfigError("give either --agent-prompt FILE or --system-prompt, not both")
        else:
            env["system_prompt"] = _agent_prompt_file(agent_prompt)
    if think is not None:
        env["think"] = think
    return env


def _agent_prompt_file(value: str) -> str:
    """The text of ``--agent-prompt FILE``. A value that is neither a prompt's name nor a readable
    file is refused with the names (and the nearest one): ``coachng`` used to read as a missing file,
    ``cannot read: No such file``, which did not say that a name was expected."""
    from rlver.env.thinking import AGENT_PROMPT_NAMES, read_prompt_file

    try:
        return read_prompt_file(value)
    except ValueError as exc:
        near = "" if Path(value).expanduser().exists() else did_you_mean(value, AGENT_PROMPT_NAMES)
        raise ConfigError(f"--agent-prompt: {exc}{near}") from None


def _renamed_flag(old: str, given: str | None, new_value: str | None) -> str | None:
    """An old flag's value (one deprecation line, rlver.migrate) where its new flag was not given."""
    if given is None:
        return new_value
    deprecated_flag(old)
    return given if new_value is None else new_value


def _dialogue_choice(dialogue: str) -> str:
    if dialogue not in ("benchmark", "training"):
        raise ConfigError(f"--dialogue {dialogue!r}: choose benchmark or training")
    return dialogue


def _user_block(prompts: str | None, behaviour: str | None, difficulty: str | None) -> dict[str, Any]:
    """The simulated user's --sim-prompts, --behaviour and --difficulty (as ``simulator`` keys)."""
    sim: dict[str, Any] = {}
    if prompts is not None:
        # a block, not the bare name: --set simulator.prompts.OPTION=... adds to it
        sim["prompts"] = {"name": PROTOCOLS.check_flag(prompts, "--sim-prompts")}
    if behaviour is not None:
        sim["behaviour"] = get_behaviour(behaviour).name
    if difficulty is not None:
        sim["difficulty"] = difficulty
    return sim


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("eval", epilog=EXIT_CODES_HELP)(eval_command)
