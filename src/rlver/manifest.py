"""The run manifest: line 1 of every rlver transcript, as one typed object.

A transcript describes itself: its first line records what ran (the agent, the simulated user, the
dialogue's rules, the reward, sampling, seeds, rlver's version and the time). Every writer
(``rlver eval``, the demo, ``rlver chat --save``) builds a :class:`RunManifest`; every reader (audit,
inspect, report, score, judge, resume) gets one from :meth:`RunManifest.read` and uses its typed
attributes. The older shapes are upgraded as a record is read (``rlver.migrate.upgrade_manifest``),
so no reader carries fallback keys:

* the agent: ``agent`` (``ChatModel.describe()``); ``policy`` (named in the first transcript docs);
  ``model`` as a bare name (the demo, in early versions);
* the run's kind: ``kind``; ``mode`` (``rlver chat --save``, in early versions);
* the dialogue's rules: ``rules``; else the environment's: ``env`` or ``rollout.env``, each with its
  rule fields flat (every early ``EnvConfig``) or nested under ``rules``;
* the reward: ``reward``; ``rollout.reward``; the flat ``reward_mode``/``format_penalty``/
  ``mixed_weight`` of ``rollout`` or of the manifest itself (before ``RewardSpec``).

What a manifest does not say stays unknown (``None``): an old manifest without an environment has no
:attr:`RunManifest.rules`, and the auditor then accepts the recorded start and assumes no turn limit.
Keys this version does not know (a newer rlver, a hand-written file) are kept as they are and written
back unchanged. Secret-looking keys are dropped whenever a manifest is written.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from rlver import __version__
from rlver.env.rewards import RewardSpec
from rlver.errors import InputError, Problem
from rlver.migrate import stated_env_rules, upgrade_manifest
from rlver.rules import PRESETS, DialogueRules

MANIFEST = "manifest"
_SECRET_HINTS = ("api_key", "apikey", "secret", "password", "authorization", "access_token", "auth_token")
#: Without both of these an environment record says too little to rebuild the dialogue's rules.
_RULES_REQUIRED = ("start_emotion", "max_assistant_turns")
_M = TypeVar("_M", bound=BaseModel)


def scrub(value: Any) -> Any:
    """Drop anything that looks like a secret (``api_key_env`` names are kept: they are not secrets)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = str(k).lower()
            if any(h in key for h in _SECRET_HINTS) and not key.endswith("_env"):
                continue
            out[k] = scrub(v)
        return out
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


