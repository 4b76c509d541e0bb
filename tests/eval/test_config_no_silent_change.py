"""No setting changes another one silently, and none is dropped where it cannot apply (issue 48).

* a partial ``simulator.sampling`` block is merged onto the simulator's defaults: ``max_tokens`` alone
  leaves the temperature at 0.7 (it was 1.0, ``SamplingParams``' own), in what the server receives and
  after the config is written out and read back;
* a ``simulator.prompts.*`` key the chosen protocol does not have is refused in one line, exit 2; on
  ``--profiles sage`` a protocol option alone applies to the default ``sage-published`` (it ran the
  ``sage`` paraphrase and dropped the key);
* a setting the simulator never reads is warned of when the run starts, and ``rlver explain`` names it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from helpers import endpoint_eval_argv, run_rlver
from rlver.simulator.llm import published_text
from rlver.testing.openai_server import FakeChatServer
from rlver.testing.responders import POLICY_TEXT, SIMULATOR_TEXT
from rlver.transcripts.native import read_transcript
from test_sage_published import ThinkJudge


def _answers(request: dict[str, Any]) -> str:
    return POLICY_TEXT if request["model"] == "policy" else SIMULATOR_TEXT


def test_a_partial_sampling_block_keeps_the_simulators_temperature(tmp_path: Path) -> None:
    for key, value in (("max_tokens", "512"), ("seed", "7")):
        folder = tmp_path / key
        folder.mkdir()
        with FakeChatServer(_answers) as server:
            done = run_rlver(
                *endpoint_eval_argv(server.url, "--limit", "1", "--set", f"simulator.sampling.{key}={value}"),
                cwd=folder,
            )
            sim = [r for r in server.requests if r["model"] == "sim"]
        assert done.returncode == 0, done.stderr[-3000:]
        assert sim and {r["temperature"] for r in sim} == {0.7}, key
        assert {r["max_tokens"] for r in sim} == ({512} if key == "max_tokens" else {4096})
        assert all(("seed" in r) == (key == "seed") for r in sim)
        manifest = read_transcript(folder / "run" / "transcript.jsonl").manifest
        assert manifest["simulator"]["sampling"]["temperature"] == 0.7


def test_a_written_config_reads_back_to_the_same_simulator_sampling(tmp_path: Path) -> None:
    """``rlver train`` writes config.yaml and ``--resume`` reads it: the model block's sampling, written
    out whole, must not read as stated and replace the simulator's 0.7."""
    from rlver.train.config import load_train_config

    sets = ["simulator.kind=llm", "simulator.model.model=m", "simulator.model.base_url=http://127.0.0.1:9/v1"]
    sets += ["simulator.sampling.max_tokens=512"]
    config = load_train_config("tiny-offline", sets)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")), encoding="utf-8")
    again = load_train_config(str(tmp_path / "config.yaml"))
    assert again.simulator == config.simulator
    assert (again.simulator.sampling.temperature, again.simulator.sampling.max_tokens) == (0.7, 512)  # type: ignore[attr-defined]


def test_a_protocol_key_that_cannot_apply_is_refused_in_one_line(tmp_path: Path) -> None:
    for where in ("simulator.prompts.prompt_role=system", "simulator.prompt_role=system"):
        done = run_rlver(*endpoint_eval_argv("http://127.0.0.1:9/v1", "--set", where), cwd=tmp_path)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert lines[0].startswith("error:") and "prompt_role='system'" in lines[0]
        assert "sage-published, rlver-published" in lines[0] and "prompt set 'sage'" in lines[0]
    assert not (tmp_path / "run").exists()


def test_on_the_sage_profiles_a_protocol_option_applies_to_sages_own_text(
    shared_data: Path, tmp_path: Path
) -> None:
    judge = ThinkJudge(published_text.sage_texts().appraisal_template[:40])

    def answer(request: dict[str, Any]) -> str:
        return POLICY_TEXT if request["model"] == "policy" else judge(request["messages"][0]["content"])

    with FakeChatServer(answer) as server:
        done = run_rlver(
            "eval", "--agent-base-url", server.url, "--agent-model", "policy", "--simulator", "llm",
            "--sim-base-url", server.url, "--sim-model", "sim", "--sim-key-env", "", "--profiles", "sage",
            "--limit", "1", "--set", "env.rules.max_assistant_turns=2", "--out", "run", "--no-report",
            "--set", "simulator.prompts.prompt_role=system", cwd=tmp_path,
        )  # fmt: skip
        sim = [r["messages"] for r in server.requests if r["model"] == "sim"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert sim and all([m["role"] for m in messages] == ["system"] for messages in sim)
    described = read_transcript(tmp_path / "run" / "transcript.jsonl").manifest["simulator"]
    assert (described["prompts"], described["prompt_role"]) == ("sage-published", "system")


def test_a_setting_the_simulator_never_reads_is_warned_of_and_explained(tmp_path: Path) -> None:
    done = run_rlver(
        "eval", "--agent-tiny", "--simulator", "offline", "--profiles", "en-test", "--limit", "1",
        "--agent-max-tokens", "4", "--set", "env.rules.max_assistant_turns=1", "--no-report",
        "--set", "simulator.prompt_language=zh", "--out", "run", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "simulator.prompt_language='zh' has no effect with this simulator (offline)" in done.stderr
    explained = run_rlver("explain", "run", cwd=tmp_path)
    assert "simulator.prompt_language: 'zh' (the offline user sends no prompts)" in explained.stdout
    assert "row no-effect" in explained.stdout
