"""A new user's first hour, round 5: the bad inputs that were not clean, exit codes a script can use,
values checked before torch is imported, SIGTERM while loading, and the small items the round found.

The bad inputs are one table (:data:`BAD_INPUTS`), run through ``rlver``'s entry point in this process:
each is exit 2, exactly one ``error:`` line with the words the row names, no traceback, and nothing
written into the working folder (no run folder, no report). What needs a real process (torch not yet
imported, signals, a terminal prompt) runs ``python -m rlver`` as a user does.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from helpers import TINY_TRAIN_SETS, popen_with_ctrl_c
from rlver.interrupt import GRACE_S
from rlver.limits import MAX_TEXT_CHARS, max_dialogues
from rlver.manifest import RunManifest
from rlver.testing.openai_server import FakeChatServer, Fault
from rlver.transcripts.native import TranscriptWriter
from test_env_rewards import make_episode
from test_errors_one_line import assert_one_error_line, run_in_process
from test_eval_judge import verdict

DEAD = "http://127.0.0.1:9/v1"  # nothing listens: any call would fail, so none may be made
NOT_UTF8 = "hello\nw\xe9rld\n".encode("latin-1")  # a Latin-1 file: byte 0xe9 at line 2, column 2


def _write_inputs(box: Path) -> None:
    """Every bad file the table names, and one finished run for the commands that read one."""
    (box / "latin1.txt").write_bytes(NOT_UTF8)
    (box / "tab.yaml").write_text("profiles:\n\t- id: a\n", encoding="utf-8")
    (box / "tab-config.yaml").write_text("agent_tiny: true\nlimit:\t2\n", encoding="utf-8")
    (box / "no-endpoint.yaml").write_text(
        "agent: {model: my-model}\nprofiles: bundled-test\n", encoding="utf-8"
    )
    persona = {"id": "big", "persona": "x" * 2_000_000, "background": "b", "goal": "g", "hidden_need": "h"}
    (box / "big-persona.jsonl").write_text(json.dumps(persona) + "\n", encoding="utf-8")
    (box / "big.txt").write_text("x" * (MAX_TEXT_CHARS + 1), encoding="utf-8")
    (box / "huge.txt").write_bytes(b"x" * 2_000_000)  # refused from its size, never read
    writer = TranscriptWriter(box / "run" / "transcript.jsonl", RunManifest.create(kind="eval", run_name="r"))
    writer.append(make_episode(40, [45, 50]))


#: (argv, words the one error line must hold). Run in a folder holding what :func:`_write_inputs` writes.
BAD_INPUTS: dict[str, tuple[list[str], list[str]]] = {
    # a text file that is not UTF-8: a 52-line traceback before
    "system-prompt-not-utf8": (
        [
            "eval",
            "--agent-tiny",
            "--profiles",
            "bundled-test",
            "--system-prompt",
            "@latin1.txt",
            "--out",
            "e",
        ],
        ["latin1.txt:2:2:", "not UTF-8", "0xe9"],
    ),
    "agent-prompt-file-not-utf8": (
        ["eval", "--agent-tiny", "--profiles", "bundled-test", "--agent-prompt", "latin1.txt", "--out", "e"],
        ["--agent-prompt", "latin1.txt:2:2:", "not UTF-8"],
    ),
    "train-agent-prompt-not-utf8": (
        ["train", "--config", "tiny-offline", "--set", "rollout.agent_prompt=latin1.txt", "--out", "t"],
        ["rollout.agent_prompt", "latin1.txt:2:2:", "not UTF-8"],
    ),
    # counts the machine cannot hold: 4 minutes and 7.6 GB before, then 2 minutes to exit
    "eval-dialogues-beyond-memory": (
        [
            "eval",
            "--agent-tiny",
            "--profiles",
            "bundled-test",
            "--limit",
            "1",
            "--n-per-profile",
            "100000000",
            "--out",
            "e",
        ],
        ["--n-per-profile 100000000", "100,000,000 dialogues", f"at most {max_dialogues():,}"],
    ),
    "train-step-beyond-memory": (
        [
            "train",
            "--config",
            "tiny-offline",
            "--set",
            "rollout.batch_size=100000",
            "--set",
            "rollout.n_per_profile=100000",
            "--out",
            "t",
        ],
        ["rollout.batch_size 100000 x rollout.n_per_profile 100000", f"at most {max_dialogues():,}"],
    ),
    # YAML errors as file:line:col, not pyyaml's five lines
    "profiles-yaml-with-a-tab": (
        ["profiles", "validate", "tab.yaml"],
        ["tab.yaml:2:1: not valid YAML", "spaces, not tabs"],
    ),
    "config-yaml-with-a-tab": (
        ["eval", "--config", "tab-config.yaml", "--out", "e"],
        ["tab-config.yaml:2:7: not valid YAML"],
    ),
    # no silent default endpoint: a model name without its base URL
    "sim-model-without-endpoint": (
        ["eval", "--agent-tiny", "--profiles", "bundled-test", "--sim-model", "gpt-4o", "--out", "e"],
        ["--sim-model 'gpt-4o' has no endpoint", "--sim-base-url", "https://api.openai.com/v1"],
    ),
    "agent-model-without-endpoint": (
        ["eval", "--agent-model", "gpt-4o", "--profiles", "bundled-test", "--out", "e"],
        ["--agent-model 'gpt-4o' has no endpoint", "--agent-base-url"],
    ),
    "config-model-without-endpoint": (
        ["eval", "--config", "no-endpoint.yaml", "--out", "e"],
        ["no-endpoint.yaml:1: agent.base_url", "'my-model' has no endpoint"],
    ),
    "train-sim-model-without-endpoint": (
        ["train", "--config", "tiny-offline", "--sim-model", "gpt-4o", "--out", "t"],
        ["simulator.model.base_url", "'gpt-4o' has no endpoint"],
    ),
    "chat-model-without-endpoint": (
        ["chat", "--play-user", "--model", "m"],
        ["--model 'm'", "--model-base-url"],
    ),
    "judge-without-endpoint": (
        ["judge", "run", "--judge-model", "m"],
        ["--judge-model 'm'", "--judge-base-url"],
    ),
    "generate-without-endpoint": (
        ["profiles", "generate", "--n", "1", "--model", "m", "--out", "g.jsonl"],
        ["--model 'm' has no endpoint", "--base-url"],
    ),
    # report --out: the suffix picks the format; HTML went into r.pdf without a word
    "report-out-pdf": (["report", "run", "--out", "r.pdf"], ["--out r.pdf", ".html or .md", "not .pdf"]),
    "report-out-no-suffix": (["report", "run", "--out", "r"], ["--out r", "without a suffix"]),
    # text fields have a size limit: a 2 MB persona was accepted without a word
    "persona-of-2-mb": (
        ["eval", "--agent-tiny", "--profiles", "big-persona.jsonl", "--out", "e"],
        ["big-persona.jsonl:1: persona", "2,000,000 characters", f"at most {MAX_TEXT_CHARS:,}"],
    ),
    "system-prompt-file-too-long": (
        ["eval", "--agent-tiny", "--profiles", "bundled-test", "--system-prompt", "@big.txt", "--out", "e"],
        ["big.txt", f"{MAX_TEXT_CHARS + 1:,} characters"],
    ),
    "system-prompt-file-of-2-mb": (
        ["eval", "--agent-tiny", "--profiles", "bundled-test", "--system-prompt", "@huge.txt", "--out", "e"],
        ["huge.txt", "2,000,000 bytes", f"at most {MAX_TEXT_CHARS:,} characters"],
    ),
    "system-prompt-too-long": (
        [
            "eval",
            "--agent-tiny",
            "--profiles",
            "bundled-test",
            "--system-prompt",
            "y" * (MAX_TEXT_CHARS + 1),
            "--out",
            "e",
        ],
        ["--system-prompt", f"at most {MAX_TEXT_CHARS:,}"],
    ),
    # the small items
    "export-a-missing-folder": (["export", "runs/nope", "out"], ["runs/nope", "no such folder"]),
    "data-from-a-missing-folder": (
        ["data", "download", "sage-test", "--from", "nope"],
        ["nope", "not a folder"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_each_bad_input_is_one_line_exit_2_before_any_work(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    argv, words = BAD_INPUTS[case]
    _write_inputs(tmp_path)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    line = assert_one_error_line(run_in_process(argv, tmp_path, monkeypatch, capfd))
    for word in words:
        assert word in line, line
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before, f"{case} wrote files"


def test_the_dialogue_bound_follows_the_machine_and_says_so() -> None:
    from rlver.errors import ConfigError
    from rlver.limits import BYTES_PER_DIALOGUE, check_dialogues

    gib = 2**30
    assert max_dialogues(24 * gib) == 24 * gib // 2 // BYTES_PER_DIALOGUE == 98_304
    assert max_dialogues(64 * gib) == 262_144  # a larger machine holds a larger run
    check_dialogues(98_304, "this", "fix it", memory_bytes=24 * gib)
    with pytest.raises(
        ConfigError, match=r"^this = 98,305 dialogues: .*at most 98,304.*24\.0 GiB\); fix it$"
    ):
        check_dialogues(98_305, "this", "fix it", memory_bytes=24 * gib)


# -- values checked before torch ---------------------------------------------------------------------

_PROBE = """
import sys
from rlver.cli import main
sys.argv = ["rlver", *sys.argv[1:]]
try:
    main()
