"""Older shapes are upgraded in one module, ``rlver.migrate`` (issue 37), and still read the same.

The one-module check is honest about what it can see: an upgrade announces itself to users with a
``FutureWarning`` (the old key and its new place), is written as a function named for what it does
(``upgrade_*``, ``nest_flat_*``, ``drop_*keys*``), or names a key only old files have (``reward_mode``);
each may appear in ``src/rlver/migrate.py`` only. An upgrade written under another name, with no
warning, on keys that are still current, would slip past it.
The validators that hand a block to it are named ``_read_older_shapes``.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

from rlver.env.dialogue import EnvConfig
from rlver.eval.runner import _READ_NOW
from rlver.migrate import (
    nest_flat_eval_rules,
    nest_flat_reward,
    recorded_max_quoted_chars,
    recorded_think_context,
    upgrade_recorded_setting,
    upgrade_update_keys,
)
from rlver.rules import EVALUATION, TRAINING
from rlver.train.config import TrainConfig, UpdateSettings, load_train_config

SRC = Path(__file__).resolve().parents[2] / "src" / "rlver"
#: Keys that only an older shape has (nothing current spells them), so only the upgrade may name them.
OLD_ONLY_KEYS = {"reward_mode"}
UPGRADE_NAME = re.compile(r"upgrade|nest_flat|flat_keys|foreign|drop_.*keys|protocol_options")


def upgrade_code_outside(root: Path, home: str = "migrate.py") -> list[str]:
    """Functions named as upgrades, and FutureWarnings, in any module but ``home``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        where = str(path.relative_to(root))
        if where == home:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and UPGRADE_NAME.search(node.name):
                found.append(f"{where}:{node.lineno} def {node.name}")
            if isinstance(node, ast.Name) and node.id == "FutureWarning":
                found.append(f"{where}:{node.lineno} FutureWarning")
            if isinstance(node, ast.Constant) and node.value in OLD_ONLY_KEYS:
                found.append(f"{where}:{node.lineno} {node.value!r}")
    return found


def test_one_module_holds_every_upgrade() -> None:
    assert upgrade_code_outside(SRC) == []


def test_the_check_sees_an_upgrade_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "migrate.py").write_text("def upgrade_x(d): warn(FutureWarning)\n")
    (tmp_path / "other.py").write_text(
        "def nest_flat_things(d): ...\ndef _drop_old_keys(d): ...\nwarnings.warn('x', FutureWarning)\n"
        "k = d.pop('reward_mode')\n"
    )
    assert upgrade_code_outside(tmp_path) == [
        "other.py:1 def nest_flat_things",
        "other.py:2 def _drop_old_keys",
        "other.py:3 FutureWarning",
        "other.py:4 'reward_mode'",
    ]


def test_flat_reward_keys_of_older_files_nest() -> None:
    old = {"env": {}, "reward_mode": "mixed", "mixed_weight": 0.3, "seed": 1}
    assert nest_flat_reward(old) == {"env": {}, "seed": 1, "reward": {"mode": "mixed", "mixed_weight": 0.3}}
    new = {"reward": {"mode": "delta"}}
    assert nest_flat_reward(new) is new
    both = {"reward": {"mode": "delta"}, "format_penalty": 0.1}
    assert nest_flat_reward(both) == {"reward": {"mode": "delta", "format_penalty": 0.1}}


