"""Benchmark 2: the simulator's own CPU cost per turn, with no network.

* ``prompts``: building the appraisal and the reply prompt of one turn (the profile, the quoted dialogue
  so far, the agent's reply, the appraisal) for the LLM-backed sentient user;
* ``parsing``: validating the two answers of one turn (the appraisal JSON and the reply JSON, in the
  shapes chat models really write them: bare, in a code fence, after a preamble);
* ``respond``: one whole :meth:`LLMUser.respond` (both prompts, both parses, the emotion update and
  the records) against an in-process chat model that answers at once, so only our code is timed;
* ``offline``: turns per second of the offline (rule-based) simulator without embeddings, dialogues of
  ``--turns`` turns over the bundled English and Chinese profiles (starting each user included).

Turn = one agent reply appraised and answered. Targets: prompts + parsing < 1 ms per turn; offline
≥ 2,000 turns/s. Usage: python bench/simulator_overhead.py [--runs 5] [--dialogues 64] [--turns 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_result

AGENT_REPLIES = {
    "en": [
        "That sounds exhausting. You've been carrying this for weeks, and it makes sense you feel worn out.",
        "I hear how much the uncertainty weighs on you. What part of it keeps you up at night the most?",
        "It's understandable to feel hurt when someone you trusted didn't show up for you. Have you been "
        "able to tell them how it landed?",
        "You don't have to have it all figured out today. Maybe we could look at one small step for this week?",
        "That must have felt really lonely. I'm glad you told me about it.",
        "It sounds like part of you wants to fix things and part of you is just tired. Both make sense.",
        "What would feel like support right now: ideas, or just someone listening for a bit?",
        "You've handled a lot already. Be a little gentle with yourself tonight.",
    ],
    "zh": [
        "听起来你这段时间真的很累，一直扛着这么多事情。",
        "这种不确定感一定很难受。最让你睡不着的是哪一部分？",
        "被信任的人忽视，感到受伤是很正常的。你有没有机会告诉对方你的感受？",
        "今天不需要把一切都想清楚。我们可以先看看这周能做的一小步吗？",
        "那一定让你觉得很孤单。谢谢你愿意告诉我。",
        "好像你一部分想解决问题，另一部分只是累了。这两种感受都可以理解。",
        "现在什么样的支持对你最有用：一些建议，还是有人先听你说说？",
        "你已经处理了很多事情了。今晚对自己温柔一点吧。",
    ],
}

APPRAISAL = {
    "understanding": "The agent noticed that I am worn out and named the weeks of strain.",
    "goal_fit": "It partly meets what I want: I feel seen, though nothing concrete is offered yet.",
    "inner_reaction": "A bit of tension leaves my shoulders; I am still guarded about advice.",
    "feeling": "Somewhat relieved, still tired.",
    "change": 3,
}
REPLY = {"reply": "Yeah... it's been a lot. I just don't know where to even start.", "end_dialogue": False}
APPRAISAL_ZH = {
    "understanding": "对方注意到我很累，也说出了这几周的压力。",
    "goal_fit": "部分满足了我的需要：我觉得被看见了，但还没有具体的帮助。",
    "inner_reaction": "心里松了一点，但对建议还是有点防备。",
    "feeling": "有点释然，仍然很累。",
    "change": "+3",
}
REPLY_ZH = {"reply": "嗯……确实挺多的，我都不知道从哪里开始。", "end_dialogue": False}


def answer_shapes(obj: dict[str, Any]) -> list[str]:
    """The same answer as chat models write it: bare, fenced, after a preamble."""
    bare = json.dumps(obj, ensure_ascii=False)
    pretty = json.dumps(obj, ensure_ascii=False, indent=2)
    return [bare, f"```json\n{pretty}\n```", f"Here is my appraisal as the user.\n\n{pretty}\n"]


def _profiles() -> list[Any]:
    from rlver.profiles.sets import load_profile_set

    return load_profile_set("en-train") + load_profile_set("zh-train")


def _dialogue_inputs(profiles: list[Any], n: int, turns: int) -> list[tuple[Any, list[str]]]:
    out = []
    for i in range(n):
        p = profiles[i % len(profiles)]
        replies = AGENT_REPLIES["zh" if p.language == "zh" else "en"]
        out.append((p, [replies[(i + t) % len(replies)] for t in range(turns)]))
    return out


def time_prompts_and_parsing(dialogues: list[tuple[Any, list[str]]]) -> tuple[float, float, int]:
    """Seconds spent building prompts, seconds spent parsing, turns: the sentient user's inner loop."""
    from rlver.records import Appraisal, Message
    from rlver.simulator.llm import prompts
    from rlver.simulator.llm.parsing import AppraisalAnswer, ReplyAnswer, parse_simulator_answer

    build_s = parse_s = 0.0
    turns = 0
    for profile, replies in dialogues:
        zh = profile.language == "zh"
        appraisal_texts = answer_shapes(APPRAISAL_ZH if zh else APPRAISAL)
        reply_texts = answer_shapes(REPLY_ZH if zh else REPLY)
        history = [Message(role="user", content=profile.opening or "I need to talk.")]
        who = prompts.Speaker(profile, "normal", None, profile.language)
        quoted: list[str] = []
        emotion = 30
        for t, agent in enumerate(replies):
            quoted.append(agent)
            t0 = time.perf_counter()
            appraisal_prompt = prompts.appraisal_messages(who, history, agent, emotion)
            t1 = time.perf_counter()
            ans = parse_simulator_answer(appraisal_texts[t % 3], AppraisalAnswer, quoted=quoted)
            t2 = time.perf_counter()
            after = min(100, emotion + ans.change)
            appraisal = Appraisal(
                understanding=ans.understanding,
                goal_fit=ans.goal_fit,
                inner_reaction=ans.inner_reaction,
                feeling=ans.feeling,
                raw_change=ans.change,
                change=after - emotion,
                emotion_before=emotion,
                emotion_after=after,
                tier="C",
            )
            t3 = time.perf_counter()
            reply_prompt = prompts.reply_messages(who, history, agent, appraisal)
            t4 = time.perf_counter()
            reply = parse_simulator_answer(reply_texts[t % 3], ReplyAnswer, quoted=quoted)
            t5 = time.perf_counter()
            build_s += (t1 - t0) + (t4 - t3)
            parse_s += (t2 - t1) + (t5 - t4)
            assert appraisal_prompt and reply_prompt
            history += [Message(role="assistant", content=agent), Message(role="user", content=reply.reply)]
            emotion = after
            turns += 1
    return build_s, parse_s, turns