class RunManifest(BaseModel):
    """What a run was: written as line 1 of its transcript, read back by every tool.

    The descriptions of the agent and of the simulator are kept as their own ``describe()`` wrote
    them (each model backend and simulator kind says different things); the properties below read
    the parts rlver's tools use.
    """

    model_config = ConfigDict(extra="allow")

    type: Literal["manifest"] = "manifest"
    #: ``eval``, ``demo``, ``chat``, ``train``; None in files that did not say.
    kind: str | None = None
    rlver_version: str | None = None
    created: str | None = None
    python: str | None = None
    run_name: str | None = None
    #: The agent as it described itself (``ChatModel.describe()``: name, class, model, sampler).
    agent: dict[str, Any] | None = None
    #: The agent's ``ModelSpec`` (redacted), enough to build it again.
    agent_spec: dict[str, Any] | None = None
    agent_sampling: dict[str, Any] | None = None
    agent_seeding: dict[str, Any] | None = None
    #: The agent's system prompt: its name and, per language, its SHA-256 and text.
    agent_prompt: dict[str, Any] | None = None
    #: The simulated user as it described itself (``SimulatedUser.describe()``).
    simulator: dict[str, Any] | None = None
    #: The simulator's spec (redacted), enough to build it again.
    simulator_spec: dict[str, Any] | None = None
    #: The environment's settings as recorded (``EnvConfig``), for reproduction.
    env: dict[str, Any] | None = None
    #: The dialogue's rules; None when the manifest does not say them.
    rules: DialogueRules | None = None
    #: How episodes were rewarded; None when the manifest does not say.
    reward: RewardSpec | None = None
    #: The dialogue in words (``benchmark protocol: 10 replies from 40, ...``); ``protocol`` before.
    dialogue: str | None = None
    #: What the simulated user is shown of a reply and what the agent's later turns see of it
    #: (``EnvConfig.reply_layout``); None in manifests written before it was recorded.
    reply_layout: dict[str, Any] | None = None
    #: A training run: the published preset it is compared with and the settings that differ
    #: (``train/published_run.published_run``).
    published_run: dict[str, Any] | None = None
    #: A training run: how its held-out score was measured (dialogue, profiles, user, agent prompt).
    held_out: dict[str, Any] | None = None
    profiles: str | list[str] | None = None
    limit: int | None = None
    n_profiles: int | None = None
    #: SHA-256 of the ids of the whole profile set, in order (``profiles.sets.profile_ids_sha256``):
    #: the set's content, so the published file given by path reads as the published set.
    profile_ids_sha256: str | None = None
    n_per_profile: int | None = None
    seed: int | None = None
    concurrency: int | None = None
    #: The demo's evaluations: ``before`` or ``after`` training, and the steps trained.
    stage: str | None = None
    steps: int | None = None

    # ------------------------------------------------------------------------------ building
    @classmethod
    def create(cls, **settings: Any) -> RunManifest:
        """A new run's manifest: ``settings`` plus rlver's version, the time and Python's version.

        Pydantic models among ``settings`` (an ``EnvConfig``, a ``RewardSpec``) are dumped first.
        """
        body = {k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v for k, v in settings.items()}
        stamp = {
            "rlver_version": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(),
        }
        return cls.read({**stamp, **body})

    def to_json(self) -> dict[str, Any]:
        """The JSON record written to a transcript, unset fields left out (secrets never get in).

        The rules are written once: inside ``env`` when it holds them, on their own otherwise.
        """
        record = self.model_dump(mode="json")
        if self.rules is not None and self.rules == _rules_of(self.env):
            del record["rules"]
        return {k: v for k, v in record.items() if v is not None}

    # ------------------------------------------------------------------------------- reading
    def stated_rules(self, source: str = "manifest") -> dict[str, Any]:
        """Each dialogue-rule field the manifest states, validated on its own: what an auditor checks.

        Unlike :attr:`rules` (None unless the start and the turn limit are both stated), a manifest that
        states only its start still has that start checked. A stated value that is not a valid rule is
        an error naming the field (``source``: the file, line 1), never a silently skipped check.
        """
        if self.rules is not None:
            return self.rules.model_dump()
        stated = _stated_rules(self.env)
        for key, value in stated.items():
            try:
                DialogueRules.model_validate({key: value})
            except ValidationError as exc:
                reason = exc.errors()[0]["msg"]
                raise InputError(Problem(source, 1, f"env.{key}", f"{reason} (got {value!r})")) from exc
        return stated

    @classmethod
    def read(cls, source: dict[str, Any] | RunManifest | str | os.PathLike[str]) -> RunManifest:
        """A manifest from a record, a manifest ``.json`` file, a transcript or a run folder.

        Accepts every shape rlver has written (see the module docstring). A value of the wrong type
        (a damaged or hand-edited file) is left out rather than refused: a manifest describes a
        transcript, and the transcript stays readable without it.
        """
        if isinstance(source, RunManifest):
            return source
        data = source if isinstance(source, dict) else _load(Path(source))
        data = _normalised(scrub(dict(data)))
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
            return cls.model_validate({k: v for k, v in data.items() if k not in bad})

    # ---------------------------------------------------------------------- what tools read
    @property
    def agent_name(self) -> str | None:
        """The agent's model: what it described itself as, else its spec's model."""
        for record in (self.agent, self.agent_spec):
            if record:
                for key in ("model", "name"):
                    if record.get(key):
                        return str(record[key])
        return None

    @property
    def simulator_kind(self) -> str | None:
        """The simulator's kind (``offline``, ``sentient``, ``replay``...)."""
        name = (self.simulator or {}).get("name")
        return str(name) if name else None

    @property
    def max_change(self) -> int | None:
        """The simulator's per-turn change bound, when it recorded one."""
        value = (self.simulator or {}).get("max_change")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def think(self) -> bool | None:
        """The run's think mode (``env.think``), None when the manifest does not say."""
        value = (self.env or {}).get("think")
        return value if isinstance(value, bool) else None

    @property
    def agent_max_tokens(self) -> int | None:
        """The agent's reply cap."""
        return _int((self.agent_sampling or {}).get("max_tokens"))

    @property
    def simulator_max_tokens(self) -> int | None:
        """The simulator's reply cap, as it ran."""
        sampling = (self.simulator or {}).get("sampling")
        return _int(sampling.get("max_tokens")) if isinstance(sampling, dict) else None

    @property
    def expected_dialogues(self) -> int | None:
        """The dialogues an ``rlver eval`` run set out to score (profiles x samples)."""
        if self.n_profiles is None or self.n_per_profile is None:
            return None
        return self.n_profiles * self.n_per_profile


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _load(path: Path) -> dict[str, Any]:
    """The manifest record of a ``.json`` file, or line 1 of a transcript (a run folder's included)."""
    file = path / "transcript.jsonl" if path.is_dir() else path
    try:
        with file.open(encoding="utf-8") as fh:
            if file.suffix == ".json":
                record = json.load(fh)
            else:
                first = next((line for line in fh if line.strip()), "{}")
                record = json.loads(first)
    except (OSError, ValueError) as exc:
        raise InputError(Problem(str(file), 1, None, f"cannot read a manifest: {exc}")) from exc
    if not isinstance(record, dict) or record.get("type") != MANIFEST:
        raise InputError(Problem(str(file), 1, "type", "the first record is not an rlver manifest"))
    return record


