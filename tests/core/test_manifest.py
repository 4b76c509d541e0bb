"""Every manifest shape rlver has written reads as one :class:`RunManifest`, and a manifest written
today reads back as itself.

The files in tests/data/manifests are line 1 of real transcripts, cut short (long free-form
``describe()`` blocks trimmed, local paths shortened), except two derived ones: eval_a685346.json,
the first eval writer's shape (eval_c1b2b44.json less what that writer did not yet record), and
eval_9204e5f.json (eval_b839107.json with its env as EnvConfig dumps it since the rules nested). The
small dicts below are the shapes written only by tests, docs and the training harness. Each names the
commit whose writer produced the shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rlver.env.dialogue import EnvConfig
from rlver.env.rewards import RewardSpec
from rlver.errors import InputError
from rlver.manifest import RunManifest
from rlver.rollout.runner import RolloutConfig
from rlver.rules import EVALUATION, PUBLISHED_TRAINING, TRAINING
from rlver.transcripts.audit import AuditOptions, _reward_from_manifest, _rules_from_manifest

DATA = Path(__file__).parents[1] / "data" / "manifests"

#: file -> (commit whose writer produced this shape, what the typed fields must say)
FILES: dict[str, tuple[str, dict[str, Any]]] = {
    # rlver eval, first version (eval/runner.py _manifest): no seeding, prompt or protocol; EnvConfig
    # without think_context, agent_prompt or the emotion-dynamics fields (derived, see above).
    "eval_a685346.json": (
        "a685346",
        {"kind": "eval", "agent_name": "runs/ev1/tiny-agent", "simulator_kind": "offline", "start": 40},
    ),
    # rlver eval after agent_seeding (b1eff31) and agent_prompt + the dynamics fields (c1b2b44); a
    # real run written before b839107.
    "eval_c1b2b44.json": (
        "c1b2b44",
        {"kind": "eval", "agent_name": "runs/ev1/tiny-agent", "simulator_kind": "offline", "start": 40},
    ),
    # rlver eval with the protocol named (b839107 .. a5b922f).
    "eval_b839107.json": (
        "b839107",
        {"kind": "eval", "agent_name": "runs/pb/tiny-agent", "simulator_kind": "offline", "start": 40},
    ),
    # rlver eval once EnvConfig nested its rules (main at 9204e5f, before RunManifest): the b839107
    # file with its env as that version dumps it (derived).
    "eval_9204e5f.json": (
        "9204e5f",
        {"kind": "eval", "agent_name": "runs/pb/tiny-agent", "simulator_kind": "offline", "start": 40},
    ),
    # rlver demo (train/demo.py from a685346, cli/demo.py from 88fd5f3, unchanged to a5b922f): the
    # model as a bare name, no kind, no env. Real runs of a5b922f's demo.
    "demo_before_88fd5f3.json": (
        "88fd5f3",
        {"kind": None, "agent_name": "tiny", "simulator_kind": "offline", "start": None, "stage": "before"},
    ),
    "demo_after_88fd5f3.json": (
        "88fd5f3",
        {"kind": None, "agent_name": "tiny", "simulator_kind": "offline", "start": None, "stage": "after"},
    ),
    # rlver chat --save (cli/chat.py, unchanged from a685346 to a5b922f): ``mode`` instead of
    # ``kind``, no agent. A real file of a5b922f's writer (tests/cli/test_chat.py).
    "chat_a685346.json": (
        "a685346",
        {"kind": "chat", "agent_name": None, "simulator_kind": "sentient", "start": 40},
    ),
}


def _rollout_flat() -> dict[str, Any]:
    """Tests' training transcripts at a685346: RolloutConfig with the reward flat, env beside it."""
    env = {"max_assistant_turns": 8, "appraise_final_reply": True, "start_emotion": 30, "think": False}
    env.update(stop_on_emotion=True, system_prompt=None, language=None, max_reply_chars=8000)
    rollout = {"n_per_profile": 1, "simulator_concurrency": 64, "env": env, "seed": 0}
    rollout.update(reward_mode="mixed", format_penalty=0.1, mixed_weight=0.25)
    return {
        "type": "manifest",
        "rlver_version": "0.1.0",
        "simulator": {"name": "scripted"},
        "rollout": rollout,
    }


def _rollout_nested() -> dict[str, Any]:
    """tests/transcripts/test_audit.py from c1b2b44: ``rollout=RolloutConfig`` only (reward nested, env inside)."""
    config = RolloutConfig(env=EnvConfig.training(), reward=RewardSpec(mode="delta"))
    return {
        "type": "manifest",
        "simulator": {"name": "scripted", "max_change": 6},
        "rollout": config.model_dump(),
    }


