"""Refusals before any work: a published prompt set on profiles not in the published format is one
``error:`` line and exit 2, before an agent is loaded or a request sent (it used to start the run and
fail every dialogue, the reason only in transcript.jsonl)."""

from __future__ import annotations

from pathlib import Path

from helpers import published_training_argv, run_rlver
from rlver.testing.openai_server import FakeChatServer


def test_sage_published_on_english_profiles_is_refused_before_any_work(
    shared_data: Path, tmp_path: Path
) -> None:
    with FakeChatServer(lambda _request: "Response:\n嗯。") as server:
        done = run_rlver(
            "eval", "--agent-base-url", server.url, "--agent-model", "policy", "--simulator", "llm",
            "--sim-base-url", server.url, "--sim-model", "sim", "--sim-key-env", "",
            "--sim-prompts", "sage-published", "--profiles", "en-test", "--limit", "3",
            "--out", "run", "--no-report", cwd=tmp_path,
        )  # fmt: skip
        sent = len(server.requests)
    assert done.returncode == 2, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "error: --profiles en-test: 3 of 3 profiles cannot run under simulator protocol 'sage-published'"
    )
    assert "Traceback" not in done.stderr and sent == 0
    assert not (tmp_path / "run" / "transcript.jsonl").exists()


def test_a_held_out_set_its_user_cannot_play_is_refused_before_training(
    shared_data: Path, tmp_path: Path
) -> None:
    """Held out on the training protocol, the held-out user is the training simulator
    (``rlver-published``): on English profiles each held-out dialogue would fail after the last step."""
    rows = (shared_data / "rlver_train_profiles.jsonl").read_text(encoding="utf-8").splitlines()[:2]
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    argv = published_training_argv("http://127.0.0.1:9/v1", "eval.profiles=en-test", "eval.dialogue=training")
    done = run_rlver(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "error: eval.profiles=en-test: 8 of 8 profiles cannot run under simulator protocol 'rlver-published'"
    )
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_sim_protocol_combines_with_its_options(shared_data: Path, tmp_path: Path) -> None:
    """``--sim-prompts NAME --set simulator.prompts.OPTION=...`` runs NAME with the option (it used
    to exit 2: "'protocol' is not a section")."""
    from rlver.manifest import RunManifest

    with FakeChatServer(lambda _request: "Response:\n嗯。") as server:
        done = run_rlver(
            "eval", "--agent-base-url", server.url, "--agent-model", "policy", "--simulator", "llm",
            "--sim-base-url", server.url, "--sim-model", "sim", "--sim-key-env", "",
            "--sim-prompts", "sage-published", "--set", "simulator.prompts.parse_attempts=3",
            "--profiles", "sage", "--limit", "1", "--set", "env.rules.max_assistant_turns=1",
            "--out", "run", "--no-report", cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode in (0, 3), done.stderr[-3000:]
    described = RunManifest.read(tmp_path / "run").simulator or {}
    assert (described.get("prompts"), described.get("parse_attempts")) == ("sage-published", 3)