except SystemExit as done:
    print(json.dumps({"rc": done.code, "heavy": sorted(m for m in ("torch", "transformers") if m in sys.modules)}))
"""


def _refused_before_torch(*argv: str, cwd: Path) -> tuple[dict[str, Any], str, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + _PROBE, *argv],
        capture_output=True, text=True, cwd=cwd, timeout=300, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    took = time.perf_counter() - started
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr, took


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--config", "tiny-offline", "--set", "optim.actor_lr=-1", "--out", "t"],
        ["train", "--config", "grpo-think", "--set", "algorithm.name=gpro", "--out", "t"],
        ["train", "--config", "tiny-offline", "--set", "model.path=/no/such/model", "--out", "t"],
        ["train", "--config", "tiny-offline", "--set", "rollout.profiles=nope", "--out", "t"],
        ["eval", "--agent-tiny", "--set", "env.rules.max_assistant_turns=0", "--out", "e"],
    ],
    ids=["train-number", "train-name", "train-model-path", "train-profiles", "eval-number"],
)
def test_a_bad_value_is_refused_while_torch_is_not_imported(argv: list[str], tmp_path: Path) -> None:
    """A bad `train --set` was checked only after torch was imported: 76-117 s under load."""
    result, stderr, _ = _refused_before_torch(*argv, cwd=tmp_path)
    assert result == {"rc": 2, "heavy": []}, stderr
    assert stderr.startswith("error: ") and len(stderr.strip().splitlines()) == 1, stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.timing
def test_a_bad_train_set_is_refused_in_under_3_s(tmp_path: Path) -> None:
    """The issue's target, on a quiet machine: the whole process, start to exit."""
    result, stderr, took = _refused_before_torch(
        "train", "--config", "grpo-think", "--set", "optim.actor_lr=-1", "--out", "t", cwd=tmp_path
    )
    assert result["rc"] == 2, stderr
    assert took < 3.0, f"took {took:.1f} s"


