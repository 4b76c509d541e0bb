"""Ctrl-C (or SIGTERM) in ``rlver train`` keeps the finished steps (issue 43, item 2).

The first signal abandons the step in flight if its update has not begun (nothing of it is kept but
transcript lines that ``--resume`` cuts back) or lets it finish once the update has begun; then the last
finished step is checkpointed atomically and the message names the resume command. ``--resume`` from
there repeats an uninterrupted run bit for bit: the same metrics, the same dialogues, the same weights.

Real subprocesses and real signals, on the tiny offline preset; the branch "the step finishes first",
which needs the signal to land inside an update, is driven in-process by a real ``SIGINT`` the process
sends itself from inside the update.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from helpers import TINY_TRAIN_SETS, popen_with_ctrl_c, train_argv
from rlver.interrupt import finish_first, graceful_stop, interruptible, signalled_during, stop_requested

STEPS = 6
#: no checkpoint before the end: the issue's case, where a Ctrl-C used to lose every finished step
SETS = (*TINY_TRAIN_SETS, "run.checkpoint_every=0", "run.keep_checkpoints=5")
VOLATILE_METRICS = ("time/", "perf/")


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "COLUMNS": "200",
            "PYTHONUNBUFFERED": "1"}  # fmt: skip


def _rlver(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", *argv], capture_output=True, text=True, env=_env(), cwd=cwd,
        timeout=300,
    )  # fmt: skip


def _metric_lines(run: Path) -> int:
    path = run / "metrics.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _stable_metrics(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE_METRICS)} for r in rows]


def _untimed(value: object) -> object:
    """``value`` without its durations (every key ending in ``_s``: wall_s, latency_s, policy_s...)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not k.endswith("_s")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _stable_episodes(run: Path) -> list[object]:
    rows = [json.loads(line) for line in (run / "transcript.jsonl").read_text().splitlines()]
    return [_untimed(r) for r in rows if r.get("type") == "episode"]


def _weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return load_file(checkpoint / "policy" / "model.safetensors")


