"""Kill the CPU-untestable mutants on a CUDA machine, without mutmut: ``python bench/cuda_mutants.py``.

``bench/mutant_labels.py`` lists as *CPU-untestable* the mutants that only a device can tell apart from the
original (``.to(None)``, ``device=None``, an autocast without its dtype): on a CPU they compute exactly
what the original does. ``tests/train/test_batch_cuda_only.py`` holds their killing tests (skipped without
CUDA). This script checks them the way mutmut would, on a machine that has a GPU but no mutmut: for
each mutant it copies ``src/`` to a temporary folder, makes the mutant's one change there, and runs the
CUDA test file against the copy; the mutant is *killed* when a test fails. The unchanged copy runs first
and must pass (else the verdicts mean nothing).

Each mutant is written here as the one source line mutmut changes and what it changes it to, so the GPU
machine needs only torch, pytest and the project: ``PYTHONPATH=src python bench/cuda_mutants.py`` (the
mutants run ``--jobs`` at a time, 8 by default, on the one GPU). ``--check`` (where mutmut is installed)
regenerates mutmut's mutants from the current source and confirms each line here is the named mutant's
change, so an edit of the source that renumbers or moves them is caught before a GPU run;
``tests/test_bench.py`` runs it.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_FILE = "tests/train/test_batch_cuda_only.py"


@dataclass(frozen=True)
class LineMutant:
    """mutmut's ``name``: in ``path``, the line ``line`` (unique in the file) becomes ``mutated``."""

    name: str
    path: str
    line: str
    mutated: str


_COLLATE = "    return MicroBatch(list(indices), ids.to(device), attn.to(device), amask[:, 1:].to(device))"
_REGION = "    return torch.autocast(device_type=device.type, dtype=dtype)"
_ROWS = "        return x[mb.indices, : mb.action_mask.shape[1]].to(mb.action_mask.device)"
_MICRO = "        mb = collate(b.seqs, group, self.parts.pad_id, self.parts.device)"
_ARANGE = "    positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)"
_EMPTY = "        return torch.empty((0, steps), dtype=torch.float32, device=device)"
_DRAWN = "    return drawn.to(device)"
_B, _L, _U, _C, _S = (
    "src/rlver/train/batch.py",
    "src/rlver/train/learner.py",
    "src/rlver/train/update.py",
    "src/rlver/train/algorithms/core.py",
    "src/rlver/llm/sampling.py",
)

MUTANTS: tuple[LineMutant, ...] = (
    LineMutant("rlver.train.batch.x_collate__mutmut_41", _B, _COLLATE, _COLLATE.replace("ids.to(device)", "ids.to(None)")),
    LineMutant("rlver.train.batch.x_collate__mutmut_42", _B, _COLLATE, _COLLATE.replace("attn.to(device)", "attn.to(None)")),
    LineMutant("rlver.train.batch.x_collate__mutmut_43", _B, _COLLATE, _COLLATE.replace("1:].to(device)", "1:].to(None)")),
    LineMutant("rlver.train.batch.x__compute_region__mutmut_7", _B, _REGION, _REGION.replace("dtype=dtype", "dtype=None")),
    LineMutant("rlver.train.batch.x__compute_region__mutmut_9", _B, _REGION, _REGION.replace("dtype=dtype", "")),
    LineMutant("rlver.train.learner.xǁBatchǁrows__mutmut_1", _L, _ROWS, _ROWS.replace("(mb.action_mask.device)", "(None)")),
    LineMutant("rlver.train.update.xǁPPOUpdateǁ_micro_batch__mutmut_7", _U, _MICRO, _MICRO.replace("self.parts.device", "None")),
    LineMutant("rlver.train.algorithms.core.x_compact__mutmut_25", _C, _ARANGE, _ARANGE.replace("device=mask.device", "device=None")),
    LineMutant("rlver.train.algorithms.core.x_compact__mutmut_27", _C, _ARANGE, _ARANGE.replace("device=mask.device", "")),
    LineMutant("rlver.llm.sampling.x_row_uniforms__mutmut_4", _S, _EMPTY, _EMPTY.replace("device=device", "device=None")),
    LineMutant("rlver.llm.sampling.x_row_uniforms__mutmut_7", _S, _EMPTY, _EMPTY.replace("device=device", "")),
    LineMutant("rlver.llm.sampling.x_row_uniforms__mutmut_17", _S, _DRAWN, _DRAWN.replace("to(device)", "to(None)")),
)  # fmt: skip


def apply(mutant: LineMutant, root: Path) -> None:
    """Make ``mutant``'s change in the copy under ``root``; refuse a line that is gone or not unique."""
    path = root / mutant.path
    lines = path.read_text(encoding="utf-8").split("\n")
    found = [i for i, line in enumerate(lines) if line == mutant.line]
    if len(found) != 1:
        raise SystemExit(
            f"error: {mutant.path}: the line of {mutant.name} occurs {len(found)} times (expected once): "
            f"{mutant.line.strip()!r}; re-derive it (bench/cuda_mutants.py --check)"
        )
    lines[found[0]] = mutant.mutated
    path.write_text("\n".join(lines), encoding="utf-8")


