"""The dialogue's rules have one home (issue 26): ``rlver.rules.DialogueRules``.

The environment (``EnvConfig.rules``), a training config (``rollout.rules``) and the auditor
(``AuditOptions.rules``) hold one; none declares the rules again. Files written before the rules nested
(flat ``max_assistant_turns`` keys) still load, a training config's with a warning naming the new place.
"""

from __future__ import annotations

import ast
import functools
import warnings
from pathlib import Path

import pytest

from rlver.config import load_config
from rlver.env.dialogue import EnvConfig
from rlver.errors import ConfigError
from rlver.rules import EVALUATION, PUBLISHED_TRAINING, TRAINING, DialogueRules, protocol_name, rule_range
from rlver.train.config import RolloutSettings, TrainConfig, load_train_config

SRC = Path(__file__).resolve().parents[2] / "src" / "rlver"
#: Every rule but ``start_emotion`` (an episode records where it started); the turn limit joined the list
#: when the in-training evaluation's flat ``eval.max_assistant_turns`` became ``eval.rules`` (issue 37).
RULE_ONLY_FIELDS = (
    "end_below",
    "turn_limit_rule",
    "bound_change",
    "end_at_high",
    "max_assistant_turns",
    "appraise_final_reply",
    "stop_on_emotion",
    "floor_emotion",
    "shared_opening",
)