def _interrupt_after(run: Path, cwd: Path, sig: int, finished: int) -> tuple[int, str]:
    """Start the run; once ``finished`` steps are logged, send ``sig``; (exit code, stderr)."""
    proc = popen_with_ctrl_c(
        [sys.executable, "-m", "rlver", *train_argv(run.name, *SETS, steps=STEPS)],
        cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while _metric_lines(run) < finished:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no finished step within 300 s"
            time.sleep(0.02)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run the interrupted-and-resumed one must equal."""
    cwd = tmp_path_factory.mktemp("straight")
    proc = _rlver(train_argv("run", *SETS, steps=STEPS), cwd)
    assert proc.returncode == 0, proc.stderr
    return cwd / "run"


@pytest.mark.slow  # three `rlver train` processes: ~40 s on the shared 2-core box
def test_ctrl_c_keeps_the_finished_steps_and_resume_is_bit_identical(straight: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    code, err = _interrupt_after(run, tmp_path, signal.SIGINT, finished=2)
    assert code == 130, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    message = errors[0]
    kept = _metric_lines(run)
    assert 2 <= kept < STEPS, message
    # the step in flight: abandoned (its update had not begun) or finished first; the message says which
    assert (
        f"step {kept + 1} was abandoned" in message
        or f"step {kept} finished first" in message
        or (f"interrupted after step {kept}" in message)
    ), message
    checkpoint = run / "checkpoints" / f"step_{kept:06d}"
    assert f"saved step {kept} to {checkpoint.relative_to(tmp_path)}" in message, message
    assert (run / "checkpoints" / "latest").read_text().strip() == checkpoint.name
    assert json.loads((checkpoint / "state.json").read_text())["step"] == kept
    assert not list((run / "checkpoints").glob(".*")), "a temporary folder was left"

    # the resume command, exactly as the message gives it
    command = shlex.split(message.split("continue with: ", 1)[1])
    assert command[:4] == ["rlver", "train", "--resume", "--out"], message
    resumed = _rlver(command[1:], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"from step {kept} to {STEPS}" in resumed.stdout

    assert _stable_metrics(run) == _stable_metrics(straight)
    assert _stable_episodes(run) == _stable_episodes(straight)
    final = f"step_{STEPS:06d}"
    a, b = _weights(straight / "checkpoints" / final), _weights(run / "checkpoints" / final)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), "the resumed weights differ"


@pytest.mark.slow  # one `rlver train` process: ~15 s on the shared 2-core box
def test_sigterm_keeps_the_finished_steps_too(tmp_path: Path) -> None:
    run = tmp_path / "run"
    code, err = _interrupt_after(run, tmp_path, signal.SIGTERM, finished=1)
    assert code == 143, err
    kept = _metric_lines(run)
    assert kept >= 1 and (run / "checkpoints" / f"step_{kept:06d}" / "trainer_state.pt").exists(), err
    assert "continue with: rlver train --resume --out run" in err, err


# -- the step in flight finishes when the signal lands inside its update (in-process) ---------------


@pytest.fixture
def _own_signals() -> object:
    """An in-process signal leaves SIGINT ignored and the stop flag set (the process is meant to be on
    its way out); put both back for the tests that follow."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    stop_requested.clear()
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


@pytest.mark.usefixtures("_own_signals")
def test_a_signal_inside_finish_first_is_raised_when_the_block_ends() -> None:
    """A real SIGINT inside the block: the block runs to its end, then KeyboardInterrupt."""
    done = []
    with pytest.raises(KeyboardInterrupt), graceful_stop(), finish_first():
        os.kill(os.getpid(), signal.SIGINT)
        done.append("after the signal")
    assert done == ["after the signal"]


@pytest.mark.usefixtures("_own_signals")
def test_a_signal_outside_finish_first_is_raised_at_once() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), graceful_stop():
        os.kill(os.getpid(), signal.SIGINT)
        done.append("after the signal")
    assert done == []


@pytest.mark.usefixtures("_own_signals")
def test_an_interruptible_part_of_a_finish_first_block_is_cut_at_once() -> None:
    """Inside ``finish_first``, ``interruptible`` raises a signal at once (the watchdog armed), and a
    signal noted earlier in the block skips it; ``signalled_during`` names the phase it came in."""
    from rlver.heartbeat import activity

    done = []
    activity.set_phase("held-out evaluation of 2 dialogues")
    with pytest.raises(KeyboardInterrupt), graceful_stop(), finish_first(), interruptible():
        os.kill(os.getpid(), signal.SIGINT)
        done.append("after the signal")
    assert done == [] and stop_requested.is_set()
    assert signalled_during() == "held-out evaluation of 2 dialogues"
    stop_requested.clear()
    activity.set_phase("step 1: update")
    with pytest.raises(KeyboardInterrupt), graceful_stop(), finish_first():
        os.kill(os.getpid(), signal.SIGINT)
        done.append("the rest of the update")
        activity.set_phase("held-out evaluation of 2 dialogues")
        with interruptible():
            done.append("the evaluation")
    assert done == ["the rest of the update"] and signalled_during() == "step 1: update"


