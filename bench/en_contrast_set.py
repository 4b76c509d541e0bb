"""Build the English contrast set: a real model's own replies against broken versions of them.

Reads an ``rlver eval`` transcript on English profiles (SmolLM2-135M-Instruct's, for the committed
fixture), and for every agent reply that is a finished reply (it ends on a sentence end and has at
least two sentences: a reply the token limit cut off cannot be cut again, and one sentence cannot be
shuffled) writes five pairs, each in the reply's own dialogue context (history, emotion and the
user's earlier changes as recorded):

* ``off_topic``: the original against a reply the same model wrote in a *different* dialogue (the one
  closest in length, so length is not what tells them apart);
* ``shuffled``: its sentences in another order;
* ``repeated``: its longest sentence said twice;
* ``cut``: cut off mid-sentence at about 60 % of its characters;
* ``platitude``: a stock platitude (our wording, below).

The offline user must prefer the original (a higher change before rounding) in at least 90 % of the
pairs of every class: ``tests/test_simulator_contrast.py`` checks the committed fixture
``tests/data/en_contrast.jsonl``.

Usage: python bench/en_contrast_set.py TRANSCRIPT... [--out tests/data/en_contrast.jsonl]
[--first-replies tests/data/en_smollm2_first_replies.jsonl]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from rlver.env.thinking import visible_text
from rlver.errors import RlverError
from rlver.transcripts.native import read_transcript

KINDS = ("off_topic", "shuffled", "repeated", "cut", "platitude")

#: Stock platitudes (our own wording): what a reply sounds like when it says nothing about this user.
PLATITUDES = (
    "Everything happens for a reason. Try to stay positive and things will get better.",
    "Don't worry too much about it. Just relax and let it go, you'll be fine.",
    "Look on the bright side, it could be worse. Stay strong and keep your head up!",
    "Time heals everything. Believe in yourself, you've got this!",
    "Cheer up! It is what it is, so just move on and think positive.",
)

_SENTENCE = re.compile(r"[^.!?]+[.!?]+[\"')]*")


def split_sentences(text: str) -> list[str]:
    """The sentences of a reply, each with its end mark (text after the last end mark is dropped)."""
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def cut_mid_sentence(text: str) -> str:
    """``text`` cut at the word boundary nearest 60 % of its length, never right after an end mark."""
    at = int(len(text) * 0.6)
    space = text.rfind(" ", 0, at)
    cut = text[: space if space > 0 else at].rstrip()
    return cut.rstrip(".!?,;:") if cut else text[: len(text) // 2]


def shuffled(sentences: list[str], rng: random.Random) -> str:
    """The sentences in a different order (a rotation when the draw gave the original order back)."""
    order = list(range(len(sentences)))
    for _ in range(10):
        rng.shuffle(order)
        if order != sorted(order):
            break
    else:
        order = order[1:] + order[:1]
    return " ".join(sentences[i] for i in order)


def repeated(sentences: list[str]) -> str:
    """The reply with its longest sentence said a second time, right after itself."""
    i = max(range(len(sentences)), key=lambda k: len(sentences[k]))
    return " ".join([*sentences[: i + 1], sentences[i], *sentences[i + 1 :]])


def reply_contexts(transcript: Path) -> list[dict[str, Any]]:
    """Every agent reply with what the user had seen before it (history, emotion, its own changes)."""
    out: list[dict[str, Any]] = []
    for ep in read_transcript(transcript).episodes:
        history: list[dict[str, str]] = []
        emotion, changes = ep.start_emotion, []
        users = iter(ep.user_turns[1:])  # the first user turn is the opening line
        for msg in ep.messages:
            if msg.role == "system":
                continue
            if msg.role == "assistant":
                reply = visible_text(msg.content).strip()
                out.append(
                    {
                        "profile_id": ep.profile_id,
                        "turn": len(changes) + 1,
                        "history": list(history),
                        "emotion": emotion,
                        "changes": list(changes),
                        "original": reply,
                    }
                )
                turn = next(users, None)
                if turn is None or turn.appraisal is None:
                    break
                emotion, changes = turn.appraisal.emotion_after, [*changes, turn.appraisal.change]
            history.append({"role": msg.role, "content": msg.content if msg.role == "user" else reply})
    return out


def build_pairs(contexts: list[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """The five contrast pairs of every finished reply of ``contexts`` (see the module docstring)."""
    rng = random.Random(seed)
    pairs: list[dict[str, Any]] = []
    for i, ctx in enumerate(contexts):
        text = ctx["original"]
        sents = split_sentences(text)
        if len(sents) < 2 or " ".join(sents) != " ".join(text.split()) or not text.endswith((".", "!", "?")):
            continue  # cut off by the token limit, or a single sentence: not a contrast for this set
        others = [c for c in contexts if c["profile_id"] != ctx["profile_id"] and c["original"]]
        other = min(others, key=lambda c: (abs(len(c["original"]) - len(text)), c["original"]))
        alternatives = {
            "off_topic": other["original"],
            "shuffled": shuffled(sents, rng),
            "repeated": repeated(sents),
            "cut": cut_mid_sentence(text),
            "platitude": PLATITUDES[i % len(PLATITUDES)],
        }
        for kind in KINDS:
            pairs.append({"kind": kind, **ctx, "alternative": alternatives[kind]})
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transcripts", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=Path("tests/data/en_contrast.jsonl"))
    parser.add_argument(
        "--first-replies",
        type=Path,
        default=None,
        help="Also write each dialogue's first agent reply, as it is, here (of the first transcript).",
    )
    args = parser.parse_args()
    try:
        per_file = [reply_contexts(t) for t in args.transcripts]
    except RlverError as exc:
        raise SystemExit(f"en_contrast_set: {exc}") from None
    for path, contexts in zip(args.transcripts, per_file, strict=True):
        if len({c["profile_id"] for c in contexts}) < 2:
            print(
                f"error: {path}: the off-topic pairs need dialogues of two or more profiles", file=sys.stderr
            )
            raise SystemExit(2)
    pairs = [p for i, contexts in enumerate(per_file) for p in build_pairs(contexts, seed=i)]
    if not pairs:
        print("error: no finished agent reply of two or more sentences in the transcripts", file=sys.stderr)
        raise SystemExit(2)
    if args.first_replies:
        first = [
            {"profile_id": c["profile_id"], "reply": c["original"]} for c in per_file[0] if c["turn"] == 1
        ]
        args.first_replies.write_text("".join(json.dumps(f) + "\n" for f in first), encoding="utf-8")
    args.out.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    counts = {k: sum(1 for p in pairs if p["kind"] == k) for k in KINDS}
    print(f"wrote {len(pairs)} pairs to {args.out}: {counts}")


if __name__ == "__main__":
    main()