def _normalised(data: dict[str, Any]) -> dict[str, Any]:
    """Older shapes moved to today's keys (``rlver.migrate.upgrade_manifest``), then the rules and
    reward read from what the record states."""
    data = upgrade_manifest(data)
    data["type"] = MANIFEST
    if data.get("rules") is None:
        data["rules"] = _rules_of(data.get("env"))
    data["reward"] = _reward_of(data.get("reward"))
    return data


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _rules_of(env: Any) -> DialogueRules | None:
    """The rules an environment record states: nested under ``rules`` or flat (older files).

    None unless the start and the turn limit are stated (and valid): the auditor must not assume them.
    """
    if not isinstance(env, dict):
        return None
    preset = PRESETS.get(str(_dict(env.get("rules")).get("preset")))
    rules, kept = _valid(DialogueRules, _stated_rules(env))
    if rules is None or (preset is None and not all(k in kept for k in _RULES_REQUIRED)):
        return None
    return rules


def _stated_rules(env: Any) -> dict[str, Any]:
    """The rule fields an environment record states (a preset states all of its own)."""
    if not isinstance(env, dict):
        return {}
    stated = stated_env_rules(env)
    preset = PRESETS.get(str(stated.pop("preset", None)))
    return {**(preset.model_dump() if preset else {}), **stated}


def _reward_of(reward: Any) -> RewardSpec | None:
    """The reward the manifest states; None without a known mode."""
    if isinstance(reward, RewardSpec):
        return reward
    if isinstance(reward, dict):
        spec, kept = _valid(RewardSpec, reward)
        return spec if "mode" in kept else None
    return None


def _valid(model: type[_M], data: dict[str, Any]) -> tuple[_M | None, set[str]]:
    """``data`` as ``model`` leaving out the fields that do not validate, and the fields kept."""
    try:
        return model.model_validate(data), set(data)
    except ValidationError as exc:
        bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
    kept = {k: v for k, v in data.items() if k not in bad}
    try:
        return model.model_validate(kept), set(kept)
    except ValidationError:
        return None, set()