@pytest.mark.slow  # three tiny runs in-process: 22 s on the shared 2-core box at load 8
@pytest.mark.usefixtures("_own_signals")
def test_a_signal_in_the_update_lets_the_step_finish_and_saves_it(tmp_path: Path) -> None:
    """SIGINT sent from inside step 2's update: step 2 finishes, is saved with the RNG states it ended
    with, and resuming gives the weights of an uninterrupted 3-step run."""
    from rlver.train.checkpoint import load_trainer_state
    from rlver.train.config import load_train_config
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    cfg = load_train_config("tiny-offline", [*SETS, "run.steps=3"])
    straight = Trainer(cfg, tmp_path / "a")
    straight.train()

    trainer = Trainer(cfg, tmp_path / "b")
    update = trainer.learner.update

    def signalled_update(*args: object, **kwargs: object) -> dict:
        if trainer.step == 1:  # step 2's update
            os.kill(os.getpid(), signal.SIGINT)
        return update(*args, **kwargs)  # type: ignore[arg-type]

    trainer.learner.update = signalled_update  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt), graceful_stop():
        trainer.train()
    assert trainer.step == 2
    assert trainer.interrupt_note.startswith("step 2 finished first"), trainer.interrupt_note
    saved = tmp_path / "b" / "checkpoints" / "step_000002"
    assert f"saved step 2 to {saved}" in trainer.interrupt_note
    assert trainer.rng_at_step_end is not None
    state = load_trainer_state(saved)
    assert torch.equal(state["rng"]["torch"], trainer.rng_at_step_end["torch"])

    stop_requested.clear()  # a new command in this process, as `rlver train --resume` is
    resumed = Trainer(cfg, tmp_path / "b", resume=True)
    assert resumed.step == 2
    resumed.train()
    a, b = straight.policy.state_dict(), resumed.policy.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a), "the resumed weights differ"


# -- a Ctrl-C during the in-training evaluation cuts it short; the message names the phase ----------
#: an evaluation after every step: 4 held-out dialogues of two replies
EVAL_SETS = (*SETS, "run.steps=3", "eval.every=1", "eval.limit=2", "eval.samples_per_profile=2")


def _signal_in_the_evaluation(trainer: object, at_step: int, after_replies: int) -> list[str]:
    """Make the simulated users of step ``at_step``'s evaluation send SIGINT once they have answered
    ``after_replies`` replies; returns the phase seen at each answer (the answers given)."""
    from rlver.heartbeat import activity

    simulator = trainer.simulator  # type: ignore[attr-defined]
    start = simulator.start
    answered: list[str] = []

    def start_user(*args: object, **kwargs: object) -> object:
        user = start(*args, **kwargs)
        respond = user.respond

        async def signalled_respond(reply: str) -> object:
            if trainer.step == at_step and activity.phase.startswith("held-out"):  # type: ignore[attr-defined]
                answered.append(activity.phase)
                if len(answered) == after_replies:
                    os.kill(os.getpid(), signal.SIGINT)
            return await respond(reply)

        user.respond = signalled_respond
        return user

    simulator.start = start_user
    return answered


@pytest.mark.usefixtures("_own_signals")  # three tiny runs in-process: 3 s at load 3, 25 s at load 8
def test_a_signal_in_the_evaluation_cuts_it_short_and_keeps_the_step(tmp_path: Path) -> None:
    """SIGINT during step 2's held-out evaluation: the evaluation stops there (its other dialogues are
    never answered), the stop is under way with the watchdog armed, step 2 is logged and saved without
    held-out numbers, the message names the evaluation, and resuming gives the uninterrupted weights."""
    import threading

    from rlver.train.config import load_train_config
    from rlver.train.logger import read_metrics
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    cfg = load_train_config("tiny-offline", list(EVAL_SETS))
    straight = Trainer(cfg, tmp_path / "a")
    straight.train()

    trainer = Trainer(cfg, tmp_path / "b")
    answered = _signal_in_the_evaluation(trainer, at_step=2, after_replies=2)
    with pytest.raises(KeyboardInterrupt), graceful_stop():
        trainer.train()
    assert trainer.step == 2 and trainer.evaluation_cut
    assert len(answered) <= 4, answered  # of 8 replies the evaluation would have answered (4 x 2)
    assert stop_requested.is_set()
    assert "rlver-interrupt-watchdog" in {t.name for t in threading.enumerate()}
    note = trainer.interrupt_note
    assert note.startswith("step 2 finished; the signal cut its held-out evaluation of 4 dialogues short")
    assert f"saved step 2 to {tmp_path / 'b' / 'checkpoints' / 'step_000002'}" in note, note
    logged = read_metrics(tmp_path / "b")
    assert [r["step"] for r in logged] == [1, 2]
    assert "eval/score" in logged[0] and not any(k.startswith("eval/") for k in logged[1]), logged[1]

    stop_requested.clear()
    resumed = Trainer(cfg, tmp_path / "b", resume=True)
    assert resumed.step == 2
    resumed.train()
    a, b = straight.policy.state_dict(), resumed.policy.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a), "the resumed weights differ"