def test_old_eval_keys_become_eval_rules() -> None:
    """Every config.yaml before issue 37 wrote ``eval.max_assistant_turns``/``start_emotion`` (mostly
    null): null means the protocol's and goes quietly; a value moves to ``eval.rules`` with a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nest_flat_eval_rules({"max_assistant_turns": None, "start_emotion": None, "seed": 1}) == {
            "seed": 1
        }
    with pytest.warns(
        FutureWarning, match=r"eval\.max_assistant_turns is deprecated: write it as eval\.rules"
    ):
        moved = nest_flat_eval_rules({"max_assistant_turns": 4, "start_emotion": None})
    assert moved == {"rules": {"max_assistant_turns": 4}}


@pytest.mark.parametrize("protocol", ["benchmark", "training"])
def test_an_old_config_yaml_evaluates_the_same(protocol: str) -> None:
    """A run folder's config.yaml with the flat eval keys resumes with the same held-out dialogue."""
    now = load_train_config("tiny-offline", [f"eval.dialogue={protocol}", "eval.rules.max_assistant_turns=3"])
    old = now.model_dump(mode="json")
    old["eval"] = {k: v for k, v in old["eval"].items() if k != "rules"} | {
        "max_assistant_turns": 3,
        "start_emotion": None,
    }
    with pytest.warns(FutureWarning):
        again = TrainConfig.model_validate(old)
    base = EVALUATION if protocol == "benchmark" else now.rollout.rules
    assert again.env_config(evaluation=True).rules == base.but(max_assistant_turns=3)
    assert again == now
    # and the config as written now reloads to itself (its eval.rules states the whole rules)
    assert TrainConfig.model_validate(now.model_dump(mode="json")) == now
    assert now.eval.rules is not None and now.eval.rules != TRAINING


def test_old_update_keys_under_algorithm_move_to_update() -> None:
    """Before issue 44 ``micro_batch_tokens``/``logit_chunk_tokens`` were ``algorithm:`` keys, and every
    config.yaml states them: they move to ``update:``; at their defaults quietly, a value chosen named
    in a warning; an ``algorithm:`` one beats an ``update:`` one (set later, by ``--set``)."""
    defaults = UpdateSettings().model_dump()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = upgrade_update_keys({"algorithm": {"name": "grpo", **defaults}}, defaults)
    assert quiet == {"algorithm": {"name": "grpo"}, "update": defaults}
    with pytest.warns(
        FutureWarning,
        match=r"algorithm\.micro_batch_tokens is deprecated: write it as update\.micro_batch_tokens",
    ):
        moved = upgrade_update_keys(
            {
                "algorithm": {"micro_batch_tokens": 600},
                "update": {"micro_batch_tokens": 9, "logit_chunk_tokens": 64},
            },
            defaults,
        )
    assert moved == {"algorithm": {}, "update": {"micro_batch_tokens": 600, "logit_chunk_tokens": 64}}
    now = {"algorithm": {"name": "grpo"}, "update": {"micro_batch_tokens": 600}}
    assert upgrade_update_keys(now, defaults) is now


def test_an_old_config_yaml_updates_the_same() -> None:
    """A run folder's config.yaml from before ``update:`` (for ``--resume``) loads to the same config."""
    now = load_train_config("smollm2-offline", ["update.micro_batch_tokens=2048"])
    old = now.model_dump(mode="json")
    old["algorithm"] = {**old["algorithm"], **old.pop("update")}
    with pytest.warns(FutureWarning) as warned:
        again = TrainConfig.model_validate(old)
    assert sorted(str(w.message).split(":")[0] for w in warned) == [
        "algorithm.logit_chunk_tokens is deprecated",
        "algorithm.micro_batch_tokens is deprecated",
    ]
    assert again == now and again.update.micro_batch_tokens == 2048


def test_a_recorded_setting_reads_as_this_version_writes_it() -> None:
    """``rlver eval --resume`` compares an older manifest's settings as now (with the runner's readers):
    flat rules nest; without think any think_context is today's; what no reader takes stays as recorded."""
    now = EnvConfig().think_context
    old_env = {"think": False, "think_context": "full", "max_assistant_turns": 3}
    assert upgrade_recorded_setting("env", old_env, _READ_NOW, now) == EnvConfig(
        rules=EnvConfig().rules.but(max_assistant_turns=3)
    ).model_dump(mode="json")
    thinking = {"think": True, "rules": {"max_assistant_turns": 3}}  # no think_context: as recorded
    assert upgrade_recorded_setting("env", thinking, _READ_NOW, now) == thinking
    sampling = upgrade_recorded_setting(
        "agent_sampling", {"temperature": 0.7, "max_tokens": 9}, _READ_NOW, now
    )
    assert sampling["temperature"] == 0.7 and "model_default" in sampling  # written before model_default
    unknown = {"kind": "no-such-kind"}
    assert upgrade_recorded_setting("simulator_spec", unknown, _READ_NOW, now) is unknown
    assert upgrade_recorded_setting("seed", 7, _READ_NOW, now) == 7


