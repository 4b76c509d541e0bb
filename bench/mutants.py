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
them on), each with its reason, are left out of it and shown apart, and a second score counts them
as survivors.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: selected tests run without the long, the wall-clock and the real-model ones
MARKERS = "not slow and not timing and not realmodel and not browser and not verl"


@dataclass(frozen=True)
class Target:
    """One module of the training core: what to mutate, which test files test it, and which of their
    tests to leave out (``deselect``: pytest node ids of tests that run whole training steps, seconds
    each, where faster tests of the same functions exist: every mutant of a function runs every
    selected test that reaches it)."""

    source: str
    tests: tuple[str, ...]
    deselect: tuple[str, ...] = ()


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

#: Surviving mutants are listed, by mutmut's name and with a one-line reason, in one of three lists:
#:
#: * :data:`EQUIVALENT`: no input, on any device, can tell the mutant from the original;
#: * :data:`CPU_UNTESTABLE`: only a device (CUDA) can (``.to(None)``, ``device=None``, an autocast without
#:   its dtype): on the CPU the tests run on, the mutant computes what the original does.
#:   ``tests/train/test_batch_cuda_only.py`` kills them on a GPU (``bench/cuda_mutants.py``, no mutmut needed);
#: * :data:`OUT_OF_REACH`: mutmut cannot switch the mutant on (code that runs at import, before it forks).
#:
#: Each is left out of the score and shown apart; the score counting them as survivors is printed too.
#: mutmut numbers a function's mutants in order, so an edit to the function renames them: re-check
#: the lists after changing a module.
_ZIP_SAME = (
    "zip's strict= only acts on unequal lengths; both lists hold one value per assistant turn by construction"
)
_R = "rlver.env.rewards."
_B = "rlver.train.batch."
_USE_CACHE = "use_cache only decides whether the forward also returns a KV cache; the logits are the same"
_S = "rlver.llm.sampling."
_TWO_D = "the sampler's tensors are [rows, vocab] (or [rows, 1]): dim/axis 1 is dim -1"
_FLOAT32 = "float32 is torch's default dtype: dtype=None or no dtype gives the same tensor"
_A = "rlver.train.algorithms."
# the update loop moved out of learner.py: the same tests reach it (one list, kept in one place)
TARGETS["update"] = Target("src/rlver/train/update.py", TARGETS["learner"].tests, TARGETS["learner"].deselect)

