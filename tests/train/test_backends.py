"""The trainer's sampler is a rollout backend from a registry (``rollout.backend``,
``rlver.train.backends``): its own settings are read with its settings class when the config is read;
a backend added at run time trains a step, released before the update and resumed and synced after it;
the sampler is recorded in its engine's own words; the memory guard adds what the backend holds; and
``--trainer verl`` refuses a backend or a backend setting it would not honour."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from helpers import run_rlver
from rlver.errors import ConfigError
from rlver.integrations.verl.config import refuse_unsupported
from rlver.integrations.verl.launch import load_verl_config
from rlver.llm.engine import TokenEngine
from rlver.llm.hf_engine import HFEngine
from rlver.llm.local import LocalChatModel
from rlver.train.backends import BACKENDS
from rlver.train.backends.base import BackendSettings, RolloutBackend
from rlver.train.backends.hf import HFBackend, HFSettings
from rlver.train.config import TrainConfig, load_train_config
from rlver.train.logger import read_metrics
from rlver.train.memory_guard import GIB, check_update_fits
from test_architecture import SRC, rlver_imports
from test_memory_guard import H100, _grpo_think, _model_folder

TINY_STEP = [
    "rollout.batch_size=2",
    "rollout.n_per_profile=2",
    "rollout.rules.max_assistant_turns=2",
    "rollout.max_new_tokens=6",
    "eval.every=0",
    "eval.at_start=false",
    "run.steps=1",
    "run.progress=false",
    "run.tensorboard=false",
]


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names added to :data:`BACKENDS` by a test, removed after it."""
    names: list[str] = []
    yield names
    for name in names:
        BACKENDS.remove(name)


def test_the_default_backend_and_an_unknown_one() -> None:
    r = load_train_config("tiny-offline").rollout
    assert r.backend == "hf" and "hf" in BACKENDS and r.backend_settings == HFSettings()
    known = ", ".join(BACKENDS)
    with pytest.raises(
        ConfigError, match=rf"rollout\.backend.*unknown rollout backend 'vllm'.*known: {known}"
    ):
        load_train_config("tiny-offline", ["rollout.backend=vllm"])


def test_a_backends_own_settings_are_read_with_its_class() -> None:
    on = load_train_config("tiny-offline", ["rollout.backend_settings.compile_decode=true"])
    assert on.rollout.backend_settings == HFSettings(compile_decode=True)
    with pytest.raises(ConfigError, match=r"rollout\.backend_settings\.memory_fraction: unknown key"):
        load_train_config("tiny-offline", ["rollout.backend_settings.memory_fraction=0.5"])
    # config.yaml as a run writes it reloads to the same settings
    again = TrainConfig.model_validate(yaml.safe_load(yaml.safe_dump(on.model_dump(mode="json"))))
    assert again.rollout.backend_settings == on.rollout.backend_settings