def run_tests(src: Path) -> tuple[bool, str]:
    """Run the CUDA test file against the source under ``src``: whether every test passed, and the
    last lines pytest printed (a kill by an import error is no kill: read them)."""
    # the copy replaces the tree's src/; the rest of PYTHONPATH (a GPU image's extra site folder) stays
    kept = [
        p
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if p and Path(p).resolve() != ROOT / "src"
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT / "tests"), *kept])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly", TEST_FILE],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    summary = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR", "E "))]
    return done.returncode == 0, " | ".join(summary[:2])[:300] or done.stdout.strip()[-300:]


def run(selected: tuple[LineMutant, ...], jobs: int) -> int:
    """The unchanged source first (it must pass), then every mutant, ``jobs`` at a time (one GPU is
    plenty: the tensors are a few kilobytes)."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    if not torch.cuda.is_available():
        print(
            "error: no CUDA device: these mutants are only visible on one (tests/train/test_batch_cuda_only.py)"
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="rlver-cuda-mutants-") as tmp:
        clean = Path(tmp) / "clean"
        shutil.copytree(ROOT / "src", clean / "src")
        passed, said = run_tests(clean / "src")
        if not passed:
            print(f"error: {TEST_FILE} fails on the unchanged source; fix that first: {said}")
            return 1

        def killed(item: tuple[int, LineMutant]) -> tuple[bool, str]:
            index, mutant = item
            copy = Path(tmp) / f"mutant-{index}"
            shutil.copytree(ROOT / "src", copy / "src")
            apply(mutant, copy)
            passed, said = run_tests(copy / "src")
            return not passed, said

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            verdicts = list(pool.map(killed, enumerate(selected)))
    for mutant, (dead, said) in zip(selected, verdicts, strict=True):
        print(f"{'killed' if dead else 'SURVIVED'}: {mutant.name}" + (f" ({said})" if dead else ""))
    kills = sum(dead for dead, _ in verdicts)
    print(f"{kills} of {len(selected)} CPU-untestable mutants killed on CUDA")
    return 0 if kills == len(selected) else 1


def function_alone(path: str, name: str) -> str:
    """The source of the function or method named by mutmut's ``name`` (``x_collate__mutmut_41``,
    ``xǁBatchǁrows__mutmut_1``), alone in a module (a method inside its class, without the class's other
    methods): mutmut numbers each function's mutants by themselves, and mutating one function is
    seconds where the whole file is minutes. Empty when the file has no such function (renamed or gone)."""
    source = (ROOT / path).read_text(encoding="utf-8")
    qualified = name.rsplit("__mutmut_", 1)[0]
    parts = qualified.split("ǁ")
    tree = ast.parse(source)
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    if len(parts) == 3:  # xǁClassǁmethod
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == parts[1]), None)
        method = (
            next((n for n in cls.body if isinstance(n, functions) and n.name == parts[2]), None)
            if cls
            else None
        )
        if cls is None or method is None:
            return ""
        return f"class {cls.name}:\n" + (ast.get_source_segment(source, method, padded=True) or "")
    function = next((n for n in tree.body if isinstance(n, functions) and n.name == qualified[2:]), None)
    return (ast.get_source_segment(source, function) or "") if function else ""


def check() -> int:
    """Each line mutant against mutmut's own mutant of the current source (needs mutmut)."""
    import difflib

    from mutmut.mutation.file_mutation import mutate_file_contents

    bad = 0
    for mutant in MUTANTS:
        short = mutant.name.rsplit(".", 1)[-1]
        module = mutate_file_contents(mutant.path, function_alone(mutant.path, short)).code
        functions = {
            node.name: ast.get_source_segment(module, node) or ""
            for node in ast.walk(ast.parse(module))
            if isinstance(node, ast.FunctionDef)
        }
        original = functions.get(short.rsplit("__mutmut_", 1)[0] + "__mutmut_orig", "")
        changed = [
            (a, b)
            for a, b in zip(
                original.splitlines()[1:], functions.get(short, "").splitlines()[1:], strict=False
            )
            if a != b
        ]
        if changed != [(mutant.line, mutant.mutated)]:
            bad += 1
            print(f"mismatch: {mutant.name}: mutmut changes {changed or 'nothing (no such mutant)'}")
            print("\n".join(difflib.ndiff([mutant.line], [mutant.mutated])))
    print(f"{len(MUTANTS) - bad} of {len(MUTANTS)} line mutants are mutmut's")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare each line mutant with mutmut's")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these mutants only")
    parser.add_argument("--jobs", type=int, default=8, help="mutants tested at once (default 8)")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    selected = tuple(m for m in MUTANTS if not args.only or m.name in args.only)
    return run(selected, args.jobs)


if __name__ == "__main__":
    raise SystemExit(main())