def _env_nested_rules() -> dict[str, Any]:
    """Issue 26's EnvConfig: the dialogue's rules nested under ``env.rules``."""
    env = {"rules": PUBLISHED_TRAINING.model_dump(), "think": True, "agent_prompt": "published"}
    return {"type": "manifest", "kind": "eval", "env": env}


def test_every_file_shape_reads_with_its_typed_fields() -> None:
    assert sorted(p.name for p in DATA.glob("*.json")) == sorted(FILES), "a fixture without a test row"
    for name, (_commit, want) in FILES.items():
        m = RunManifest.read(DATA / name)
        assert m.kind == want["kind"], name
        assert m.agent_name == want["agent_name"], name
        assert m.simulator_kind == want["simulator_kind"], name
        assert (m.rules.start_emotion if m.rules else None) == want["start"], name
        assert m.stage == want.get("stage"), name
        assert m.max_change == 10 and m.reward is None, name
        assert RunManifest.read(m.to_json()) == m, name  # today's writer keeps what it read


def test_eval_shapes_keep_sampling_protocol_and_counts() -> None:
    newest = RunManifest.read(DATA / "eval_b839107.json")
    assert newest.agent_max_tokens == 24 and newest.dialogue and newest.dialogue.startswith("benchmark")
    assert newest.rules == EVALUATION.but(max_assistant_turns=newest.rules.max_assistant_turns)  # type: ignore[union-attr]
    assert newest.think is False and newest.expected_dialogues is not None
    oldest = RunManifest.read(DATA / "eval_a685346.json")
    # Fields the first EnvConfig lacked read as that version ran them: the benchmark's dynamics.
    assert oldest.rules is not None and oldest.rules.bound_change and oldest.rules.end_below == 10
    assert oldest.agent_prompt is None and oldest.dialogue is None


def test_training_shapes_read_rules_and_reward() -> None:
    flat = RunManifest.read(_rollout_flat())
    assert flat.rules is not None and flat.rules.start_emotion == 30 and flat.rules.appraise_final_reply
    assert flat.reward == RewardSpec(mode="mixed", format_penalty=0.1, mixed_weight=0.25)
    assert flat.env is not None and flat.env["start_emotion"] == 30
    nested = RunManifest.read(_rollout_nested())
    assert nested.rules == TRAINING and nested.reward == RewardSpec(mode="delta") and nested.max_change == 6
    published = RunManifest.read(_env_nested_rules())
    assert published.rules == PUBLISHED_TRAINING and published.think is True
    # The top-level flat reward keys (the manifest itself carrying them) are read too.
    top = RunManifest.read({"type": "manifest", "reward_mode": "final"})
    assert top.reward == RewardSpec(mode="final") and "reward_mode" not in top.to_json()


def test_what_a_manifest_does_not_say_stays_unknown() -> None:
    think_only = RunManifest.read({"type": "manifest", "kind": "eval", "env": {"think": True}})
    assert think_only.rules is None and think_only.think is True  # tests/eval/test_report.py's shape
    minimal = RunManifest.read({"type": "manifest", "rlver_version": "0.1.0"})
    assert minimal.rules is None and minimal.reward is None and minimal.agent_name is None
    assert minimal.max_change is None and minimal.expected_dialogues is None
    unknown_mode = RunManifest.read({"rollout": {"reward": {"mode": "from-the-future"}}})
    assert unknown_mode.reward is None  # not silently taken as the default mode
    options = _rules_from_manifest(think_only, AuditOptions(check_start=False, check_turns=False))
    assert not options.check_start and not options.check_turns
    assert _reward_from_manifest(minimal) is None


def test_older_and_odd_keys() -> None:
    # the agent under ``policy`` (the transcript docs of a685346), and a published file's stand-in
    m = RunManifest.read({"type": "manifest", "policy": {"name": "p", "backend": "Scripted"}})
    assert m.agent_name == "p" and "policy" not in m.to_json()
    stand_in = RunManifest.read({"source": "published", "file": "x_result.jsonl"})
    assert stand_in.to_json() == {"type": "manifest", "source": "published", "file": "x_result.jsonl"}
    # a value of the wrong type is left out, never a crash; unknown keys are kept as they are
    odd = RunManifest.read({"seed": {"not": "an int"}, "profiles": 3, "future_key": [1, 2], "rules": "x"})
    assert odd.seed is None and odd.profiles is None and odd.rules is None
    assert odd.to_json()["future_key"] == [1, 2]
    # rules without an environment are written on their own
    alone = RunManifest.read({"rules": TRAINING.model_dump()})
    assert alone.to_json()["rules"] == TRAINING.model_dump() and RunManifest.read(alone.to_json()) == alone
    bad_rules = RunManifest.read({"env": {"start_emotion": "forty", "max_assistant_turns": 10}})
    assert bad_rules.rules is None


