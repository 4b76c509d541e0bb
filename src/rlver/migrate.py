"""Every older shape of a config block or a run manifest, upgraded to today's in one place.

rlver reads files it wrote earlier: a run folder's ``config.yaml`` (``--resume``), a transcript's
manifest line, a config a user kept. Each shape change left readers with a little history. Keeping that
history here, as plain mapping-to-mapping functions run when a block is read, means every other module
sees only the current shape, and a shape can be retired by deleting one function.

The shapes read here (each written by a released rlver; the commit that changed it in brackets where
known):

* flat rule keys (``max_assistant_turns: 3``) of an environment block or ``rollout:`` → ``rules:``
  a training config's are named in a :class:`FutureWarning`;
* flat ``max_assistant_turns``/``start_emotion`` of a training config's ``eval:`` → ``eval.rules``
  (every config.yaml before it wrote both, mostly ``null``);
* flat ``reward_mode``/``format_penalty``/``mixed_weight`` → a nested ``reward:`` block (RewardSpec);
* ``rollout.compile_decode`` → ``rollout.backend_settings.compile_decode`` (the ``hf`` backend's own
  settings), named in a :class:`FutureWarning`;
* one flat ``algorithm:`` block holding every algorithm's keys → only the named algorithm's (8c4fe12);
* the update's system knobs (``micro_batch_tokens``, ``logit_chunk_tokens``) under ``algorithm:`` →
  their own ``update:`` block;
* one flat ``simulator:`` block holding every kind's and every protocol's options → the named kind's
  and protocol's (c81a8f4);
* the words that meant two things (docs/architecture.md, "Glossary"): ``protocol`` for the dialogue's
  rules → ``dialogue`` (an eval config's top level, a training config's ``eval:``, the manifest's
  line and its ``held_out``), ``protocol`` for the LLM user's prompt set → ``prompts``
  (``simulator.protocol``, a simulator's description), and a model description's ``backend`` (its
  Python class) → ``class`` (:func:`renamed`; the command line's flags: :data:`RENAMED_FLAGS`);
* the manifest's earlier names: ``mode`` (now ``kind``), ``policy`` or a bare ``model`` (now
  ``agent``), ``rollout.env`` (now ``env``), flat reward keys (its own or its rollout's), and an
  environment's flat rule keys (read by :func:`stated_env_rules`).
* a manifest's recorded settings compared on ``rlver eval --resume``, as this version writes them
  (:func:`upgrade_recorded_setting`: flat rules, ``think_context`` before it was recorded, sampling before
  ``model_default``, one flat simulator block, a model spec without ``base_url`` from before there
  was no default endpoint: :func:`recorded_endpoint`);
* what a manifest left out because it was the default then (:func:`recorded_think_context`,
  :func:`recorded_max_quoted_chars`: the defaults before they were recorded), read by ``rlver explain``.

This module sits at the bottom layer: callers hand over what only they know (the registry of
algorithms or simulator kinds), so it imports nothing of theirs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rlver.rules import DialogueRules

#: The names of the rules, as older files wrote them flat beside other keys.
RULE_FIELDS: tuple[str, ...] = tuple(DialogueRules.model_fields)

#: Keys a reward was configured with before it became one nested ``reward:`` block.
FLAT_REWARD_KEYS = {"reward_mode": "mode", "format_penalty": "format_penalty", "mixed_weight": "mixed_weight"}

#: The in-training evaluation's rule keys before ``eval.rules``.
FLAT_EVAL_RULE_KEYS = ("max_assistant_turns", "start_emotion")


def _moved(old: str, new: str) -> None:
    """Name an old key and its new place in a FutureWarning (shown to users, unlike a
    DeprecationWarning). ``stacklevel`` points past this helper and the upgrade calling it."""
    warnings.warn(f"{old} is deprecated: write it as {new}", FutureWarning, stacklevel=5)


def _deprecated(where: str | None, keys: Iterable[str]) -> None:
    """Each flat rule key of block ``where`` and its place under ``where.rules``."""
    if where is None:
        return
    for key in keys:
        _moved(f"{where}.{key}", f"{where}.rules.{key}")


# -- words that meant two things -----------------------------------------------------------------------
#: Old command-line flags and their names now (``rlver.cli`` keeps the old ones working, hidden).
RENAMED_FLAGS = {"--protocol": "--dialogue", "--sim-protocol": "--sim-prompts", "--engine": "--trainer"}


def renamed(data: Any, old: str, new: str, where: str | None = None) -> Any:
    """A block with key ``old`` read as ``new`` (the new one wins when both are given). With
    ``where`` (the block's config path with its dot, ``""`` at the top level) one deprecation line
    names the new key; ``None`` reads it quietly (a manifest written by an older rlver)."""
    if not isinstance(data, Mapping) or old not in data:
        return data
    if where is not None:
        _moved(f"{where}{old}", f"{where}{new}")
    out = {k: v for k, v in data.items() if k != old}
    out.setdefault(new, data[old])
    return out


def deprecated_flag(old: str) -> str:
    """The flag ``old`` is now; one deprecation line says so (shown on stderr)."""
    new = RENAMED_FLAGS[old]
    warnings.warn(f"{old} is deprecated: write it as {new}", FutureWarning, stacklevel=2)
    return new


# -- the dialogue's rules ------------------------------------------------------------------------------
#: Rules presets renamed: the benchmark's dialogue has one name, in ``dialogue:`` and ``rules.preset``.
RENAMED_PRESETS = {"evaluation": "benchmark"}


def preset_renamed(value: Any) -> Any:
    """A ``rules:`` entry naming a preset by its older name, read with today's (one deprecation line)."""
    if isinstance(value, Mapping) and value.get("preset") in RENAMED_PRESETS:
        new = RENAMED_PRESETS[value["preset"]]
        _moved(f"rules preset {value['preset']!r}", repr(new))
        return {**value, "preset": new}
    return value


def rules_on(value: Any, base: DialogueRules) -> Any:
    """``value`` (a ``rules:`` entry of a config) read on top of ``base``: missing means ``base``, a
    mapping without ``preset`` changes ``base``'s rules; anything else is left to validation."""
    value = preset_renamed(value)
    if value is None:
        return base
    if isinstance(value, Mapping) and "preset" not in value:
        return {**base.model_dump(), **value}
    return value


def nest_flat_rules(data: Any, base: DialogueRules, *, where: str | None = None) -> Any:
    """Move flat rule keys of a block (``max_assistant_turns: 3``) into its ``rules:`` entry, read on
    ``base``. A block with both forms keeps the flat value (it was set later, e.g. by ``--set``). With
    ``where`` (the block's config path) each flat key is named in a warning with its new place."""
    if not isinstance(data, Mapping):
        return data
    flat = {k: data[k] for k in RULE_FIELDS if k in data}
    if not flat and "rules" in data:
        return {**data, "rules": rules_on(data["rules"], base)}
    if not flat:
        return data
    _deprecated(where, flat)
    nested = rules_on(data.get("rules"), base)
    if isinstance(nested, DialogueRules):
        nested = nested.model_dump()
    if isinstance(nested, Mapping):
        nested = {**nested, **flat}
    out = {k: v for k, v in data.items() if k not in flat}
    out["rules"] = nested
    return out


def nest_flat_eval_rules(data: Any) -> Any:
    """A training config's ``eval:`` block: flat ``max_assistant_turns``/``start_emotion`` → ``rules``.

    ``null`` (the old default, in every config.yaml written before) means "the protocol's" and is
    dropped; a value is moved, with a warning, beside any ``rules`` keys given (the flat one wins).
    """
    if isinstance(data, Mapping) and "rules" in data:
        data = {**data, "rules": preset_renamed(data["rules"])}
    if not isinstance(data, Mapping) or not any(k in data for k in FLAT_EVAL_RULE_KEYS):
        return data
    flat = {k: data[k] for k in FLAT_EVAL_RULE_KEYS if data.get(k) is not None}
    out = {k: v for k, v in data.items() if k not in FLAT_EVAL_RULE_KEYS}
    if flat:
        _deprecated("eval", flat)
        nested = out.get("rules")
        out["rules"] = {**nested, **flat} if isinstance(nested, Mapping) else nested or flat
    return out


def stated_env_rules(env: Mapping[str, Any]) -> dict[str, Any]:
    """The rule keys an environment record states, flat (older files) or nested, as one ``rules``
    mapping of only what it states (a manifest must not assume the rest)."""
    nested = env.get("rules")
    nested = dict(nested) if isinstance(nested, Mapping) else {}
    return {**{k: v for k, v in env.items() if k in RULE_FIELDS}, **nested}


# -- the reward ----------------------------------------------------------------------------------------
def nest_flat_reward(data: Any) -> Any:
    """Move flat ``reward_mode``/``format_penalty``/``mixed_weight`` keys of a block into ``reward``.
    A block with both forms keeps the nested one's values."""
    if not isinstance(data, Mapping) or not any(k in data for k in FLAT_REWARD_KEYS):
        return data
    out = {k: v for k, v in data.items() if k not in FLAT_REWARD_KEYS}
    flat = {FLAT_REWARD_KEYS[k]: v for k, v in data.items() if k in FLAT_REWARD_KEYS}
    nested = data.get("reward")
    out["reward"] = {**flat, **nested} if isinstance(nested, Mapping) else nested or flat
    return out


def upgrade_rollout(data: Any, base: DialogueRules) -> Any:
    """A training config's ``rollout:`` block: flat reward and rule keys nested (rules on ``base``), and
    the ``hf`` backend's knob moved into ``backend_settings``."""
    return nest_flat_rules(nest_flat_reward(nest_backend_knobs(data)), base, where="rollout")


# -- the rollout backend's own knobs -------------------------------------------------------------------
#: Keys of ``rollout:`` that became a backend's own settings (``rollout.backend_settings``).
ROLLOUT_BACKEND_KNOBS = ("compile_decode",)


def nest_backend_knobs(data: Any) -> Any:
    """``rollout.compile_decode`` → ``rollout.backend_settings.compile_decode``, with a FutureWarning
    naming the new place when it was set (every older config.yaml holds the default, ``false``). A
    block with both keeps the flat value (it was set later, e.g. by ``--set``); a backend whose
    settings have no such key refuses it there, by its new path."""
    if not isinstance(data, Mapping) or not any(k in data for k in ROLLOUT_BACKEND_KNOBS):
        return data
    flat = {k: data[k] for k in ROLLOUT_BACKEND_KNOBS if k in data}
    for key in (k for k, v in flat.items() if v is not False):  # every old config.yaml wrote false
        _moved(f"rollout.{key}", f"rollout.backend_settings.{key}")
    out = {k: v for k, v in data.items() if k not in flat}
    nested = out.get("backend_settings")
    out["backend_settings"] = {**nested, **flat} if isinstance(nested, Mapping) else nested or flat
    return out


# -- blocks that once held every variant's keys --------------------------------------------------------
def drop_keys_of_others(data: Mapping[str, Any], mine: set[str], others: set[str]) -> dict[str, Any]:
    """A flat block of old read as one variant: keys only *other* variants read are dropped (they
    never did anything for this one); a key no variant knows stays, for validation to name."""
    return {k: v for k, v in data.items() if k in mine or k not in others}


def drop_other_algorithms_keys(
    data: Mapping[str, Any], name: str, mine: set[str], others: Mapping[str, tuple[str, Any]]
) -> dict[str, Any]:
    """An ``algorithm:`` block written before each algorithm had its own settings class held every
    algorithm's keys. ``others`` maps each key of another algorithm's settings to ``(who, default)``;
    such a key is dropped, with a warning naming its owner when it was set to anything but its default.
    """
    for key, value in data.items():
        if key in others and key not in mine and value != others[key][1]:
            warnings.warn(
                f"algorithm.{key}={value!r} is a setting of {others[key][0]} and does nothing for "
                f"algorithm.name={name}; it is ignored",
                FutureWarning,
                stacklevel=3,
            )
    return drop_keys_of_others(data, mine, set(others))


#: ``algorithm:`` keys that were removed, each with why: a config or run folder that still sets one
#: loads, with one line saying the key is ignored.
RETIRED_ALGORITHM_KEYS = {
    "ctc_scale_by_std": "CTC-GRPO's released code divides its turn credit by no std "
    "(docs/algorithms.md, 'Turn credit as the papers define it')",
}


def drop_retired_algorithm_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """An ``algorithm:`` block without the keys of :data:`RETIRED_ALGORITHM_KEYS`, each found one
    named in a FutureWarning with the reason it went."""
    for key in data:
        if key in RETIRED_ALGORITHM_KEYS:
            warnings.warn(
                f"algorithm.{key} was removed and is ignored: {RETIRED_ALGORITHM_KEYS[key]}",
                FutureWarning,
                stacklevel=3,
            )
    return {k: v for k, v in data.items() if k not in RETIRED_ALGORITHM_KEYS}


def upgrade_update_keys(data: Any, defaults: Mapping[str, Any]) -> Any:
    """A training config whose ``algorithm:`` block holds the update's system knobs (``defaults``: each
    key of ``update:`` and its default) as older configs did: they move to ``update:``, beside any
    keys given there (the ``algorithm:`` one wins: it was set later, e.g. by ``--set``). Every
    config.yaml written before states them, mostly at the default: those move quietly; a value chosen
    is named in a warning with its new place."""
    if not isinstance(data, Mapping) or not isinstance(data.get("algorithm"), Mapping):
        return data
    algorithm = data["algorithm"]
    moved = {k: v for k, v in algorithm.items() if k in defaults}
    if not moved:
        return data
    for key, value in moved.items():
        if value != defaults[key]:
            _moved(f"algorithm.{key}", f"update.{key}")
    update: Any = data.get("update")
    if hasattr(update, "model_dump"):  # an ``UpdateSettings`` given whole
        update = update.model_dump()
    out = {**data, "algorithm": {k: v for k, v in algorithm.items() if k not in moved}}
    if update is None or isinstance(update, Mapping):
        out["update"] = {**(update or {}), **moved}
    return out  # an ``update:`` that is no block is left for validation to name


def nest_protocol_options(data: Mapping[str, Any], options: set[str], default_protocol: str) -> Any:
    """A flat ``simulator:`` block's prompt-set options (``show_traits: true``) move into its
    ``prompts`` entry (a name, a mapping or a prompt set's dump)."""
    given = {k: v for k, v in data.items() if k in options}
    if not given:
        return data
    protocol = data.get("prompts", default_protocol)
    if hasattr(protocol, "model_dump"):
        protocol = protocol.model_dump()
    elif isinstance(protocol, str):
        protocol = {"name": protocol}
    rest = {k: v for k, v in data.items() if k not in given}
    return {**rest, "prompts": {**protocol, **given}} if isinstance(protocol, Mapping) else data


# -- the run manifest ----------------------------------------------------------------------------------
def upgrade_manifest(data: dict[str, Any]) -> dict[str, Any]:
    """A manifest record (any shape rlver wrote) with today's keys; values are not validated here."""
    # words that meant two things (quietly: the file was written by an older rlver)
    data = renamed(data, "protocol", "dialogue")
    if isinstance(data.get("simulator"), dict):
        data["simulator"] = renamed(data["simulator"], "protocol", "prompts")
    if isinstance(data.get("held_out"), dict):
        held = renamed(data["held_out"], "protocol", "dialogue")
        data["held_out"] = renamed(held, "simulator_protocol", "simulator_prompts")
    for who in ("agent", "policy"):  # a model's description: its Python class was its "backend"
        if isinstance(data.get(who), dict):
            data[who] = renamed(data[who], "backend", "class")
    simulated = data.get("simulator")
    if isinstance(simulated, dict) and isinstance(simulated.get("model"), dict):
        data["simulator"] = {**simulated, "model": renamed(simulated["model"], "backend", "class")}
    if data.get("kind") is None and isinstance(data.get("mode"), str):
        data["kind"] = data.pop("mode")
    if data.get("agent") is None:
        if isinstance(data.get("policy"), dict):
            data["agent"] = data.pop("policy")
        elif isinstance(data.get("model"), str):
            data["agent"] = {"model": data.pop("model")}
    found = data.get("rollout")
    rollout: dict[str, Any] = found if isinstance(found, dict) else {}
    if data.get("env") is None and isinstance(rollout.get("env"), dict):
        data["env"] = rollout["env"]
    # the reward: its own (flat keys or nested), else its rollout's
    own = nest_flat_reward({k: v for k, v in data.items() if k in (*FLAT_REWARD_KEYS, "reward")})
    data["reward"] = own.get("reward") or nest_flat_reward(rollout).get("reward")
    for key in FLAT_REWARD_KEYS:
        data.pop(key, None)
    return data


def upgrade_recorded_setting(
    key: str, value: Any, read_now: Mapping[str, Callable[[Any], Any]], think_context_now: str
) -> Any:
    """A setting a manifest recorded (``key``: ``env``, ``agent_sampling``, ``simulator_spec``...) as
    this version writes it, so that ``rlver eval --resume`` compares like with like: an ``env`` from
    before the rules nested (flat ``max_assistant_turns``...) equals the same rules nested, one without
    think equals any ``think_context`` (it changes nothing there; the default became
    ``think_context_now`` when think contexts were recorded), an ``agent_sampling`` from before ``model_default`` and a
    ``simulator_spec`` from before the specs split by kind (one flat block) read as now.

    ``read_now`` maps each such key to the caller's reader (validate, then dump as JSON); a value it
    refuses (``ValueError``) is compared as recorded.
    """
    try:
        if key == "env" and isinstance(value, Mapping) and not value.get("think"):
            value = {**value, "think_context": think_context_now}
        if key == "env" and isinstance(value, Mapping) and "rules" not in value:
            return read_now["env"](value)
        if key == "agent_sampling" and isinstance(value, Mapping):
            return read_now["agent_sampling"](value)
        if key == "agent_spec":
            return recorded_endpoint(value)
        if key == "simulator_spec":
            value = renamed(value, "protocol", "prompts")  # recorded before the rename: quietly
            if isinstance(value, Mapping) and isinstance(value.get("model"), Mapping):
                value = {**value, "model": recorded_endpoint(value["model"])}
            return read_now["simulator_spec"](value)
    except ValueError:
        pass  # not a settings block this version reads: compared as recorded
    return value


#: Where an ``openai`` model spec without ``base_url`` was sent before rlver refused such a spec
#: (the client's default then): what a spec recorded at that time means. :mod:`rlver.llm.spec` names
#: it in the refusal.
OPENAI_BASE_URL = "https://api.openai.com/v1"


def recorded_endpoint(spec: Any) -> Any:
    """A recorded model spec (a manifest's ``agent_spec``, a ``simulator_spec``'s ``model``) with the
    endpoint it was sent to: an ``openai`` spec (the default kind) without ``base_url`` went to
    :data:`OPENAI_BASE_URL`. Anything else is returned as it is."""
    if not isinstance(spec, Mapping) or spec.get("kind", "openai") != "openai" or "model" not in spec:
        return spec
    return spec if spec.get("base_url") else {**spec, "base_url": OPENAI_BASE_URL}


#: What manifests written before these settings were recorded left unsaid because it was the default then.
THINK_CONTEXT_UNRECORDED = "full"
MAX_QUOTED_CHARS_UNRECORDED = 4000


def recorded_think_context(env: Mapping[str, Any] | None) -> Any:
    """The ``think_context`` a manifest's ``env`` ran with: as recorded, or ``full``, the default
    before manifests recorded it."""
    return (env or {}).get("think_context", THINK_CONTEXT_UNRECORDED)


def recorded_max_quoted_chars(simulator: Mapping[str, Any]) -> Any:
    """How many characters of a reply the ``sage`` simulator quoted: as its description records it,
    or 4,000, where manifests from before it was recorded cut."""
    return simulator.get("max_quoted_chars", MAX_QUOTED_CHARS_UNRECORDED)
