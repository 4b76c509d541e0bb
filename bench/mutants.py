"""Mutation testing of the training core with mutmut (issue 42, item 3): ``make mutants`` or, for one
module, ``python bench/mutants.py rewards``.

Why a harness around mutmut: mutmut 3 reads its settings from the ``pyproject.toml`` of the folder it
runs in and first runs its whole test selection once to learn which tests reach which function. The
suite is far too long for that on a 2-core machine, and each module has a few test files that matter.
So each module runs in its own folder, ``build/mutants/<module>/``, holding a copy of ``src/`` and
``tests/`` and this project's ``pyproject.toml`` with a ``[tool.mutmut]`` block naming the one source
file (or folder) to mutate and the test files that test it. Nothing is written outside ``build/``.

mutmut is not in CI (a module takes minutes to an hour of CPU). It is in the ``dev`` extra, so
``make setup-dev`` installs it beside the project; or install it into a venv of its own, point ``$MUTMUT``
at its ``mutmut`` and put the project's packages on ``PYTHONPATH`` (docs/training.md, "Mutation testing").

The score printed is killed / (killed + survived), where a timeout counts as killed and a mutant no
selected test reaches ("no tests") as survived; mutants listed in :data:`EQUIVALENT` (no input can
tell them apart), :data:`CPU_UNTESTABLE` (only a GPU can) or :data:`OUT_OF_REACH` (mutmut cannot switch
them on), each with its reason (``bench/mutant_labels.py``), are left out of it and shown apart while
each one's diff is still the change its label records, and a second score counts them as survivors.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from cuda_mutants import function_alone
from mutant_labels import CPU_UNTESTABLE, EQUIVALENT, OUT_OF_REACH, Label

ROOT = Path(__file__).resolve().parent.parent
#: selected tests run without the long, the wall-clock and the real-model ones
MARKERS = "not slow and not timing and not realmodel and not browser and not verl"


@dataclass(frozen=True)
class Target:
    """One module of the training core: what to mutate, which test files test it, and which of their
    tests to leave out (``deselect``: pytest node ids of tests that run whole training steps, seconds
    each, where faster tests of the same functions exist: every mutant of a function runs every
    selected test that reaches it). ``source``: one path or glob, or several."""

    source: str | tuple[str, ...]
    tests: tuple[str, ...]
    deselect: tuple[str, ...] = ()
    #: the target whose mutants this one is a narrower view of (run by name only, not in "all")
    narrows: str = ""


_ALG = "tests/train/test_train_algorithms.py"
TARGETS: dict[str, Target] = {
    "rewards": Target(
        "src/rlver/env/rewards.py",
        (
            "tests/env/test_env_rewards.py",
            "tests/env/test_rewards_spec.py",
            "tests/env/test_rewards_mutants.py",
        ),
    ),
    "batch": Target(
        "src/rlver/train/batch.py",
        (
            "tests/train/test_learner_packed_update.py",
            "tests/train/test_learner_update_memory.py",
            "tests/train/test_batch_mutants.py",
        ),
    ),
    "algorithms": Target(
        "src/rlver/train/algorithms/*",
        (
            "tests/train/test_train_algorithms.py",
            "tests/train/test_rollout_is.py",
            "tests/train/test_core_kl_clamp.py",
            "tests/train/test_grpo_lone_sample.py",
            "tests/train/test_sequence_is_warning.py",
            "tests/train/test_algorithms_mutants.py",
            "tests/train/test_mapo.py",
            "tests/train/test_algorithms_turn_credit.py",
            "tests/train/test_algorithms_turn_credit_mutants.py",
        ),
        # whole training steps (1-6 s each): they test the learner; the maths has direct tests here
        (
            "tests/train/test_mapo.py::test_a_training_step_in_each_layout",
            f"{_ALG}::test_the_trainer_puts_ppos_kl_in_the_rewards",
            f"{_ALG}::test_target_kl_stops_the_remaining_minibatch_updates",
            f"{_ALG}::test_one_sample_per_dialogue_takes_minibatches_optimiser_steps",
            f"{_ALG}::test_a_partial_second_minibatch_is_off_policy",
            f"{_ALG}::test_the_last_partial_minibatch_is_trained",
            "tests/train/test_rollout_is.py::test_a_training_step_weighs_its_loss_and_logs_the_weights",
            "tests/train/test_rollout_is.py::test_off_policy_minibatches_weigh_by_the_log_probs_from_before_the_update",
            "tests/train/test_sequence_is_warning.py::test_a_run_warns_once_for_sequence_level_only",
        ),
    ),
    "learner": Target(
        "src/rlver/train/learner.py",
        (
            "tests/train/test_learner_packed_update.py",
            "tests/train/test_train_algorithms.py",
            "tests/train/test_rollout_is.py",
            "tests/train/test_train_loop.py",
            "tests/train/test_sequence_is_warning.py",
            "tests/train/test_learner_mutants.py",
            "tests/train/test_mapo.py",
            "tests/train/test_update_critic_inputs.py",
            "tests/train/test_update_edges.py",
        ),
        # two PPO training steps with a KL term (6 s): test_learner_mutants scores a KL batch directly;
        # MAPO's training steps: its layouts test builds the padded batch directly
        (
            f"{_ALG}::test_the_trainer_puts_ppos_kl_in_the_rewards",
            "tests/train/test_mapo.py::test_a_training_step_in_each_layout",
        ),
    ),
    "optim": Target(
        "src/rlver/train/optim.py",
        ("tests/train/test_optim_config.py", "tests/train/test_optim_schedule.py"),
    ),
    "sampling": Target(
        "src/rlver/llm/sampling.py",
        (
            "tests/llm/test_sampling_batched.py",
            "tests/llm/test_sampling_greedy.py",
            "tests/llm/test_sampling_mutants.py",
        ),
    ),
    "batching": Target(
        "src/rlver/rollout/batching.py",
        (
            "tests/rollout/test_batching.py",
            "tests/rollout/test_rollout_overlap.py",
            "tests/rollout/test_batching_mutants.py",
        ),
    ),
}

# the turn-credit algorithms and the MAPO estimator they share, apart from the rest of algorithms/
# (the same mutants, with their own tests only: minutes where the whole package is much longer)
TARGETS["turncredit"] = Target(
    (
        "src/rlver/train/algorithms/mapo.py",
        "src/rlver/train/algorithms/mica.py",
        "src/rlver/train/algorithms/ctc_grpo.py",
    ),
    (
        "tests/train/test_mapo.py",
        "tests/train/test_algorithms_turn_credit.py",
        "tests/train/test_algorithms_mutants.py",
        "tests/train/test_algorithms_turn_credit_mutants.py",
    ),
    ("tests/train/test_mapo.py::test_a_training_step_in_each_layout",),
    narrows="algorithms",
)
# the update loop moved out of learner.py: the same tests reach it (one list, kept in one place)
TARGETS["update"] = Target("src/rlver/train/update.py", TARGETS["learner"].tests, TARGETS["learner"].deselect)

#: every listed mutant: which list it is in, and its label
LISTED: dict[str, tuple[str, Label]] = {
    **{m: ("equivalent", label) for m, label in EQUIVALENT.items()},
    **{m: ("CPU-untestable", label) for m, label in CPU_UNTESTABLE.items()},
    **{m: ("out of reach", label) for m, label in OUT_OF_REACH.items()},
}

#: a mutant's change: the source lines it replaces and its own, stripped (``None``: no such mutant)
Change = tuple[str, str]


def module_path(module: str) -> str:
    """The source file of a dotted module under ``src/`` (a package's ``__init__.py``)."""
    plain = Path("src", *module.split(".")).with_suffix(".py")
    return str(plain if (ROOT / plain).exists() else Path("src", *module.split("."), "__init__.py"))


def functions_of(code: str) -> dict[str, str]:
    """Every function and method in ``code`` by name, with its source (mutmut's ``x_f__mutmut_3`` too)."""
    return {
        node.name: ast.get_source_segment(code, node) or ""
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def change_of(functions: dict[str, str], short: str) -> Change | None:
    """The lines mutant ``short`` (``x_f__mutmut_3``) changes against mutmut's unmutated copy of the
    function, from a mutated module's functions; ``None`` when mutmut made no such mutant."""
    base = short.rsplit("__mutmut_", 1)[0]
    original, mutant = functions.get(base + "__mutmut_orig"), functions.get(short)
    if original is None or mutant is None:
        return None
    before = original.splitlines()
    after = mutant.replace(short, base + "__mutmut_orig", 1).splitlines()  # the same def line
    removed: list[str] = []
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += [line.strip() for line in before[i1:i2]]
            added += [line.strip() for line in after[j1:j2]]
    return "\n".join(removed), "\n".join(added)


def run_changes(folder: Path, names: list[str]) -> dict[str, Change | None]:
    """Each named mutant's change as the run in ``folder`` made it (its ``mutants/`` copy of the source)."""
    functions: dict[str, dict[str, str]] = {}
    out: dict[str, Change | None] = {}
    for name in names:
        module, short = name.rsplit(".", 1)
        if module not in functions:
            path = folder / "mutants" / module_path(module)
            functions[module] = functions_of(path.read_text(encoding="utf-8")) if path.exists() else {}
        out[name] = change_of(functions[module], short)
    return out


def generated_changes(names: list[str]) -> dict[str, Change | None]:
    """Each named mutant's change, regenerated by mutmut's own mutator from the current source, one
    function at a time (seconds where a whole module is minutes; mutmut numbers each function's
    mutants by themselves). Needs mutmut importable."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    functions: dict[tuple[str, str], dict[str, str]] = {}
    out: dict[str, Change | None] = {}
    for name in names:
        module, short = name.rsplit(".", 1)
        key = (module, short.rsplit("__mutmut_", 1)[0])
        if key not in functions:
            path = module_path(module)
            alone = function_alone(path, short) if (ROOT / path).exists() else None
            functions[key] = functions_of(mutate_file_contents(path, alone).code) if alone else {}
        out[name] = change_of(functions[key], short)
    return out


def stale_labels(
    labels: dict[str, tuple[str, Label]], changes: dict[str, Change | None]
) -> tuple[dict[str, Change], list[str]]:
    """The labels whose mutant's change is no longer the one they record (with the mutant's change now),
    and those naming no mutant: both the result of an edit that renumbered a function's mutants."""
    stale: dict[str, Change] = {}
    missing: list[str] = []
    for name in sorted(set(labels) & set(changes)):
        change = changes[name]
        if change is None:
            missing.append(name)
        elif change != (labels[name][1].line, labels[name][1].mutated):
            stale[name] = change
    return stale, missing


def print_stale(stale: dict[str, Change], missing: list[str]) -> None:
    for name, (line, mutated) in stale.items():
        label = LISTED[name][1] if name in LISTED else None
        print(f"  stale label (not left out): {name}: mutmut changes {line!r} -> {mutated!r}", end="")
        print(f"; the label was written for {label.line!r} -> {label.mutated!r}" if label else "")
    for name in missing:
        print(f"  label names no mutant (remove or re-key it): {name}")


def check_labels() -> int:
    """``--check-labels``: every label against its mutant regenerated from the current source."""
    stale, missing = stale_labels(LISTED, generated_changes(sorted(LISTED)))
    print_stale(stale, missing)
    good = len(LISTED) - len(stale) - len(missing)
    print(f"{good} of {len(LISTED)} labels name the change they were written for")
    return 1 if stale or missing else 0


#: A mutant's tests are stopped (a *timeout*, counted as killed) after this many times the clean run's
#: time (+ 1 s) of wall clock. mutmut's default, 15, gives a mutant that loops forever in the policy
#: queue's ``serve`` two minutes (of 7 s of tests); 5 still leaves a loaded 2-core box room.
TIMEOUT_MULTIPLIER = 5

#: mutmut's statuses that count as the tests seeing the change
KILLED = {"killed", "timeout", "segfault", "caught by type check"}


def workdir(name: str) -> Path:
    return ROOT / "build" / "mutants" / name


def prepare(name: str, target: Target, keep: bool = False, blank: tuple[str, ...] = ()) -> Path:
    """A fresh folder for ``name``: copies of src/ and tests/, and pyproject.toml with mutmut's block.

    ``keep``: refresh the copies but keep mutmut's state (``mutants/``: the results so far, which tests
    reach which function), so that ``--only`` re-runs some mutants against new tests and the rest of
    the module keeps its verdicts (mutmut collects the new tests' coverage itself).
    """
    out = workdir(name)
    if out.exists():
        for part in ("src", "tests") if keep else ():
            shutil.rmtree(out / part, ignore_errors=True)
        if not keep:
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "src", out / "src", ignore=ignore)
    shutil.copytree(ROOT / "tests", out / "tests", ignore=ignore)
    for test_file in blank:  # the score before these tests were written (--blank)
        (out / test_file).write_text('"""Left empty for this run (bench/mutants.py --blank)."""\n')
    sources = (target.source,) if isinstance(target.source, str) else target.source
    pytest_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-m", MARKERS, "-n", "0", "-q"]
    selection = [*target.tests, *(f"--deselect={test}" for test in target.deselect)]
    block = "\n".join(
        [
            "",
            "[tool.mutmut]",
            'source_paths = ["src"]',
            f"only_mutate = [{', '.join(map(_toml_str, sources))}]",
            f"pytest_add_cli_args = [{', '.join(map(_toml_str, pytest_args))}]",
            f"pytest_add_cli_args_test_selection = [{', '.join(map(_toml_str, selection))}]",
            "use_git_change_detection = false",
            f"timeout_multiplier = {TIMEOUT_MULTIPLIER}",
            "",
        ]
    )
    (out / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text() + block)
    return out


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: mutmut forks each mutant's test run from a process that has already run the tests once. torch's
#: CPU kernels use OpenMP (libgomp), which is not fork-safe: a child whose first large op (a
#: ``log_softmax`` over a 50k vocabulary) opens a parallel region waits forever on the parent's
#: thread team, and mutmut's wall-clock limit then records a *timeout*, counted as killed, for a
#: mutant no test saw. One thread per process has no team to wait on (and suits ``--max-children``).
SINGLE_THREADED = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def mutmut(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``mutmut`` beside this Python (or ``$MUTMUT``) in ``folder``, single-threaded."""
    exe = os.environ.get("MUTMUT") or str(Path(sys.executable).with_name("mutmut"))
    env = {**os.environ, **SINGLE_THREADED}
    return subprocess.run([exe, *args], cwd=folder, text=True, capture_output=True, check=False, env=env)


def statuses(folder: Path) -> dict[str, str]:
    """Each mutant's status, from ``mutmut results --all true`` (``name: status`` lines)."""
    done = mutmut(folder, "results", "--all", "true")
    out: dict[str, str] = {}
    for line in done.stdout.splitlines():
        match = re.match(r"\s*(\S+__mutmut_\d+): (.+)$", line)
        if match:
            out[match.group(1)] = match.group(2).strip()
    return out


def merged(found: dict[str, str], earlier: dict[str, str]) -> dict[str, str]:
    """This run's statuses, and the earlier run's for the mutants this one did not test (``--only``).

    mutmut resets every result when the test selection changes (a new test file), so the earlier
    verdicts are read before the run and kept here. A kill stays a kill with more tests; an earlier
    survivor not re-run stays a survivor.
    """
    kept = {m: earlier[m] for m, s in found.items() if s == "not checked" and m in earlier}
    if kept:
        print(f"({len(kept)} results kept from the previous run)")
    return {**found, **kept}


#: the merged statuses of a target's runs, beside mutmut's own state: mutmut forgets every result when
#: the test selection changes, so a second ``--only`` run would lose what the first one kept
RESULTS = "rlver-results.json"


def kept_results(folder: Path) -> dict[str, str]:
    """The statuses :func:`keep_results` wrote after the last run in ``folder`` (none before one)."""
    path = folder / RESULTS
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def keep_results(folder: Path, found: dict[str, str]) -> None:
    tmp = folder / (RESULTS + ".tmp")
    tmp.write_text(json.dumps(found, ensure_ascii=False, indent=0, sort_keys=True), encoding="utf-8")
    tmp.replace(folder / RESULTS)


def report(name: str, found: dict[str, str], changes: dict[str, Change | None] | None = None) -> int:
    """Print the module's counts, its score with the listed mutants left out and counted as
    survivors, and the surviving mutants; return the number of unexplained ones.

    ``changes``: each listed mutant's change in this run (:func:`run_changes`). A listed mutant is left
    out only while its change is its label's; a stale label's mutant is scored as a survivor, and a
    label of a module of this run that names no mutant is reported (a renumbering edit does both).
    """
    counts = Counter(found.values())
    modules = {m.rsplit(".", 1)[0] for m in found}
    own = {m: LISTED[m] for m in LISTED if m.rsplit(".", 1)[0] in modules}
    stale, _ = stale_labels(own, {m: c for m, c in (changes or {}).items() if m in found})
    missing = sorted(m for m in own if m not in found)
    listed = {m for m in found if m in own and m not in stale and found[m] not in KILLED | {"not checked"}}
    killed = sum(1 for m, s in found.items() if s in KILLED)
    #: "skipped" and "not checked" (outside an ``--only`` selection, or an interrupted run) are not scored
    unscored = {"skipped", "not checked"}
    live = [m for m, s in sorted(found.items()) if s not in KILLED and m not in listed and s not in unscored]
    scored = killed + len(live)
    score = 100.0 * killed / scored if scored else 100.0
    with_listed = 100.0 * killed / (scored + len(listed)) if scored + len(listed) else 100.0
    kinds = Counter(LISTED[m][0] for m in listed)
    print(f"{name}: {len(found)} mutants, " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(
        f"{name}: score {score:.1f} % ({killed} killed of {scored}; listed left out: "
        + ", ".join(f"{kinds[k]} {k}" for k in ("equivalent", "CPU-untestable", "out of reach"))
        + f"); {with_listed:.1f} % ({killed} of {scored + len(listed)}) counting the listed as survivors"
    )
    for mutant in live:
        print(f"  survived ({found[mutant]}): {mutant}   (mutmut show {mutant})")
    for mutant in sorted(listed):
        kind, label = LISTED[mutant]
        print(f"  {kind}: {mutant}: {label.why}")
    print_stale({m: c for m, c in stale.items() if found[m] not in KILLED}, missing)
    for mutant in sorted(m for m in own if found.get(m) in KILLED):
        if found[mutant] == "timeout":  # a survivor runs every test that reaches it: the longest runs
            print(f"  listed as {LISTED[mutant][0]} but timed out (a loaded machine? --only it): {mutant}")
        else:
            print(f"  listed as {LISTED[mutant][0]} but killed (remove it from its list): {mutant}")
    return len(live)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "modules", nargs="*", help=f"of: {', '.join(TARGETS)} (default: all but the narrower views)"
    )
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--report-only", action="store_true", help="print the last run's results again")
    parser.add_argument(
        "--check-labels",
        action="store_true",
        help="regenerate every listed mutant from the current source and check that each is still the "
        "change its label was written for (needs mutmut; no tests run)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="MUTANT",
        help="run only these mutants (names or globs, e.g. 'rlver.train.update.x_clip*') in the "
        "module's existing folder, keeping the others' results (one module)",
    )
    parser.add_argument(
        "--blank",
        nargs="+",
        default=[],
        metavar="TEST_FILE",
        help="run with these test files empty in the copy: the score before they were written",
    )
    args = parser.parse_args(argv)
    if args.check_labels:
        return check_labels()
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        print(f"error: unknown module {unknown[0]!r}; expected one of {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    if args.only and len(args.modules) != 1:
        print("error: --only needs exactly one module", file=sys.stderr)
        return 2
    for name in args.modules or [n for n, t in TARGETS.items() if not t.narrows]:
        keep = bool(args.only) and workdir(name).is_dir()
        earlier = {**statuses(workdir(name)), **kept_results(workdir(name))} if keep else {}
        folder = (
            workdir(name)
            if args.report_only
            else prepare(name, TARGETS[name], keep=keep, blank=tuple(args.blank))
        )
        if not args.report_only:
            done = mutmut(folder, "run", "--max-children", str(args.max_children), *(args.only or ()))
            if done.returncode != 0:
                print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
                print(f"error: mutmut run failed for {name} (exit {done.returncode})", file=sys.stderr)
                return 1
        found = merged(statuses(folder), earlier if args.only else kept_results(folder))
        if not args.report_only:
            keep_results(folder, found)
        report(name, found, run_changes(folder, [m for m in found if m in LISTED]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
