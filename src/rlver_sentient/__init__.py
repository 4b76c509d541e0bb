"""``rlver-sentient``: the Sentient Benchmark's simulated user as a verifiers (v1) environment.

Each task is one profile; the env plays the dialogue with rlver's own simulated user (the offline user,
or the LLM user, which asks SAGE's own questions on the SAGE profiles) under rlver's dialogue rules,
and the assistant (the trainable agent) earns the published reward, the final emotion / 100::

    pip install -e '.[verifiers]'          # Python >= 3.11 (verifiers' floor; rlver's core keeps 3.10)
    vf-eval rlver-sentient -m MODEL --client.base-url URL --client.api-key-var VAR --no-push -o OUT \\
        --env.taskset.profiles bundled --env.taskset.simulator offline --env.taskset.limit 4

It ships in rlver's distribution as a second top-level package beside ``rlver`` (verifiers finds an
environment by importing the module its id names, ``rlver-sentient`` → ``rlver_sentient``, and takes
the Taskset, Env and Harness subclasses this module exports in ``__all__``). docs/integrations.md has
the settings and what a score here can be compared with.
"""

from rlver_sentient.env import SentientEnv, SentientEnvConfig
from rlver_sentient.harness import SentientHarness, SentientHarnessConfig
from rlver_sentient.taskset import SentientTask, SentientTaskData, SentientTaskset, SentientTasksetConfig

__all__ = [
    "SentientEnv",
    "SentientEnvConfig",
    "SentientHarness",
    "SentientHarnessConfig",
    "SentientTask",
    "SentientTaskData",
    "SentientTaskset",
    "SentientTasksetConfig",
]
