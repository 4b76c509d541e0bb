"""Test data shared by several test files: profile literals and the tiny training command line.

Imported as ``from helpers import ...`` (pytest puts ``tests/`` on the path, as for
``from test_env_rewards import make_episode``). Kept here, not inline, so that a change to the profile
schema or to the training CLI is made once; a test that needs a variant copies one with
``model_copy(update=...)`` and says why.
"""

from __future__ import annotations

from pathlib import Path

from rlver.profiles.schema import Profile

#: An English user with an opening line of their own (so no opening is generated).
SAM_EN = Profile(
    id="en-1",
    language="en",
    persona="Sam, 29, a line cook who jokes when things get heavy.",
    background="Sam's restaurant closed suddenly and the owner still owes two weeks of pay.",
    goal="Figure out what to do about the unpaid wages.",
    hidden_need="To feel that being angry about it is fair before thinking about next steps.",
    traits=["proud", "blunt"],
    style="negative",
    opening="So my restaurant just shut down. No warning.",
)

#: A Chinese user without an opening line (the simulator writes it).
XIAOLIN_ZH = Profile(
    id="zh-1",
    language="zh",
    persona="小林，26岁，程序员，说话直接。",
    background="小林加班三个月做的项目被领导拿去邀功。",
    goal="倾诉被抢功劳的委屈。",
    hidden_need="希望自己的付出被认可。",
    traits=["敏感", "要强"],
    style="passive",
)

#: A minimal English profile (defaults for language, traits and style) with an opening line.
NURSE_EN = Profile(
    id="p-test",
    persona="A night-shift nurse, dry humour.",
    background="Her manager keeps moving her shifts without asking.",
    goal="Vent about the schedule.",
    hidden_need="To hear that being annoyed is fair.",
    opening="They changed my shifts again. Third time this month.",
)

#: The smallest ``tiny-offline`` run that still does every part of a step: 2 profiles x 2 dialogues of
#: one reply of at most 8 tokens, no evaluation, no progress bar, no TensorBoard.
TINY_TRAIN_SETS = (
    "rollout.batch_size=2",
    "rollout.n_per_profile=2",
    "rollout.max_assistant_turns=1",
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