def test_the_old_place_of_compile_decode_still_loads() -> None:
    """``rollout.compile_decode`` (before issue 44) is moved by rlver.migrate, named in a warning when
    set; every older config.yaml holds ``false``, which moves silently."""
    with pytest.warns(FutureWarning, match=r"rollout\.backend_settings\.compile_decode"):
        cfg = load_train_config("tiny-offline", ["rollout.compile_decode=true"])
    assert cfg.rollout.backend_settings == HFSettings(compile_decode=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old = load_train_config("tiny-offline", ["rollout.compile_decode=false"])
    assert old.rollout.backend_settings == HFSettings()


class _CountingEngine(HFEngine):
    """The hf engine on the policy, noting each lifecycle call; it writes no ``sampler()`` of its own."""

    calls: list[tuple[str, Any]]

    def release(self) -> None:
        self.calls.append(("release", None))
        super().release()

    def resume(self, tags: Sequence[str] = ("weights", "kv_cache")) -> None:
        self.calls.append(("resume", None))
        super().resume(tags)

    def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        given = list(weights)
        self.calls.append(("update_weights", given))
        super().update_weights(given)


class _CountingSettings(BackendSettings):
    label: str = "counted"


def test_a_backend_added_at_run_time_trains_a_step_in_its_lifecycle(
    tmp_path: Path, registered: list[str]
) -> None:
    torch.set_num_threads(1)
    calls: list[tuple[str, Any]] = []

    class Counting(HFBackend):
        settings_class = _CountingSettings

        def build(self, policy: torch.nn.Module, tokenizer: Any, device: torch.device) -> TokenEngine:
            calls.append(("build", self.settings.label))
            engine = _CountingEngine(policy, tokenizer, device=str(device), name="policy")
            engine.calls = calls
            return engine

    BACKENDS.add("counting-hf", Counting, "the hf sampler, counting its lifecycle")
    registered.append("counting-hf")
    from rlver.train.trainer import Trainer

    overrides = [*TINY_STEP, "rollout.backend=counting-hf", "rollout.backend_settings.label=mine"]
    trainer = Trainer(load_train_config("tiny-offline", overrides), tmp_path)
    assert isinstance(trainer.backend, Counting) and trainer.chat is trainer.backend.chat
    before = {k: v.detach().clone() for k, v in trainer.policy.state_dict().items()}
    trainer.train()
    assert [c[0] for c in calls] == ["build", "release", "resume", "update_weights"] and calls[0][1] == "mine"
    synced = dict(calls[-1][1])  # the policy's weights by state_dict name, as views (nothing copied)
    after = trainer.policy.state_dict()
    assert list(synced) == list(after)
    assert all(synced[k].data_ptr() == after[k].data_ptr() for k in after)
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the update it synced changed weights

    # the sampler's provenance is the engine's: its own class, and whose words describe it
    sampler = json.loads((tmp_path / "sampling.json").read_text())["sampler"]
    assert sampler["engine"] == f"{_CountingEngine.__module__}._CountingEngine"
    assert sampler["described_by"] == "rlver.llm.hf_engine.HFEngine"
    manifest = json.loads((tmp_path / "transcript.jsonl").read_text().splitlines()[0])
    assert manifest["agent"]["rollout_backend"] == "counting-hf"
    assert manifest["agent"]["sampler"]["engine"] == sampler["engine"]
    written = yaml.safe_load((tmp_path / "config.yaml").read_text())["rollout"]
    assert written["backend"] == "counting-hf" and written["backend_settings"] == {"label": "mine"}
    (step,) = read_metrics(tmp_path)
    rollout_s = step["time/rollout_s"]
    for key in ("time/policy_s", "time/simulator_s", "time/policy_idle_s"):
        assert 0.0 <= step[key] <= rollout_s, (key, step[key], rollout_s)
    assert step["time/policy_s"] > 0 and step["time/simulator_s"] > 0


def test_the_hf_backend_states_its_own_sampler(tmp_path: Path) -> None:
    """``hf`` records the engine that sampled, in that engine's own words (no ``described_by``)."""
    from rlver.train.trainer import Trainer

    trainer = Trainer(load_train_config("tiny-offline", TINY_STEP), tmp_path)
    sampler = trainer.backend.sampler()
    assert sampler["engine"] == "rlver.llm.hf_engine.HFEngine" and "described_by" not in sampler
    assert sampler["weights"] == "shared with the trained model" and sampler["generation_config"] == "ignored"
    assert sampler["stop_token_ids"] == trainer.chat.stop_token_ids  # type: ignore[attr-defined]


def test_the_hf_backends_slots_come_from_memory_unless_set() -> None:
    """``model.generation_batch_size`` unset: the engine's slots are sized from the memory free and
    the KV cost of a ``max_length``-token dialogue; set, the setting wins."""
    from rlver.models.tiny import tiny_model_and_tokenizer

    net, tok = tiny_model_and_tokenizer(0)

    def engine(*sets: str) -> HFEngine:
        built = HFBackend(load_train_config("tiny-offline", list(sets)), net, tok, torch.device("cpu")).engine
        assert isinstance(built, HFEngine)
        return built

    plan = engine("model.generation_batch_size=null", "model.max_length=1536").slot_plan
    assert plan.source == "memory" and plan.longest_tokens == 1536, plan
    assert plan.record()["kv_bytes_per_token"] > 0
    fixed = engine("model.generation_batch_size=12")
    assert fixed.slot_plan.source == "set" and fixed.max_batch_size == 12


class _ChatOnly(RolloutBackend[BackendSettings]):
    """A backend written against the old seam: its build returns a chat model, not an engine."""

    def build(self, policy: torch.nn.Module, tokenizer: Any, device: torch.device) -> Any:
        return LocalChatModel(policy, tokenizer, device=str(device))  # type: ignore[arg-type]


def test_a_backend_that_builds_a_chat_model_is_refused_naming_the_seam(
    tmp_path: Path, registered: list[str]
) -> None:
    from rlver.train.trainer import Trainer

    BACKENDS.add("chat-only", _ChatOnly, "builds a chat model")
    registered.append("chat-only")
    with pytest.raises(TypeError, match=r"_ChatOnly\.build returned a LocalChatModel; .*TokenEngine"):
        Trainer(load_train_config("tiny-offline", [*TINY_STEP, "rollout.backend=chat-only"]), tmp_path)


class _Reserving(RolloutBackend[BackendSettings]):
    """An engine that keeps a share of the card through the update (as vLLM's memory fraction does)."""

    @classmethod
    def memory_bytes(
        cls, settings: BackendSettings, config: TrainConfig, arch: dict[str, Any], device_bytes: float
    ) -> float:
        return 0.7 * device_bytes


def test_the_memory_guard_adds_what_the_backend_holds(tmp_path: Path, registered: list[str]) -> None:
    """LoRA GRPO on the 7B shape fits an 80 GB card with ``hf``; with a backend holding 70 % of the
    card through the update it does not, and the refusal names the backend and its share."""
    folder = _model_folder(tmp_path)
    terms = check_update_fits(_grpo_think(folder, "model.lora.enabled=true"), device=H100)
    assert terms is not None and terms["rollout_backend"] == 0.0
    BACKENDS.add("reserving", _Reserving, "holds 70 % of the card")
    registered.append("reserving")
    with pytest.raises(ConfigError) as refused:
        check_update_fits(
            _grpo_think(folder, "model.lora.enabled=true", "rollout.backend=reserving"), device=H100
        )
    assert f"rollout.backend=reserving holds {0.7 * 80:.1f} GiB" in str(refused.value)
    assert "\n" not in str(refused.value) and H100.bytes > 0.7 * 80 * GIB


def test_verl_refuses_a_backend_or_a_backend_setting_it_would_not_honour(
    tmp_path: Path, registered: list[str]
) -> None:
    out = f"verl.out_dir={tmp_path / 'verl'}"
    refuse_unsupported(load_verl_config("tiny-offline", [out]))  # hf at its defaults: verl's own engine
    with pytest.raises(
        ConfigError, match=r"rollout\.backend_settings\.compile_decode=true: .*--trainer verl"
    ):
        refuse_unsupported(
            load_verl_config("tiny-offline", [out, "rollout.backend_settings.compile_decode=true"])
        )
    BACKENDS.add("reserving", _Reserving, "holds 70 % of the card")
    registered.append("reserving")
    with pytest.raises(ConfigError, match=r"rollout\.backend=reserving: --trainer verl samples with its own"):
        refuse_unsupported(load_verl_config("tiny-offline", [out, "rollout.backend=reserving"]))


def test_rlver_train_engine_verl_refuses_in_one_line(tmp_path: Path) -> None:
    proc = run_rlver(
        "train", "--config", "tiny-offline", "--trainer", "verl", "--dry-run", "--out", "run",
        "--set", "rollout.backend_settings.compile_decode=true", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: rollout.backend_settings.compile_decode=true")
    assert not (tmp_path / "run").exists()


def test_only_a_backend_imports_a_sampler() -> None:
    """The trainer and the CLI ask the backend for sampling settings and the sampler's description;
    a sampler module (``rlver.llm.local``, the transformers engine and its decode loop) is imported only
    by a backend."""
    samplers = ("rlver.llm.local", "rlver.llm.decoding", "rlver.llm.hf_engine")
    found = [
        str(edge)
        for folder in ("train", "cli")
        for path in sorted((SRC / folder).rglob("*.py"))
        if "backends" not in path.relative_to(SRC).parts
        for edge in rlver_imports(path)
        if edge.target.startswith(samplers)
    ]
    assert not found, "ask the rollout backend instead:\n" + "\n".join(found)