@functools.cache  # the source does not change during a run: parse it once for every check
def _trees() -> list[tuple[str, ast.Module]]:
    return [
        (str(p.relative_to(SRC)), ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(SRC.rglob("*.py"))
    ]


def _classes_declaring(field: str, trees: list[tuple[str, ast.Module]]) -> list[str]:
    """Classes with a class-level annotated field of this name (pydantic or dataclass)."""
    found = []
    for where, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if (
                        isinstance(stmt, ast.AnnAssign)
                        and isinstance(stmt.target, ast.Name)
                        and stmt.target.id == field
                    ):
                        found.append(f"{where}:{node.name}")
    return found


def _named_literals(trees: list[tuple[str, ast.Module]], word: str, values: tuple[int, ...]) -> list[str]:
    """Every int in ``values`` given to a name containing ``word``: assignments, annotated fields (also
    as ``Field(default=...)``), parameter defaults and keyword arguments."""

    def is_rule_value(name: str, value: ast.expr | None) -> bool:
        if word not in name.lower() or value is None:
            return False
        if isinstance(value, ast.Call):  # Field(default=40, ...)
            value = next((k.value for k in value.keywords if k.arg == "default"), None)
        return isinstance(value, ast.Constant) and type(value.value) is int and value.value in values

    found = []
    for where, tree in trees:
        for node in ast.walk(tree):
            pairs: list[tuple[str, ast.expr | None]] = []
            if isinstance(node, ast.Assign):
                pairs = [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                pairs = [(node.target.id, node.value)]
            elif isinstance(node, ast.keyword) and node.arg:
                pairs = [(node.arg, node.value)]
            elif isinstance(node, ast.arguments):
                positional = [*node.posonlyargs, *node.args]
                with_default = positional[len(positional) - len(node.defaults) :]
                pairs = [(a.arg, d) for a, d in zip(with_default, node.defaults, strict=True)]
                pairs += [(a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True)]
            found += [f"{where}:{name}" for name, value in pairs if is_rule_value(name, value)]
    return found


def _start_literals(trees: list[tuple[str, ast.Module]]) -> list[str]:
    """Every 40 or 30 given to a name about a start."""
    return _named_literals(trees, "start", (40, 30))


def _turn_limit_literals(trees: list[tuple[str, ast.Module]]) -> list[str]:
    """Every number given to a name about the turn limit (``max_assistant_turns=10`` as a default)."""
    return _named_literals(trees, "max_assistant_turns", tuple(range(1, 201)))


@pytest.mark.parametrize("field", RULE_ONLY_FIELDS)
def test_each_rule_is_a_field_of_one_class(field: str) -> None:
    assert _classes_declaring(field, _trees()) == ["rules.py:DialogueRules"]


def test_the_start_emotions_are_written_once_each() -> None:
    assert sorted(_start_literals(_trees())) == ["rules.py:EVALUATION_START", "rules.py:TRAINING_START"]


def test_the_turn_limits_are_written_in_the_protocol_only() -> None:
    """The benchmark's 10 (the field's default) and training's 8; ``fidelity/calibrate.recorded_end``
    once restated the 10 as its own default, and now reads ``EVALUATION.max_assistant_turns``."""
    assert sorted(_turn_limit_literals(_trees())) == [
        "rules.py:max_assistant_turns",
        "rules.py:max_assistant_turns",
    ]


def test_audit_overrides_take_the_rules_bounds() -> None:
    """``rlver audit --start/--max-assistant-turns`` accept exactly what ``DialogueRules`` accepts."""
    from rlver.errors import InputError
    from rlver.transcripts.audit import _OVERRIDE_RANGES, _check_overrides

    for rule in ("start_emotion", "max_assistant_turns"):
        low, high = rule_range(rule)
        assert _OVERRIDE_RANGES[rule] == (low, high)
        DialogueRules.model_validate({rule: high})  # the rules take the top of the range
        _check_overrides({rule: high})
        with pytest.raises(InputError, match=f"{rule}.*expected an integer from {low} to {high}"):
            _check_overrides({rule: (high or 0) + 1})
        with pytest.raises(ValueError):
            DialogueRules.model_validate({rule: (high or 0) + 1})


def _rules_holders(trees: list[tuple[str, ast.Module]]) -> list[str]:
    """Class fields annotated with ``DialogueRules`` (optional or not): the places that hold the rules."""
    found = []
    for where, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found += [
                    f"{where}:{node.name}.{stmt.target.id}"
                    for stmt in node.body
                    if isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and "DialogueRules" in ast.unparse(stmt.annotation)
                ]
    return found


def test_the_rules_are_held_as_one_object_each() -> None:
    """Training, the in-training evaluation, the environment, the emotion rules, the auditor and the
    manifest hold a ``DialogueRules``; ``rlver eval`` holds one in its ``env``. None spells a rule flat."""
    assert sorted(_rules_holders(_trees())) == [
        "env/dialogue.py:EnvConfig.rules",
        "manifest.py:RunManifest.rules",
        "simulator/emotion.py:EmotionRules.dialogue",
        "train/config.py:EvalSettings.rules",
        "train/config.py:RolloutSettings.rules",
        "transcripts/audit.py:AuditOptions.rules",
    ]


def test_the_counts_see_a_second_declaration() -> None:
    """The two checks above find what they look for (so they can fail)."""
    code = """
class Old(BaseModel):
    end_below: int = 10
    start_emotion: int = Field(default=40, ge=0)
def run(x, start_emotion: int = 40, *, train_start=30): ...
EVAL_START = 40
g(start=30, other=40)
LIMIT = 30
"""
    trees = [("x.py", ast.parse(code))]
    assert _classes_declaring("end_below", trees) == ["x.py:Old"]
    limit = "def recorded_end(e, max_assistant_turns: int = 10): ...\nrun(max_assistant_turns=8)\n"
    assert _turn_limit_literals([("y.py", ast.parse(limit))]) == ["y.py:max_assistant_turns"] * 2
    assert sorted(_start_literals(trees)) == sorted(
        ["x.py:start_emotion", "x.py:start_emotion", "x.py:train_start", "x.py:EVAL_START", "x.py:start"]
    )


def test_flat_env_config_keys_nest_into_rules() -> None:
    env = EnvConfig(max_assistant_turns=3, start_emotion=30, think=True)
    assert env.rules == EVALUATION.but(max_assistant_turns=3, start_emotion=30) and env.think
    # an ``env:`` block of an older file, and one written now, give the same environment
    old = {"max_assistant_turns": 2, "appraise_final_reply": True, "agent_prompt": "neutral"}
    assert EnvConfig.model_validate(old) == EnvConfig(
        rules={"max_assistant_turns": 2, "appraise_final_reply": True}
    )
    assert EnvConfig.model_validate(EnvConfig.training().model_dump(mode="json")) == EnvConfig.training()
    with pytest.raises(ValueError, match="max_assistant_turns"):
        EnvConfig(max_assistant_turns=0)


def test_env_defaults_are_the_benchmarks_and_training_coaches() -> None:
    assert EnvConfig() == EnvConfig.evaluation()
    assert (EnvConfig().agent_prompt, EnvConfig.training().agent_prompt) == ("neutral", "coaching")
    assert EnvConfig.training().rules == TRAINING
    assert EnvConfig.published_training().rules == PUBLISHED_TRAINING
    assert EnvConfig.published_training().agent_prompt == "published"


def test_flat_rollout_keys_still_load_with_a_warning() -> None:
    with pytest.warns(FutureWarning) as caught:
        old = RolloutSettings.model_validate({"max_assistant_turns": 3, "end_below": 1})
    assert sorted(str(w.message) for w in caught) == [
        "rollout.end_below is deprecated: write it as rollout.rules.end_below",
        "rollout.max_assistant_turns is deprecated: write it as rollout.rules.max_assistant_turns",
    ]
    assert old.rules == TRAINING.but(max_assistant_turns=3, end_below=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the nested form warns about nothing
        new = RolloutSettings.model_validate({"rules": {"max_assistant_turns": 3, "end_below": 1}})
    assert new == old


def test_an_old_published_config_yaml_loads_as_the_preset(tmp_path: Path) -> None:
    """A run folder's config.yaml from before the nesting (``--resume`` reads it) runs the same dialogue."""
    now = load_train_config("ppo-think")
    old = now.model_dump(mode="json")
    old["rollout"] = {k: v for k, v in old["rollout"].items() if k != "rules"} | {
        "max_assistant_turns": 8,
        "appraise_final_reply": True,
        "start_emotion": 30,
        "bound_change": False,
        "floor_emotion": False,
        "end_at_high": False,
        "end_below": 1,
        "turn_limit_rule": "after_user_exceeds",
        "shared_opening": True,
    }
    with pytest.warns(FutureWarning):
        again = TrainConfig.model_validate(old)
    assert again == now and again.env_config() == EnvConfig.published_training(
        think=True, agent_prompt="rlver-published"
    )


def test_rules_take_a_preset_and_changes() -> None:
    cfg = load_train_config("tiny-offline", ["rollout.rules.preset=published_training"])
    assert cfg.rollout.rules == PUBLISHED_TRAINING.but(max_assistant_turns=2)
    assert DialogueRules.model_validate({"preset": "benchmark", "start_emotion": 30}).start_emotion == 30
    with pytest.raises(ConfigError, match="preset 'nope' is not one of benchmark, training"):
        load_train_config("tiny-offline", ["rollout.rules.preset=nope"])


def test_eval_config_keeps_the_neutral_prompt_and_training_rules() -> None:
    from rlver.eval.config import EvalConfig

    plain = load_config(EvalConfig, None, ["agent_tiny=true", "env.think=true"])
    assert plain.env.agent_prompt == "neutral" and plain.env.rules == EVALUATION
    trained = load_config(
        EvalConfig, None, ["agent_tiny=true", "dialogue=training", "env.rules.max_assistant_turns=2"]
    )
    assert trained.env.rules == TRAINING.but(max_assistant_turns=2)
    assert trained.env.agent_prompt == "neutral"


def test_protocol_names() -> None:
    assert protocol_name(EVALUATION.but(max_assistant_turns=3)) == "benchmark"
    assert protocol_name(TRAINING.but(max_assistant_turns=2)) == "training"
    assert protocol_name(PUBLISHED_TRAINING) == "training"
    assert protocol_name(EVALUATION.but(start_emotion=50)) == "custom"


def test_an_old_eval_manifest_env_resumes() -> None:
    from rlver.eval.runner import _check_resume

    new = {"env": EnvConfig().model_dump(mode="json")}
    flat = {k: v for k, v in new["env"].items() if k != "rules"} | EVALUATION.model_dump(mode="json")
    assert _check_resume({"env": flat}, new) == []
    assert _check_resume({"env": flat | {"max_assistant_turns": 3}}, new) == ["env"]
