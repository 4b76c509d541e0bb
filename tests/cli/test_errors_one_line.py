"""Every failure is one line (issue 25): each command the issue found giving a traceback, a wrong exit
code or a silent acceptance now exits 2 with one ``error:`` line and no traceback, before any model is
loaded; warnings are one ``warning:`` line with no source path; and every command, given a file where a
folder is expected, a folder where a file is expected, an empty file or a missing path, says so the same
way.

The issue's commands run as a user runs them (a subprocess); the wider matrix runs ``rlver``'s entry
point in this process (the same code path, minus the interpreter start), so that it stays fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from rlver.manifest import RunManifest
from rlver.records import Episode
from rlver.transcripts.native import TranscriptWriter
from test_calibrate import write_synthetic
from test_env_rewards import make_episode


def _env() -> dict[str, str]:
    # os.environ at call time: conftest's autouse fixture points RLVER_DATA_DIR at an empty folder.
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "COLUMNS": "80"}


def rlver(*args: str | Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", *map(str, args)],
        capture_output=True, text=True, env=_env(), cwd=cwd, timeout=timeout,
    )  # fmt: skip


def _episode(profile_id: str) -> Episode:
    return make_episode(40, [45, 50]).model_copy(update={"profile_id": profile_id})


@pytest.fixture()
def box(tmp_path: Path) -> Path:
    """A working folder holding every kind of wrong input the checks below give."""
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "empty.yaml").write_text("# nothing set\n", encoding="utf-8")
    (tmp_path / "adir").mkdir()
    (tmp_path / "emptydir").mkdir()
    run = tmp_path / "run"
    run.mkdir()
    writer = TranscriptWriter(run / "transcript.jsonl", RunManifest.create(kind="eval", run_name="unit"))
    writer.append(_episode("p-1"))
    writer.append(_episode("p-2"))
    (tmp_path / "pub").mkdir()
    write_synthetic(tmp_path / "pub" / "m_result.jsonl")
    done = tmp_path / "trained" / "checkpoints" / "step_000001"
    done.mkdir(parents=True)
    (done / "trainer_state.pt").write_bytes(b"")
    return tmp_path


def assert_one_error_line(proc: subprocess.CompletedProcess[str] | tuple[int, str], *, code: int = 2) -> str:
    """Exit ``code``, no traceback, exactly one line starting with ``error:``; returns that line."""
    rc, text = (proc.returncode, proc.stdout + proc.stderr) if not isinstance(proc, tuple) else proc
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert rc == code, text
    assert len(errors) == 1, text
    return errors[0]


# -- the issue's list, as a user runs it ----------------------------------------------------------------

#: (argv, words the error line must contain). ``{box}`` is the fixture's folder.
ISSUE_CASES: dict[str, tuple[list[str], list[str]]] = {
    "train-preset-without-profiles": (
        ["train", "--config", "grpo-think", "--out", "runs/g4"],
        ["rlver-train"],
    ),
    "train-missing-model-folder": (
        ["train", "--config", "tiny-offline", "--set", "model.path=/models/nope", "--out", "x"],
        ["model.path", "/models/nope"],
    ),
    "train-empty-model-folder": (
        ["train", "--config", "tiny-offline", "--set", "model.path={box}/emptydir", "--out", "x"],
        ["model.path", "empty"],
    ),
    "train-out-is-a-file": (
        ["train", "--config", "tiny-offline", "--out", "empty.jsonl"],
        ["--out", "empty.jsonl"],
    ),
    "train-out-has-checkpoints": (
        ["train", "--config", "tiny-offline", "--out", "trained"],
        ["--resume", "trained"],
    ),
    "train-empty-config": (["train", "--config", "empty.yaml", "--out", "x"], ["empty.yaml", "empty"]),
    "eval-out-is-a-file": (
        ["eval", "--agent-tiny", "--profiles", "bundled-test", "--limit", "1", "--out", "empty.jsonl"],
        ["--out", "empty.jsonl"],
    ),
    "eval-two-agents": (
        ["eval", "--agent-tiny", "--agent-base-url", "http://127.0.0.1:9/v1", "--agent-model", "x"],
        ["--agent-tiny", "--agent-base-url"],
    ),
    "eval-empty-model-folder": (
        ["eval", "--agent-local", "emptydir", "--profiles", "bundled-test", "--limit", "1", "--out", "e"],
        ["--agent-local", "empty"],
    ),
    "calibrate-out-is-a-file": (
        ["calibrate", "--simulator", "replay", "pub/m_result.jsonl", "--out", "empty.jsonl"],
        ["--out", "empty.jsonl"],
    ),
    "calibrate-a-folder": (["calibrate", "--simulator", "replay", "adir"], ["adir", "folder"]),
    "calibrate-an-empty-file": (
        ["calibrate", "--simulator", "replay", "empty.jsonl"],
        ["empty.jsonl", "empty"],
    ),
    "calibrate-an-rlver-transcript": (
        ["calibrate", "run/transcript.jsonl"],
        ["rlver transcript", "rlver score"],
    ),
    "report-out-is-a-folder": (["report", "run", "--out", "adir"], ["--out", "adir", "folder"]),
    "report-out-missing-parent": (
        ["report", "run", "--out", "missing/dir/x.html"],
        ["does not exist"],
    ),
    "score-compare-one-run": (["score", "--compare", "run/transcript.jsonl"], ["--compare", "two"]),
    "chat-start-too-high": (["chat", "--start", "500"], ["--start", "500"]),
    "chat-start-negative": (["chat", "--start", "-5"], ["--start", "-5"]),
}


@pytest.mark.parametrize("case", sorted(ISSUE_CASES))
def test_each_listed_command_is_one_line_and_exit_2(case: str, box: Path) -> None:
    argv, words = ISSUE_CASES[case]
    started = time.monotonic()
    proc = rlver(*(a.replace("{box}", str(box)) for a in argv), cwd=box)
    line = assert_one_error_line(proc)
    for word in words:
        assert word in line, line
    # Nothing was loaded, so nothing was left behind: no run folder, no report's parent folders.
    for left in ("runs", "x", "e", "missing"):
        assert not (box / left).exists(), f"{case} left {left}/ behind"
    assert time.monotonic() - started < 60  # the preset case used to spend ~52 s on hub retries


def test_a_torn_last_line_is_one_warning_line_without_source_paths(box: Path) -> None:
    """score, inspect, report and calibrate read a file whose last line was cut by a crash: each says so
    in one ``warning:`` line (no ``…/native.py:124: UserWarning`` and source line)."""
    torn = box / "torn.jsonl"
    torn.write_text((box / "run" / "transcript.jsonl").read_text(encoding="utf-8") + '{"type": "epi', "utf-8")
    pub = box / "pub2"
    pub.mkdir()
    cut = pub / "m_result.jsonl"
    cut.write_text((box / "pub" / "m_result.jsonl").read_text(encoding="utf-8") + '{"id": "x', "utf-8")
    for argv in (
        ["score", torn],
        ["inspect", torn],
        ["report", torn, "--out", box / "r.html"],
        ["calibrate", "--simulator", "replay", cut, "--out", box / "cal"],
    ):
        proc = rlver(*argv, cwd=box)
        text = proc.stdout + proc.stderr
        assert proc.returncode == 0, text
        warned = [line for line in text.splitlines() if "warning" in line.lower()]
        assert len(warned) == 1 and warned[0].startswith("warning: "), text
        assert "incomplete trailing line" in warned[0]
        assert ".py:" not in text and "UserWarning" not in text, text


def test_help_texts_are_plain_and_whole(tmp_path: Path) -> None:
    """No RST markup, and no help text cut with an ellipsis at 80 columns."""
    for argv in (["--help"], ["calibrate", "--help"], ["eval", "--help"], ["train", "--help"]):
        text = rlver(*argv, cwd=tmp_path).stdout
        lines = [line for line in text.splitlines() if not line.startswith("Usage:")]  # [ARGS]... is notation
        assert "``" not in text, text
        assert not [line for line in lines if line.rstrip().endswith(("…", "..."))], text
        assert all(len(line) <= 80 for line in lines), text
    assert "leaderboard-comparable" in rlver("eval", "--help", cwd=tmp_path).stdout


# -- every command, with the wrong kind of path -----------------------------------------------------------


def run_in_process(
    argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """``rlver ARGV`` through the console entry point, in this process: (exit code, stdout + stderr).
    An exception that escapes ``main`` fails the test (it would be a traceback for a user)."""
    from rlver.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["rlver", *argv])
    for name in (
        "HF_HUB_DISABLE_PROGRESS_BARS",
        "TRANSFORMERS_VERBOSITY",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS",
        "TQDM_DISABLE",
    ):
        monkeypatch.setenv(name, os.environ.get(name, "1" if name != "TRANSFORMERS_VERBOSITY" else "error"))
    shown = warnings.showwarning
    try:
        with pytest.raises(SystemExit) as exited:
            main()
    finally:
        warnings.showwarning = shown
    out, err = capfd.readouterr()
    code = exited.value.code
    return (code if isinstance(code, int) else 0), out + err


#: Where each command takes a file: ``{}`` is replaced by the wrong input.
FILE_ARGS: dict[str, list[str]] = {
    "audit": ["audit", "{}"],
    "calibrate": ["calibrate", "--simulator", "replay", "{}"],
    "score": ["score", "{}"],
    "report": ["report", "{}", "--out", "r.html"],
    "inspect": ["inspect", "{}"],
    "profiles-validate": ["profiles", "validate", "{}"],
    "profiles-stats": ["profiles", "stats", "{}"],
    "profiles-show": ["profiles", "show", "p-1", "--set", "{}"],
    "profiles-list": ["profiles", "list", "{}"],
    "config-show": ["config", "show", "{}"],
    "train-config": ["train", "--config", "{}", "--out", "x"],
    "eval-config": ["eval", "--agent-tiny", "--config", "{}", "--out", "x"],
    "eval-profiles": ["eval", "--agent-tiny", "--profiles", "{}", "--out", "x"],
    "eval-system-prompt": ["eval", "--agent-tiny", "--system-prompt", "@{}", "--out", "x"],
    "probe-profiles": ["probe", "--profiles", "{}"],
    "chat-profile-file": ["chat", "--profile-file", "{}"],
    "simulator-fit-data": ["simulator", "fit", "--data", "{}", "--out", "fit.json"],
}
#: Where each command takes a folder.
FOLDER_ARGS: dict[str, list[str]] = {
    "judge": ["judge", "{}", "--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1"],
    "export": ["export", "{}", "exported"],
    "probe-from-run": ["probe", "--from-run", "{}"],
    "eval-agent-local": ["eval", "--agent-local", "{}", "--profiles", "bundled-test", "--out", "x"],
    "train-model-path": ["train", "--config", "tiny-offline", "--set", "model.path={}", "--out", "x"],
    "train-out": ["train", "--config", "tiny-offline", "--out", "{}"],
    "eval-out": ["eval", "--agent-tiny", "--profiles", "bundled-test", "--out", "{}"],
    "calibrate-out": ["calibrate", "--simulator", "replay", "pub/m_result.jsonl", "--out", "{}"],
    "demo-out": ["demo", "--out", "{}"],
}
#: Where each command writes a file: a folder there is refused.
OUT_FILE_ARGS: dict[str, list[str]] = {
    "report-out": ["report", "run", "--out", "{}"],
    "simulator-fit-out": ["simulator", "fit", "--data", "pub", "--out", "{}"],
}

MATRIX = (
    [(f"{name}:{kind}", argv, arg) for name, argv in FILE_ARGS.items() for kind, arg in
     (("folder-for-a-file", "adir"), ("empty-file", "empty.jsonl"), ("missing", "nope/missing.jsonl"))]
    + [(f"{name}:{kind}", argv, arg) for name, argv in FOLDER_ARGS.items() for kind, arg in
       (("file-for-a-folder", "empty.jsonl"), ("missing-parent", "empty.jsonl/sub"))]
    + [(f"{name}:{kind}", argv, arg) for name, argv in FOLDER_ARGS.items() if not name.endswith("-out")
       for kind, arg in (("empty-folder", "emptydir"), ("missing", "nope/missing"))]
    + [(f"{name}:folder-for-a-file", argv, "adir") for name, argv in OUT_FILE_ARGS.items()]
)  # fmt: skip


@pytest.mark.parametrize(("argv", "arg"), [m[1:] for m in MATRIX], ids=[m[0] for m in MATRIX])
def test_every_command_refuses_the_wrong_kind_of_path_in_one_line(
    argv: list[str], arg: str, box: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    if argv[:2] == ["config", "show"] and arg == "empty.jsonl":
        arg = "empty.yaml"  # an empty YAML file, as the command reads YAML
    result = run_in_process([a.replace("{}", arg) for a in argv], box, monkeypatch, capfd)
    line = assert_one_error_line(result)
    assert arg.split("/")[0] in line, line  # the error names the path given (or its first part)


@pytest.mark.slow  # two evaluations in subprocesses: 17-32 s on the shared 2-core box
def test_third_party_progress_bars_only_with_verbose(tmp_path: Path) -> None:
    """transformers' "Loading weights" bar stays out of rlver's output unless --verbose asks for it."""
    from rlver.models.tiny import ensure_tiny_model

    model = ensure_tiny_model(tmp_path / "tiny")
    argv = [
        "eval",
        "--agent-local",
        model,
        "--profiles",
        "bundled-test",
        "--limit",
        "1",
        "--agent-max-tokens",
        "4",
    ]
    quiet = rlver(*argv, "--out", "a", "--no-report", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "Loading weights" not in quiet.stdout + quiet.stderr
    verbose = rlver(*argv, "--out", "b", "--no-report", "--verbose", cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    assert "Loading weights" in verbose.stderr


def test_an_uncached_hub_id_is_refused_at_once_without_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub id that is not cached fails before loading when the hub cannot be asked: with
    HF_HUB_OFFLINE, or when its host name does not resolve (no network: it used to take ~25-50 s of
    retries and end in a traceback)."""
    import socket

    from rlver.errors import ConfigError
    from rlver.llm.factory import check_model_source

    with pytest.raises(
        ConfigError,
        match=r"model\.path: 'rlver-test/no-such-model' is not in the Hugging Face cache and HF_HUB_OFFLINE",
    ):
        check_model_source("rlver-test/no-such-model")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HF_ENDPOINT"):
        monkeypatch.delenv(proxy, raising=False)

    def no_dns(*_args: object, **_kwargs: object) -> None:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(ConfigError, match=r"huggingface\.co cannot be reached"):
        check_model_source("rlver-test/no-such-model", "--agent-local")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")  # a proxy may resolve names itself
    check_model_source("rlver-test/no-such-model")
    check_model_source("tiny")


