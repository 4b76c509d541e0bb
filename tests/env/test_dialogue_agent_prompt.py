"""The policy's prompt as a setting (issue 24): ``rollout.agent_prompt`` takes neutral, coaching,
published (our words), sage-published / rlver-published (the fetched text) or a file; the four
published presets use the published training prompt itself (issue 41) with the published per-turn
cap; ``rlver config show`` names the prompt and its SHA-256."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlver.env.dialogue import EnvConfig
from rlver.env.thinking import AGENT_PROMPT_NAMES, system_prompt
from rlver.errors import ConfigError
from rlver.eval.config import EvalConfig
from rlver.train.config import load_train_config

PUBLISHED_PRESETS = ("ppo-think", "ppo-nothink", "grpo-think", "grpo-nothink")


@pytest.mark.parametrize("preset", PUBLISHED_PRESETS)
def test_published_presets_use_the_published_prompt_and_per_turn_cap(preset: str) -> None:
    cfg = load_train_config(preset)
    assert cfg.rollout.agent_prompt == "rlver-published"
    assert cfg.simulator.prompts.name == "rlver-published"  # type: ignore[attr-defined]
    assert cfg.rollout.max_new_tokens == 5000  # train_rlver.sh:46 per_turn_length=5000
    env = cfg.env_config()
    assert env.agent_prompt == "rlver-published" and env.system_prompt is None
    assert env.think == preset.endswith("-think")


def test_published_prompt_has_four_versions_and_only_think_asks_for_tags() -> None:
    texts = {
        (lang, think): system_prompt(think, lang, "published") for lang in ("en", "zh") for think in (0, 1)
    }
    assert len(set(texts.values())) == 4
    for (_lang, think), text in texts.items():
        assert ("<think>" in text) == bool(think)
    # different from the other built-in prompts
    for other in ("neutral", "coaching"):
        assert system_prompt(False, "en", other) != texts[("en", 0)]
    assert AGENT_PROMPT_NAMES == ("neutral", "coaching", "published", "sage-published", "rlver-published")


def test_the_fetched_training_prompts_are_the_published_files(shared_data: Path) -> None:
    """``rlver-published`` is ``system_prompt.py``'s text: think and no-think, nothing added."""
    import ast

    source = (shared_data / "published_code" / "rlver" / "system_prompt.py").read_text(encoding="utf-8")
    published = {
        node.targets[0].id: node.value.value  # type: ignore[attr-defined]
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
    }
    assert system_prompt(True, "zh", "rlver-published") == published["system_prompt_train_think"]
    assert system_prompt(False, "en", "rlver-published") == published["system_prompt_train_unthink"]


def test_set_rollout_agent_prompt_names_a_prompt_or_a_file(tmp_path: Path) -> None:
    cfg = load_train_config("tiny-offline", ["rollout.agent_prompt=published"])
    assert cfg.env_config().agent_prompt == "published"
    prompt = tmp_path / "mine.txt"
    prompt.write_text("Talk like a good friend.", encoding="utf-8")
    cfg = load_train_config("tiny-offline", [f"rollout.agent_prompt={prompt}"])
    assert cfg.env_config().system_prompt == "Talk like a good friend."
    with pytest.raises(ConfigError, match=r"rollout\.agent_prompt.*neither neutral, coaching, published"):
        load_train_config("tiny-offline", ["rollout.agent_prompt=publish"])


def test_eval_takes_the_published_prompt_too() -> None:
    cfg = EvalConfig.model_validate({"agent_tiny": True, "env": {"agent_prompt": "published"}})
    assert cfg.env.agent_prompt == "published"
    assert EnvConfig(agent_prompt="published", think=True).agent_prompt == "published"


def test_config_show_prints_the_cap_and_the_prompt_with_its_sha256() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "config", "show", "grpo-think"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "max_new_tokens: 5000" in proc.stdout and "agent_prompt: rlver-published" in proc.stdout
    # the fetched text is named by its file's pinned checksum (config show needs no download)
    assert (
        "# policy prompt: rlver-published (think); from the fetched rlver/system_prompt.py, sha256 fba61c09c63880ee"
        in proc.stdout
    )
    mine = subprocess.run(
        [sys.executable, "-m", "rlver", "config", "show", "grpo-think", "--set", "rollout.agent_prompt=published"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    digest = hashlib.sha256(system_prompt(True, "zh", "published").encode()).hexdigest()[:16]
    assert "# policy prompt: published (think); sha256 en " in mine.stdout and f"zh {digest}" in mine.stdout
