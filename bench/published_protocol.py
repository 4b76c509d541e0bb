"""What ``sage-published`` costs per turn against rlver's ``sage``, with no network.

Both protocols play the same released dialogues (SAGE's DeepSeek-V3 judgements of GPT-4.1, the 100 test
profiles): every agent reply of each dialogue goes through one whole :meth:`LLMUser.respond`
(both prompts, both parses, the emotion update, the records) against an in-process model that answers
at once with the released judgement, in SAGE's text fields for ``sage-published`` and in rlver's JSON for
``sage``. Only rlver's own code is timed. Needs the published data (``RLVER_SHARED_DATA``).

Usage: RLVER_SHARED_DATA=../shared/data python bench/published_protocol.py [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_result

RELEASED = "sage_released/deepseek-v3-simulator/gpt-4.1_result.jsonl"


def _answers(turn: dict[str, Any], published: bool) -> tuple[str, str]:
    """The released judgement of one reply as the protocol's two answers (appraisal, reply)."""
    p = turn["planning"]
    if published:
        appraisal = (
            f"Content:\n{p['content']}\nTargetCompletion:\n{p['TargetCompletion']}\n"
            f"Activity:\n{p['activity']}\nAnalyse:\n{p['analyse']}\nChange:\n{p['change']}"
        )
        return appraisal, f"Thinking:\n{turn.get('thinking', '')}\nResponse:\n{turn['content']}"
    appraisal = json.dumps(
        {"understanding": p["content"] or "-", "goal_fit": p["TargetCompletion"] or "-",
         "inner_reaction": p["activity"] or "-", "feeling": p["analyse"] or "-", "change": p["change"]},
        ensure_ascii=False,
    )  # fmt: skip
    reply = json.dumps(
        {"stance": "-", "aim": "-", "tone": "-", "draft": turn["content"] or "-", "rewrite": "-",
         "reply": turn["content"] or "-", "end_dialogue": False},
        ensure_ascii=False,
    )  # fmt: skip
    return appraisal, reply


def time_protocol(
    protocol: str, records: list[dict[str, Any]], profiles: dict[str, Any]
) -> tuple[float, int]:
    """Seconds spent in ``respond`` and turns played, over every appraised reply of ``records``."""
    from rlver.llm.base import ChatModel, Completion
    from rlver.records import Message
    from rlver.simulator.llm.user import LLMSimulator

    class Instant(ChatModel):
        def __init__(self) -> None:
            self.queue: list[Completion] = []

        async def complete(self, messages: Any, sampling: Any) -> Completion:
            return self.queue.pop(0)

    model = Instant()
    simulator = LLMSimulator(model, protocol=protocol)
    published = protocol == "sage-published"

    async def run() -> tuple[float, int]:
        spent, turns = 0.0, 0
        for record in records:
            history = record["history"]
            user = simulator.start(profiles[record["id"]], start_emotion=40)
            await user.open()
            for k in range(1, (len(history) - 1) // 2 + 1):
                appraisal, reply = _answers(history[2 * k], published)
                model.queue = [Completion(text=appraisal), Completion(text=reply)]
                before = [Message(role=m["role"], content=m["content"]) for m in history[: 2 * k - 1]]
                user.restore(before, history[2 * k - 2]["emotion-point"])
                t0 = time.perf_counter()
                await user.respond(history[2 * k - 1]["content"])
                spent += time.perf_counter() - t0
                turns += 1
        return spent, turns

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from rlver.profiles.loaders import load_profiles

    data = Path(
        os.environ.get("RLVER_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    records = [json.loads(line) for line in (data / RELEASED).read_text(encoding="utf-8").splitlines()]
    profiles = {p.id: p for p in load_profiles(data / "sage_test_profiles.jsonl")}
    rows, result = [], {}
    for protocol in ("sage", "sage-published"):
        per_turn = []
        for _ in range(args.runs):
            spent, turns = time_protocol(protocol, records, profiles)
            per_turn.append(spent / turns * 1000)
        result[protocol] = {"ms_per_turn": per_turn, "turns": turns}
        rows.append(
            [
                protocol,
                f"{turns}",
                f"{min(per_turn):.3f}",
                f"{statistics.median(per_turn):.3f}",
                f"{max(per_turn):.3f}",
            ]
        )
    print_table("simulator CPU per turn", ["protocol", "turns", "min ms/turn", "median", "max"], rows)
    write_result("published_protocol", result)


if __name__ == "__main__":
    main()
