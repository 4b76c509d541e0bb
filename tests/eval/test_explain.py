"""`rlver explain` (issue 36): which settings of a run differ from the published protocol, each with its
docs/protocol.md row; a released SAGE result file is the published protocol itself.

Runs are real: one tiny offline evaluation through the CLI, and manifests written by rlver's own code
(``RunManifest.create`` with a real simulator's ``describe()``) for the runs that follow the protocol.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_rlver
from rlver.env.dialogue import EnvConfig
from rlver.eval.explain import ROWS, explain
from rlver.eval.runner import agent_prompt_record
from rlver.llm.base import SamplingParams
from rlver.manifest import RunManifest
from rlver.simulator.factory import SimulatorSpec, build_simulator

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_MD = ROOT / "docs" / "protocol.md"
RELEASED = ROOT.parent / "shared" / "data" / "sage_released"


def _write_run(folder: Path, manifest: RunManifest) -> Path:
    folder.mkdir(parents=True)
    (folder / "transcript.jsonl").write_text(json.dumps(manifest.to_json()) + "\n", encoding="utf-8")
    return folder


def _as_published(**changes: object) -> RunManifest:
    """A benchmark run's manifest with every setting as published (a DeepSeek-V3 judge, the sage
    prompts with every option off, the neutral prompt, no temperature sent, the 100 SAGE profiles)."""
    env = EnvConfig.evaluation(think=True)
    simulator = build_simulator(
        SimulatorSpec.model_validate({"kind": "llm", "model": {"model": "deepseek-chat"}, "cache": None})
    )
    settings: dict[str, object] = {
        "kind": "eval",
        "env": env,
        "agent_prompt": agent_prompt_record(env),
        "agent_sampling": SamplingParams(model_default=True, max_tokens=8192).model_dump(mode="json"),
        "simulator": simulator.describe(),
        "profiles": "sage",
        "n_profiles": 100,
        "n_per_profile": 1,
    }
    return RunManifest.create(**{**settings, **changes})


def test_every_row_explain_names_is_an_anchor_in_protocol_md() -> None:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    missing = [row for row in ROWS if f'<a id="{row}"></a>' not in text]
    assert not missing, missing


def test_tiny_run_from_30_names_the_start_emotion_with_its_row(tmp_path: Path) -> None:
    done = run_rlver(
        "eval", "--agent-tiny", "--simulator", "offline", "--profiles", "en-test", "--limit", "1",
        "--agent-max-tokens", "8", "--set", "env.rules.start_emotion=30",
        "--set", "env.rules.max_assistant_turns=2", "--no-report", "--out", "R", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = run_rlver("explain", "R", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "differ from the published benchmark protocol" in lines[0]
    start = next(line for line in lines if line.strip().startswith("start emotion:"))
    assert "30 (published: 40)" in start and "docs/protocol.md row start-emotion" in start
    assert any(line.strip().startswith("turn limit: 2 replies") for line in lines)
    assert any(line.strip().startswith("simulator: the offline user") for line in lines)
    assert any("Spearman -0.026" in line for line in lines)  # the measured effect, with its place
    assert not any(line.strip().startswith("think context") for line in lines)  # no think: nothing to say


def test_a_run_as_published_has_no_difference_and_each_change_is_named(tmp_path: Path) -> None:
    same = explain(_write_run(tmp_path / "same", _as_published()))
    assert same.differences == [], same.text()
    assert "follows the published benchmark protocol" in same.text()
    assert [d.setting for d in same.unknown] == ["simulator temperature"]  # SAGE did not record it
    coached = EnvConfig.evaluation(think=True, think_context="full", agent_prompt="coaching")
    changed = _as_published(
        env=coached,
        agent_prompt=agent_prompt_record(coached),
        agent_sampling=SamplingParams(temperature=0.7, max_tokens=512).model_dump(mode="json"),
        profiles="en-test",
    )
    rows = {d.row: d for d in explain(_write_run(tmp_path / "changed", changed)).differences}
    assert set(rows) == {"think-context", "agent-prompt", "agent-sampling", "agent-max-tokens", "profiles"}
    assert rows["agent-prompt"].run == "coaching" and rows["think-context"].published == "visible text only"


def test_sage_options_and_an_old_quote_cut_are_named(tmp_path: Path) -> None:
    described = {**_as_published().simulator, "shared_rules": True, "goodbye_required": True}  # type: ignore[dict-item]
    described.pop("max_quoted_chars")  # written before issue 36: quoted text was cut at 4,000
    found = explain(_write_run(tmp_path / "r", _as_published(simulator=described))).differences
    texts = {d.setting: d.run for d in found}
    assert texts["simulator options"] == "shared_rules, goodbye_required on"
    assert texts["agent reply shown to the simulator"] == "cut at 4000 characters"


def test_a_training_folder_is_compared_with_the_published_training_run(tmp_path: Path) -> None:
    env = EnvConfig.published_training(think=True)
    simulator = build_simulator(
        SimulatorSpec.model_validate({"kind": "llm", "model": {"model": "deepseek-chat"}, "cache": None})
    )
    base = {
        "kind": "train",
        "env": env,
        "agent_sampling": {"temperature": 1.0, "top_p": 1.0, "max_tokens": 5000},
        "simulator": simulator.describe(),
        "profiles": "rlver-train",
    }
    same = explain(_write_run(tmp_path / "same", RunManifest.create(**base)))
    assert same.differences == [] and "published training run" in same.text()
    start_40 = RunManifest.create(**{**base, "env": EnvConfig.published_training(think=True).model_copy(
        update={"rules": env.rules.but(start_emotion=40)})})  # fmt: skip
    (difference,) = explain(_write_run(tmp_path / "r", start_40)).differences
    assert (difference.run, difference.published, difference.row) == ("40", "30", "start-emotion")


def test_a_transcript_without_a_manifest_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text("", encoding="utf-8")
    folder = tmp_path / "run"
    folder.mkdir()
    episode_only = {"type": "episode", "profile_id": "p", "episode_id": "p#0", "messages": []}
    (folder / "transcript.jsonl").write_text(json.dumps(episode_only) + "\n", encoding="utf-8")
    for target in ("run", "missing-folder"):
        out = run_rlver("explain", target, cwd=tmp_path)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), out.stderr


def _published_record() -> dict[str, object]:
    return {
        "id": "p1", "emo_point": 45, "emo_state": "Emotion-B", "player": "a cook", "scene": "work",
        "history": [
            {"role": "user", "content": "hi", "emotion-point": 40},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "ok", "emotion-point": 45,
             "planning": {"content": "c", "TargetCompletion": "t", "activity": "a", "analyse": "f", "change": 5}},
            {"role": "assistant", "content": "bye"},
        ],
    }  # fmt: skip


def test_a_released_result_file_reads_as_the_published_protocol(tmp_path: Path) -> None:
    folder = tmp_path / "gpt-4o-simulator"
    folder.mkdir()
    file = folder / "some-model_result.jsonl"
    file.write_text(json.dumps(_published_record(), ensure_ascii=False) + "\n", encoding="utf-8")
    out = run_rlver("explain", str(file), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "published protocol, simulator gpt-4o" in out.stdout and "agent some-model" in out.stdout


@pytest.mark.skipif(not RELEASED.is_dir(), reason="the released SAGE files are not in ../shared/data")
def test_the_real_released_files_read_as_the_published_protocol() -> None:
    for file in sorted(RELEASED.glob("*/*_result.jsonl"))[:2]:
        simulator = file.parent.name.removesuffix("-simulator")
        assert f"published protocol, simulator {simulator}" in explain(file).text()