# -- issue 34: bad input refused up front, in rlver's one format ----------------------------------------

#: A variable no test sets: the key-variable flags below name it.
UNSET = "RLVER_TEST_KEY_NEVER_SET"


def _model_folder_without_weights(folder: Path) -> Path:
    """What a copy that left out the large files leaves: the config and the tokenizer, no weights."""
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen2", "vocab_size": 64}', encoding="utf-8")
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 512}', encoding="utf-8")
    (folder / "tokenizer.json").write_text('{"version": "1.0"}', encoding="utf-8")
    return folder


#: (argv, words the one ``error:`` line must contain). Each is refused while the command line is read
#: or by the checks before any model loads: nothing may appear in the working folder.
REFUSED_UP_FRONT: dict[str, tuple[list[str], list[str]]] = {
    # 1. an empty output path meant the current folder
    "eval-out-empty": (
        ["eval", "--agent-tiny", "--profiles", "bundled-test", "--out", ""],
        ["--out", "empty"],
    ),
    "train-out-empty": (["train", "--config", "tiny-offline", "--out", ""], ["--out", "empty"]),
    "chat-save-empty": (["chat", "--save", ""], ["--save", "empty"]),
    "calibrate-out-empty": (
        ["calibrate", "--simulator", "replay", "pub/m_result.jsonl", "--out", " "],
        ["--out", "empty"],
    ),
    "demo-out-empty": (["demo", "--out", ""], ["--out", "empty"]),
    "report-out-empty": (["report", "run", "--out", ""], ["--out", "empty"]),
    "export-out-empty": (["export", "trained", ""], ["OUT_DIR", "empty"]),
    "data-dest-empty": (["data", "download", "sage-test", "--dest", ""], ["--dest", "empty"]),
    "simulator-fit-out-empty": (["simulator", "fit", "--data", "pub", "--out", ""], ["--out", "empty"]),
    "profiles-generate-out-empty": (
        ["profiles", "generate", "--n", "1", "--model", "m", "--out", ""],
        ["--out", "empty"],
    ),
    # 2. an endpoint that is no URL spent every retry of every dialogue
    "agent-base-url": (
        ["eval", "--agent-base-url", "notaurl", "--agent-model", "m", "--out", "e"],
        ["--agent-base-url", "'notaurl'", "http://"],
    ),
    "sim-base-url": (
        ["eval", "--agent-tiny", "--sim-model", "m", "--sim-base-url", "localhost:8000/v1", "--out", "e"],
        ["--sim-base-url", "localhost:8000/v1", "http://"],
    ),
    "judge-base-url": (
        ["judge", "run", "--judge-model", "m", "--judge-base-url", "http://"],
        ["--judge-base-url", "names no host"],
    ),
    "chat-model-base-url": (
        ["chat", "--play-user", "--model", "m", "--model-base-url", "api.example.com"],
        ["--model-base-url", "http://"],
    ),
    "agent-base-url-in-a-config-key": (
        ["eval", "--set", "agent.model=m", "--set", "agent.base_url=notaurl", "--out", "e"],
        ["--set agent.base_url", "http://"],
    ),
    # 3. a key variable that is not set ran without a key
    "agent-key-env-unset": (
        ["eval", "--agent-base-url", "http://127.0.0.1:9/v1", "--agent-model", "m", "--agent-key-env", UNSET],
        ["--agent-key-env", UNSET, "not set"],
    ),
    "sim-key-env-unset": (
        ["eval", "--agent-tiny", "--sim-model", "m", "--sim-key-env", UNSET, "--out", "e"],
        ["--sim-key-env", UNSET, "not set"],
    ),
    "judge-key-env-unset": (
        ["judge", "run", "--judge-model", "m", "--judge-key-env", UNSET],
        ["--judge-key-env", UNSET, "not set"],
    ),
    "chat-api-key-env-unset": (
        ["chat", "--play-user", "--model", "m", "--api-key-env", UNSET],
        ["--api-key-env", UNSET, "not set"],
    ),
    "profiles-generate-key-env-unset": (
        ["profiles", "generate", "--n", "1", "--model", "m", "--out", "g.jsonl", "--key-env", UNSET],
        ["--key-env", UNSET, "not set"],
    ),
    # 4. a misspelt data set was exit 1
    "data-download-typo": (
        ["data", "download", "sage-tset"],
        ["sage-test, rlver-train", "did you mean sage-test?"],
    ),
    # 6. a misspelt model said "downloading" first
    "models-fetch-typo": (["models", "fetch", "smollm3"], ["'smollm3'", "smollm2-135m-instruct"]),
    # 7. a typo in --set was blamed on the preset
    "train-set-typo": (
        ["train", "--config", "tiny-offline", "--set", "optim.actor_lrr=1e-4", "--out", "x"],
        ["--set optim.actor_lrr", "did you mean optim.actor_lr?"],
    ),
    "eval-set-typo": (
        ["eval", "--agent-tiny", "--set", "limt=2", "--out", "e"],
        ["--set limt", "did you mean limit?"],
    ),
    # 8. a bad config file was "config: invalid configuration"
    "eval-config-unknown-key": (
        ["eval", "--config", "bad.yaml", "--out", "e"],
        ["bad.yaml:3", "limt", "limit"],
    ),
    "eval-config-wrong-type": (
        ["eval", "--config", "badtype.yaml", "--out", "e"],
        ["badtype.yaml:2", "n_per_profile", "'two'"],
    ),
    # 9. a misspelt prompt name read as a missing file
    "agent-prompt-typo": (
        ["eval", "--agent-tiny", "--agent-prompt", "coachng", "--out", "e"],
        ["--agent-prompt", "neutral, coaching, published", "file", "did you mean coaching?"],
    ),
    # 10. the parser's own errors had click's Usage:/Error: block
    "no-such-option": (["eval", "--foo"], ["error: rlver eval: no such option: --foo", "rlver eval --help"]),
    "missing-argument": (["judge"], ["rlver judge: missing argument", "rlver judge --help"]),
    "bad-value": (["eval", "--limit", "x"], ["rlver eval: invalid value for '--limit'"]),
    "no-such-command": (["evl"], ["rlver: unknown command 'evl'; did you mean 'eval'?", "rlver --help"]),
    "no-such-subcommand": (
        ["data", "dowload"],
        ["rlver data: unknown command 'dowload'; did you mean 'download'?"],
    ),
    # 11. config.json and a tokenizer but no weights: a traceback after the run folder was made
    "eval-model-without-weights": (
        ["eval", "--agent-local", "noweights", "--profiles", "bundled-test", "--out", "e"],
        ["--agent-local", "noweights", "no weights"],
    ),
    "train-model-without-weights": (
        ["train", "--config", "tiny-offline", "--set", "model.path=noweights", "--out", "x"],
        ["model.path", "noweights", "no weights"],
    ),
    # 12. a training run written into an evaluation's folder, and the other way round
    "train-into-an-eval-run": (
        ["train", "--config", "tiny-offline", "--out", "run"],
        ["--out run", "eval run"],
    ),
    "eval-into-a-training-run": (
        ["eval", "--agent-tiny", "--profiles", "bundled-test", "--out", "trained"],
        ["--out trained", "training run"],
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED_UP_FRONT))
def test_bad_input_is_refused_before_any_work(
    case: str, box: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 34: each is exit 2 with one ``error:`` line naming the flag or file (and the valid names,
    or the nearest one), no ``Usage:`` block, and nothing written: no run folder, no file in the
    working folder, no change to the run folder it was pointed at."""
    argv, words = REFUSED_UP_FRONT[case]
    monkeypatch.delenv(UNSET, raising=False)
    (box / "bad.yaml").write_text("agent_tiny: true\nprofiles: bundled-test\nlimt: 2\n", encoding="utf-8")
    (box / "badtype.yaml").write_text("agent_tiny: true\nn_per_profile: two\n", encoding="utf-8")
    _model_folder_without_weights(box / "noweights")
    before = sorted(str(p.relative_to(box)) for p in box.rglob("*"))
    code, text = run_in_process(argv, box, monkeypatch, capfd)
    line = assert_one_error_line((code, text))
    for word in words:
        assert word in line, line
    assert "Usage:" not in text and "downloading" not in text, text
    assert sorted(str(p.relative_to(box)) for p in box.rglob("*")) == before, f"{case} wrote into {box}"


def test_a_set_key_variable_or_none_passes_and_its_value_is_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key-variable check refuses only a named variable that is unset or empty; ``''`` (a local
    server with no key) passes, and no message carries the variable's value."""
    from rlver.cli.checks import key_env
    from rlver.errors import ConfigError

    check = key_env("--agent-key-env")
    assert check("") == ""
    monkeypatch.setenv("RLVER_TEST_KEY_SET", "sk-rlver-test-value-0123456789abcdef")
    assert check("RLVER_TEST_KEY_SET") == "RLVER_TEST_KEY_SET"
    monkeypatch.setenv("RLVER_TEST_KEY_SET", "")
    with pytest.raises(ConfigError, match="RLVER_TEST_KEY_SET is not set or is empty") as info:
        check("RLVER_TEST_KEY_SET")
    assert "sk-rlver" not in str(info.value)


def test_resume_with_nothing_to_resume_starts_a_new_run_in_train_and_eval(
    box: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """One rule for both commands (issue 34): ``--resume`` with nothing to resume starts a new run and
    says so in one plain line; both --help texts say it. ``train --resume`` into an empty folder was
    exit 1. The model loading is replaced by a stand-in: what is checked happens before it."""
    import rlver.cli.eval_cmd as eval_cmd
    import rlver.train.trainer as trainer_module
    from rlver.errors import RlverError

    started: list[tuple[str, bool]] = []

    class Loaded(RlverError):
        """Raised where the model would start loading: everything before it has run."""

    def fake_trainer(cfg: object, out: Path, *, resume: bool = False) -> None:
        started.append(("train", resume))
        raise Loaded("stand-in trainer: the model would load now")

    monkeypatch.setattr(trainer_module, "Trainer", fake_trainer)
    monkeypatch.setattr(
        eval_cmd, "run_with_progress", lambda cfg, *, resume: started.append(("eval", resume))
    )
    (box / "emptyrun").mkdir()
    code, text = run_in_process(
        ["train", "--config", "tiny-offline", "--resume", "--out", "emptyrun"], box, monkeypatch, capfd
    )
    assert code == 1 and "stand-in trainer" in text, text
    assert "nothing to resume in emptyrun: starting a new run" in text, text
    code, text = run_in_process(
        ["eval", "--agent-tiny", "--profiles", "bundled-test", "--resume", "--out", "neweval"],
        box,
        monkeypatch,
        capfd,
    )
    assert code == 0, text
    assert "nothing to resume in neweval: starting a new run" in text, text
    assert started == [("train", False), ("eval", True)]  # the runner resumes nothing: a new transcript
    for command in ("train", "eval"):
        _, text = run_in_process([command, "--help"], box, monkeypatch, capfd)
        assert "with nothing there to resume, start a new run" in " ".join(text.split()) or (
            "with no checkpoint there, start a new run" in " ".join(text.split())
        ), text


def test_a_usage_error_is_one_line_as_a_user_runs_it(tmp_path: Path) -> None:
    """The parser's own errors, through the real entry point: one ``error:`` line in rlver's format,
    named ``rlver`` (not ``python -m rlver``), no ``Usage:``/``Error:`` block, exit 2."""
    proc = rlver("eval", "--foo", cwd=tmp_path)
    line = assert_one_error_line(proc)
    assert line.startswith("error: rlver eval: no such option: --foo"), line
    assert proc.stdout + proc.stderr == line + "\n"


def _command_paths() -> list[list[str]]:
    from rlver.cli import app

    paths = [[info.name or ""] for info in app.registered_commands]
    for group in app.registered_groups:
        assert group.typer_instance is not None
        paths += [[group.name or "", info.name or ""] for info in group.typer_instance.registered_commands]
    return paths


def test_every_command_lists_verbose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The root help says any command takes --verbose: each command's --help lists it too."""
    paths = _command_paths()
    assert len(paths) > 20
    for path in [[], *paths]:
        code, text = run_in_process([*path, "--help"], tmp_path, monkeypatch, capfd)
        assert code == 0 and "--verbose" in text, (path, text)


def test_plain_tqdm_bars_only_with_verbose(tmp_path: Path) -> None:
    """``rlver models fetch`` de-quantises with a plain tqdm bar, which ignores the transformers and
    huggingface_hub switches: ``rlver`` switches tqdm off too, before tqdm is imported (it reads its
    environment once, at import), unless --verbose asks for the bars."""
    script = (
        "import sys\n"
        "from rlver.cli import _quiet_third_party\n"
        "_quiet_third_party(sys.argv[1:])\n"
        "from tqdm import tqdm\n"
        "for _ in tqdm(range(3), desc='dequantising'): pass\n"
    )
    env = {k: v for k, v in _env().items() if k != "TQDM_DISABLE"}

    def run(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", script, *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    assert "dequantising" not in run("models", "fetch", "smollm2-135m-instruct")
    assert "dequantising" in run("models", "fetch", "smollm2-135m-instruct", "--verbose")


def test_a_training_run_with_its_own_transcript_is_still_a_training_run(box: Path) -> None:
    """A training run keeps its dialogues in ``transcript.jsonl`` too (manifest ``kind: train``): its
    own folder is not taken for an evaluation's by ``train --resume``, and ``eval`` still refuses it."""
    from rlver.cli.checks import refuse_other_run, run_kind
    from rlver.errors import ConfigError

    trained = box / "trainrun"
    trained.mkdir()
    writer = TranscriptWriter(trained / "transcript.jsonl", RunManifest.create(kind="train", run_name="t"))
    writer.append(_episode("p-1"))
    assert (run_kind(trained), run_kind(box / "run"), run_kind(box / "trained"), run_kind(box / "adir")) == (
        "train",
        "eval",
        "train",
        None,
    )
    refuse_other_run(trained, "train")
    refuse_other_run(box / "run", "eval")
    with pytest.raises(ConfigError, match="holds a training run"):
        refuse_other_run(trained, "eval")
    with pytest.raises(ConfigError, match="holds an rlver eval run"):
        refuse_other_run(box / "run", "train")