@pytest.mark.usefixtures("_own_signals")
def test_a_signal_in_the_update_skips_the_evaluation_and_names_the_update(tmp_path: Path) -> None:
    """SIGINT inside step 1's update, an evaluation due after it: the step finishes, the evaluation is
    skipped, and the message names the update (the phase when the signal came, not the last one)."""
    from rlver.train.config import load_train_config
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    trainer = Trainer(load_train_config("tiny-offline", list(EVAL_SETS)), tmp_path)
    update = trainer.learner.update

    def signalled_update(*args: object, **kwargs: object) -> dict:
        os.kill(os.getpid(), signal.SIGINT)
        return update(*args, **kwargs)  # type: ignore[arg-type]

    trainer.learner.update = signalled_update  # type: ignore[method-assign]
    evaluated: list[int] = []
    trainer.evaluate = lambda: evaluated.append(trainer.step) or {}  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt), graceful_stop():
        trainer.train()
    assert trainer.step == 1 and evaluated == [] and not trainer.evaluation_cut
    assert trainer.interrupt_note.startswith("step 1 finished first (the signal came during its update)")


@pytest.mark.usefixtures("_own_signals")  # three 3-step tiny runs in-process, an evaluation each step
def test_a_step_whose_evaluation_a_signal_skipped_is_evaluated_on_resume(tmp_path: Path) -> None:
    """SIGINT inside step 2's update, an evaluation due after every step: step 2 finishes and is saved
    without its evaluation; ``--resume`` runs that evaluation first, logged at step 2, so the resumed
    run's ``eval_history`` and held-out numbers are the uninterrupted run's, step for step, and so are
    its weights. A resume whose last step was evaluated runs no evaluation twice."""
    from rlver.train.config import load_train_config
    from rlver.train.logger import read_metrics
    from rlver.train.trainer import Trainer

    torch.set_num_threads(1)
    cfg = load_train_config("tiny-offline", list(EVAL_SETS))
    straight = Trainer(cfg, tmp_path / "a")
    straight.train()
    assert [e["step"] for e in straight.eval_history] == [1, 2, 3]

    trainer = Trainer(cfg, tmp_path / "b")
    update = trainer.learner.update

    def signalled_update(*args: object, **kwargs: object) -> dict:
        if trainer.step == 1:  # step 2's update
            os.kill(os.getpid(), signal.SIGINT)
        return update(*args, **kwargs)  # type: ignore[arg-type]

    trainer.learner.update = signalled_update  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt), graceful_stop():
        trainer.train()
    assert trainer.step == 2 and [e["step"] for e in trainer.eval_history] == [1]

    stop_requested.clear()
    resumed = Trainer(cfg, tmp_path / "b", resume=True)
    assert [e["step"] for e in resumed.eval_history] == [1]
    resumed.train()
    assert resumed.eval_history == straight.eval_history
    logged = [(r["step"], r["eval/score"]) for r in read_metrics(tmp_path / "b") if "eval/score" in r]
    assert logged == [(e["step"], e["score"]) for e in straight.eval_history]
    a, b = straight.policy.state_dict(), resumed.policy.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a), "the resumed weights differ"

    evaluated: list[int] = []
    again = Trainer(cfg, tmp_path / "b", resume=True)  # step 3 was evaluated: nothing to catch up
    again.evaluate = lambda: evaluated.append(again.step) or {}  # type: ignore[method-assign]
    again.train()
    assert evaluated == []
