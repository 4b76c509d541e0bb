"""A training run given as the agent takes its think mode and agent prompt from the run's manifest;
a flag that contradicts them wins and is named in one warning.

The end-to-end round trip (a think run trained, then ``rlver eval --agent-local RUN`` with no other
flag: the logged score and every request) is
``tests/train/test_train_eval_dialogue.py::test_the_in_training_figure_equals_rlver_eval_of_the_checkpoint``.
Here a run folder is written as the trainer writes one: ``config.yaml``, ``checkpoints/`` and the
training manifest of its config.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml

from rlver.cli.run_agent import evaluated_as_run, run_agent
from rlver.config import ConfigLayer, load_layers
from rlver.eval.config import EvalConfig
from rlver.train.config import load_train_config
from rlver.train.transcript_writer import training_manifest


def _run(tmp_path: Path, *sets: str, manifest: bool = True) -> Path:
    """A run folder of the ``grpo-think`` preset (``sets`` added), with a checkpoint folder."""
    cfg = load_train_config("grpo-think", list(sets))
    run = tmp_path / "run"
    (run / "checkpoints" / "step_1" / "policy").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")), encoding="utf-8")
    if manifest:
        record = training_manifest(cfg, run, agent={}, sampling={}, simulator={"name": "llm"})
        (run / "transcript.jsonl").write_text(json.dumps(record.to_json()) + "\n", encoding="utf-8")
    return run


def _eval(run: Path, flags: dict[str, object], sets: list[str] | None = None) -> EvalConfig:
    agent = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    layers = [ConfigLayer("flags", {"agent": agent, **flags})]
    cfg = load_layers(EvalConfig, layers, sets or [])
    found = run_agent(run)
    assert found is not None
    return evaluated_as_run(
        found, cfg, lambda base: load_layers(EvalConfig, [base, *layers], sets or []), "--agent-local"
    )


@pytest.mark.parametrize("manifest", [True, False], ids=["manifest", "config-only"])
def test_a_think_run_is_evaluated_thinking_with_its_prompt(tmp_path: Path, manifest: bool) -> None:
    run = _run(tmp_path, manifest=manifest)
    for where in (run, run / "checkpoints" / "step_1" / "policy"):
        found = run_agent(where)
        assert (
            found is not None and found.think is True and found.prompt == {"agent_prompt": "sage-published"}
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing contradicts the run: no warning
        cfg = _eval(
            run, {"simulator": {"kind": "llm", "model": {"model": "s", "base_url": "http://127.0.0.1:9/v1"}}}
        )
    assert cfg.env.think is True and cfg.env.agent_prompt == "sage-published"


def test_a_contradicting_flag_wins_and_is_named_in_one_warning(tmp_path: Path) -> None:
    run = _run(tmp_path)
    sim = {"kind": "llm", "model": {"model": "s", "base_url": "http://127.0.0.1:9/v1"}}
    with pytest.warns(UserWarning) as caught:
        cfg = _eval(run, {"simulator": sim, "env": {"think": False, "agent_prompt": "neutral"}})
    assert cfg.env.think is False and cfg.env.agent_prompt == "neutral"
    (warning,) = caught
    text = str(warning.message)
    assert text.startswith(f"--agent-local {run}: evaluating with think mode off (the run's: on)")
    assert "agent prompt neutral (the run's: sage-published)" in text and "eval/score" in text
    # --set env.think=false contradicts it too
    with pytest.warns(UserWarning, match="think mode off"):
        _eval(run, {"simulator": sim}, ["env.think=false"])


def test_on_other_profiles_only_the_think_mode_is_the_runs(tmp_path: Path) -> None:
    """The held-out prompt was chosen for the held-out profiles and user; elsewhere rlver eval's own
    default prompt applies, with the run's think mode."""
    cfg = _eval(_run(tmp_path), {"profiles": "en-test", "simulator": {"kind": "offline"}})
    assert cfg.env.think is True and cfg.env.agent_prompt == "neutral"


def test_a_model_folder_is_not_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "model").mkdir()
    assert run_agent(tmp_path / "model") is None
    # a model name typed inside a run folder is not that run
    monkeypatch.chdir(_run(tmp_path))
    assert run_agent(Path("smollm2-135m-instruct")) is None


def test_chat_takes_the_runs_think_mode(tmp_path: Path) -> None:
    from rlver.cli.run_agent import local_think

    run = _run(tmp_path)
    assert local_think(run, None) is True and local_think(tmp_path, None) is False
    with pytest.warns(UserWarning, match="think mode off as asked"):
        assert local_think(run, False) is False
