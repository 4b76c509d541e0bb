"""``EvalConfig``: everything one benchmark run needs, loadable from YAML with ``--set`` overrides.

Defaults follow the published Sentient Benchmark protocol (start emotion 40, 10 assistant replies
counting from the user's opening line, the 10th never appraised, opening line from the profile, the
plain "high-EQ chat partner" agent prompt: ``env.agent_prompt: neutral``) via
:meth:`rlver.env.dialogue.EnvConfig.evaluation`; the LLM simulator defaults to the ``sage`` protocol. Keys are never stored here, only the *names* of the
environment variables that hold them (``agent.api_key_env``, ``simulator.model.api_key_env``).

Example ``eval.yaml``::

    agent: {kind: openai, base_url: http://localhost:8000/v1, model: my-model, api_key_env: null,
            sampling: {temperature: 0.7, max_tokens: 1024}}
    simulator: {kind: llm, model: {base_url: https://api.deepseek.com/v1, model: deepseek-chat,
                                   api_key_env: DEEPSEEK_API_KEY}}
    profiles: sage
    out: runs/my-model
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlver.config import MAX_COUNT, deep_merge
from rlver.env.dialogue import EnvConfig
from rlver.llm.base import SamplingParams
from rlver.llm.spec import ModelSpec
from rlver.migrate import renamed
from rlver.rules import BENCHMARK_PROFILES, BENCHMARK_TEXT, TRAINING, asks_published_text
from rlver.seeding import Seed
from rlver.simulator.factory import SimulatorSpec
from rlver.simulator.spec import asks_prompt_set

#: The tiny test model writes gibberish; a few tokens a turn keep an offline smoke run fast.
TINY_AGENT_SAMPLING = SamplingParams(temperature=1.0, max_tokens=16)

#: The agent's reply cap when a benchmark run does not set one. SAGE's ``call_npc`` sets none
#: (SAGE/npc_response.py:22 ``call_llm(history)``), so the cap must be one that no released reply would reach: the longest
#: agent reply in the nine released result files is 4,643 characters (o1), far under 8,192 tokens in
#: any tokenizer. ``SamplingParams``' own default (512) would cut about half of some models' replies.
EVAL_AGENT_MAX_TOKENS = 8192


#: What SAGE's ``call_npc`` sends of the sampling fields: nothing (npc_response.py:22 ``call_llm(history)``), so the
#: endpoint's own defaults apply; an endpoint agent given SAGE's prompt and no sampling sends the same.
PUBLISHED_AGENT_SAMPLING = SamplingParams(model_default=True, max_tokens=None)


def _uncapped(sampling: SamplingParams, published: bool = False) -> SamplingParams:
    """``sampling`` with the benchmark's high reply cap when it does not state ``max_tokens`` itself;
    none sent where the model's own defaults are asked for (``model_default``), and nothing at all
    (``published``: SAGE's prompt on an endpoint) where no sampling value was set."""
    if "max_tokens" in sampling.model_fields_set:
        return sampling
    if published and not sampling.model_fields_set:
        return PUBLISHED_AGENT_SAMPLING.model_copy()
    cap = None if sampling.model_default else EVAL_AGENT_MAX_TOKENS
    raised = sampling.model_copy(update={"max_tokens": cap})
    raised.model_fields_set.add("max_tokens")
    return raised


def published_benchmark(data: dict[str, Any]) -> dict[str, Any]:
    """``profiles: sage`` with an LLM simulator: the ``sage-published`` prompts and SAGE's agent
    prompt (``env.agent_prompt: sage-published``), both read from the fetched files, unless the
    config names a protocol or an agent prompt of its own. Other profile sets keep rlver's ``sage``
    protocol (SAGE has no English prompts) and the neutral prompt; so does the offline user."""
    simulator = data.get("simulator")
    if not isinstance(simulator, dict) or not asks_published_text(
        data.get("profiles", BENCHMARK_PROFILES), asks_prompt_set(simulator.get("kind"))
    ):
        return data
    out = dict(data)
    simulator = renamed(simulator, "protocol", "prompts", where="simulator.")  # the older key
    out["simulator"] = simulator
    prompts = simulator.get("prompts")
    if prompts is None:
        out["simulator"] = {**simulator, "prompts": BENCHMARK_TEXT}
    elif isinstance(prompts, dict) and "name" not in prompts:  # options given, the set not named
        out["simulator"] = {**simulator, "prompts": {"name": BENCHMARK_TEXT, **prompts}}
    env = data.get("env")
    if env is None:
        out["env"] = {"agent_prompt": BENCHMARK_TEXT}
    elif isinstance(env, dict) and "agent_prompt" not in env and "system_prompt" not in env:
        out["env"] = {**env, "agent_prompt": BENCHMARK_TEXT}
    return out


class EvalConfig(BaseModel):
    """One benchmark run."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    agent: ModelSpec | None = Field(default=None, description="the model under test")
    agent_tiny: bool = Field(
        default=False,
        description=(
            "Build the tiny local test model (rlver.models.tiny) as the agent: an offline smoke run."
        ),
    )
    sampling: SamplingParams | None = Field(
        default=None,
        description=(
            "Replaces the agent's sampling settings when set (``--agent-temperature``, ``--agent-max-"
            "tokens``)."
        ),
    )
    simulator: SimulatorSpec = Field(
        default_factory=lambda: SimulatorSpec(kind="offline"),
        description=("The simulated user: ``kind`` picks it (``offline`` or ``llm``); its own keys below."),
    )
    profiles: str = Field(default="sage", description="a profile set name (sage, en-test, ...) or a file")
    limit: int | None = Field(default=None, ge=1, le=MAX_COUNT, description="use only the first N profiles")
    n_per_profile: int = Field(
        default=1, ge=1, le=MAX_COUNT, description="dialogues per profile (each scored)"
    )
    dialogue: Literal["benchmark", "training"] = Field(
        default="benchmark",
        description=(
            "``benchmark``: the Sentient Benchmark's dialogue (start 40, 10 replies, the last "
            "unappraised). ``training``: the training dialogue (``EnvConfig.training()``: start 30, 8 "
            "replies, each appraised), so a trained policy can be checked the way training checked it; "
            "keys given in ``env`` still win. The two numbers differ and are not comparable "
            "(docs/benchmark.md)."
        ),
    )
    env: EnvConfig = Field(
        default_factory=EnvConfig.evaluation,
        description=(
            "How each dialogue runs (rules, agent prompt, think mode); keys given win over the "
            "``dialogue``'s."
        ),
    )
    concurrency: int = Field(default=32, ge=1, le=MAX_COUNT, description="simulator calls in flight at once")
    batch_size: int | None = Field(
        default=None,
        ge=1,
        le=MAX_COUNT,
        description=(
            "Dialogues run together (one batched policy call per turn). ``None`` = all at once; smaller "
            "batches bound a local model's memory and let a long run save dialogues batch by batch."
        ),
    )
    seed: Seed = Field(
        default=0,
        description="The run's seed: the agent's and the simulator's per-dialogue seeds are hashed from it.",
    )
    out: str = Field(default="runs/eval", description="output folder (transcript, metrics, report)")
    run_name: str | None = Field(
        default=None,
        description="The run folder's name under ``out`` (default: one made from the time and the agent).",
    )
    report: bool = Field(default=True, description="Write report.html and report.md beside the metrics.")

    @model_validator(mode="before")
    @classmethod
    def _dialogue_env(cls, data: Any) -> Any:
        """``dialogue: training`` starts ``env`` from the training dialogue instead of the benchmark's;
        the benchmark on the published profiles with an LLM user asks SAGE's own questions. The
        older key ``protocol`` reads as ``dialogue`` (rlver.migrate)."""
        data = renamed(data, "protocol", "dialogue", where="")
        if isinstance(data, dict) and data.get("dialogue", "benchmark") == "benchmark":
            return published_benchmark(data)
        if not isinstance(data, dict) or data.get("dialogue") != "training":
            return data
        env = data.get("env")
        if isinstance(env, EnvConfig):
            return data  # a complete environment, built by the caller
        # the training rules with the benchmark's neutral prompt; ``env`` keys given (flat or under
        # ``rules``) change single values of it
        base = EnvConfig(rules=TRAINING).model_dump(mode="json")
        return {**data, "env": deep_merge(base, env or {})}

    @model_validator(mode="after")
    def _agent_given(self) -> EvalConfig:
        if self.agent is None and not self.agent_tiny:
            raise ValueError(
                "no agent: give --agent-base-url/--agent-model, --agent-local PATH or --agent-tiny "
                "(config key `agent`, or `agent_tiny: true`)"
            )
        return self

    @model_validator(mode="after")
    def _model_default_needs_an_endpoint(self) -> EvalConfig:
        """``model_default`` sampling leaves temperature and top_p to the server; a local agent has no
        server, and rlver's local backend reads no ``generation_config``, so it would sample at 1.0
        while the manifest said "model default". Refused instead (docs/protocol.md)."""
        if self.agent_sampling().model_default and (self.agent is None or self.agent.kind != "openai"):
            raise ValueError(
                "--agent-sampling model-default (sampling.model_default) needs an OpenAI-compatible "
                "agent (--agent-base-url/--agent-model): a local or tiny agent has no server to take "
                "the model's own defaults from; give --agent-temperature instead"
            )
        return self

    @model_validator(mode="after")
    def _published_reply_cap(self) -> EvalConfig:
        """An agent whose sampling states no ``max_tokens`` gets :data:`EVAL_AGENT_MAX_TOKENS`.

        Applied to the config itself, so ``config.json``, the manifest's ``agent_spec`` and
        ``agent_sampling`` and the calls all carry the same number.
        """
        published = (
            self.agent is not None
            and self.agent.kind == "openai"
            and self.env.agent_prompt == BENCHMARK_TEXT
            and self.env.system_prompt is None
        )
        if self.agent is not None:
            self.agent.sampling = _uncapped(self.agent.sampling, published and self.sampling is None)
        if self.sampling is not None and self.agent is not None:
            self.sampling = _uncapped(self.sampling)
        return self

    @property
    def out_dir(self) -> Path:
        return Path(self.out).expanduser()

    def agent_sampling(self) -> SamplingParams:
        """The agent's sampling settings (recorded in the manifest)."""
        if self.sampling is not None:
            return self.sampling
        if self.agent is None:
            return TINY_AGENT_SAMPLING
        return self.agent.sampling
