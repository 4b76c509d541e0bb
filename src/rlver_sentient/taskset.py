"""The taskset: one task per profile, and the dialogue settings every task of a run shares.

The settings are read the way ``rlver eval`` reads its flags: they are validated as an
:class:`rlver.eval.config.EvalConfig`, so the profile set, the simulator (with the ``sage-published``
protocol and SAGE's agent prompt on the SAGE profiles with an LLM user), the dialogue rules and the
profile selection (``limit``) are rlver's own, decided in one place for both routes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import Field, PrivateAttr, ValidationError, model_validator

from rlver.config import MAX_COUNT
from rlver.env.dialogue import EnvConfig
from rlver.env.thinking import system_prompt
from rlver.errors import RlverError
from rlver.eval.config import EvalConfig
from rlver.eval.runner import requests_record, select_profiles
from rlver.llm.openai_client import sampling_fields
from rlver.migrate import renamed
from rlver.profiles.schema import Profile
from rlver.seeding import MAX_SEED
from rlver.simulator.factory import SimulatorSpec
from rlver_sentient.exchange import SentientState

#: The agent's placeholder in the rlver config the settings are validated as: verifiers' client is the
#: agent (``-m``, ``--client.*``); rlver builds no agent here, so its endpoint is a name that resolves
#: nowhere (``.invalid``, RFC 2606): an openai spec must name one.
_VERIFIERS_AGENT = {
    "kind": "openai",
    "model": "verifiers-client",
    "base_url": "http://verifiers-client.invalid/v1",
    "api_key_env": None,
}


class SentientTasksetConfig(vf.TasksetConfig):
    """``--env.taskset.*``: which users, which simulated user, and the dialogue's rules."""

    profiles: str = "sage"
    """A profile set (``sage``, ``bundled``, ``en-test``, ...: ``rlver profiles list``) or a file."""
    simulator: Literal["offline", "llm"] = "offline"
    """``offline``: rlver's deterministic user (no LLM; a proxy, not the published judge). ``llm``: an
    LLM plays the user; on ``sage`` it asks SAGE's own questions (``sage-published``)."""
    sim_base_url: str | None = None
    """The simulator LLM's OpenAI-compatible endpoint (``llm``)."""
    sim_model: str | None = None
    """The simulator LLM's model id (``llm``; the leaderboard used DeepSeek-V3)."""
    sim_key_var: str | None = None
    """The environment variable holding the simulator's key (never the key itself); unset: no key."""
    limit: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    """Only the first N profiles of the set (as ``rlver eval --limit``)."""
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    """The run seed: each profile's user is seeded as in ``rlver eval --seed`` (n = 1)."""
    dialogue: Literal["benchmark", "training"] = "benchmark"
    """``benchmark``: the Sentient Benchmark's dialogue (start 40, 10 replies, the last unappraised).
    ``training``: rlver's training dialogue (start 30, 8 replies, each appraised)."""
    max_turns: int | None = Field(default=None, ge=1)
    """Assistant replies per dialogue; unset: the dialogue's (10 for the benchmark, 8 for training)."""
    think: bool = False
    """Think then say: the agent is asked to reason in ``<think>...</think>``, which the user never
    sees; later turns see only the visible text of earlier replies (the published rule)."""
    #: :meth:`with_sampling`'s configs, by the sampling values set
    _with_sampling: dict[str, EvalConfig] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _older_argument(cls, data: Any) -> Any:
        """``protocol`` was this argument's name (rlver.migrate: one deprecation line)."""
        return renamed(data, "protocol", "dialogue", where="")

    @model_validator(mode="after")
    def _settings_are_rlver_settings(self) -> SentientTasksetConfig:
        if self.sim_key_var and not os.environ.get(self.sim_key_var):
            raise ValueError(
                f"sim_key_var {self.sim_key_var}: the environment variable is not set or is empty; put "
                "the simulator's key in it, or leave sim_key_var out for an endpoint that needs no key"
            )
        try:  # validated now, so a bad setting fails before any rollout, in one line
            self.rlver_config  # noqa: B018
            if "profiles" in self.model_fields_set:
                # a set named on the command line is read now (a missing download is one line); the
                # default is read when the tasks load, since verifiers also validates a bare {id}
                self.selected_profiles  # noqa: B018
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"{where}: {first['msg']}" if where else first["msg"]) from None
        except RlverError as exc:
            raise ValueError(str(exc)) from None
        return self

    @cached_property
    def selected_profiles(self) -> list[Profile]:
        """The profiles of the run, as ``rlver eval`` selects them (``limit``, duplicate ids refused)."""
        return select_profiles(self.rlver_config)

    @cached_property
    def rlver_config(self) -> EvalConfig:
        """These settings as ``rlver eval`` would run them (its defaults, its published-protocol rule)."""
        return EvalConfig.model_validate(self._rlver_data())

    def _rlver_data(self) -> dict[str, Any]:
        """These settings as the config data ``rlver eval`` would validate."""
        simulator: dict[str, Any] = {"kind": self.simulator}
        if self.simulator == "llm":
            if not self.sim_model:
                raise ValueError(
                    "simulator llm needs sim_model and sim_base_url (rlver has no default endpoint)"
                )
            simulator["model"] = {
                "kind": "openai",
                "model": self.sim_model,
                "base_url": self.sim_base_url,
                "api_key_env": self.sim_key_var or None,
            }
        elif self.sim_model or self.sim_base_url or self.sim_key_var:
            raise ValueError("sim_model, sim_base_url and sim_key_var are for simulator llm")
        env: dict[str, Any] = {"think": self.think}
        if self.max_turns is not None:
            env["rules"] = {"max_assistant_turns": self.max_turns}
        return {
            "agent": _VERIFIERS_AGENT,
            "simulator": simulator,
            "profiles": self.profiles,
            "limit": self.limit,
            "seed": self.seed,
            "dialogue": self.dialogue,
            "env": env,
            "report": False,
        }

    def with_sampling(self, stated: Mapping[str, Any]) -> EvalConfig:
        """These settings with the agent's sampling values the run set (verifiers' ``--sampling.*``,
        as ``rlver eval --agent-temperature`` and the like set them); validated once per distinct set."""
        key = json.dumps(dict(stated), sort_keys=True)
        if key not in self._with_sampling:
            data = {**self._rlver_data(), "sampling": _rlver_sampling(stated)} if stated else None
            self._with_sampling[key] = EvalConfig.model_validate(data) if data else self.rlver_config
        return self._with_sampling[key]

    def agent_fields(self, stated: Mapping[str, Any]) -> dict[str, Any]:
        """What the agent's request bodies carry of the sampling fields, as ``rlver eval`` decides it
        for the same settings and values set: nothing under SAGE's prompt with none set, as SAGE's
        ``call_npc`` sends none; the set values (and the benchmark's reply cap) otherwise."""
        return sampling_fields(self.with_sampling(stated).agent_sampling())

    def requests(self, stated: Mapping[str, Any]) -> dict[str, Any]:
        """What the agent's and the simulated user's bodies carry of the sampling fields, ``"server
        default"`` for each left out: the record ``rlver eval`` writes in its manifest."""
        return requests_record(self.with_sampling(stated))

    @property
    def simulator_spec(self) -> SimulatorSpec:
        return self.rlver_config.simulator

    @property
    def env_config(self) -> EnvConfig:
        """The dialogue's rules and what the agent is shown (rlver's :class:`EnvConfig`)."""
        return self.rlver_config.env


