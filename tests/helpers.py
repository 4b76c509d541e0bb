"""Test data shared by several test files: the test profiles and the tiny training command line.

Imported as ``from helpers import ...`` (pytest puts ``tests/`` on the path, as for
``from test_env_rewards import make_episode``). Kept here, not inline, so that a change to the profile
schema or to the training CLI is made once; a test that needs a variant copies a profile with
``model_copy(update=...)``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlver.profiles.loaders import load_profiles
from rlver.registry import Entry, Registry

#: The published data, when a developer or CI has it: ``$RLVER_SHARED_DATA``, else ``../shared/data``
#: beside the checkout. Only the ``shared_data`` fixture hands it to tests; every other test runs as on
#: a fresh clone with nothing beside it. Here, not in conftest.py, because ``from conftest import``
#: finds whichever folder's conftest.py was imported first (tests/rollout/ has one).
SHARED_DATA = Path(
    os.environ.get("RLVER_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)

#: Every profile a test names by id (``tests/data/profiles.yaml``), read with rlver's own loader;
#: ``source`` is left empty, as for a profile written inline.
TEST_PROFILES = {p.id: p for p in load_profiles(Path(__file__).parent / "data" / "profiles.yaml", source="")}
#: An English user with an opening line of their own (so no opening is generated).
SAM_EN = TEST_PROFILES["en-1"]
#: A Chinese user without an opening line (the simulator writes it).
XIAOLIN_ZH = TEST_PROFILES["zh-1"]
#: A minimal English profile (language, traits and style left to their defaults) with an opening line.
NURSE_EN = TEST_PROFILES["p-test"]

#: The smallest ``tiny-offline`` run that still does every part of a step: 2 profiles x 2 dialogues of
#: one reply of at most 8 tokens, no evaluation, no progress bar, no TensorBoard.
TINY_TRAIN_SETS = (
    "rollout.batch_size=2",
    "rollout.n_per_profile=2",
    "rollout.rules.max_assistant_turns=1",
    "rollout.max_new_tokens=8",
    "eval.every=0",
    "eval.at_start=false",
    "run.progress=false",
    "run.tensorboard=false",
)


def train_argv(
    out: str | Path, *sets: str, steps: int | None = None, config: str = "tiny-offline"
) -> list[str]:
    """``rlver train --config tiny-offline [--steps N] --out OUT --set k=v ...``, without the program
    name (prefix ``sys.executable -m rlver`` or pass it to a test's own ``rlver(...)``)."""
    argv = ["train", "--config", config]
    if steps is not None:
        argv += ["--steps", str(steps)]
    argv += ["--out", str(out)]
    for item in sets:
        argv += ["--set", item]
    return argv


def popen_with_ctrl_c(cmd: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """``subprocess.Popen(cmd, text=True, **kwargs)`` for a child that must act on SIGINT as after Ctrl-C.

    A shell that starts a job in the background (``make test &`` in a script) sets SIGINT to ignored
    for it, and an ignored signal stays ignored across exec: the child would never see the test's
    SIGINT. A handled signal is reset to its default at exec, so handle it here while the child starts.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(cmd, text=True, **kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)


def count_optimiser_steps(trainer: Any) -> list[int]:
    """Count the optimiser steps a trainer takes, on the optimiser itself (not on a logged metric): the
    returned list gets the trainer's step number once per optimiser step."""
    steps: list[int] = []
    real_step = trainer.optimisers.step

    def counted() -> None:
        steps.append(trainer.step)
        real_step()

    trainer.optimisers.step = counted
    return steps


async def user_lines(user: Any, replies: list[str], *, with_opening: bool = False) -> list[str]:
    """What a simulated ``user`` says over a dialogue of ``replies``, until it ends the dialogue.

    One helper for the simulator tests that read a whole dialogue's lines (repetition, answers), so
    each test states only the replies; ``with_opening`` puts the user's first line in front.
    """
    opening = (await user.open()).text
    said = [opening] if with_opening else []
    for reply in replies:
        turn = await user.respond(reply)
        said.append(turn.text)
        if turn.ends_dialogue:
            break
    return said


def restore_after_test(monkeypatch: pytest.MonkeyPatch, registry: Registry[Any]) -> None:
    """Whatever this test adds to or removes from ``registry`` is undone when it ends: the registry's
    table is swapped for a copy, and ``monkeypatch`` puts the original back."""
    monkeypatch.setattr(registry, "_entries", dict(registry._entries))


def add_for_test(monkeypatch: pytest.MonkeyPatch, registry: Registry[Any], entry: Entry[Any]) -> None:
    """Add (or replace) ``entry`` in ``registry`` for this test only, as a plugin would add it."""
    restore_after_test(monkeypatch, registry)
    registry.add_entry(entry)


def run_rlver(
    *args: str, cwd: Path, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m rlver ARGS`` in ``cwd``, offline and one thread, with no API key in its environment
    (``env`` is added last, so a test may set one on purpose); a traceback on stderr fails the test
    (every failure of the CLI is one ``error:`` line)."""
    base = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    base.pop("OPENAI_API_KEY", None)
    env = {**base, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def published_training_argv(url: str, *sets: str) -> list[str]:
    """``rlver train`` of one ``tiny-offline`` step on ``train.jsonl`` (published rows) into ``run/``,
    with the published training rules, prompt and simulator (``rlver-published`` at ``url``); ``sets``
    add ``--set`` overrides (the rollout's size, the held-out evaluation)."""
    published = (
        "simulator.kind=llm", "simulator.prompts.name=rlver-published", "simulator.model.model=sim",
        f"simulator.model.base_url={url}", "simulator.model.api_key_env=",
        "rollout.rules.preset=published_training", "rollout.agent_prompt=rlver-published",
        "rollout.profiles=train.jsonl", "eval.at_start=false", "eval.every=0", "eval.samples_per_profile=1",
        "run.progress=false", "run.tensorboard=false",
    )  # fmt: skip
    return train_argv("run", *published, *sets, steps=1)


def endpoint_eval_argv(url: str, *extra: str) -> list[str]:
    """``rlver eval`` of an agent and an LLM simulator both served at ``url`` (a test server), on the
    English test users, 3 replies each, into ``run/``; ``extra`` adds flags."""
    return [
        "eval", "--agent-base-url", url, "--agent-model", "policy",
        "--simulator", "llm", "--sim-base-url", url, "--sim-model", "sim",
        "--profiles", "en-test", "--out", "run", "--no-report",
        "--set", "env.rules.max_assistant_turns=3", *extra,
    ]  # fmt: skip
