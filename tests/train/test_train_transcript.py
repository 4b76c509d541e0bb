"""Training dialogues are written and readable (issue 33).

A training run writes each due step's dialogues to its folder's ``transcript.jsonl`` (eval's record
format, ``kind: train``, ``meta.step`` on every dialogue), cut back on ``--resume`` to the checkpoint's
step; ``rlver inspect/audit/score/report`` read the folder; TensorBoard gets sample replies. One real
two-step tiny run (in process, the smallest settings that do a whole step) serves the module.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from helpers import TINY_TRAIN_SETS
from rlver.manifest import RunManifest
from rlver.records import Episode, Message
from rlver.transcripts.files import dedupe_episodes, read_episodes
from rlver.transcripts.training import at_step, keep_through_step

#: TINY_TRAIN_SETS (2 profiles x 2 dialogues of one reply) for two steps, with TensorBoard and the
#: sample-reply table on every step, and a checkpoint after each step (the resume test starts from 1).
SETS = [
    *TINY_TRAIN_SETS,
    "run.steps=2",
    "run.tensorboard=true",
    "run.reply_table_every=1",
    "run.checkpoint_every=1",
    "run.keep_checkpoints=2",
    "eval.limit=2",
]


def _stable(path: Path) -> list[dict[str, Any]]:
    """The episodes of a transcript without what varies between runs of the same step (timings)."""
    keep = ("profile_id", "sample_index", "episode_id", "messages", "emotions", "final_emotion", "reward")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["type"] == "episode":
            out.append({**{k: record[k] for k in keep}, "step": record["meta"]["step"]})
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rlver.train.config import load_train_config
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("train") / "T"
    trainer = Trainer(load_train_config("tiny-offline", SETS), out)
    assert trainer.transcript.every == 1  # run.transcript_every's default: every step
    trainer.train()
    return out


def _rlver(*args: str | Path) -> str:
    from rlver.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_training_dialogues_are_a_native_transcript_with_their_step(run_dir: Path) -> None:
    fmt, manifest, episodes = read_episodes(run_dir)
    assert fmt == "rlver" and manifest.kind == "train" and manifest.run_name == "T"
    assert manifest.rules is not None and manifest.rules.max_assistant_turns == 1
    assert [ep.meta["step"] for ep in episodes] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert [ep.meta["row"] for ep in episodes] == [0, 1, 2, 3] * 2
    assert all(ep.reward is not None and ep.episode_id.endswith(f"@{ep.meta['step']}") for ep in episodes)
    # every line is whole JSON, the manifest first and only once
    lines = (run_dir / "transcript.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["manifest"] + ["episode"] * 8


def test_inspect_audit_score_and_report_read_a_train_folder(run_dir: Path, tmp_path: Path) -> None:
    listing = _rlver("inspect", run_dir)
    assert "kind" in listing and "train" in listing and "@2" in listing
    first = read_episodes(run_dir)[2][0]
    assert "assistant 1" in _rlver("inspect", run_dir, "--dialogue", first.episode_id)
    assert "8 dialogues, 8 appraisals checked: OK" in _rlver("audit", run_dir)
    assert json.loads(_rlver("score", run_dir, "--json"))["runs"][0]["n"] == 8

    _rlver("report", run_dir, "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    for text in ("Reward curve", "hack/* rates per step", "Early: step 1", "Late: step 2", "T · step 2"):
        assert text in page, text
    assert page.count('id="featured-') == 2 and 'class="featured"' in page  # side by side
    assert {p.name for p in (tmp_path / "r_files").iterdir()} >= {"reward_curve.svg", "hack_rates.svg"}


def test_tensorboard_gets_a_table_of_sample_replies(run_dir: Path) -> None:
    events = b"".join(p.read_bytes() for p in (run_dir / "tensorboard").iterdir())
    assert b"samples/replies" in events
    assert b"| profile | reply | reward |" in events
    assert read_episodes(run_dir)[2][0].profile_id.encode() in events


def test_resume_cuts_the_transcript_back_to_the_checkpoint(run_dir: Path, tmp_path: Path) -> None:
    """A run killed after writing step 2's dialogues but before its checkpoint (step 2's checkpoint
    removed, a torn line appended) resumes from step 1: the transcript ends equal to the straight one."""
    from rlver.train.config import load_train_config
    from rlver.train.trainer import Trainer

    crashed = tmp_path / "T"
    shutil.copytree(run_dir, crashed)
    shutil.rmtree(crashed / "checkpoints" / "step_000002")
    (crashed / "checkpoints" / "latest").write_text("step_000001\n")
    with (crashed / "transcript.jsonl").open("ab") as fh:
        fh.write(b'{"type": "episode", "profile_id": "torn')
    straight = _stable(run_dir / "transcript.jsonl")

    resumed = Trainer(load_train_config("tiny-offline", SETS), crashed, resume=True)
    assert resumed.step == 1
    assert [r["step"] for r in _stable(crashed / "transcript.jsonl")] == [1] * 4  # cut at the checkpoint
    resumed.train()
    assert _stable(crashed / "transcript.jsonl") == straight


def _episode(profile: str, text: str = "hi") -> Episode:
    return Episode(
        profile_id=profile, episode_id=f"{profile}#0", messages=[Message(role="assistant", content=text)]
    )


def test_keep_through_step_keeps_whole_earlier_lines_byte_for_byte(tmp_path: Path) -> None:
    from rlver.transcripts.native import episode_record

    path = tmp_path / "transcript.jsonl"
    manifest = json.dumps(RunManifest.create(kind="train").to_json()) + "\n"
    lines = [json.dumps(episode_record(at_step(_episode("p"), s, 0))) + "\n" for s in (1, 2, 3)]
    path.write_text(manifest + "".join(lines) + '{"type": "epi', encoding="utf-8")
    assert keep_through_step(path, 2) == 2  # step 3 and the torn line
    assert path.read_text(encoding="utf-8") == manifest + lines[0] + lines[1]


def test_a_user_met_at_two_steps_is_two_dialogues() -> None:
    """Eval's dedupe key (profile, sample) would fold a training run's steps into one dialogue."""
    same = [at_step(_episode("p"), 1, 0), at_step(_episode("p"), 2, 0), at_step(_episode("p"), 2, 1)]
    assert len(dedupe_episodes(same)) == 3
    assert len(dedupe_episodes([_episode("p"), _episode("p")])) == 1  # eval transcripts: as before


def test_transcript_every_writes_only_every_nth_step(tmp_path: Path) -> None:
    from rlver.train.transcript_writer import TrainingTranscript

    manifest = RunManifest.create(kind="train")
    every2 = TrainingTranscript(tmp_path, manifest, every=2, resume_step=None)
    for step in range(1, 5):
        every2.record(step, [_episode("p")])
    _, read, episodes = read_episodes(tmp_path)
    assert read.kind == "train" and [ep.meta["step"] for ep in episodes] == [2, 4]

    off = TrainingTranscript(tmp_path / "off", manifest, every=0, resume_step=None)
    off.record(1, [_episode("p")])
    assert not off.path.exists()


def test_the_reply_table_is_markdown_that_model_text_cannot_break() -> None:
    from rlver.train.logger import markdown_table
    from rlver.train.transcript_writer import reply_rows

    rows = reply_rows([_episode("a", "<think>x</think>kind | words\nhere"), _episode("a"), _episode("b")])
    assert [r[:2] for r in rows] == [("a", "kind | words\nhere"), ("b", "hi")]  # one row per user
    table = markdown_table(("profile", "reply", "reward"), rows)
    assert table.splitlines()[2] == "| a | kind \\| words here | 0.000 |"


def test_wandb_gets_the_reply_table_as_a_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """W&B logs the rows as a ``wandb.Table`` at the step (a stand-in module: no wandb run is opened)."""
    import sys
    import types

    from rlver.train.logger import MetricsLogger

    class Table:
        def __init__(self, columns: list[str], data: list[list[Any]]) -> None:
            self.columns, self.data = columns, data

    logged: list[tuple[dict[str, Any], int]] = []
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(Table=Table))
    logger = MetricsLogger(tmp_path, tensorboard=False)
    logger._wandb = types.SimpleNamespace(log=lambda data, step: logged.append((data, step)))
    logger.log_table(3, "samples/replies", ("profile", "reply", "reward"), [("p", "hi", 0.5)])
    ((data, step),) = logged
    table = data["samples/replies"]
    assert step == 3 and table.columns == ["profile", "reply", "reward"] and table.data == [["p", "hi", 0.5]]
