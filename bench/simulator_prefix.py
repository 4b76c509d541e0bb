"""Benchmark: how much of the simulator's input is a prefix a prefix cache can reuse.

Runs scripted dialogues (bundled en + zh training profiles, fixed agent replies, a chat model that
answers at once with valid JSON) through the real :class:`LLMUser`, records every prompt the
simulator sends, renders it with a real byte-level BPE tokenizer and ChatML template (the tiny test
model's, trained in-process from the bundled corpus: no download), and counts for each call the
longest prefix it shares with an earlier call's prompt.

Figures, as fractions of all simulator input tokens:

* ``within_dialogue``: sharing only with earlier calls of the same dialogue (a turn's reply call with
  its appraisal call; a turn with the turns before): what a per-conversation cache (hosted APIs) hits;
* ``across_dialogues``: sharing with any earlier call of the run (the rules text is common to every
  dialogue): what vLLM's automatic prefix cache can hit;
* ``*_blocks16``: the same, rounded down to whole 16-token blocks (vLLM caches full blocks only).

Both protocols are measured: ``sage`` (laid out for caching) and ``rlver-v1`` (the earlier prompts).
Target: ``sage`` within_dialogue >= 0.80. Usage: python bench/simulator_prefix.py [--dialogues 8] [--turns 9]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_result
from simulator_overhead import _dialogue_inputs, _profiles

BLOCK = 16

ANSWER = {
    "understanding": "They noticed what happened and asked a gentle question.",
    "goal_fit": "It touches what I need but does not quite get there.",
    "inner_reaction": "I relax a little, still unsure.",
    "feeling": "A bit heard.",
    "change": 5,
    "stance": "neutral",
    "aim": "say a little more about it",
    "tone": "tired, casual",
    "draft": "Yeah, it has been a lot lately, honestly.",
    "rewrite": "shorter, more casual, no stated feeling",
    "reply": "yeah. it's been a lot lately.",
    "end_dialogue": False,
}


def _lcp(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def collect_prompts(
    protocol: str, dialogues: list[tuple[Any, list[str]]]
) -> list[list[list[dict[str, str]]]]:
    """Every simulator prompt, grouped per dialogue, as chat messages."""
    from rlver.llm.base import ChatModel, Completion
    from rlver.rules import EVALUATION_START
    from rlver.simulator.llm.user import LLMSimulator

    class Recorder(ChatModel):
        def __init__(self) -> None:
            self.calls: list[list[dict[str, str]]] = []

        async def complete(self, messages: Any, sampling: Any) -> Completion:
            self.calls.append([{"role": m.role, "content": m.content} for m in messages])
            return Completion(text=json.dumps(ANSWER))

    async def run() -> list[list[list[dict[str, str]]]]:
        out = []
        for i, (profile, replies) in enumerate(dialogues):
            model = Recorder()
            user = LLMSimulator(model, protocol=protocol).start(
                profile, start_emotion=EVALUATION_START, seed=i
            )
            await user.open()
            for agent in replies:
                await user.respond(agent)
            out.append(model.calls)
        return out

    return asyncio.run(run())


def shared_fractions(tokenizer: Any, dialogues: list[list[list[dict[str, str]]]]) -> dict[str, Any]:
    seen_run: list[list[int]] = []
    total = within = across = within_b = across_b = 0
    calls = 0
    for calls_of_dialogue in dialogues:
        seen_dialogue: list[list[int]] = []
        for messages in calls_of_dialogue:
            encoded = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=True
            )
            ids = list(encoded["input_ids"])
            w = max((_lcp(ids, s) for s in seen_dialogue), default=0)
            a = max((_lcp(ids, s) for s in seen_run), default=0)
            total += len(ids)
            within += w
            across += a
            within_b += w // BLOCK * BLOCK
            across_b += a // BLOCK * BLOCK
            seen_dialogue.append(ids)
            seen_run.append(ids)
            calls += 1
    return {
        "calls": calls,
        "input_tokens": total,
        "mean_input_tokens_per_call": total / calls if calls else 0.0,
        "within_dialogue": within / total,
        "across_dialogues": across / total,
        "within_dialogue_blocks16": within_b / total,
        "across_dialogues_blocks16": across_b / total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", type=int, default=8, help="dialogues (alternating en/zh profiles)")
    parser.add_argument("--turns", type=int, default=9, help="appraised agent replies per dialogue")
    args = parser.parse_args()
    from rlver.models.tiny import train_tokenizer

    tokenizer = train_tokenizer()
    profiles = _profiles()
    # alternate languages: the en and zh profiles interleaved
    en = [p for p in profiles if p.language != "zh"]
    zh = [p for p in profiles if p.language == "zh"]
    mixed = [p for pair in zip(en, zh, strict=False) for p in pair] or profiles
    dialogues = _dialogue_inputs(mixed, args.dialogues, args.turns)
    results = {}
    for protocol in ("sage", "rlver-v1"):
        results[protocol] = shared_fractions(tokenizer, collect_prompts(protocol, dialogues))
    rows = [
        [
            name,
            r["calls"],
            r["input_tokens"],
            round(r["mean_input_tokens_per_call"]),
            r["within_dialogue"],
            r["within_dialogue_blocks16"],
            r["across_dialogues"],
            r["across_dialogues_blocks16"],
        ]
        for name, r in results.items()
    ]
    print_table(
        f"Simulator input shared as a prefix ({args.dialogues} dialogues x {args.turns} appraised turns)",
        ["protocol", "calls", "input tok", "tok/call", "within", "within/16", "across", "across/16"],
        rows,
    )
    path = write_result(
        "simulator_prefix",
        {"dialogues": args.dialogues, "turns": args.turns, "block": BLOCK, "protocols": results},
    )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
