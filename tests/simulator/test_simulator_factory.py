"""Building simulators from specs: offline, LLM over a real local server, the replay cache."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from helpers import TEST_PROFILES, add_for_test
from rlver.errors import ConfigError, InputError
from rlver.llm.base import SamplingParams
from rlver.llm.cache import CachedChatModel
from rlver.llm.spec import ModelSpec
from rlver.simulator.factory import (
    KINDS,
    SimulatorKind,
    SimulatorSpec,
    build_simulator,
    kind_names,
    kinds,
    simulator_kind,
)
from rlver.simulator.llm.spec import LLMUserSpec, simulator_sampling
from rlver.simulator.llm.user import DEFAULT_SAMPLING, LLMSimulator
from rlver.simulator.offline.spec import OfflineSpec
from rlver.simulator.offline.user import OfflineSimulator
from rlver.testing.openai_server import FakeChatServer

PROFILE = TEST_PROFILES["f-1"]


def responder(request: dict[str, Any]) -> str:
    return json.dumps(
        {
            "understanding": "u",
            "goal_fit": "g",
            "inner_reaction": "i",
            "feeling": "f",
            "change": 3,
            **{k: k for k in ("stance", "aim", "tone", "draft", "rewrite")},  # the sage plan
            "reply": "hm.",
            "end_dialogue": False,
        }
    )


def one_turn(sim: Any) -> int:
    async def go() -> int:
        user = sim.start(PROFILE, start_emotion=40)
        try:
            await user.open()
            turn = await user.respond("That sounds painful.")
        finally:
            if isinstance(sim, LLMSimulator):
                await sim.model.aclose()
        assert turn.appraisal is not None
        return turn.appraisal.emotion_after

    return asyncio.run(go())


def test_offline_by_default() -> None:
    assert type(SimulatorSpec()) is OfflineSpec and type(SimulatorSpec.model_validate({})) is OfflineSpec
    sim = build_simulator(SimulatorSpec())
    assert isinstance(sim, OfflineSimulator) and sim.rules.max_change == 10
    sim = build_simulator(SimulatorSpec(seed=4, difficulty="hard", max_change=6))
    assert (
        sim.describe()["seed"] == 4 and sim.describe()["difficulty"] == "hard" and sim.rules.max_change == 6
    )


def test_llm_simulator_over_http(fake_server: FakeChatServer) -> None:
    fake_server.responder = responder
    spec = SimulatorSpec(
        kind="llm",
        model=ModelSpec(model="judge", base_url=fake_server.url, api_key_env=None),
        cache=None,
    )
    sim = build_simulator(spec)
    assert isinstance(sim, LLMSimulator) and not isinstance(sim.model, CachedChatModel)
    assert sim.sampling == DEFAULT_SAMPLING
    assert one_turn(sim) == 43
    assert fake_server.requests[0]["temperature"] == DEFAULT_SAMPLING.temperature


def test_greedy_simulator_is_cached_and_replays(fake_server: FakeChatServer, tmp_path: Path) -> None:
    fake_server.responder = responder
    spec = SimulatorSpec(
        kind="llm",
        model=ModelSpec(model="judge", base_url=fake_server.url, api_key_env=None),
        sampling=SamplingParams(temperature=0.0, max_tokens=256),
        cache=str(tmp_path / "sim.sqlite"),
    )
    first = build_simulator(spec)
    assert isinstance(first, LLMSimulator) and isinstance(first.model, CachedChatModel)
    assert one_turn(first) == 43
    served = fake_server.served
    assert one_turn(build_simulator(spec)) == 43
    assert fake_server.served == served  # the second run was answered from the cache


def test_model_spec_sampling_is_used_when_set() -> None:
    spec = SimulatorSpec(
        kind="llm",
        model=ModelSpec(
            model="m", base_url="http://127.0.0.1:9/v1", sampling=SamplingParams(temperature=0.2)
        ),
    )
    assert simulator_sampling(spec).temperature == 0.2
    assert (
        simulator_sampling(
            SimulatorSpec(kind="llm", model=ModelSpec(model="m", base_url="http://127.0.0.1:9/v1"))
        )
        == DEFAULT_SAMPLING
    )


def test_spec_errors_are_clear() -> None:
    with pytest.raises(ValidationError, match="needs a 'model'"):
        SimulatorSpec(kind="llm")
    with pytest.raises(ValidationError):
        SimulatorSpec(kind="offline", max_change=-1)
    with pytest.raises(ValidationError):
        SimulatorSpec.model_validate({"kind": "offline", "temprature": 0})
    with pytest.raises(ConfigError, match="unknown behaviour mode"):
        build_simulator(SimulatorSpec(behaviour="no-such-mode"))


def test_embed_without_the_extra_is_a_config_error() -> None:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match=r"\.\[embed\]"):
            build_simulator(SimulatorSpec(embed=True))
    else:  # pragma: no cover
        pytest.skip("the [embed] extra is installed")


# -- the kinds registry -------------------------------------------------------------------------------


def test_kinds_are_declared_once_and_read_by_the_spec_and_the_cli() -> None:
    every = kind_names(from_spec=False)
    assert every[:3] == ("replay", "offline", "llm")  # the built-ins; a kind added later follows them
    assert kind_names() == tuple(n for n in every if simulator_kind(n).spec is not None)
    assert "replay" not in kind_names()
    schema = SimulatorSpec.model_json_schema()
    assert schema["discriminator"] == {"propertyName": "kind"}
    assert [alt["properties"]["kind"]["const"] for alt in schema["oneOf"]] == list(kind_names())
    with pytest.raises(
        ValidationError, match=f"unknown simulator kind 'magic'; known: {', '.join(kind_names())}"
    ):
        SimulatorSpec(kind="magic")
    # replay needs recorded dialogues: only `rlver calibrate` builds it, and the error says so
    with pytest.raises(ValidationError, match="rlver calibrate --simulator replay"):
        SimulatorSpec(kind="replay")
    with pytest.raises(
        InputError, match=f"--simulator: unknown simulator kind 'x'; known: {', '.join(every)}"
    ):
        kinds(from_spec=False).check_flag("x", "--simulator")
    assert simulator_kind("llm").needs_model and not simulator_kind("offline").needs_model
    for name in KINDS:  # a kind's own options are fields of its own spec, of no other kind's
        kind = simulator_kind(name)
        assert kind.spec is None or set(kind.options) <= set(kind.spec.model_fields), kind.name
    assert set(simulator_kind("offline").options) == {"embed", "learned"}
    assert {"model", "sampling", "cache", "prompts"} == set(simulator_kind("llm").options)
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "calibrate", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
        check=True,
    )
    shown = " ".join(proc.stdout.split())  # help text is wrapped to the terminal
    for kind in KINDS.entries():
        assert kind.description in shown


class GrumpySpec(SimulatorSpec):
    """A new kind's own spec, as its file would declare it (one option only it reads)."""

    kind: Literal["grumpy"] = "grumpy"
    grumpiness: int = 1