def test_what_manifests_before_issue_36_left_unsaid() -> None:
    """``rlver explain`` reads a think_context or a quoted-reply cut a manifest did not record as the
    default of then (``full``, 4,000 characters), and a recorded one as recorded."""
    assert recorded_think_context(None) == recorded_think_context({"think": True}) == "full"
    assert recorded_think_context({"think_context": "visible"}) == "visible"
    assert recorded_max_quoted_chars({}) == 4000
    assert recorded_max_quoted_chars({"max_quoted_chars": 9000}) == 9000


def _future_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, FutureWarning)]


def test_the_words_renamed_in_a_config_read_as_the_new_ones_with_one_line_each() -> None:
    """``eval.protocol``, ``simulator.protocol`` (with a flat option) and the preset ``evaluation``
    of a config written before the glossary: the same config, one deprecation line per old name."""
    now = load_train_config("grpo-nothink", ["eval.dialogue=training", "eval.rules.preset=benchmark"])
    old = now.model_dump(mode="json")
    old["eval"] = {**{k: v for k, v in old["eval"].items() if k != "dialogue"}, "protocol": "training"}
    old["eval"]["rules"] = {"preset": "evaluation"}
    prompts = old["simulator"].pop("prompts")
    old["simulator"] |= {"protocol": prompts["name"], "parse_attempts": prompts["parse_attempts"]}
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        again = TrainConfig.model_validate(old)
    assert again == now
    assert sorted(_future_warnings(record)) == [
        "eval.protocol is deprecated: write it as eval.dialogue",
        "rules preset 'evaluation' is deprecated: write it as 'benchmark'",
        "simulator.protocol is deprecated: write it as simulator.prompts",
    ]


def test_a_manifest_in_the_old_words_reads_in_the_new_ones() -> None:
    """A manifest written before the renames (``protocol`` twice, ``held_out.simulator_protocol``, a
    model's ``backend``) reads with today's fields, quietly: the file is not the user's to fix."""
    from rlver.manifest import RunManifest

    old = {
        "type": "manifest",
        "kind": "train",
        "protocol": "benchmark protocol: 10 replies from 40",
        "agent": {"name": "p", "backend": "LocalChatModel", "rollout_backend": "hf"},
        "simulator": {
            "name": "sentient",
            "protocol": "sage",
            "model": {"name": "m", "backend": "OpenAIChatModel"},
        },
        "held_out": {
            "protocol": "training protocol: 8 replies from 30",
            "simulator_protocol": "sage-published",
        },
    }
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        read = RunManifest.read(old)
    assert _future_warnings(record) == []
    assert read.dialogue == "benchmark protocol: 10 replies from 40"
    assert read.agent == {"name": "p", "class": "LocalChatModel", "rollout_backend": "hf"}
    assert read.simulator is not None and read.simulator["prompts"] == "sage"
    assert read.simulator["model"] == {"name": "m", "class": "OpenAIChatModel"}
    assert read.held_out == {
        "dialogue": "training protocol: 8 replies from 30",
        "simulator_prompts": "sage-published",
    }


def test_a_removed_algorithm_key_is_ignored_with_one_line_naming_why() -> None:
    """A run folder written while CTC-GRPO had ``ctc_scale_by_std`` still resumes: the key is dropped
    with one FutureWarning that says it was removed and why, and the settings equal a config
    without it."""
    base = {"name": "ctc_grpo", "ctc_turn_weight": 2.0}
    group = {"rollout": {"n_per_profile": 2, "reward": {"mode": "delta"}}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = TrainConfig.model_validate({"algorithm": {**base, "ctc_scale_by_std": True}, **group})
    lines = [str(w.message) for w in caught if "ctc_scale_by_std" in str(w.message)]
    assert len(lines) == 1 and "removed" in lines[0], lines
    assert old.algorithm == TrainConfig.model_validate({"algorithm": base, **group}).algorithm
