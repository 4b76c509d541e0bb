"""A real preset can be dry-run offline (issue 25): ``rlver train --config grpo-think --trainer verl
--dry-run`` on a fresh clone, where the published profile sets are not downloaded, writes its files from
a clearly labelled stand-in (the bundled Chinese sets, repeated to fill a step), and a dry run that fails
leaves no empty folder behind.

Writing the datasets needs pyarrow (the ``verl`` extra); the stand-in test skips without it. verl itself
is not needed: without it the dry run says the overrides were not checked against verl's config.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlver.errors import RlverError
from rlver.integrations.verl.launch import STAND_IN_PROMPT, load_verl_config, main, prepare


def test_a_real_preset_dry_runs_offline_with_a_labelled_stand_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "grpo"
    assert main("grpo-think", [f"verl.out_dir={out}"], dry_run=True) == 0
    printed = capsys.readouterr().out
    assert "STAND-IN: rlver-train is not downloaded" in printed
    assert "STAND-IN: sage is not downloaded" in printed
    assert "rlver data download rlver-train" in (out / "STAND-IN.txt").read_text(encoding="utf-8")
    table = pq.read_table(out / "train.parquet")
    assert table.num_rows >= 32  # grpo-think's batch: 32 profiles a step
    # the agent prompt is published text: where it is not downloaded either, a labelled placeholder
    system = table.column("prompt").to_pylist()[0][0]["content"]
    placeholder = "the agent prompt is a placeholder" in (out / "STAND-IN.txt").read_text(encoding="utf-8")
    assert (system == STAND_IN_PROMPT) == placeholder, system[:200]
    assert (out / "run.sh").is_file()


def test_the_stand_in_is_for_dry_runs_only(tmp_path: Path) -> None:
    """Writing a real launch's run folder with the published set missing is refused, and makes no
    folder (the launch's own checks, verl and the key, come before it: tests/integrations/test_verl_launch.py)."""
    out = tmp_path / "grpo"
    with pytest.raises(RlverError, match="rlver-train"):
        prepare(load_verl_config("grpo-think", [f"verl.out_dir={out}"]), stand_in=False)
    assert not out.exists()


def test_a_dry_run_that_fails_while_writing_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as on an install without the verl extra
    out = tmp_path / "tiny"
    with pytest.raises(RlverError, match="pyarrow"):
        main("tiny-offline", [f"verl.out_dir={out}"], dry_run=True)
    assert not out.exists()
