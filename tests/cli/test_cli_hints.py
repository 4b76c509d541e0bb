"""A newcomer's small stumbles (issue 43, item 3), each fixed and checked here: what an interrupted eval
says about an empty folder, `inspect`/`explain` on the demo's folder, the verl install hint, `train`'s
simulator flags, no wrapping when the output is a file, "did you mean" for model names, and a data
folder that is a file refused before any download.

Real subprocesses of the CLI where the message is the point (one ``error:`` line, exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_rlver
from rlver.cli.eval_progress import interrupted_note


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# -- an eval interrupted before anything was written -------------------------------------------------
def test_an_interrupted_eval_names_only_what_its_folder_holds(tmp_path: Path) -> None:
    """An empty folder does not "hold the run's settings"; one with the manifest does."""
    out = tmp_path / "ev"
    assert interrupted_note(out) == "interrupted before the run started: nothing was written"
    out.mkdir()
    empty = interrupted_note(out)
    assert "settings" not in empty and "is empty" in empty and "nothing was written" in empty
    (out / "notes.txt").write_text("mine")
    assert "settings" not in interrupted_note(out)
    (out / "transcript.jsonl").write_text("")  # the manifest line is written first
    assert "holds the run's settings" in interrupted_note(out)


# -- inspect / explain on the demo's folder -------------------------------------------------------------
def test_inspect_and_explain_on_a_demo_folder_point_to_its_runs(tmp_path: Path) -> None:
    demo = tmp_path / "rlver-demo"
    for name in ("run", "before", "after"):
        (demo / name).mkdir(parents=True)
        (demo / name / "transcript.jsonl").write_text("")
    (demo / "report_files").mkdir()  # a folder without a transcript is not a run
    for command in ("inspect", "explain"):
        proc = run_rlver(command, str(demo), cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        (line,) = _errors(proc.stderr)
        assert "before/, after/ and run/" in line, line
        assert f"e.g. {demo / 'after'}" in line and "report_files" not in line, line


def test_a_folder_without_runs_says_what_it_expected(tmp_path: Path) -> None:
    proc = run_rlver("inspect", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = _errors(proc.stderr)
    assert "no transcript.jsonl here; is this an `rlver eval` or `rlver train` output folder?" in line


# -- the verl dry run from the default venv -------------------------------------------------------------
def test_a_verl_dry_run_without_pyarrow_exits_2_naming_the_install_command(tmp_path: Path) -> None:
    """As in the default venv of a fresh clone (no ``verl`` extra): one line, exit 2, nothing written,
    and the command from the checkout (rlver is not on the package index), not ``pip install rlver[verl]``."""
    blocker = tmp_path / "no-extra" / "pyarrow"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('pyarrow is not installed (test)')\n")
    out = tmp_path / "verl-run"
    proc = run_rlver(
        "train", "--config", "tiny-offline", "--trainer", "verl", "--dry-run", "--out", str(out),
        cwd=tmp_path, env={"PYTHONPATH": f"{blocker.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc.stderr)
    assert "pyarrow" in line and "pip install -e '.[verl]'" in line and "rlver[verl]" not in line, line
    assert not out.exists()


# -- rlver train against a self-hosted simulator ----------------------------------------------------------
@pytest.mark.slow  # one real training step: 25 s at a load average of 7
def test_train_takes_the_simulator_flags_of_eval(tmp_path: Path) -> None:
    """``--sim-base-url/--sim-model/--sim-key-env`` reach the run: one real step against a simulator
    served on 127.0.0.1, asked for by the model id given, with no key sent."""
    from helpers import TINY_TRAIN_SETS, train_argv
    from rlver.testing.openai_server import FakeChatServer
    from rlver.testing.responders import SIMULATOR_TEXT

    with FakeChatServer(lambda _request: SIMULATOR_TEXT) as server:
        argv = train_argv("run", *TINY_TRAIN_SETS, steps=1)
        sim = ["--sim-base-url", server.url, "--sim-model", "my-sim", "--sim-key-env", ""]
        proc = run_rlver(*argv, *sim, cwd=tmp_path, env={"OPENAI_API_KEY": "must-not-be-sent"}, timeout=300)
        models = {r["model"] for r in server.requests}
        keys = set(server.authorizations)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert models == {"my-sim"} and keys == {"Bearer EMPTY"}, (
        models,
        keys,
    )  # '': no key, not $OPENAI_API_KEY
    saved = (tmp_path / "run" / "config.yaml").read_text(encoding="utf-8")
    assert "kind: llm" in saved and "model: my-sim" in saved and server.url in saved


def test_train_refuses_the_simulator_flags_without_a_model(tmp_path: Path) -> None:
    proc = run_rlver(
        "train", "--config", "tiny-offline", "--sim-base-url", "http://127.0.0.1:9/v1", cwd=tmp_path
    )
    assert proc.returncode == 2
    (line,) = _errors(proc.stderr)
    assert "--sim-base-url" in line and "--sim-model" in line, line
    assert not (tmp_path / "runs").exists()


# -- output to a file is not wrapped ---------------------------------------------------------------------
def test_output_to_a_pipe_is_not_wrapped_at_80_columns(tmp_path: Path) -> None:
    """Without COLUMNS, rich lays out a pipe's output to 80 columns: `inspect` split a user's long line
    and padded every line with spaces. Now each line is its content, whole."""
    import json

    opening = "I keep replaying what the head teacher said on Monday, and I cannot tell any more whether I was wrong."
    reply = "That sounds exhausting, and it makes sense that it keeps coming back to you at night. What did she say?"
    record = {
        "id": "a-dialogue-id-long-enough-to-be-split-by-a-narrow-table-cell-0001",
        "emo_point": 45,
        "history": [
            {"role": "user", "content": opening, "emotion-point": 40},
            {"role": "assistant", "content": reply},
            {
                "role": "user",
                "content": "She asked me for a written account 'to be safe'.",
                "emotion-point": 45,
            },
        ],
    }
    path = tmp_path / "run_result.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    unset = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    for args in ([str(path), "--dialogue", "1"], [str(path)]):
        proc = subprocess.run(
            [sys.executable, "-m", "rlver", "inspect", *args],
            capture_output=True, text=True, env=unset, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        if "--dialogue" in args:
            assert f"  {opening}" in lines and f"  {reply}" in lines, proc.stdout
            assert not [line for line in lines if line != line.rstrip()], "lines padded with spaces"
        else:
            assert any(str(record["id"]) in line for line in lines), proc.stdout  # the id in one cell


# -- "did you mean" for model names -------------------------------------------------------------------------
def test_a_model_name_one_typo_away_gets_the_name_not_the_hub(tmp_path: Path) -> None:
    for flag, value, near in (
        ("--agent-local", "smollm2-135m", "smollm2-135m-instruct"),
        ("--agent-local", "tiyn", "tiny"),
    ):
        proc = run_rlver(
            "eval", flag, value, "--simulator", "offline", "--profiles", "en-test", "--out", "E", cwd=tmp_path
        )
        assert proc.returncode == 2, proc.stderr
        (line,) = _errors(proc.stderr)
        assert f"did you mean {near}?" in line and "Hugging Face cache and" not in line, line
        assert "network" not in line and "HF_HUB_OFFLINE" not in line, line
    # a hub id like no known name is still the hub's business
    far = run_rlver("eval", "--agent-local", "gpt2", "--simulator", "offline", "--out", "E", cwd=tmp_path)
    (line,) = _errors(far.stderr)
    assert far.returncode == 2 and "did you mean" not in line and "HF_HUB_OFFLINE is set" in line, line
    assert not (tmp_path / "E").exists()


# -- a data folder that is a file -----------------------------------------------------------------------------
def test_a_data_dir_that_is_a_file_is_refused_before_any_download(tmp_path: Path) -> None:
    a_file = tmp_path / "data.txt"
    a_file.write_text("not a folder")
    for data_dir, argv in (
        (a_file, ["models", "fetch", "smollm2-135m-instruct"]),
        (a_file / "inside", ["data", "download", "sage-test"]),
    ):
        env = {"RLVER_DATA_DIR": str(data_dir), "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}
        proc = run_rlver(*argv, cwd=tmp_path, env={**env, "RLVER_DATA_BASE_URL": "http://127.0.0.1:9"})
        assert proc.returncode == 2, proc.stderr
        (line,) = _errors(proc.stderr)
        assert "$RLVER_DATA_DIR" in line and str(a_file) in line and "not a folder" in line, line
        assert "downloading" not in proc.stderr and "could not" not in proc.stderr, proc.stderr
    assert a_file.read_text() == "not a folder"