EQUIVALENT: dict[str, str] = {
    **{
        f"{_A}core.x_group_advantages__mutmut_{n}": "device=None puts the group ids on the CPU, and CUDA "
        "indexes a CUDA tensor with them all the same: the same advantages on the scores' device (survived "
        "tests/train/test_batch_cuda_only.py on an H200, bench/cuda_mutants.py, 2026-11-28)"
        for n in (7, 9)
    },
    **{f"rlver.train.learner.x_pad_batch__mutmut_{n}": _FLOAT32 for n in (8, 10)},
    **{
        f"rlver.train.learner.x_pad_batch__mutmut_{n}": "the int mask is cast on assignment into the float32 tensor"
        for n in (16, 18)
    },
    "rlver.train.learner.x_make_samples__mutmut_17": "episode_turn_samples marks every sample it returns "
    "meta['per_turn'] = True: the condition is always true",
    **{
        f"rlver.train.learner.x_make_samples__mutmut_{n}": "the cut episode holds exactly kept_turns turns, "
        "so sample_rewards has no later turn to fold in: kept_turns changes nothing"
        for n in (59, 62)
    },
    "rlver.train.learner.xǁLearnerǁ_advantages__mutmut_43": "a wider `within` lets through only zeros: every "
    "registered algorithm's advantages and returns are 0 outside the mask already",
    "rlver.train.learner.xǁLearnerǁ__init____mutmut_15": "warned_sequence_is = None: only `if` reads it, and "
    "None is falsy as False is",
    "rlver.train.update.x_clip_and_norm__mutmut_15": 'float("INF") is float("inf"): float() ignores case',
    **{
        f"rlver.train.update.xǁPPOUpdateǁupdate__mutmut_{n}": "every minibatch step logs train/nonfinite_skips, "
        "so the default of sums.get is never used"
        for n in (67, 69, 72)
    },
    "rlver.train.update.xǁPPOUpdateǁ_micro_batch__mutmut_28": "chunk_tokens left at policy_forward's "
    "default: the chunking is exact, the numbers do not depend on its size",
    "rlver.train.learner.xǁLearnerǁ_logp__mutmut_8": "the chunk size is exact: the numbers do not depend on "
    "logit_chunk_tokens (batch's policy_forward_70 likewise)",
    "rlver.train.update.xǁPPOUpdateǁupdate__mutmut_56": "approx_kl >= vs > target_kl: a float tie no run meets "
    "(target_kl > 0, and a minibatch's KL is 0 exactly only at ratio 1)",
    _A + "core.x_masked_sum__mutmut_1": "sum(dim=None) is the full sum, as sum()",
    **{
        _A + f"core.x_explained_variance__mutmut_{n}": "unbiased=None is falsy: the population variance"
        for n in (4, 18)
    },
    _A + "core.x_compact__mutmut_6": "argsort's default dim is -1, the T axis of the [B, T] mask",
    _A + "core.x_compact__mutmut_8": "argsort of the bool mask orders it as its int8 copy does",
    _A + "core.x_compact__mutmut_35": "GAE multiplies, sums and concatenates the bool mask as its float copy",
    **{
        _A
        + f"core.x_group_advantages__mutmut_{n}": "lone acts only through lone == 'raw': any other default is 'zero'"
        for n in (3, 4)
    },
    _A
    + "core.x_token_rewards__mutmut_18": "row[end] = r vs += r: turn ends are distinct positions of a zero grid",
    **{
        _A
        + f"x_settings_for__mutmut_{n}": "dumping unset fields adds only defaults: the shared ones are the same in "
        "every settings class, another algorithm's are dropped quietly at their defaults"
        for n in (8,)
    },
    _A + "x_settings_for__mutmut_16": "and -> or in an assertion every entry meets (entry() always names "
    "the settings class): it can fail only for a table entry built by hand without one",
    _A + "base.xǁAlgorithmǁactor_loss__mutmut_28": "entropy_coef >= 0: at 0 it subtracts 0 x entropy, the "
    "same loss and gradient",
    _A + "core.x_masked_mean__mutmut_16": "mask.sum(dim=None) is the full sum, as mask.sum()",
    **{
        _A
        + f"mapo.xǁMAPOǁadvantages__mutmut_{n}": "a (dialogue, turn) table a row or a column larger: the extra "
        "one is never read (every lookup is of a dialogue and turn that exists)"
        for n in (45, 48)
    },
    _A + "core.x_policy_loss__mutmut_46": "advantages <= 0 in the dual clip: at A = 0 both sides are 0",
    "rlver.train.optim.x_lr_lambda__mutmut_2": "n <= warmup: at n == warmup the warm-up gives 1.0, as "
    "every decay does at progress 0",
    **{
        f"rlver.rollout.batching.xǁBusyǁ__init____mutmut_{n}": "since is written by the first enter() before "
        "anything reads it"
        for n in (3, 4)
    },
    **{
        "rlver.rollout.batching.xǁPolicyQueueǁ_run__mutmut_" + str(n): "zip's strict= only acts on unequal "
        "lengths; generate() returns one result per request (a wrong count becomes one error per row)"
        for n in (20, 23, 24)
    },
    **{
        _S + f"x_sample_tokens__mutmut_{n}": _TWO_D
        for n in (10, 14, 21, 23, 35, 39, 53, 67, 81, 83, 98, 104, 111, 113)
    },
    **{_S + f"x_inverse_cdf__mutmut_{n}": _TWO_D for n in (3, 31, 39, 54, 58)},
    **{_S + f"x_nucleus__mutmut_{n}": _TWO_D for n in (6, 13)},
    **{
        _S + f"x_sample_tokens__mutmut_{n}": "topk/sort: dim=-1 and sorted=True are the defaults"
        for n in (51, 52, 64)
    },
    **{_S + f"x_row_uniforms__mutmut_{n}": _FLOAT32 for n in (3, 6, 13, 16)},
    _S + "x_sample_tokens__mutmut_1": "top_p 2 as the default: any top_p >= 1 is off in both of its tests",
    **{
        _S + f"x_sample_tokens__mutmut_{n}": "top_p 1 after top_k: the nucleus then drops only tokens under "
        "2**-24 of the row's mass, whose cdf step rounds to 0 in float32 (never drawn either way)"
        for n in (85, 86)
    },
    _S
    + "x_inverse_cdf__mutmut_20": "u.to(None): the product with the cdf's total promotes to its dtype anyway",
    _S
    + "x_inverse_cdf__mutmut_30": "the clamp never acts: the target is held below the total, so searchsorted "
    "(right=True) returns at most vocab - 1",
    _S + "x_to_host__mutmut_3": "stacking int64 ids with float32 log-probs promotes to float32 anyway",
    _S + "x_to_host__mutmut_4": "the log-probs sample_tokens returns are float32 already (logits.float())",
    _R + "x_mixed_rewards__mutmut_4": "final_rewards ignores its spec argument",
    _R + "x_mixed_rewards__mutmut_8": "delta_rewards ignores its spec argument",
    _R + "x_mixed_rewards__mutmut_18": _ZIP_SAME,
    _R + "x_mixed_rewards__mutmut_21": _ZIP_SAME,
    _R + "x_mixed_rewards__mutmut_22": _ZIP_SAME,
    _R
    + "x_place_on_tokens__mutmut_11": "row[end] = r vs += r: turn ends are distinct positions, each row starts at 0",
    _R + "x_sample_rewards__mutmut_12": "0 <= k: for k = 0, [*r[:-1], sum(r[-1:])] == r, the unchanged list",
    _R
    + "x_sample_rewards__mutmut_13": "k <= len(r): for k = len(r), [*r[:k-1], sum(r[k-1:])] == r, unchanged",
    **{
        _B + f"x_collate__mutmut_{n}": "torch.full with an int pad id is int64 without a dtype"
        for n in (7, 10)
    },
    **{_B + f"x_collate__mutmut_{n}": "torch.zeros is float32 without dtype=" for n in (18, 20)},
    **{
        _B + f"x_collate__mutmut_{n}": "the int mask is cast on assignment into the float32 tensor"
        for n in (29, 31)
    },
    **{
        _B
        + f"x_micro_batches__mutmut_{n}": "width starts at 1, not 0: max(width, length) is the same for every length >= 1"
        for n in (15, 28)
    },
    **{_B + f"x_policy_forward__mutmut_{n}": _USE_CACHE for n in (10, 13, 14, 33, 36, 37)},
    _B
    + "x_policy_forward__mutmut_70": "chunks of at least 2 instead of 1: chunking is exact, the numbers do not depend on the size",
    _B
    + "x_policy_forward__mutmut_75": "checkpointing a chunk whose input needs no gradient recomputes the same numbers",
    _B + "x__body_and_head__mutmut_17": "and for or: a missing get_output_embeddings is then called as None, "
    "a TypeError the try returns None for",
}