def test_audit_reads_the_rules_of_each_shape() -> None:
    lenient = AuditOptions(check_start=False, check_turns=False)
    flat = _rules_from_manifest(_rollout_flat(), lenient)
    assert flat.check_start and flat.check_turns and flat.rules == TRAINING
    nested = _rules_from_manifest(_rollout_nested(), lenient)
    assert nested.max_change == 6 and nested.rules.start_emotion == 30
    published = _rules_from_manifest(_env_nested_rules(), lenient)
    assert published.rules == PUBLISHED_TRAINING
    assert _reward_from_manifest(_rollout_flat()) == {
        "mode": "mixed",
        "format_penalty": 0.1,
        "mixed_weight": 0.25,
    }


def test_created_manifest_round_trips_and_drops_secrets(tmp_path: Path) -> None:
    m = RunManifest.create(
        kind="eval",
        run_name="unit",
        agent={"name": "a", "api_key": "sk-secret", "api_key_env": "MY_KEY"},
        env=EnvConfig.evaluation(think=True),
        reward=RewardSpec(mode="delta"),
        profiles="en-test",
        n_profiles=3,
        n_per_profile=2,
        seed=7,
        extra_note={"kept": True},
    )
    record = m.to_json()
    assert "sk-secret" not in json.dumps(record) and record["agent"]["api_key_env"] == "MY_KEY"
    assert record["env"]["rules"] == EVALUATION.model_dump() and "rules" not in record  # written once
    assert m.rules == EVALUATION and record["rlver_version"] and record["created"]
    assert RunManifest.read(record) == m
    assert RunManifest.read(json.loads(json.dumps(record))) == m  # through JSON text too
    file = tmp_path / "transcript.jsonl"
    file.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert RunManifest.read(tmp_path) == m == RunManifest.read(file)  # a run folder, a transcript
    assert m.expected_dialogues == 6 and m.think is True and m.extra_note == {"kept": True}  # type: ignore[attr-defined]


def test_a_file_without_a_manifest_is_named(tmp_path: Path) -> None:
    published = tmp_path / "x_result.jsonl"
    published.write_text('{"id": "p1", "emo_point": 40}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"x_result\.jsonl:1: type: the first record is not an rlver"):
        RunManifest.read(published)
    with pytest.raises(InputError, match="cannot read a manifest"):
        RunManifest.read(tmp_path / "missing.json")


def test_verl_worker_transcripts_start_with_a_train_manifest() -> None:
    """verl's agent loop writes this as line 1 of each worker's transcript of one split."""
    from rlver.integrations.verl.settings import DialogueTask
    from rlver.profiles.sets import load_profile_set
    from rlver.simulator.factory import SimulatorSpec

    task = DialogueTask(
        profile=load_profile_set("en-test")[0],
        simulator=SimulatorSpec(kind="offline"),
        env=EnvConfig.training(),
        reward=RewardSpec(mode="delta", format_penalty=0.1),
        group_size=4,
        seed=3,
    )
    m = RunManifest.read(task.run_manifest("val").to_json())
    assert (m.kind, m.split, m.engine) == ("train", "val", "verl")  # type: ignore[attr-defined]
    assert m.rules == TRAINING and m.reward == RewardSpec(mode="delta", format_penalty=0.1)
    assert m.seed == 3 and m.n_per_profile == 4 and m.simulator_spec and m.simulator_spec["kind"] == "offline"


def test_the_auditor_checks_each_stated_rule_and_refuses_a_bad_one(tmp_path: Path) -> None:
    """A manifest stating only its start still has the start checked; a stated value that is not a
    rule is an error naming the file and the field (as the auditor did before RunManifest)."""
    only_start = RunManifest.read({"kind": "eval", "env": {"start_emotion": 40, "think": False}})
    assert only_start.rules is None and only_start.stated_rules() == {"start_emotion": 40}
    bad = RunManifest.read({"kind": "eval", "env": {"start_emotion": 140, "max_assistant_turns": 10}})
    with pytest.raises(InputError) as err:
        bad.stated_rules(str(tmp_path / "t.jsonl"))
    assert "t.jsonl:1: env.start_emotion" in str(err.value)