# -- exit codes ---------------------------------------------------------------------------------------


def _rlver(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", *map(str, argv)],
        capture_output=True, text=True, cwd=cwd, timeout=300, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip


def _fail_requests_holding(text: str) -> Callable[[dict[str, Any]], Fault | None]:
    """A fault plan that rejects (HTTP 400, never retried) every request whose messages hold ``text``."""

    def choose(request: dict[str, Any]) -> Fault | None:
        return Fault.rejected(400, "bad request") if text in json.dumps(request, ensure_ascii=False) else None

    return choose


def test_eval_exits_0_when_all_finished_3_when_some_failed_1_when_none(tmp_path: Path) -> None:
    """An eval where 72 % of the dialogues failed exited 0: a script could not tell it from a good run."""
    from rlver.profiles.sets import load_profile_set

    second = load_profile_set("bundled-test")[1]
    assert second.opening is not None
    common = ["--agent-model", "echo", "--agent-key-env", "", "--profiles", "bundled-test", "--limit", "2"]
    common += ["--set", "env.rules.max_assistant_turns=1", "--no-report"]
    with FakeChatServer() as server:
        whole = _rlver("eval", "--agent-base-url", server.url, *common, "--out", "whole", cwd=tmp_path)
        server.fault_for = _fail_requests_holding(second.opening)
        partial = _rlver("eval", "--agent-base-url", server.url, *common, "--out", "partial", cwd=tmp_path)
    dead = _rlver("eval", "--agent-base-url", DEAD, *common, "--out", "dead", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert partial.returncode == 3, partial.stdout + partial.stderr
    assert (
        "1 dialogue(s) failed" in partial.stderr + partial.stdout
        and "exit code 3" in partial.stderr + partial.stdout
    )
    assert "Traceback" not in partial.stderr and not [
        x for x in partial.stderr.splitlines() if x.startswith("error:")
    ]
    assert dead.returncode == 1, dead.stderr


def test_judge_exits_3_when_some_dialogues_were_not_judged(tmp_path: Path) -> None:
    from test_report import make_episode as report_episode
    from test_report import write_run

    run = write_run(tmp_path / "run", "r", [report_episode("p1", [5]), report_episode("p2", [3])])

    def answer(request: dict[str, Any]) -> str:
        return json.dumps(verdict())

    with FakeChatServer(answer, fault_for=_fail_requests_holding("opening of p2")) as server:
        done = _rlver(
            "judge", run, "--judge-model", "j", "--judge-base-url", server.url, "--judge-key-env", "",
            "--no-cache", "--no-report", cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "judged 1 / failed 1" in done.stdout


def test_the_exit_codes_are_in_the_help(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for argv in (["--help"], ["eval", "--help"], ["judge", "--help"], ["probe", "--help"]):
        code, text = run_in_process(argv, tmp_path, monkeypatch, capfd)
        flat = " ".join(text.split())
        assert code == 0 and "Exit codes: 0 all finished; 3 finished, but some" in flat, (argv, text)
        assert "1 none finished" in flat and "2 bad input" in flat and "130/143" in flat


# -- SIGTERM while loading ------------------------------------------------------------------------------


@pytest.mark.slow  # a subprocess that imports torch: 5-20 s on the shared box
def test_sigterm_while_loading_ends_the_process_within_the_grace_period(tmp_path: Path) -> None:
    """Sent as soon as the run starts building its model (the tiny agent's folder appears): exit 143,
    one line, and the folder the run made is gone (it holds nothing to resume)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlver", "eval", "--agent-tiny", "--profiles", "bundled-test", "--limit", "4",
         "--agent-max-tokens", "400", "--out", "ev"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not (tmp_path / "ev" / "tiny-agent").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=GRACE_S + 30)  # the watchdog's bound, with room for a loaded box
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and len([x for x in err.splitlines() if x.startswith("error:")]) == 1, err
    assert "stopping took over" not in err  # ended by the stop itself, not by the watchdog
    assert not (tmp_path / "ev").exists()


# -- the small items ------------------------------------------------------------------------------------


def test_every_option_of_every_command_says_what_it_does() -> None:
    """`chat --seed` and `--temperature`, `probe --seed` and `--start-emotion`, `profiles generate
    --temperature` and `--max-tokens` had no help text."""
    import typer.main

    from rlver.cli import app

    missing: list[str] = []

    def walk(command: Any, path: list[str]) -> None:
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, [*path, name])
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden and not (param.help or "").strip():
                missing.append(f"rlver {' '.join(path)} {param.opts[0]}")

    walk(typer.main.get_command(app), [])
    assert not missing, missing


def test_train_help_names_no_flag_train_does_not_have(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, text = run_in_process(["train", "--help"], tmp_path, monkeypatch, capfd)
    assert code == 0 and "--sim-model" in text
    assert "--simulator" not in text, text  # it said "implies --simulator llm"; train has no such flag
    assert "simulator.kind=llm" in " ".join(text.split())


def test_time_left_counts_from_the_first_dialogue_that_ended() -> None:
    """The first line said "about 52 min left" for a run that took 47 s: 100 dialogues run together,
    the first ends after 31 s of loading and generating, and the rest end within seconds."""
    from rlver.heartbeat import Pace, eta

    assert eta(31.0, 1, 100) == ", about 51 min left"  # what the old line divided by
    pace = Pace()
    assert pace.left(1, 100, now=31.0) == ""  # the first ending only starts the clock
    assert pace.left(50, 100, now=36.0) == ", about 5 s left"
    assert pace.left(100, 100, now=41.0) == ""


def test_inspect_labels_the_parts_of_the_users_reply_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """SAGE's reply plan ends with ``Change:``, the rewrite of a draft reply; shown unlabelled under the
    appraisal, it read like the emotion change."""
    ep = make_episode(40, [45])
    plan = "she wants to be heard\nOrigin:\n[ok I guess]\nChange:\n[shorter, more casual]"
    turns = [ep.user_turns[0], ep.user_turns[1].model_copy(update={"extra": {"thinking": plan}})]
    writer = TranscriptWriter(tmp_path / "transcript.jsonl", RunManifest.create(kind="eval", run_name="r"))
    writer.append(ep.model_copy(update={"user_turns": turns}))
    code, text = run_in_process(
        ["inspect", "transcript.jsonl", "--dialogue", "1"], tmp_path, monkeypatch, capfd
    )
    assert code == 0, text
    lines = [line.strip() for line in text.splitlines()]
    assert "thinking: she wants to be heard" in lines
    assert "first draft: ok I guess" in lines and "draft rewritten: shorter, more casual" in lines
    assert not [line for line in lines if "Change:" in line or "Origin:" in line], text


def test_ctrl_c_at_the_chat_prompt_ends_at_once_on_a_new_line(tmp_path: Path) -> None:
    """`You: ` was left with no newline, and the process waited for the thread reading the keyboard
    until the interrupt watchdog ended it (30 s, and a second error line). The keyboard is a terminal here (a pty that stays open), as a person's is: a pipe would
    end the read when the test closes it."""
    import pty

    keyboard, terminal = pty.openpty()
    proc = popen_with_ctrl_c(
        [sys.executable, "-m", "rlver", "chat"],
        cwd=tmp_path, stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    shown = b""
    try:
        deadline = time.monotonic() + 120
        while not shown.endswith(b"You: "):
            assert time.monotonic() < deadline and proc.poll() is None, shown
            if select.select([proc.stdout], [], [], 0.5)[0]:
                shown += os.read(proc.stdout.fileno(), 4096)
        proc.send_signal(signal.SIGINT)
        # No clock here (a loaded machine is slow to exit): the hang this test is for ends only by the
        # interrupt watchdog after GRACE_S, whose own error line the stderr check below then finds.
        out, err = proc.communicate(timeout=GRACE_S + 90)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(keyboard)
        os.close(terminal)
    assert proc.returncode == 130, err
    assert (shown.decode() + out).endswith("You: \n")
    assert err.strip().splitlines() == ["error: interrupted: the dialogue ended here"], err


def test_audit_counts_failed_records_apart_from_dialogues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    writer = TranscriptWriter(tmp_path / "transcript.jsonl", RunManifest.create(kind="eval", run_name="r"))
    for pid in ("a", "b"):
        writer.append(make_episode(40, [45]).model_copy(update={"profile_id": pid}))
    failed = make_episode(40, [45]).model_copy(update={"profile_id": "c", "status": "failed", "error": "x"})
    writer.append(failed)
    code, text = run_in_process(["audit", "transcript.jsonl"], tmp_path, monkeypatch, capfd)
    assert code == 0, text
    assert "2 dialogues (and 1 failed record(s), not counted as dialogues), 3 appraisals checked: OK" in text


def test_the_demo_says_what_the_replacement_characters_are() -> None:
    """The tiny model writes byte fragments that decode to U+FFFD: they read as mojibake."""
    from rlver.cli.demo_cmd import summary_lines

    def result(reply: str) -> Any:
        numbers = {"score": 12.9, "n": 24, "vetoed": 0, "replies": 48, "vetoes": {}}
        example = {"before": ["user: hi", f"assistant: {reply}"], "after": ["user: hi", "assistant: ok"]}
        summary = {"offline_user": "u", "before": numbers, "after": numbers, "example": example, "steps": 1,
                   "wall_s": 1.0, "peak_rss_mb": 1.0}  # fmt: skip
        return SimpleNamespace(summary=summary, report_html="r.html", report_md="r.md")

    noted = [line for line in summary_lines(result("理解\ufffd cle了")) if "not an encoding fault" in line]
    assert len(noted) == 1 and "\ufffd marks bytes the model wrote" in noted[0]
    assert not [line for line in summary_lines(result("plain text")) if "encoding fault" in line]


@pytest.mark.slow  # one tiny training step: 10-30 s on the shared box
def test_the_rollout_phase_counts_dialogues_not_profiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "rollout of 8 dialogues" was 8 profiles x 4 = 32 dialogues."""
    import rlver.train.trainer as trainer_module
    from rlver.train.config import load_train_config

    phases: list[str] = []
    monkeypatch.setattr(trainer_module.activity, "set_phase", phases.append)
    config = load_train_config("tiny-offline", [*TINY_TRAIN_SETS, "rollout.n_per_profile=3", "run.steps=1"])
    trainer_module.Trainer(config, tmp_path / "run").train_step()
    assert "step 1: rollout of 6 dialogues (2 profiles x 3)" in phases, phases
