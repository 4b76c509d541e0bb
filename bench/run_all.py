"""Run every benchmark, then write their tables into docs/performance.md.

    python bench/run_all.py                 # all of them, full size (~10 min on 2 quiet cores for the first
                                            # four; update-memory and sampler need SmolLM2 fetched, else skip)
    python bench/run_all.py --only rollout  # some of them (rollout, simulator, trainer, memory,
                                            # update-memory, sampler: SmolLM2, see docs/performance.md;
                                            # engine: the tiny model's chat layer and decode steps)
    python bench/run_all.py --quick         # tiny configurations: checks the scripts run (~1 min)
    python bench/run_all.py --render-only   # rewrite the docs tables from bench/results/*.json

The trainer benchmark needs TRL, kept out of the main environment: it runs under ``.venv-bench``
when that exists (``make bench`` creates it), else under this interpreter with our numbers only.
The system load average is recorded before and after each benchmark, because on a shared machine
it explains more of the spread than anything in the code.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS_DIR, machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOCS = ROOT / "docs" / "performance.md"
START, END = "<!-- bench:results:start -->", "<!-- bench:results:end -->"


def _a(text: str) -> list[str]:
    return text.split()


FULL: dict[str, list[str]] = {
    "rollout": ["rollout_concurrency.py"],
    "simulator": ["simulator_overhead.py"],
    "trainer": ["trainer_throughput.py"],
    "memory": ["memory.py"],
    "update-memory": ["update_memory.py"],
    "sampler": ["sampler_vs_generate.py"],
    "engine": ["engine_speed.py"],
}
QUICK: dict[str, list[str]] = {
    "rollout": [
        "rollout_concurrency.py",
        *_a("--runs 1 --sizes 4 --latencies 0.02 --turns 2 --seq-n 2"),
    ],
    "simulator": ["simulator_overhead.py", *_a("--runs 1 --dialogues 4 --turns 2")],
    "trainer": [
        "trainer_throughput.py",
        *_a(
            "--sizes tiny --steps 1 --passes 1 --warmup 0 --batch 4 --group 2 --prompt-len 8 --completion-len 8"
        ),
    ],
    "memory": ["memory.py", *_a("--runs 1 --skip-demo --sizes tiny")],
    "update-memory": ["update_memory.py", "--quick"],
    "sampler": ["sampler_vs_generate.py", "--quick"],
    "engine": ["engine_speed.py", "--quick"],
}


def bench_python() -> str:
    """The interpreter with TRL for the trainer benchmark, when the bench venv exists."""
    candidate = ROOT / ".venv-bench" / "bin" / "python"
    if candidate.exists():
        ok = subprocess.run([str(candidate), "-c", "import trl, rlver"], capture_output=True).returncode == 0
        if ok:
            return str(candidate)
    return sys.executable


def run(name: str, argv: list[str]) -> dict[str, Any]:
    python = bench_python() if name == "trainer" else sys.executable
    cmd = [python, str(HERE / argv[0]), *argv[1:]]
    load_before = os.getloadavg()
    print(f"$ {' '.join([Path(python).name if python == sys.executable else python, *cmd[1:]])}", flush=True)
    started = dt.datetime.now(dt.timezone.utc)
    subprocess.run(cmd, check=True, cwd=ROOT)
    return {
        "command": " ".join(["python", f"bench/{argv[0]}", *argv[1:]]),
        "interpreter": os.path.relpath(python, ROOT) if python.startswith(str(ROOT)) else python,
        "started_utc": started.isoformat(timespec="seconds"),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


# ----------------------------------------------------------------------------------- docs rendering
def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS_DIR / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _provenance(runs: dict[str, Any], key: str) -> str:
    info = runs.get(key)
    if not info:
        return ""
    return (
        f"Command: `{info['command']}` ({info['interpreter']}), started {info['started_utc']}; "
        f"load average (1/5/15 min) {'/'.join(map(str, info['load_before']))} before, "
        f"{'/'.join(map(str, info['load_after']))} after.\n\n"
    )


def render() -> str:
    runs = (_load("runs") or {}).get("runs", {})
    m = machine()
    parts = [
        f"Measured on: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Python {m['python']}, "
        f"torch {m['torch']}, {m['platform']}."
    ]
    if r := _load("rollout_concurrency"):
        rows = []
        for x in r["results"]:
            rows.append(
                [
                    str(x["n"]),
                    f"{x['latency_s'] * 1000:.0f}",
                    f"{x['ours_median_s']:.2f} ({', '.join(f'{v:.2f}' for v in x['ours_s'])})",
                    f"{x['critical_path_s']:.2f}",
                    f"**{x['ours_over_critical']:.2f}×**",
                    f"{x['sequential_estimate_s']:.1f}"
                    + (
                        " (measured)"
                        if x["n"] == x["sequential_measured_n"]
                        else f" (scaled from N={x['sequential_measured_n']})"
                    ),
                    f"{x['speedup_vs_sequential']:.0f}×",
                ]
            )
        parts.append(
            f"### 1. Rollout concurrency ({r['results'][0]['turns']} turns, median of {r['runs']} runs)\n\n"
            + _provenance(runs, "rollout")
            + _table(
                [
                    "N",
                    "L ms",
                    "ours s (runs)",
                    "critical path s",
                    "ours / critical",
                    "sequential s",
                    "speed-up",
                ],
                rows,
            )
        )
    if r := _load("simulator_overhead"):
        med = statistics.median
        rows = [
            ["prompt building (appraisal + reply)", f"{med(r['prompt_build_us_per_turn']):.0f} µs/turn", ""],
            ["parsing (appraisal + reply answers)", f"{med(r['parse_us_per_turn']):.0f} µs/turn", ""],
            [
                "**prompts + parsing**",
                f"**{r['overhead_us_per_turn_median']:.0f} µs/turn**",
                "< 1,000 µs: " + ("met" if r["targets"]["overhead_met"] else "not met"),
            ],
            ["whole `LLMUser.respond`, no network", f"{med(r['respond_us_per_turn']):.0f} µs/turn", ""],
            [
                "**offline simulator, no embeddings**",
                f"**{med(r['offline_turns_per_s']):,.0f} turns/s**",
                "≥ 2,000: " + ("met" if r["targets"]["offline_met"] else "not met"),
            ],
        ]
        parts.append(
            f"### 2. Simulator overhead ({r['dialogues']} dialogues × {r['turns_per_dialogue']} turns, "
            f"median of {r['runs']} runs)\n\n"
            + _provenance(runs, "simulator")
            + _table(["what", "median", "target"], rows)
        )
    if r := _load("trainer_throughput"):
        st = r["settings"]
        rows = []
        for x in r["results"]:
            trl_s = x["trl_s"]
            rows.append(
                [
                    f"{x['size']} ({x['parameters'] / 1e6:.1f} M)",
                    f"{statistics.median(x['ours_s']):.3f} (best {min(x['ours_s']):.3f})",
                    f"{x['ours_tokens_per_s']:,.0f}",
                    f"{statistics.median(trl_s):.3f} (best {min(trl_s):.3f})" if trl_s else "n/a",
                    f"{x['trl_tokens_per_s']:,.0f}" if x["trl_tokens_per_s"] else "n/a",
                    f"**{x['ours_over_trl']:.2f}×**" if x["ours_over_trl"] else "n/a",
                    f"{x['ours_over_trl_best']:.2f}×" if x.get("ours_over_trl_best") else "n/a",
                ]
            )
        n = st["steps"] * st.get("passes", 1)
        parts.append(
            f"### 3. Trainer throughput (GRPO update, {st['batch']} sequences × ({st['prompt_len']} + "
            f"{st['completion_len']}) tokens, groups of {st['group']}, fp32, {st['threads']} threads, "
            f"median of {n} updates each; TRL {r['trl'] or 'not installed'})\n\n"
            + _provenance(runs, "trainer")
            + _table(
                [
                    "model",
                    "ours s/update",
                    "ours tokens/s",
                    "TRL s/update",
                    "TRL tokens/s",
                    "ours / TRL (median)",
                    "ours / TRL (best)",
                ],
                rows,
            )
        )
    if r := _load("memory"):
        rows = [
            [
                x["what"],
                f"{statistics.median(x['peak_rss_mib']):,.0f}",
                f"{min(x['peak_rss_mib']):,.0f}–{max(x['peak_rss_mib']):,.0f}",
                f"{statistics.median(x['wall_s']):.1f}",
            ]
            for x in r["results"]
        ]
        parts.append(
            f"### 4. Peak memory (RSS, median of {r['runs']} runs)\n\n"
            + _provenance(runs, "memory")
            + _table(["what", "peak RSS MiB", "range", "wall s"], rows)
        )
    return "\n\n".join(parts) + "\n"


def write_docs(text: str, path: Path = DOCS) -> None:
    """Replace what lies between the two markers of ``path`` (the rest of the page is hand-written)."""
    doc = path.read_text() if path.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in doc or END not in doc:
        doc = doc.rstrip() + f"\n\n{START}\n{END}\n"
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{text}{END}{tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=list(FULL), default=list(FULL))
    ap.add_argument("--quick", action="store_true", help="tiny configurations; docs are not touched")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--docs", type=Path, default=DOCS, help="the page whose results block is rewritten")
    args = ap.parse_args()

    if not args.render_only:
        plan = QUICK if args.quick else FULL
        record = _load("runs") or {"runs": {}}
        for name in args.only:
            record["runs"][name] = run(name, plan[name])
            record["python"] = platform.python_version()
            RESULTS_DIR.mkdir(parents=True, exist_ok=True)
            (RESULTS_DIR / "runs.json").write_text(json.dumps(record, indent=2) + "\n")
        if args.quick:
            return
    write_docs(render(), args.docs)
    print(f"wrote {args.docs}")


if __name__ == "__main__":
    main()
