"""Score the English contrast set: how often a judge prefers SmolLM2's original reply to its broken twin.

Reads ``tests/data/en_contrast.jsonl`` (made by ``bench/en_contrast_set.py``) and prints, per class and
split (dev / held out), how many pairs the original wins (a strictly higher value; a tie is a loss):

* ``--judge offline`` (default): the offline user's exact change, as
  ``tests/simulator/test_simulator_transfer.py`` computes it;
* ``--judge offline-embed``: the same user with the packaged MiniLM embedder (``simulator.embed: true``;
  needs the ``[embed]`` extra, e.g. ``.venv-embed``);
* ``--judge meaning``: no user at all, only MiniLM (``[embed]``): for every class the cosine of the whole
  reply with the user's message, and for ``shuffled`` also the mean cosine of adjacent sentences, the
  usual embedding measure of local coherence. It asks whether meaning alone can see the fault, which is
  what the default, LLM-free user lacks (docs/simulator.md, "English checks").

Usage: python bench/en_contrast_score.py [--judge offline|offline-embed|meaning] [--pairs PATH]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rlver.profiles import load_profile_set
from rlver.records import Message
from rlver.simulator.offline.crosslingual import sentences
from rlver.simulator.offline.user import OfflineSimulator

KINDS = ("off_topic", "shuffled", "repeated", "cut", "platitude")
Judge = Callable[[dict[str, Any], str], float]


def offline_judge(sim: OfflineSimulator) -> Judge:
    """The offline user's exact change (before rounding) for a reply in the pair's own context (the test
    of the committed fixture, ``contrast_wins``, scores through this too)."""
    profiles = {p.id: p for p in load_profile_set("en-test")}

    def judge(pair: dict[str, Any], reply: str) -> float:
        history = [Message(**m) for m in pair["history"]]
        return sim.exact_change(
            profiles[pair["profile_id"]], history, reply, emotion=pair["emotion"], changes=pair["changes"]
        )

    return judge


def offline_user(embed: bool) -> OfflineSimulator:
    """The default offline user, or with the packaged MiniLM embedder (the ``[embed]`` extra)."""
    if not embed:
        return OfflineSimulator()
    from rlver.simulator.offline.user import load_minilm_embedder

    return OfflineSimulator(embedder=load_minilm_embedder())


def meaning_judges() -> dict[str, Judge]:
    """MiniLM only: the reply's cosine with the user's message, and adjacent sentences' mean cosine."""
    from rlver.embedding import load_sentence_embedder

    embed = load_sentence_embedder()

    def to_user(pair: dict[str, Any], reply: str) -> float:
        user, text = embed([pair["history"][-1]["content"], reply])
        return float(user @ text)

    def adjacent(pair: dict[str, Any], reply: str) -> float:
        sents = sentences(reply)
        if len(sents) < 2:
            return 0.0
        vecs = embed(sents)
        return float(np.mean([vecs[i] @ vecs[i + 1] for i in range(len(sents) - 1)]))

    return {"reply-to-user cosine": to_user, "adjacent-sentence cosine": adjacent}


def wins(
    pairs: list[dict[str, Any]], judge: Judge, kinds: tuple[str, ...]
) -> dict[tuple[str, str], list[int]]:
    """(class, split) -> [original won, pairs]."""
    out: dict[tuple[str, str], list[int]] = {}
    for pair in pairs:
        if pair["kind"] not in kinds:
            continue
        row = out.setdefault((pair["kind"], pair["split"]), [0, 0])
        row[0] += judge(pair, pair["original"]) > judge(pair, pair["alternative"])
        row[1] += 1
    return out


def table(title: str, counts: dict[tuple[str, str], list[int]]) -> str:
    lines = [f"## {title}", "| class | dev | held out |", "|---|---|---|"]
    for kind in KINDS:
        cells = []
        for split in ("dev", "held_out"):
            won, n = counts.get((kind, split), [0, 0])
            cells.append(f"{won}/{n} ({100 * won / n:.0f} %)" if n else "-")
        if any(c != "-" for c in cells):
            lines.append(f"| {kind} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judge", choices=("offline", "offline-embed", "meaning"), default="offline")
    parser.add_argument("--pairs", type=Path, default=Path("tests/data/en_contrast.jsonl"))
    args = parser.parse_args()
    pairs = [json.loads(line) for line in args.pairs.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.judge == "meaning":
        judges = meaning_judges()
        print(table("MiniLM reply-to-user cosine", wins(pairs, judges["reply-to-user cosine"], KINDS)))
        print()
        print(
            table(
                "MiniLM adjacent-sentence cosine",
                wins(pairs, judges["adjacent-sentence cosine"], ("shuffled",)),
            )
        )
        return
    title = "offline user" + (" with the MiniLM embedder" if args.judge == "offline-embed" else "")
    print(table(title, wins(pairs, offline_judge(offline_user(args.judge == "offline-embed")), KINDS)))


if __name__ == "__main__":
    main()
