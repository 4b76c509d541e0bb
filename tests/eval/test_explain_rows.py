"""`rlver explain` rows that used to say false things or hide a setting: the guard on malformed answers,
the agent prompt's language, the simulator's prompt language, an undated judge name, the training
simulator, and the think instruction a held-out agent was given.

Manifests are written by rlver's own code (``RunManifest.create``), as in ``test_explain.py``.
"""

from __future__ import annotations

from pathlib import Path

from rlver.env.dialogue import EnvConfig
from rlver.eval.explain import explain
from rlver.eval.runner import agent_prompt_record
from rlver.manifest import RunManifest
from rlver.simulator.llm.protocols.base import PARSE_GUARD
from test_explain import _as_published, _llm_user, _write_run


def _rows(tmp_path: Path, name: str, **changes: object) -> dict[str, list[str]]:
    found = explain(_write_run(tmp_path / name, _as_published(**changes)))
    rows: dict[str, list[str]] = {}
    for d in [*found.differences, *found.unknown]:
        rows.setdefault(d.row, []).append(f"{d.setting}: {d.run} (published: {d.published})")
    return rows


def test_the_default_guard_on_malformed_answers_is_the_published_loop(tmp_path: Path) -> None:
    """The default bound is a guard only: not a difference. A smaller one is named; 0 is SAGE's loop."""
    for name, attempts, named in (("guard", PARSE_GUARD, False), ("none", 0, False), ("two", 2, True)):
        rows = _rows(tmp_path, name, simulator={**_llm_user(), "parse_attempts": attempts})
        assert ("retries" in rows) == named, (attempts, rows)
    rows = _rows(tmp_path, "two-again", simulator={**_llm_user(), "parse_attempts": 2})
    assert rows["retries"] == [
        "simulator answer that does not parse: sent at most 2 times, then the turn fails "
        "(simulator.prompts.parse_attempts) (published: sent again until one parses)"
    ]


def test_the_language_rows_name_only_what_changed_a_prompt(tmp_path: Path) -> None:
    env = EnvConfig.evaluation(agent_prompt="sage-published", language="en")
    found = explain(_write_run(tmp_path / "en", _as_published(env=env)))
    assert not [d for d in found.differences if d.row == "language"], found.text()
    (inert,) = [d for d in found.no_effect if d.setting == "env.language"]
    assert "the same in every language" in inert.published
    # the simulator's prompts in Chinese on the Chinese SAGE profiles: each profile's own
    rlver_own = {**_llm_user(published=False), "prompt_language": "zh"}
    assert "language" not in _rows(tmp_path, "zh", simulator=rlver_own)
    english = {**_llm_user(published=False), "prompt_language": "en"}
    assert _rows(tmp_path, "en-user", simulator=english)["language"] == [
        "simulator prompt language: en for every profile (published: each profile's own (SAGE: Chinese "
        "prompts, Chinese profiles))"
    ]
    # the agent's coaching prompt in English on the Chinese profiles is a change
    coached = EnvConfig.evaluation(agent_prompt="coaching", language="en")
    assert "language" in _rows(tmp_path, "coached", env=coached, agent_prompt=agent_prompt_record(coached))


def test_an_undated_gpt_4o_is_not_the_released_files_judge(tmp_path: Path) -> None:
    rows = _rows(tmp_path, "undated", simulator=_llm_user("gpt-4o"))
    assert rows["simulator"] == [
        "simulator: LLM gpt-4o (an undated name: today's snapshot, not gpt-4o-2024-08-06 behind the "
        "released files) (published: an LLM judge: DeepSeek-V3, or GPT-4o as gpt-4o-2024-08-06)"
    ]
    assert "simulator" not in _rows(tmp_path, "dated", simulator=_llm_user("gpt-4o-2024-08-06"))


def _training(**changes: object) -> RunManifest:
    env = EnvConfig.published_training(think=True, agent_prompt="rlver-published")
    base: dict[str, object] = {
        "kind": "train",
        "env": env,
        "simulator": _llm_user(protocol="rlver-published"),
        "profiles": "rlver-train",
    }
    return RunManifest.create(**{**base, **changes})


def test_the_training_simulator_is_deepseek_v3(tmp_path: Path) -> None:
    same = explain(_write_run(tmp_path / "same", _training()))
    assert not [d for d in same.differences if d.row == "simulator"], same.text()
    gpt = explain(
        _write_run(
            tmp_path / "gpt", _training(simulator=_llm_user("gpt-4o-2024-08-06", protocol="rlver-published"))
        )
    )
    (row,) = [d for d in gpt.differences if d.row == "simulator"]
    assert (row.run, row.published) == (
        "LLM gpt-4o-2024-08-06",
        "DeepSeek-V3 (the published training simulator)",
    )


def test_the_held_out_agents_think_instruction_is_named(tmp_path: Path) -> None:
    held = {
        "profiles": "sage", "protocol": "benchmark", "simulator": "llm", "simulator_protocol": "sage-published",
        "agent_prompt": "sage-published", "think": True, "limit": None, "samples_per_profile": 1,
        "temperature": 1.0, "seed": 0, "every": 0, "at_start": False,
    }  # fmt: skip
    found = explain(_write_run(tmp_path / "think", _training(held_out=held)))
    (row,) = [d for d in found.differences if d.row == "held-out"]
    assert "agent prompt sage-published + rlver's think instruction (rollout.think)" in row.run
    no_think = explain(_write_run(tmp_path / "no-think", _training(held_out={**held, "think": False})))
    (row,) = [d for d in no_think.differences if d.row == "held-out"]
    assert "agent prompt sage-published;" in row.run
