"""The simulator flags shared by ``rlver eval``, ``chat``, ``probe`` and ``calibrate`` (and the last
three's ``--set simulator.KEY=VALUE``), and the model flags of ``rlver train``.

Why one module: the four commands used to spell ``--simulator`` and the ``--sim-*`` model flags, their
help, the kind check and the model block each on their own, and they drifted (one accepted model flags
with the offline user and ignored them, another rejected them). The kind choices and their help come
from the registry in :mod:`rlver.simulator.factory`, so a new kind shows up in every command.
"""

from __future__ import annotations

import json
from typing import Any, get_args

import typer
from pydantic import ValidationError

from rlver.cli import checks
from rlver.config import apply_overrides
from rlver.errors import InputError, Problem
from rlver.profiles.schema import Difficulty
from rlver.simulator.behaviours import behaviour_names
from rlver.simulator.factory import KINDS, SimulatorKind, SimulatorSpec, kinds, simulator_kind


def simulator_option(*, from_spec: bool = True) -> Any:
    """``--simulator KIND``; ``from_spec=False`` also offers the kinds a command builds itself (replay).

    No default value: leaving the flag out means the config's kind (``rlver eval --config``), else the
    model-backed kind with ``--sim-model``, else :data:`DEFAULT_KIND`.
    """
    return typer.Option(
        None,
        "--simulator",
        help=f"{kinds(from_spec=from_spec).help()} Default: {DEFAULT_KIND}, or llm with --sim-model.",
    )


#: The kind a run talks to when nothing names one (SimulatorSpec's default).
DEFAULT_KIND: str = SimulatorSpec.model_fields["kind"].default


SIM_BASE_URL: Any = typer.Option(
    None,
    "--sim-base-url",
    help="OpenAI-compatible endpoint of the simulator LLM.",
    parser=checks.base_url("--sim-base-url"),
)
SIM_MODEL: Any = typer.Option(
    None,
    "--sim-model",
    help="Simulator model id (the leaderboard used DeepSeek-V3); implies --simulator llm.",
)
#: ``rlver train``'s ``--sim-model``: train has no ``--simulator`` flag, so its help says what it sets.
TRAIN_SIM_MODEL: Any = typer.Option(
    None,
    "--sim-model",
    help="Simulator model id: sets simulator.kind=llm and simulator.model.model (the config's base URL "
    "and key variable stay unless --sim-base-url or --sim-key-env is given).",
)
SIM_KEY_ENV: Any = typer.Option(
    None,
    "--sim-key-env",
    help="Environment variable holding the simulator's key, never the key itself ('' for none; "
    "default OPENAI_API_KEY, if set).",
    parser=checks.key_env("--sim-key-env"),
)


BEHAVIOUR: Any = typer.Option(
    None,
    "--behaviour",
    help=f"User behaviour mode for every dialogue: {', '.join(behaviour_names())}. "
    "Default: each profile's own, else cooperative (the published benchmark's).",
)
DIFFICULTY: Any = typer.Option(
    None,
    "--difficulty",
    help=f"{', '.join(get_args(Difficulty))} for every dialogue (default: each profile's own, else normal).",
)


SET: Any = typer.Option(
    [],
    "--set",
    help="Set one of the simulator kind's own options, as in a config's simulator: block "
    "(repeatable), e.g. --set simulator.embed=true or --set simulator.prompts.show_traits=true.",
)


