"""Profiles → a parquet file verl's ``RLHFDataset`` reads, one row per profile.

Columns (the ones verl knows, plus ours inside ``extra_info``):

* ``data_source`` — ``"rlver"``; verl groups validation metrics by it;
* ``agent_name`` — ``"rlver_dialogue"``; verl picks our agent loop for the row by it;
* ``prompt`` — the opening messages as chat messages (system prompt, then the user's opening line when
  the profile has one). verl uses it for length filtering and logs it; the dialogue itself is
  rebuilt by the environment from the settings, so it cannot drift from what the agent loop runs;
* ``reward_model`` — ``{"style": "rlver", "ground_truth": ""}``: schema compatibility with verl's
  reward managers (the reward comes from the agent loop, there is no ground truth);
* ``extra_info`` — ``index``, ``profile_id``, ``split`` and ``rlver``: the row's
  :class:`~.settings.DialogueTask` as JSON (see :mod:`.settings` for why a string).

GRPO groups are not rows: verl repeats each row ``rollout.n`` times itself.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlver.env.dialogue import EnvConfig
from rlver.env.thinking import system_prompt
from rlver.errors import RlverError
from rlver.integrations.verl import AGENT_NAME, DATA_SOURCE
from rlver.integrations.verl.settings import SETTINGS_KEY, DialogueTask
from rlver.io import atomic_write_bytes
from rlver.profiles.schema import Profile


def opening_messages(profile: Profile, env: EnvConfig) -> list[dict[str, str]]:
    """The policy's first context as far as it is known before the dialogue runs."""
    language = env.language or profile.language
    prompt = env.system_prompt or system_prompt(env.think, language, env.agent_prompt)
    messages = [{"role": "system", "content": prompt}]
    if profile.opening:
        messages.append({"role": "user", "content": profile.opening})
    return messages


def build_rows(
    profiles: Sequence[Profile],
    *,
    env: EnvConfig,
    seed: int = 0,
    split: str = "train",
    **task: Any,
) -> list[dict[str, Any]]:
    """One verl dataset row per profile (row ``i`` gets seed ``seed + i``).

    ``task`` holds the rest of :class:`DialogueTask`'s fields (simulator, reward, token and
    concurrency limits, ...), named only there so that a new field needs no edit here.
    """
    rows = []
    for i, profile in enumerate(profiles):
        task_json = DialogueTask(profile=profile, env=env, seed=seed + i, **task).to_json()
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "agent_name": AGENT_NAME,
                "prompt": opening_messages(profile, env),
                "ability": "emotional_support",
                "reward_model": {"style": "rlver", "ground_truth": ""},
                "extra_info": {
                    "index": i,
                    "profile_id": profile.id,
                    "split": split,
                    SETTINGS_KEY: task_json,
                },
            }
        )
    return rows


def write_parquet(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write ``rows`` as parquet, atomically (readers never see half a file)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise RlverError(
            "writing verl datasets needs pyarrow: pip install -e '.[verl]' (in the rlver checkout)"
        ) from None

    if not rows:
        raise ValueError(f"{path}: no rows to write (empty profile set?)")
    table = pa.Table.from_pylist(list(rows))
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    target = Path(path)
    atomic_write_bytes(target, buffer.getvalue())
    return target
