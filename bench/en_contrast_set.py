"""Build the English contrast set: a real model's own replies against broken versions of them.

The originals are SmolLM2-135M-Instruct's own replies (``--model``; the committed fixture's) to the
opening message of every ``en-test`` profile, ``--samples`` seeded draws per profile, with the
benchmark's neutral agent prompt, sampled on the CPU by :class:`rlver.llm.local.LocalChatModel` (one
``torch.Generator`` per row, so a draw depends only on its seed; about 2-4 minutes on the 2-core box).
A reply the token limit cut off is kept up to its last sentence end (its own words, only shorter); a
reply of fewer than two sentences is skipped (one sentence cannot be shuffled). It can instead read the
agent replies of ``rlver eval`` transcripts (positional arguments).

Every kept reply gives five pairs in its own dialogue context (history, emotion and the user's earlier
changes):

* ``off_topic``: the original against a reply the same model wrote in a *different* dialogue (the one
  closest in length, so length is not what tells them apart);
* ``shuffled``: its sentences in another order in which no sentence keeps its place (a derangement;
  the line breaks stay where they were, the sentences move);
* ``repeated``: its longest sentence said twice;
* ``cut``: cut off mid-sentence at about 60 % of its characters;
* ``platitude``: a stock platitude (our wording, below).

Every pair is marked ``split``: ``dev`` or ``held_out``, by profile (the profiles sorted by the SHA-256
of their id, the first half dev), so a feature can be developed on one half and measured on the other.
The offline user must prefer the original (a higher change before rounding) in at least 90 % of the
pairs of every class: ``tests/simulator/test_simulator_transfer.py`` checks the committed fixture
``tests/data/en_contrast.jsonl``.

Usage: python bench/en_contrast_set.py --generate [--model DIR] [--samples 8] [--out PATH]
       python bench/en_contrast_set.py TRANSCRIPT... [--out PATH] [--first-replies PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

from rlver.env.thinking import system_prompt, visible_text
from rlver.errors import RlverError
from rlver.rules import EVALUATION_START
from rlver.transcripts.native import read_transcript

KINDS = ("off_topic", "shuffled", "repeated", "cut", "platitude")
SMOLLM2 = Path("/work/models/smollm2-135m-instruct")
#: The eval's start emotion (``rlver eval``'s ``env.rules.start_emotion``).
START_EMOTION = EVALUATION_START

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


def _slots(text: str) -> tuple[list[str], list[str]]:
    """The sentences of ``text`` and the whitespace after each (so a reordering keeps the layout)."""
    sents, gaps = [], []
    for m in _SENTENCE.finditer(text):
        body = m.group(0)
        lead = len(body) - len(body.lstrip())
        if gaps and lead:
            gaps[-1] += body[:lead]
        if body.strip():
            sents.append(body.strip())
            gaps.append(body[len(body.rstrip()) :])
    return sents, gaps


def finished_part(text: str) -> str:
    """``text`` up to its last sentence end (all of it when it ends on one)."""
    ends = [m.end() for m in _SENTENCE.finditer(text)]
    return text[: ends[-1]].strip() if ends else ""


def cut_mid_sentence(text: str) -> str:
    """``text`` cut at the word boundary nearest 60 % of its length, never right after an end mark."""
    at = int(len(text) * 0.6)
    space = text.rfind(" ", 0, at)
    cut = text[: space if space > 0 else at].rstrip()
    return cut.rstrip(".!?,;:") if cut else text[: len(text) // 2]


def derangement(n: int, rng: random.Random) -> list[int]:
    """A random order of ``range(n)`` (n >= 2) in which no item keeps its place."""
    order = list(range(n))
    while True:
        rng.shuffle(order)
        if all(i != k for i, k in enumerate(order)):
            return order


def shuffled(text: str, rng: random.Random) -> str:
    """The sentences of ``text`` in a derangement, each followed by the whitespace of its new slot."""
    sents, gaps = _slots(text)
    order = derangement(len(sents), rng)
    return "".join(sents[k] + gap for k, gap in zip(order, gaps, strict=True)).strip()


def repeated(text: str) -> str:
    """The reply with its longest sentence said a second time, right after itself."""
    sents, gaps = _slots(text)
    i = max(range(len(sents)), key=lambda k: len(sents[k]))
    sents.insert(i + 1, sents[i])
    gaps.insert(i, " ")
    return "".join(s + g for s, g in zip(sents, gaps, strict=True)).strip()


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


def generated_contexts(
    model_dir: Path, samples: int, *, max_tokens: int, temperature: float
) -> list[dict[str, Any]]:
    """``samples`` seeded first replies of the model in ``model_dir`` to every ``en-test`` opening."""
    from rlver.llm.base import SamplingParams
    from rlver.llm.local import LocalChatModel
    from rlver.profiles.sets import load_profile_set
    from rlver.records import Message

    model = LocalChatModel.from_pretrained(model_dir, device="cpu", dtype="float32", max_batch_size=32)
    prompt = system_prompt(False, "en", "neutral")
    rows = [(p, seed) for p in load_profile_set("en-test") for seed in range(samples)]
    chats = [
        [Message(role="system", content=prompt), Message(role="user", content=p.opening)] for p, _ in rows
    ]
    sampling = [
        SamplingParams(temperature=temperature, top_p=1.0, max_tokens=max_tokens, seed=seed)
        for _, seed in rows
    ]
    results = asyncio.run(model.complete_each(chats, sampling))
    out: list[dict[str, Any]] = []
    for (profile, seed), result in zip(rows, results, strict=True):
        if isinstance(result, BaseException):
            raise SystemExit(f"error: {model_dir}: generation failed for {profile.id} seed {seed}: {result}")
        text = result.text.strip()
        out.append(
            {
                "profile_id": profile.id,
                "seed": seed,
                "turn": 1,
                "history": [{"role": "user", "content": profile.opening}],
                "emotion": START_EMOTION,
                "changes": [],
                "original": finished_part(text),
                "shortened": finished_part(text) != text,
            }
        )
    return out


def split_of(profile_ids: set[str]) -> dict[str, str]:
    """``dev`` for the first half of the profiles sorted by the SHA-256 of their id, else ``held_out``."""
    ranked = sorted(profile_ids, key=lambda p: hashlib.sha256(p.encode()).hexdigest())
    return {p: ("dev" if i < len(ranked) // 2 else "held_out") for i, p in enumerate(ranked)}


def usable(text: str) -> bool:
    """A finished reply of two or more sentences with nothing after its last sentence end."""
    sents = split_sentences(text)
    return len(sents) >= 2 and " ".join(sents) == " ".join(text.split()) and text.endswith((".", "!", "?"))


def build_pairs(contexts: list[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """The five contrast pairs of every usable reply of ``contexts`` (see the module docstring)."""
    rng = random.Random(seed)
    split = split_of({c["profile_id"] for c in contexts})
    pairs: list[dict[str, Any]] = []
    for i, ctx in enumerate(contexts):
        text = ctx["original"]
        if not usable(text):
            continue  # cut off with no sentence end, or a single sentence: not a contrast for this set
        others = [c for c in contexts if c["profile_id"] != ctx["profile_id"] and usable(c["original"])]
        other = min(others, key=lambda c: (abs(len(c["original"]) - len(text)), c["original"]))
        alternatives = {
            "off_topic": other["original"],
            "shuffled": shuffled(text, rng),
            "repeated": repeated(text),
            "cut": cut_mid_sentence(text),
            "platitude": PLATITUDES[i % len(PLATITUDES)],
        }
        for kind in KINDS:
            pairs.append(
                {"kind": kind, "split": split[ctx["profile_id"]], **ctx, "alternative": alternatives[kind]}
            )
    return pairs


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("transcripts", type=Path, nargs="*", help="rlver eval transcripts to read instead.")
    parser.add_argument("--generate", action="store_true", help="Sample the originals from --model.")
    parser.add_argument("--model", type=Path, default=SMOLLM2)
    parser.add_argument("--samples", type=int, default=8, help="Seeded replies per en-test profile.")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--out", type=Path, default=Path("tests/data/en_contrast.jsonl"))
    parser.add_argument(
        "--first-replies",
        type=Path,
        default=None,
        help="Also write each dialogue's first agent reply, as it is, here (of the first transcript).",
    )
    args = parser.parse_args()
    if args.generate == bool(args.transcripts):
        parser.error("give either --generate or one or more transcripts")
    if args.generate and args.first_replies:
        parser.error(
            "--first-replies takes the first replies of a transcript; it does not go with --generate"
        )
    if args.generate and not args.model.is_dir():
        print(f"error: --model {args.model}: no such model folder", file=sys.stderr)
        raise SystemExit(2)
    return args


def main() -> None:
    args = _arguments()
    started = time.perf_counter()
    try:
        if args.generate:
            per_source = [
                generated_contexts(
                    args.model, args.samples, max_tokens=args.max_tokens, temperature=args.temperature
                )
            ]
        else:
            per_source = [reply_contexts(t) for t in args.transcripts]
    except RlverError as exc:
        raise SystemExit(f"en_contrast_set: {exc}") from None
    for contexts in per_source:
        if len({c["profile_id"] for c in contexts}) < 2:
            print("error: the off-topic pairs need dialogues of two or more profiles", file=sys.stderr)
            raise SystemExit(2)
    pairs = [p for i, contexts in enumerate(per_source) for p in build_pairs(contexts, seed=i)]
    if not pairs:
        print("error: no finished agent reply of two or more sentences", file=sys.stderr)
        raise SystemExit(2)
    if args.first_replies:
        first = [
            {"profile_id": c["profile_id"], "reply": c["original"]} for c in per_source[0] if c["turn"] == 1
        ]
        args.first_replies.write_text("".join(json.dumps(f) + "\n" for f in first), encoding="utf-8")
    args.out.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    counts = {
        k: {s: sum(1 for p in pairs if p["kind"] == k and p["split"] == s) for s in ("dev", "held_out")}
        for k in KINDS
    }
    print(f"wrote {len(pairs)} pairs to {args.out} in {time.perf_counter() - started:.0f} s: {counts}")


if __name__ == "__main__":
    main()