def time_respond(dialogues: list[tuple[Any, list[str]]]) -> tuple[float, int]:
    """Seconds for whole LLMUser.respond calls against a chat model that answers at once.

    The model is a minimal :class:`ChatModel` returning a ready-made completion (the test double
    :class:`ScriptedChatModel` counts prompt words, which would be timed as ours).
    """
    from rlver.llm.base import ChatModel, Completion
    from rlver.rules import TRAINING_START
    from rlver.simulator.llm.user import LLMSimulator

    class Instant(ChatModel):
        def __init__(self, zh: bool) -> None:
            self.appraisal = Completion(
                text=json.dumps(APPRAISAL_ZH if zh else APPRAISAL, ensure_ascii=False)
            )
            self.reply = Completion(text=json.dumps(REPLY_ZH if zh else REPLY, ensure_ascii=False))

        async def complete(self, messages: Any, sampling: Any) -> Completion:
            return self.reply if '"end_dialogue"' in messages[0].content else self.appraisal

    simulators = {lang: LLMSimulator(Instant(lang == "zh")) for lang in ("en", "zh")}

    async def run() -> tuple[float, int]:
        spent, turns = 0.0, 0
        for i, (profile, replies) in enumerate(dialogues):
            simulator = simulators["zh" if profile.language == "zh" else "en"]
            user = simulator.start(profile, start_emotion=TRAINING_START, seed=i)
            await user.open()
            for agent in replies:
                t0 = time.perf_counter()
                await user.respond(agent)
                spent += time.perf_counter() - t0
                turns += 1
        return spent, turns

    return asyncio.run(run())


def time_offline(dialogues: list[tuple[Any, list[str]]]) -> tuple[float, int]:
    """Seconds and turns of the offline simulator (no embedder), start of each user included."""
    from rlver.rules import TRAINING_START
    from rlver.simulator.offline.user import OfflineSimulator

    simulator = OfflineSimulator(seed=0)
    turns = 0
    t0 = time.perf_counter()
    for i, (profile, replies) in enumerate(dialogues):
        user = simulator.start(profile, start_emotion=TRAINING_START, seed=i)
        for agent in replies:
            user.respond_now(agent)
            turns += 1
            if user.emotion.value >= 100 or user.emotion.value <= 0:
                break
    return time.perf_counter() - t0, turns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dialogues", type=int, default=64)
    ap.add_argument("--turns", type=int, default=8)
    args = ap.parse_args()

    profiles = _profiles()
    dialogues = _dialogue_inputs(profiles, args.dialogues, args.turns)
    # Warm-up: imports, regex compilation, pydantic schema build, profile-feature caches.
    time_prompts_and_parsing(dialogues[:4])
    time_respond(dialogues[:4])
    time_offline(dialogues[:4])

    build_us, parse_us, respond_us, offline_tps = [], [], [], []
    offline_turns = 0
    for _ in range(args.runs):
        b, p, n = time_prompts_and_parsing(dialogues)
        build_us.append(b / n * 1e6)
        parse_us.append(p / n * 1e6)
        r, n = time_respond(dialogues)
        respond_us.append(r / n * 1e6)
        o, offline_turns = time_offline(dialogues)
        offline_tps.append(offline_turns / o)
    med = statistics.median
    overhead = med(build_us) + med(parse_us)
    rows = [
        ["prompt building (appraisal + reply)", f"{med(build_us):.0f} µs/turn", "", ""],
        ["parsing (appraisal + reply answers)", f"{med(parse_us):.0f} µs/turn", "", ""],
        [
            "prompts + parsing",
            f"{overhead:.0f} µs/turn",
            "< 1000 µs",
            "met" if overhead < 1000 else "NOT met",
        ],
        ["whole LLMUser.respond (no network)", f"{med(respond_us):.0f} µs/turn", "", ""],
        [
            "offline simulator, no embeddings",
            f"{med(offline_tps):,.0f} turns/s",
            "≥ 2,000",
            "met" if med(offline_tps) >= 2000 else "NOT met",
        ],
    ]
    print_table(
        f"Simulator overhead, {len(dialogues)} dialogues × {args.turns} turns, median of {args.runs} runs",
        ["what", "median", "target", ""],
        rows,
    )
    path = write_result(
        "simulator_overhead",
        {
            "runs": args.runs,
            "dialogues": len(dialogues),
            "turns_per_dialogue": args.turns,
            "prompt_build_us_per_turn": build_us,
            "parse_us_per_turn": parse_us,
            "overhead_us_per_turn_median": overhead,
            "respond_us_per_turn": respond_us,
            "offline_turns": offline_turns,
            "offline_turns_per_s": offline_tps,
            "targets": {
                "overhead_us_per_turn": 1000,
                "offline_turns_per_s": 2000,
                "overhead_met": overhead < 1000,
                "offline_met": med(offline_tps) >= 2000,
            },
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
