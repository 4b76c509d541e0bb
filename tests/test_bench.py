"""Smoke tests of the benchmark scripts: each runs in a tiny configuration and writes sane JSON.

They check that ``make bench`` will not break on a script (a real server process, real models, real
subprocesses), not the numbers: the numbers are in docs/performance.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run_bench(tmp_path: Path, script: str, args: str, timeout: int = 300) -> dict[str, Any]:
    env = {**os.environ, "RLVER_BENCH_OUT": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args.split()],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    name = script.removesuffix(".py")
    data = json.loads((tmp_path / f"{name}.json").read_text())
    assert data["benchmark"] == name and data["machine"]["cores"] >= 1
    return data


def test_rollout_concurrency_runs_ours_and_the_sequential_loop(tmp_path: Path) -> None:
    data = run_bench(
        tmp_path,
        "rollout_concurrency.py",
        "--runs 1 --sizes 4 --latencies 0.02 --turns 2 --seq-n 4",
    )
    (row,) = data["results"]
    assert row["n"] == 4 and row["critical_path_s"] == pytest.approx(2 * 3 * 0.02)
    # Nothing can beat the critical path: a faster "ours" would mean the server skipped the latency.
    assert row["ours_median_s"] >= row["critical_path_s"]
    # The published loop makes one dialogue's calls after another: 3× the critical path here.
    assert row["sequential_measured_s"][0] > row["ours_median_s"]


def test_simulator_overhead_measures_every_part(tmp_path: Path) -> None:
    data = run_bench(tmp_path, "simulator_overhead.py", "--runs 1 --dialogues 4 --turns 2")
    assert data["dialogues"] == 4 and data["turns_per_dialogue"] == 2
    assert 0 < data["prompt_build_us_per_turn"][0] < 1e5
    assert 0 < data["parse_us_per_turn"][0] < 1e5
    assert data["respond_us_per_turn"][0] > 0 and data["offline_turns_per_s"][0] > 0
    assert data["offline_turns"] == 8


@pytest.mark.slow  # ~25 s on the 2-core box (issue 25)
def test_trainer_throughput_times_our_update(tmp_path: Path) -> None:
    data = run_bench(
        tmp_path,
        "trainer_throughput.py",
        "--sizes tiny --steps 1 --passes 1 --warmup 0 --batch 4 --group 2 --prompt-len 8 --completion-len 8 --threads 1 --no-trl",
    )
    (row,) = data["results"]
    assert row["size"] == "tiny" and row["tokens_per_update"] == 4 * 16
    assert len(row["ours_s"]) == 1 and row["ours_tokens_per_s"] > 0
    assert data["trl"] is None and row["trl_s"] == []


@pytest.mark.slow  # over 20 s: left out of CI's second, bare-copy pass
def test_memory_reports_peak_rss_of_real_commands(tmp_path: Path) -> None:
    data = run_bench(tmp_path, "memory.py", "--runs 1 --skip-demo --sizes tiny")
    baseline, train = data["results"]
    assert baseline["what"].startswith("baseline") and train["command"][:2] == ["train", "--config"]
    # A training step loads a model and an optimiser on top of the imports.
    assert train["peak_rss_mib"][0] > baseline["peak_rss_mib"][0] > 50


def test_run_all_renders_the_docs_block_from_results(tmp_path: Path) -> None:
    run_bench(tmp_path, "simulator_overhead.py", "--runs 1 --dialogues 2 --turns 2")
    doc = tmp_path / "page.md"
    doc.write_text(
        "# Benchmarks\n\nhand-written intro\n\n<!-- bench:results:start -->\nold\n<!-- bench:results:end -->\n\nfooter\n"
    )
    env = {**os.environ, "RLVER_BENCH_OUT": str(tmp_path)}
    subprocess.run(
        [sys.executable, str(BENCH / "run_all.py"), "--render-only", "--docs", str(doc)],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    text = doc.read_text()
    assert "hand-written intro" in text and "footer" in text and "old" not in text
    assert "### 2. Simulator overhead" in text and "turns/s" in text
    assert "### 1. Rollout" not in text  # only what was measured is shown


@pytest.mark.slow
def test_learned_appraisal_holdout_refits_and_scores_held_out_files(
    tmp_path: Path, shared_data: Path
) -> None:
    """Two agent models' files: each is scored by an appraisal refitted without it (vetoes included)."""
    data = tmp_path / "data" / "gpt-4o-simulator"
    data.mkdir(parents=True)
    for name in ("gpt-4o-0806_result.jsonl", "openai-o1_result.jsonl"):
        (data / name).symlink_to(shared_data / "sage_released" / "gpt-4o-simulator" / name)
    out = tmp_path / "holdout.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "learned_appraisal_holdout.py"),
            "--data",
            str(data.parent),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "held out gpt-4o: 1 files" in proc.stdout and "held out openai-o1: 1 files" in proc.stdout
    summary = json.loads(out.read_text())
    overall = summary["overall"]
    assert overall["turns"] == summary["gpt-4o-simulator"]["turns"] > 1000
    # a real signal, measured on files the fit never saw (0.63 on all nine files)
    assert overall["spearman"] > 0.4 and overall["sign_agreement"] > 0.6
    assert summary["model_ranking_spearman"] is None and len(summary["per_file"]) == 2


