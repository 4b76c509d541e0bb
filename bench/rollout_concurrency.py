"""Benchmark 1: rollout concurrency against a local server with a fixed latency per call.

N dialogues × T turns, policy and simulator both served by a real OpenAI-compatible server on
127.0.0.1 (in its own process, so it does not share our GIL) that answers every call after L seconds.
Compared in the same run:

* ``ours``: :func:`rlver.rollout.runner.run_rollouts` (each dialogue's policy request sent the moment
  its user has answered, all simulator calls concurrent);
* ``sequential``: the published loop — the policy batch is generated at once, then each dialogue's
  simulator calls are made one dialogue after another. It takes T × (L + N × 2L), so it is measured
  on ``--seq-n`` dialogues and scaled linearly in N to the larger sizes (marked ``scaled`` in the
  table);
* ``critical path``: T × (L_policy + 2 L_sim), the best any runner can do.

Usage: python bench/rollout_concurrency.py [--runs 3] [--sizes 16 64 256] [--latencies 0.05 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_result

from rlver.testing.openai_server import ServerProcess

RESPONDER = "rlver.testing.responders:policy_and_simulator"


def _profiles(n: int) -> list[Any]:
    from rlver.profiles.sets import load_profile_set

    base = load_profile_set("en-train")
    return [base[i % len(base)].model_copy(update={"id": f"{base[i % len(base)].id}-{i}"}) for i in range(n)]


def _models(url: str, n: int) -> tuple[Any, Any]:
    from rlver.llm.openai_client import OpenAIChatModel
    from rlver.simulator.llm.user import LLMSimulator

    policy = OpenAIChatModel(url, "policy", api_key_env=None, concurrency=max(n, 1), timeout_s=60)
    sim_model = OpenAIChatModel(url, "sim", api_key_env=None, concurrency=max(2 * n, 1), timeout_s=60)
    return policy, LLMSimulator(sim_model)


async def _ours(url: str, n: int, turns: int) -> float:
    from rlver.env.dialogue import EnvConfig
    from rlver.llm.base import SamplingParams
    from rlver.rollout.runner import RolloutConfig, run_rollouts

    policy, simulator = _models(url, n)
    env = EnvConfig.training(max_assistant_turns=turns)  # start 30, every reply appraised
    config = RolloutConfig(simulator_concurrency=2 * n, env=env)
    profiles = _profiles(n)
    start = time.perf_counter()
    episodes = await run_rollouts(policy, simulator, profiles, config, SamplingParams(max_tokens=64))
    wall = time.perf_counter() - start
    bad = [e for e in episodes if e.status != "finished" or e.assistant_turns != turns]
    if bad:
        raise RuntimeError(f"{len(bad)} dialogues did not run {turns} turns: {bad[0].error}")
    await policy.aclose()
    await simulator.model.aclose()
    return wall


async def _sequential(url: str, n: int, turns: int) -> float:
    """The published loop: batched generation, then simulator calls one dialogue after another."""
    from rlver.env.thinking import split_think
    from rlver.llm.base import SamplingParams
    from rlver.records import Message
    from rlver.rules import TRAINING_START

    policy, simulator = _models(url, n)
    users = [simulator.start(p, start_emotion=TRAINING_START, seed=i) for i, p in enumerate(_profiles(n))]
    histories = [[Message(role="user", content=(await u.open()).text)] for u in users]
    start = time.perf_counter()
    for _ in range(turns):
        outs = await policy.complete_many(histories, SamplingParams(max_tokens=64))
        for u, h, out in zip(users, histories, outs, strict=True):
            if isinstance(out, BaseException):
                raise out
            h.append(Message(role="assistant", content=out.text))
            turn = await u.respond(split_think(out.text).visible)  # one dialogue after another
            h.append(Message(role="user", content=turn.text))
    wall = time.perf_counter() - start
    await policy.aclose()
    await simulator.model.aclose()
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--latencies", type=float, nargs="+", default=[0.05, 0.2])
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--seq-n", type=int, default=8, help="dialogues the sequential baseline really runs")
    args = ap.parse_args()

    rows: list[list[Any]] = []
    records: list[dict[str, Any]] = []
    for latency in args.latencies:
        with ServerProcess(RESPONDER, latency_s=latency) as server:
            url = server.url
            asyncio.run(_ours(url, 4, 2))  # warm-up: imports, connection pools
            seq_runs = [asyncio.run(_sequential(url, args.seq_n, args.turns)) for _ in range(args.runs)]
            seq_med = statistics.median(seq_runs)
            for n in args.sizes:
                ours_runs = [asyncio.run(_ours(url, n, args.turns)) for _ in range(args.runs)]
                ours_med = statistics.median(ours_runs)
                critical = args.turns * (latency + 2 * latency)
                # Scale the measured sequential time: T*L policy part is fixed, simulator part ∝ N.
                policy_part = args.turns * latency
                seq_est = policy_part + (seq_med - policy_part) * n / args.seq_n
                seq_label = "measured" if n == args.seq_n else f"scaled from N={args.seq_n}"
                rows.append(
                    [
                        n,
                        int(latency * 1000),
                        ours_med,
                        critical,
                        ours_med / critical,
                        seq_est,
                        seq_label,
                        seq_est / ours_med,
                    ]
                )
                records.append(
                    {
                        "n": n,
                        "latency_s": latency,
                        "turns": args.turns,
                        "ours_s": ours_runs,
                        "ours_median_s": ours_med,
                        "critical_path_s": critical,
                        "ours_over_critical": ours_med / critical,
                        "sequential_measured_n": args.seq_n,
                        "sequential_measured_s": seq_runs,
                        "sequential_estimate_s": seq_est,
                        "speedup_vs_sequential": seq_est / ours_med,
                    }
                )
    print_table(
        f"Rollout wall time, {args.turns} turns, median of {args.runs} runs",
        ["N", "L ms", "ours s", "critical s", "ours/critical", "sequential s", "sequential", "speed-up"],
        rows,
    )
    path = write_result("rollout_concurrency", {"runs": args.runs, "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