def with_sets(raw: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """The simulator block with ``--set simulator.KEY=VALUE`` applied, read as ``rlver eval --set`` reads
    its overrides (:func:`rlver.config.apply_overrides`).

    These commands have no config file, so only ``simulator.*`` keys mean something; a key the kind
    does not read is refused, naming the kind's keys, instead of being dropped as an old flat block's
    foreign keys are.
    """
    if not sets:
        return raw
    kind = simulator_kind(raw.get("kind", DEFAULT_KIND))
    accepted = kind.spec.accepted_keys() if kind.spec is not None else set()
    for item in sets:
        key = item.partition("=")[0].strip()
        head, _, rest = key.partition(".")
        if head != "simulator" or not rest:
            raise InputError(Problem("--set", None, None, f"expected simulator.KEY=VALUE, got {item[:80]!r}"))
        if rest.split(".")[0] not in accepted:
            keys = ", ".join(sorted(accepted)) or "none"
            raise InputError(
                Problem("--set", None, key, f"not an option of simulator kind {kind.name} (its keys: {keys})")
            )
    return apply_overrides({"simulator": raw}, sets)["simulator"]


def simulator_block(
    kind: str | None,
    *,
    model: str | None,
    base_url: str | None,
    key_env: str | None,
    from_spec: bool = True,
    config_base_url: str | None = None,
    endpoint_in_config: bool = False,
) -> dict[str, Any]:
    """The ``simulator`` config block the flags give (``{}`` when none was given; no ``kind`` key when
    neither ``--simulator`` nor ``--sim-model`` was: the config's or :data:`DEFAULT_KIND` applies).

    ``--sim-model`` without ``--simulator`` picks the kind that talks to a model; a kind that needs a
    model fails without one, and one that talks to no model fails with one (rather than ignoring it).
    A model needs its endpoint: ``--sim-base-url``, or ``config_base_url`` (the config's, which the
    flags keep when ``--sim-base-url`` is left out); with ``endpoint_in_config`` the config, read later,
    is left to say (``rlver train``, whose presets name theirs).
    """
    block: dict[str, Any] = {}
    if kind is not None:
        block["kind"] = kinds(from_spec=from_spec).check_flag(kind, "--simulator")
    needs_model = simulator_kind(kind).needs_model if kind is not None else None
    if not model:
        if base_url or key_env:
            raise InputError(Problem("--sim-base-url/--sim-key-env", None, None, "need --sim-model"))
        if needs_model:
            raise InputError(Problem("--sim-model", None, None, f"required with --simulator {kind}"))
        return block
    if needs_model is False:
        raise InputError(
            Problem("--sim-model", None, None, f"--simulator {kind} talks to no LLM (use --simulator llm)")
        )
    if not endpoint_in_config:
        checks.endpoint_given("--sim-model", model, "--sim-base-url", base_url or config_base_url)
    block["model"] = {"kind": "openai", "model": model}
    if base_url is not None:  # left out: the config's stays
        block["model"]["base_url"] = base_url
    if key_env is not None:
        block["model"]["api_key_env"] = key_env or None
    block.setdefault("kind", next(k.name for k in _kinds() if k.needs_model))
    return block


def parse_simulator_spec(raw: dict[str, Any], command: str) -> SimulatorSpec:
    """Validate a spec built from flags; each problem names the flag's config key (exit code 2)."""
    try:
        return SimulatorSpec.model_validate(raw)
    except ValidationError as exc:
        problems = [
            Problem(command, None, ".".join(str(x) for x in e["loc"]) or None, e["msg"]) for e in exc.errors()
        ]
        raise InputError(problems) from None


def simulator_overrides(*, model: str | None, base_url: str | None, key_env: str | None) -> list[str]:
    """The ``--sim-*`` flags as ``--set`` overrides of a config's simulator (``rlver train``).

    Why: training against a self-hosted simulator took ``--set simulator.model.model=...`` and
    ``--set simulator.model.api_key_env=''`` beside the base URL, which only the config revealed; the
    flags are checked as ``rlver eval`` checks them (:func:`simulator_block`: the other two need
    ``--sim-model``, which implies the kind that talks to a model). A flag left out keeps the config's
    value (its base URL, its key variable). Values are JSON-quoted, so a model id such as ``1.5`` stays
    a string.
    """
    block = simulator_block(None, model=model, base_url=base_url, key_env=key_env, endpoint_in_config=True)
    if not block:
        return []
    sets = [f"simulator.kind={block['kind']}"]
    for key, value in block["model"].items():
        if value is not None:
            sets.append(f"simulator.model.{key}={json.dumps(value)}")
        elif key == "api_key_env":  # --sim-key-env '': no key
            sets.append("simulator.model.api_key_env=null")
    return sets


def _kinds() -> list[SimulatorKind]:
    """Every simulator kind's entry, in registry order."""
    return [simulator_kind(name) for name in KINDS]
