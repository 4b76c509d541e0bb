"""What one verl dataset row tells the agent loop: the user, the simulator, the dialogue rules, the reward.

verl hands every column of a dataset row to the agent loop as keyword arguments, so each row carries
its own settings (``extra_info["rlver"]``, a JSON string). Why a JSON string and not nested parquet
columns: parquet stores nested dicts as structs whose schema is the union over all rows (missing keys
come back as ``None``), which would silently change a profile or a config between writing and reading.
A string round-trips exactly and is validated again, with the same pydantic models, on the worker.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlver.config import MAX_COUNT
from rlver.env.dialogue import EnvConfig
from rlver.env.rewards import RewardSpec
from rlver.manifest import RunManifest
from rlver.profiles.schema import Profile
from rlver.simulator.factory import SimulatorSpec

#: Key of our settings inside the row's ``extra_info`` column.
SETTINGS_KEY = "rlver"


class DialogueTask(BaseModel):
    """One row's settings: everything needed to run and score one dialogue on any worker."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    profile: Profile
    simulator: SimulatorSpec
    env: EnvConfig = Field(default_factory=EnvConfig.training)
    #: The same spec the local trainer scores with (``rollout.reward`` of the training config).
    reward: RewardSpec = Field(default_factory=RewardSpec)
    #: Tokens the policy may write per reply (the whole dialogue is bounded by verl's response_length).
    max_reply_tokens: int = Field(default=512, ge=1, le=MAX_COUNT)
    #: Simulator operations in flight at once per worker process, across all its dialogues.
    simulator_concurrency: int = Field(default=64, ge=1, le=MAX_COUNT)
    #: When set, each worker appends every finished dialogue (an Episode) to a JSONL file here.
    transcript_dir: str | None = None
    #: Dialogues verl samples for this row at once (rollout.n): a GRPO group, failed as a whole.
    group_size: int = Field(default=1, ge=1, le=MAX_COUNT)
    #: Base seed of this row's dialogues (combined with the sample index and the training step).
    #: ``run.seed`` + the row index (hashed with the sample and step, so any size is usable)
    seed: int = Field(default=0, ge=0)

    def to_json(self) -> str:
        return self.model_dump_json()

    def run_manifest(self, split: str) -> RunManifest:
        """Line 1 of a worker's transcript of ``split`` rows: every row of one split shares these
        settings, so ``rlver audit``/``inspect``/``report`` read the file like an eval transcript."""
        return RunManifest.create(
            kind="train",
            engine="verl",
            split=split,
            simulator_spec=self.simulator.model_dump(mode="json"),
            env=self.env,
            reward=self.reward,
            seed=self.seed,
            n_per_profile=self.group_size,
        )

    @classmethod
    def from_row(cls, extra_info: Any) -> DialogueTask:
        """Read the settings from a row's ``extra_info``; a readable ``ValueError`` when they are bad."""
        if not isinstance(extra_info, dict) or SETTINGS_KEY not in extra_info:
            raise ValueError(
                f"dataset row has no extra_info[{SETTINGS_KEY!r}]: write the parquet with "
                "`rlver train --trainer verl` (rlver.integrations.verl.dataset)"
            )
        raw = extra_info[SETTINGS_KEY]
        try:
            data = json.loads(raw) if isinstance(raw, str | bytes) else raw
            return cls.model_validate(data)
        except (json.JSONDecodeError, ValidationError) as exc:
            row = extra_info.get("index", "?")
            raise ValueError(f"dataset row {row}: extra_info[{SETTINGS_KEY!r}] is not valid: {exc}") from None