def test_a_new_kind_is_one_file_and_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the factory docstring promises: a spec and a builder (one file) plus a KINDS entry make a
    kind usable from a config block, with its own option, in the schema and the CLI help."""

    def build_grumpy(spec: SimulatorSpec, model: Any) -> OfflineSimulator:
        assert isinstance(spec, GrumpySpec)
        return OfflineSimulator(seed=spec.seed + spec.grumpiness, difficulty="hard")

    add_for_test(monkeypatch, KINDS, SimulatorKind("grumpy", "a hard offline user", build_grumpy, GrumpySpec))
    assert "grumpy" in kind_names() and "a hard offline user" in kinds().help()
    spec = SimulatorSpec.model_validate({"kind": "grumpy", "seed": 3, "grumpiness": 2})
    assert isinstance(spec, GrumpySpec) and simulator_kind("grumpy").options == ("grumpiness",)
    sim = build_simulator(spec)
    assert isinstance(sim, OfflineSimulator) and sim.describe()["difficulty"] == "hard"
    assert sim.describe()["seed"] == 5
    # another kind's option is ignored (as flat blocks were read); the kind's own are still checked
    assert "grumpiness" not in SimulatorSpec.model_validate({"kind": "offline", "grumpiness": 2}).model_dump()
    with pytest.raises(ValidationError, match="grumpiness"):
        SimulatorSpec.model_validate({"kind": "grumpy", "grumpiness": "very"})
    assert "GrumpySpec" in str(SimulatorSpec.model_json_schema())


def test_old_flat_blocks_still_load() -> None:
    """Configs and run manifests written before the specs were split: one flat block, every option."""
    flat = {
        "kind": "llm",
        "model": {"model": "m", "base_url": "http://127.0.0.1:9/v1"},
        "embed": False,  # the offline user's options: accepted and ignored, as the flat spec did
        "learned": True,
        "protocol": "sage",
        "magnitude_rubric": True,
        "show_traits": True,
        "cache": None,
    }
    spec = SimulatorSpec.model_validate(flat)
    assert isinstance(spec, LLMUserSpec) and spec.cache is None
    assert spec.prompts.name == "sage" and spec.prompts.shown()["magnitude_rubric"]
    assert spec.prompts.shown()["show_traits"] and not spec.prompts.shown()["tier_bands"]
    # a flat rlver-v1 dump carried the sage options too (all false): they are ignored
    v1 = SimulatorSpec.model_validate(
        {**flat, "protocol": "rlver-v1", "show_traits": False, "magnitude_rubric": False}
    )
    assert v1.model_dump()["prompts"] == {"name": "rlver-v1"}
    # one set under a protocol that does not read it would do nothing: refused, naming its owner
    with pytest.raises(ValidationError, match="show_traits=True is a setting of prompt set sage"):
        SimulatorSpec.model_validate({**flat, "protocol": "rlver-v1", "magnitude_rubric": False})
    offline = SimulatorSpec.model_validate({**flat, "kind": "offline", "model": None, "embed": False})
    assert isinstance(offline, OfflineSpec) and offline.learned
    # the current shape round-trips
    assert SimulatorSpec.model_validate(spec.model_dump()) == spec
    with pytest.raises(ValidationError, match="temprature"):  # a key no kind knows is still an error
        SimulatorSpec.model_validate({**flat, "temprature": 0})