def _rlver_sampling(stated: Mapping[str, Any]) -> dict[str, Any]:
    """verifiers' sampling values as an rlver ``sampling`` block: ``temperature``, ``top_p`` and
    ``max_tokens`` by name, any other key (``reasoning_effort``, a provider's own) passed through."""
    own = {k: v for k, v in stated.items() if k in ("temperature", "top_p", "max_tokens")}
    extra = {k: v for k, v in stated.items() if k not in own}
    return {**own, "extra": extra} if extra else own


class SentientTaskData(vf.TaskData):
    """One profile as a task. The user opens the dialogue, so there is no prompt; ``system_prompt`` is
    the agent's (rlver's for the profile's language, or a file given as ``--env.taskset.system-prompt``)."""

    profile: dict[str, Any]
    """The profile as rlver reads it (``rlver.profiles.schema.Profile``)."""
    profile_index: int
    """Its position in the selected set: with the run seed it seeds the user, as in ``rlver eval``."""


class SentientTask(vf.Task[SentientTaskData, SentientState, vf.TaskConfig]):
    """A task of the taskset; the env plays it (the dialogue, the reward), so it scores nothing itself."""

    @property
    def key(self) -> str:
        return str(self.data.id)


class SentientTaskset(vf.Taskset[SentientTask, SentientTasksetConfig]):
    """The profiles of ``--env.taskset.profiles`` (the first ``limit`` of them), one task each."""

    def load(self) -> Iterable[SentientTask]:
        dialogue = self.config.env_config
        for index, profile in enumerate(self.config.selected_profiles):
            yield SentientTask(task_data(profile, index, dialogue), self.config.task)


def task_data(profile: Profile, index: int, dialogue: EnvConfig) -> SentientTaskData:
    language = dialogue.language or profile.language
    prompt = dialogue.system_prompt or system_prompt(dialogue.think, language, dialogue.agent_prompt)
    return SentientTaskData(
        id=profile.id,
        name=profile.id,
        description=profile.topic or None,
        system_prompt=prompt,
        profile=profile.model_dump(mode="json"),
        profile_index=index,
    )