def test_learned_appraisal_holdout_names_the_folder_it_cannot_use(tmp_path: Path) -> None:
    """No folder, or files of one agent model only: a one-line error naming the folder, no traceback."""
    one = tmp_path / "one" / "gpt-4o-simulator"
    one.mkdir(parents=True)
    (one / "openai-o1_result.jsonl").write_text("")
    for data, expected in (
        (tmp_path / "missing", "expected a folder"),
        (one.parent, "2 or more agent models"),
    ):
        proc = subprocess.run(
            [sys.executable, str(BENCH / "learned_appraisal_holdout.py"), "--data", str(data)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert str(data) in proc.stderr and expected in proc.stderr


@pytest.mark.slow
def test_learned_appraisal_learning_curve_grows_nested_shares(tmp_path: Path, shared_data: Path) -> None:
    """Two GPT-4o files to fit on, a third as the held-out file: the curve's shares are nested draws and
    the "more files" check fits without, then with, the other held-out models (none here but one)."""
    released = shared_data / "sage_released" / "gpt-4o-simulator"
    data = tmp_path / "data" / "gpt-4o-simulator"
    heldout = tmp_path / "heldout" / "gpt-4o-simulator"
    for folder, names in (
        (data, ("claude3.7-think_result.jsonl", "openai-o1_result.jsonl")),
        (heldout, ("gpt-4o-0806_result.jsonl",)),
    ):
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).symlink_to(released / name)
    script = str(BENCH / "learned_appraisal_learning_curve.py")
    runs = {}
    for mode, extra in (("heldout", ["--heldout", str(heldout.parent)]), ("models", [])):
        out = tmp_path / f"{mode}.json"
        args = ["--data", str(data.parent), "--shares", "0.5,1", "--json", str(out), *extra]
        proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[mode] = json.loads(out.read_text())
    held = runs["heldout"]
    half, whole = held["curve"]
    assert half["train_turns"] < whole["train_turns"] == held["data_turns"]
    assert whole["test_turns"] == held["heldout_turns"] > 500
    # a real signal on a file the fit never saw (the shipped fit: 0.66 on nine such files)
    assert whole["spearman"] > 0.4 and whole["sign_agreement"] > 0.6
    (row,) = held["more_files"]["per_model"]
    assert row["model"] == "gpt-4o" and row["fit_turns"][0] == row["fit_turns"][1] == held["data_turns"]
    assert [r["train_turns"] for r in runs["models"]["curve"]] == [half["train_turns"], whole["train_turns"]]
    assert all(0.3 < r["spearman"] < 1 for r in runs["models"]["curve"])


def test_learned_appraisal_learning_curve_names_what_it_cannot_use(tmp_path: Path) -> None:
    """A missing or empty folder, or a share outside (0, 1]: one line naming it, no traceback."""
    empty = tmp_path / "empty"
    empty.mkdir()
    script = str(BENCH / "learned_appraisal_learning_curve.py")
    for args, expected in (
        (["--data", str(tmp_path / "missing")], [str(tmp_path / "missing"), "expected a folder"]),
        (["--data", str(empty)], [str(empty), "no *_result.jsonl files"]),
        (["--data", str(empty), "--shares", "0.5,1.5"], ["--shares", "(0, 1]", "'0.5,1.5'"]),
        (["--data", str(empty), "--shares", "half"], ["--shares", "'half'"]),
    ):
        proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert all(part in proc.stderr for part in expected), proc.stderr


def test_the_cuda_mutants_are_mutmuts_own() -> None:
    """``bench/cuda_mutants.py`` writes each CPU-untestable mutant as one changed line, for a GPU machine
    without mutmut; regenerated here from the current source by mutmut's own mutator, each must still
    be the named mutant's change (an edit that renumbers them fails this before a GPU run is wasted)."""
    pytest.importorskip("mutmut")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "cuda_mutants.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "12 of 12 line mutants are mutmut's" in proc.stdout


@pytest.mark.slow
def test_engine_speed_times_the_chat_layer_and_counts_decode_steps(tmp_path: Path) -> None:
    env = {**os.environ, "RLVER_BENCH_OUT": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(BENCH / "engine_speed.py"), "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "engine_speed_quick.json").read_text())
    layer = data["chat_layer_vs_generate"]
    assert len(layer["ratios"]) == layer["runs"] == 3 and layer["ratio_median"] > 0
    assert [s["path"] for s in data["staggered"]] == [
        "complete_each",
        "concurrent complete, held until queued",
        "concurrent complete",
        "complete_each, static slots",
        "complete_each, ends by a stop",
        "complete_each, static slots, ends by a stop",
    ]
    for s in data["staggered"]:
        assert s["least_possible"] <= s["decode_steps"] and 0 < s["occupancy"] <= 1
        if s["path"] != "concurrent complete":  # unheld, its count moves with the load
            assert s["decode_steps"] == s["schedule"], s
    each = data["staggered"][0]  # one call: its rows the largest budget (here: length) first
    assert each["decode_steps"] == each["fifo_longest_first"] <= 1.25 * each["least_possible"]
    static = data["staggered"][3]  # a slot freed at its budget takes its newcomer in the same step
    assert static["decode_steps"] <= each["decode_steps"]