_DEVICE = "on a CPU the tensor is already where it must be"
_TO_NONE = f".to(None) leaves the tensor where it is: {_DEVICE}; on CUDA it stays on the CPU"
_NO_DEVICE = f"device=None makes the tensor on the CPU: {_DEVICE}; on CUDA it is on the wrong device"
_GUARD = (
    "the zero-weight guard acts only when a device's parallel cumsum rounds a zero weight's step above "
    "0; on a CPU the step is exactly 0 and searchsorted(right=True) never picks it (no killing test: "
    "no input that makes a GPU's cumsum do it is known)"
)
CPU_UNTESTABLE: dict[str, str] = {
    **{f"{_B}x_collate__mutmut_{n}": _TO_NONE for n in (41, 42, 43)},
    **{
        f"{_B}x__compute_region__mutmut_{n}": "autocast without its dtype is bf16 on a CPU, as asked, and "
        "fp16 on CUDA"
        for n in (7, 9)
    },
    "rlver.train.learner.xǁBatchǁrows__mutmut_1": _TO_NONE,
    "rlver.train.update.xǁPPOUpdateǁ_micro_batch__mutmut_7": "collate(..., None) leaves the micro-batch on "
    "the CPU: on CUDA the model's forward gets CPU tensors",
    **{f"{_A}core.x_compact__mutmut_{n}": _NO_DEVICE for n in (25, 27)},
    **{_S + f"x_row_uniforms__mutmut_{n}": _NO_DEVICE for n in (4, 7)},
    _S + "x_row_uniforms__mutmut_17": _TO_NONE,
    **{_S + f"x_inverse_cdf__mutmut_{n}": _GUARD for n in (48, 50, 52)},
}

OUT_OF_REACH: dict[str, str] = {
    _A + "x_entry__mutmut_2": "entry() runs when the package is imported, before mutmut forks and switches "
    "a mutant on (test_every_algorithm_has_a_description checks the value)",
}

#: every listed mutant, with the list it is in
LISTED: dict[str, tuple[str, str]] = {
    **{m: ("equivalent", why) for m, why in EQUIVALENT.items()},
    **{m: ("CPU-untestable", why) for m, why in CPU_UNTESTABLE.items()},
    **{m: ("out of reach", why) for m, why in OUT_OF_REACH.items()},
}

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
    pytest_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-m", MARKERS, "-n", "0", "-q"]
    selection = [*target.tests, *(f"--deselect={test}" for test in target.deselect)]
    block = "\n".join(
        [
            "",
            "[tool.mutmut]",
            'source_paths = ["src"]',
            f"only_mutate = [{_toml_str(target.source)}]",
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


def report(name: str, found: dict[str, str]) -> int:
    """Print the module's counts, its score with the listed mutants left out and counted as
    survivors, and the surviving mutants; return the number of unexplained ones."""
    counts = Counter(found.values())
    listed = {m for m in found if m in LISTED and found[m] not in KILLED | {"not checked"}}
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
        kind, why = LISTED[mutant]
        print(f"  {kind}: {mutant}: {why}")
    for mutant in sorted(m for m in LISTED if found.get(m) in KILLED):
        print(f"  listed as {LISTED[mutant][0]} but killed (remove it from its list): {mutant}")
    return len(live)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"of: {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--report-only", action="store_true", help="print the last run's results again")
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
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        print(f"error: unknown module {unknown[0]!r}; expected one of {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    if args.only and len(args.modules) != 1:
        print("error: --only needs exactly one module", file=sys.stderr)
        return 2
    for name in args.modules or list(TARGETS):
        keep = bool(args.only) and workdir(name).is_dir()
        earlier = statuses(workdir(name)) if keep else {}
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
        report(name, merged(statuses(folder), earlier))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
