"""Every number a config takes is refused before any work when it cannot be used (issue 43, item 1).

The table is not written by hand: it is every numeric field of every config model reachable from the
configs a user writes (the training config with its ``verl:`` section, the eval config) and from the
settings the engines build from them (``RolloutConfig``, verl's ``DialogueTask``), subclasses included
(each algorithm's settings, each simulator kind's spec). A new numeric field therefore joins the table
by itself, and fails it unless it declares its bounds where it is declared (``Field(ge=..., le=...)``,
no inf/NaN) or is put on an allow-list below with the reason any value is usable.

Each row sets one field to one bad value through the loader a command uses (``--set KEY=VALUE``) and
expects one line that names the setting and, for a number out of range, the allowed range. A few rows
run the real command (``rlver train``, ``rlver eval``) to see that line, exit 2 and no run folder.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from helpers import NURSE_EN
from rlver.config import ConfigLayer, load_config, load_layers
from rlver.config_errors import _model_types
from rlver.errors import ConfigError
from rlver.eval.config import EvalConfig
from rlver.integrations.verl.config import VerlTrainConfig
from rlver.integrations.verl.settings import DialogueTask
from rlver.rollout.runner import RolloutConfig
from rlver.seeding import MAX_SEED
from rlver.simulator.factory import KINDS
from rlver.simulator.llm.protocols import PROTOCOLS
from rlver.train.algorithms import ALGORITHMS
from rlver.train.backends import BACKENDS
from rlver.train.config import resolve_config_path

#: Numbers with no upper bound, and why any finite size is usable (a legal, if unwise, choice; the
#: field still refuses inf, NaN and anything below its lower bound).
ANY_SIZE = {
    **dict.fromkeys(
        [
            "OptimSettings.actor_lr",
            "OptimSettings.critic_lr",
            "OptimSettings.weight_decay",
            "OptimSettings.eps",
            "OptimSettings.max_grad_norm",
        ],
        "an optimiser setting: a large one trains badly, which the run's metrics show",
    ),
    **dict.fromkeys(
        [
            "AlgorithmSettings.clip_eps",
            "AlgorithmSettings.clip_eps_high",
            "AlgorithmSettings.dual_clip",
            "MICASettings.clip_eps_high",  # the shared fields with MICA's defaults
            "MICASettings.dual_clip",
            "CTCGRPOSettings.entropy_coef",  # the shared field with CTC-GRPO's default
            "AlgorithmSettings.kl_coef",
            "AlgorithmSettings.entropy_coef",
            "AlgorithmSettings.target_kl",
            "AlgorithmSettings.rollout_is_threshold",
            "GRPOSettings.grpo_eps",
            "PPOSettings.value_clip",
            "AlgorithmSettings.loss_scale_factor",
        ],
        "a loss coefficient or clip range: any finite size is arithmetic the update can do",
    ),
    **dict.fromkeys(
        ["RolloutSettings.temperature", "EvalSettings.temperature", "SamplingParams.temperature"],
        "a sampling temperature: 0 is greedy, a large one samples near uniformly; both run",
    ),
    "RewardSpec.format_penalty": "subtracted from a reward: any finite size is a reward",
    "ModelSpec.timeout_s": "seconds to wait for an answer: a long wait is a wait",
    "RunSettings.device_memory_gib": "what the memory guard compares with: a larger device is allowed",
    "DialogueTask.seed": "run.seed + the row index, hashed before use: built by the launcher, any size",
}
#: Fields typed ``int`` or ``float`` that have a different, reasoned kind of check (none so far).
NO_LOWER_BOUND: dict[str, str] = {}

#: Overrides a row of this model's fields needs beside its own (a simulator kind's model, ...).
CONTEXT_BY_PREFIX = {
    "simulator.model.": (
        "simulator.kind=llm",
        "simulator.model.model=m",
        "simulator.model.base_url=http://127.0.0.1:9/v1",
        "simulator.model.api_key_env=",
    ),
    # a setting shared by the published-text protocols (parse_attempts) lives on their common base,
    # which no registry row names: select one of them (a registered class's own name= comes after)
    "simulator.prompts.": (
        "simulator.kind=llm",
        "simulator.model.model=m",
        "simulator.model.base_url=http://127.0.0.1:9/v1",
        "simulator.model.api_key_env=",
        "simulator.prompts.name=sage-published",
    ),
}


class Row(NamedTuple):
    """One numeric field: its dotted key under the root, the root, and the overrides it needs."""

    name: str  # Owner.field
    path: str
    root: type[BaseModel]
    context: tuple[str, ...]
    annotation: Any
    field: FieldInfo


def _numeric(annotation: Any) -> bool:
    return annotation in (int, float) or any(_numeric(a) for a in typing.get_args(annotation))


def _subclasses(model: type[BaseModel]) -> list[type[BaseModel]]:
    """``model`` and its subclasses defined in rlver itself: a subclass another test made at run time
    (a plugin algorithm, a stand-in spec) lives on in ``__subclasses__`` for the rest of the worker,
    and must not decide this test's outcome by the order tests ran in."""
    found = [model]
    for cls in found:
        found += [
            sub for sub in cls.__subclasses__() if sub not in found and sub.__module__.startswith("rlver.")
        ]
    return found


def _kind_context(cls: type[BaseModel], prefix: str) -> tuple[str, ...]:
    """The override that selects a subclass's block, read from its registry: an algorithm's or a
    protocol's ``name=``, a simulator kind's ``kind=``, a rollout backend's ``backend=`` beside its
    ``backend_settings``."""
    for name, algo in ALGORITHMS.items():
        if algo.settings_class is cls:
            return (f"{prefix}name={name}",)
    for entry in PROTOCOLS.entries():
        if entry.settings_class() is cls:
            return (f"{prefix}name={entry.name}",)
    for kind in KINDS.entries():
        if kind.settings_class() is cls and kind.name != "offline":
            return (f"{prefix}kind={kind.name}",)
    for name, backend in BACKENDS.items():
        if backend.settings_class is cls:
            return (f"{prefix.removesuffix('backend_settings.')}backend={name}",)
    if hasattr(cls, "choices") and "choices" not in vars(cls):
        # a base between a family's root and its registered members (PublishedTextProtocol): the
        # settings it declares are read only under a member's name, so take its first member's
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("rlver.") and (found := _kind_context(sub, prefix)):
                return found
    return ()


def _walk(model: type[BaseModel], root: type[BaseModel], prefix: str, context: tuple, rows: dict) -> None:
    for cls in _subclasses(model):
        here = context + _kind_context(cls, prefix)
        for name, field in cls.model_fields.items():
            owner = next(c for c in cls.__mro__ if name in getattr(c, "__annotations__", {}))
            path = prefix + name
            if _numeric(field.annotation) and field.annotation is not bool:
                extra = next((c for p, c in CONTEXT_BY_PREFIX.items() if path.startswith(p)), ())
                rows.setdefault(
                    f"{owner.__name__}.{name}",
                    Row(f"{owner.__name__}.{name}", path, root, extra + here, field.annotation, field),
                )
            for sub in _model_types(field.annotation):
                if path.count(".") < 6:
                    _walk(sub, root, path + ".", here, rows)


ROOTS = (VerlTrainConfig, EvalConfig, RolloutConfig, DialogueTask)


def import_every_registered_class() -> None:
    """The tables name their entries lazily, and the walk sees a subclass only once it is imported: so
    import every registered class first, and the table is the same when the cases are collected and
    when they run, whatever another test imported in between (an addition's own settings class)."""
    for table in (ALGORITHMS, KINDS, PROTOCOLS, BACKENDS):
        for entry in table.entries():
            entry.load()
            entry.settings_class()


def numeric_rows() -> list[Row]:
    import_every_registered_class()
    rows: dict[str, Row] = {}
    for root in ROOTS:
        _walk(root, root, "", (), rows)
    return list(rows.values())


def _bounds(annotation: Any, field: FieldInfo | None) -> dict[str, Any]:
    """ge/gt/le/lt of a number, read from its metadata and from ``Annotated`` inside ``X | None``."""
    found: dict[str, Any] = {}
    metas = list(field.metadata) if field is not None else []
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is Annotated:
            metas += [m for info in typing.get_args(arg)[1:] for m in getattr(info, "metadata", [info])]
    for meta in metas:
        for op in ("ge", "gt", "le", "lt"):
            if getattr(meta, op, None) is not None:
                found[op] = getattr(meta, op)
    return found


def _is_float(annotation: Any) -> bool:
    return annotation is float or any(_is_float(a) for a in typing.get_args(annotation))


class Case(NamedTuple):
    row: Row
    value: str  # as typed after ``--set KEY=``
    expect: tuple[str, ...]  # every one must be in the message


def _bad_values(annotation: Any, field: FieldInfo | None) -> list[tuple[Any, tuple[str, ...]]]:
    """One bad value per bound, and inf/NaN for a float; with what the message must say."""
    bounds, floating = _bounds(annotation, field), _is_float(annotation)
    step = 1.0 if floating else 1
    out: list[tuple[Any, tuple[str, ...]]] = []
    if "ge" in bounds:
        out.append((bounds["ge"] - step, ("allowed:", str(bounds["ge"]))))
    if "gt" in bounds:
        out.append((bounds["gt"], ("allowed:", str(bounds["gt"]))))
    if "le" in bounds:
        out.append((bounds["le"] + step, ("allowed:", str(bounds["le"]))))
        if not floating:
            out.append((10**26, ("allowed:", str(bounds["le"]))))  # the 99999999999999999999999999
    if "lt" in bounds:
        out.append((bounds["lt"], ("allowed:", str(bounds["lt"]))))
    if floating:
        out += [(math.inf, ("finite number", "allowed:")), (math.nan, ("finite number", "allowed:"))]
    return out


def _yaml(value: Any) -> str:
    if isinstance(value, float) and math.isnan(value):
        return ".nan"
    if isinstance(value, float) and math.isinf(value):
        return "1e999"  # YAML reads it as text; pydantic then as inf (the optim.actor_lr=1e999)
    if isinstance(value, list):
        return "[" + ",".join(_yaml(v) for v in value) + "]"
    return repr(value)


def cases() -> list[Case]:
    out: list[Case] = []
    for row in numeric_rows():
        items = typing.get_args(row.annotation) if typing.get_origin(row.annotation) is tuple else None
        if items:  # a tuple of numbers (Adam's betas): one bad item at a time, the others the default
            for i, item in enumerate(items):
                for value, expect in _bad_values(item, None):
                    whole = list(row.field.default)
                    whole[i] = value
                    out.append(Case(row, _yaml(whole), (f"{row.path}.{i}", *expect)))
            continue
        for value, expect in _bad_values(row.annotation, row.field):
            out.append(Case(row, _yaml(value), expect))
    return out


CASES = cases()


def _load(root: type[BaseModel], overrides: list[str]) -> BaseModel:
    """Load ``root`` as its command does: the tiny preset (training), ``--agent-tiny`` (eval)."""
    if root is VerlTrainConfig:
        return load_config(VerlTrainConfig, resolve_config_path("tiny-offline"), overrides)
    if root is EvalConfig:
        return load_layers(EvalConfig, [ConfigLayer("flags", {"agent_tiny": True})], overrides)
    if root is DialogueTask:
        task = {"profile": NURSE_EN.model_dump(mode="json"), "simulator": {"kind": "offline"}}
        return load_layers(DialogueTask, [ConfigLayer("task", task)], overrides)
    return load_layers(root, [], overrides)


def test_every_numeric_field_declares_its_bounds() -> None:
    """A numeric field without a lower bound, an integer without an upper one, or a float without one
    that is not on the reasoned allow-list fails here, naming itself."""
    rows = numeric_rows()
    assert len(rows) >= 80, f"only {len(rows)} numeric fields found: the walk lost part of the configs"
    problems = []
    for row in rows:
        annotations = typing.get_args(row.annotation) if typing.get_origin(row.annotation) is tuple else ()
        numbers: list[tuple[Any, FieldInfo | None]] = [(a, None) for a in annotations]
        for annotation, field in numbers or [(row.annotation, row.field)]:
            bounds = _bounds(annotation, field)
            if not {"ge", "gt"} & bounds.keys() and row.name not in NO_LOWER_BOUND:
                problems.append(f"{row.name} ({row.path}): no lower bound")
            if not {"le", "lt"} & bounds.keys() and row.name not in ANY_SIZE:
                kind = "a float" if _is_float(annotation) else "an integer"
                problems.append(f"{row.name} ({row.path}): {kind} with no upper bound and not in ANY_SIZE")
    assert not problems, "\n".join(problems)
    stale = set(ANY_SIZE) - {r.name for r in rows}
    assert not stale, f"ANY_SIZE names fields that are gone: {stale}"


def test_the_table_covers_every_numeric_field() -> None:
    assert {c.row.name for c in CASES} == {r.name for r in numeric_rows()}
    assert len(CASES) >= 250, len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.row.path}={c.value}" for c in CASES])
def test_a_bad_number_is_one_line_naming_the_setting_and_its_range(case: Case) -> None:
    row = case.row
    with pytest.raises(ConfigError) as caught:
        _load(row.root, [*row.context, f"{row.path}={case.value}"])
    message = str(caught.value)
    assert "\n" not in message, message
    assert f"--set {row.path}" in message, message
    for part in case.expect:
        assert part in message, f"{part!r} not in: {message}"


def test_the_seed_range_is_what_numpy_and_torch_take() -> None:
    """The largest seed goes through every seeding call rlver makes with a config's seed."""
    import random

    import numpy as np
    import torch

    from rlver.train.trainer import profiles_at, seed_everything

    step_seed = MAX_SEED * 1_000_003 + 10**9  # the trainer's step seed at the largest run.seed
    seed_everything(MAX_SEED)
    seed_everything(step_seed)
    np.random.seed(MAX_SEED)
    torch.manual_seed(step_seed)
    random.seed(MAX_SEED)
    assert profiles_at([NURSE_EN], 0, 2, MAX_SEED) == [NURSE_EN, NURSE_EN]
    with pytest.raises(ValueError):
        np.random.seed(MAX_SEED + 1)  # numpy's legacy seeding: why the range ends there


# -- the real commands: one line, exit 2, before any model loads -------------------------------------


def _rlver(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "rlver", *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (("train", "--config", "tiny-offline", "--out", "run", "--set", "run.seed=99999999999999999999999999"),
         "error: --set run.seed: Input should be less than or equal to 4294967295 (got 99999999999999999999999999); "
         "allowed: an integer from 0 to 4294967295"),
        (("train", "--config", "tiny-offline", "--out", "run", "--set", "optim.actor_lr=1e999"),
         "error: --set optim.actor_lr: Input should be a finite number (got '1e999'); allowed: a finite number > 0.0"),
        (("eval", "--agent-tiny", "--simulator", "offline", "--out", "run", "--seed", "99999999999999999999999999"),
         "error: --seed: Input should be less than or equal to 4294967295 (got 99999999999999999999999999); "
         "allowed: an integer from 0 to 4294967295"),
        (("eval", "--agent-tiny", "--simulator", "offline", "--out", "run", "--agent-temperature", "nan"),
         "error: --agent-temperature: Input should be a finite number (got nan); allowed: a finite number >= 0.0"),
    ],
    ids=["train-seed", "train-actor-lr-inf", "eval-seed", "eval-temperature-nan"],
)  # fmt: skip
def test_the_command_refuses_it_in_one_line_before_any_work(tmp_path: Path, argv: tuple, expect: str) -> None:
    proc = _rlver(tmp_path, *argv)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert expect in lines[0], lines[0]
    assert not (tmp_path / "run").exists(), "a run folder was made before the number was checked"


# -- every numeric flag of every command -------------------------------------------------------------

#: Numeric flags with no upper bound, and why any size is usable.
CLI_ANY_SIZE = {
    **dict.fromkeys(
        ["calibrate --limit", "judge --limit", "probe --limit", "profiles stats --top",
         "profiles stats --max-pairs", "profiles overlap --show"],
        "a cap: one above what there is takes all of it",
    ),
    **dict.fromkeys(
        ["calibrate --concurrency", "judge --concurrency", "profiles generate --concurrency"],
        "requests in flight: more than there are requests sends them all at once",
    ),
    "profiles generate --n": "profiles to write: a large number is a long run; Ctrl-C keeps what was written",
    "profiles generate --max-attempts": "attempts a profile may take: a large number is a patient run",
    "profiles generate --max-tokens": "sent to the endpoint, which checks it against its model's context",
    **dict.fromkeys(
        ["calibrate --sim-temperature", "chat --temperature", "judge --temperature",
         "profiles generate --temperature", "eval --agent-temperature"],
        "a sampling temperature: 0 is greedy, a large one samples near uniformly; both run",
    ),
    "profiles generate --timeout": "seconds to wait for an answer: a long wait is a wait",
}  # fmt: skip

#: Flags whose range the command's body checks, so the message can quote the value typed.
BODY_BOUNDS = {"chat --start": {"ge": 0, "le": 100}}  # "the emotion runs from 0 to 100, got -5"

#: What a command needs besides the flag to reach the check of a flag that its body checks.
CLI_CONTEXT = {
    "eval": ("--agent-tiny", "--simulator", "offline", "--out", "run"),
    "profiles generate": ("--n", "1", "--model", "m", "--out", "p.jsonl"),
}


class Flag(NamedTuple):
    command: str
    flag: str
    annotation: Any
    bounds: dict[str, Any]


def _config_bounds(command: str, flag: str) -> dict[str, Any]:
    """The bounds of the config field a flag sets (``eval --seed`` → ``EvalConfig.seed``)."""
    from rlver.cli.eval_cmd import EVAL_FLAGS
    from rlver.config_errors import _number_annotation

    if command != "eval":
        return {}
    key = next((k for k, f in EVAL_FLAGS.items() if f == flag), None)
    found = _number_annotation(EvalConfig, key.split(".")) if key else None
    return {} if found is None else _bounds(found[0], _info(found[1]))


def _info(metadata: list[Any]) -> FieldInfo:
    info = FieldInfo()
    info.metadata = list(metadata)
    return info


def _flag_annotation(param: Any) -> Any:
    """The Python type a flag was declared with: typer's descriptor where this typer records one, else
    read back from the click type (typer releases differ in what they keep; the GPU machine's did not
    keep ``type_descriptor``, and this test then found no numeric flag at all)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None and getattr(descriptor, "annotation", None) is not None:
        return descriptor.annotation
    if getattr(param, "is_flag", False):
        return bool
    # by class name: newer typer releases vendor click (typer._click), whose types are not click's
    kinds = {cls.__name__ for cls in type(getattr(param, "type", None)).__mro__}
    if "IntParamType" in kinds:
        return int
    if "FloatParamType" in kinds:
        return float
    return None


def _limit(param: Any, end: str) -> Any:
    """A flag's ``min``/``max``: on the parameter in the typer this venv holds, on its click range type
    in releases that vendor click (``typer._click``), whose parameters carry neither."""
    if hasattr(param, end):
        return getattr(param, end)
    return getattr(getattr(param, "type", None), end, None)


def numeric_flags() -> list[Flag]:
    import typer

    from rlver.cli import app

    out: list[Flag] = []

    def walk(cmd: Any, path: list[str]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
            return
        for param in cmd.params:
            annotation = _flag_annotation(param)
            if annotation is bool or not _numeric(annotation):
                continue
            command, flag = " ".join(path), param.opts[0]
            bounds = {
                k: v for k, v in (("ge", _limit(param, "min")), ("le", _limit(param, "max"))) if v is not None
            }
            bounds = {**_config_bounds(command, flag), **BODY_BOUNDS.get(f"{command} {flag}", {}), **bounds}
            out.append(Flag(command, flag, annotation, bounds))

    walk(typer.main.get_command(app), [])
    return out


def test_every_numeric_flag_has_its_range() -> None:
    flags = numeric_flags()
    assert len(flags) >= 40, f"only {len(flags)} numeric flags found"
    problems = []
    for f in flags:
        name = f"{f.command} {f.flag}"
        if not {"ge", "gt"} & f.bounds.keys():
            problems.append(f"{name}: no lower bound")
        if not {"le", "lt"} & f.bounds.keys() and name not in CLI_ANY_SIZE:
            problems.append(f"{name}: no upper bound and not in CLI_ANY_SIZE")
    assert not problems, "\n".join(problems)
    stale = set(CLI_ANY_SIZE) - {f"{f.command} {f.flag}" for f in flags}
    assert not stale, f"CLI_ANY_SIZE names flags that are gone: {stale}"


def flag_cases() -> list[tuple[Flag, str]]:
    out = []
    for f in numeric_flags():
        for value, _expect in _bad_values(f.annotation, _info([_Bound(op, v) for op, v in f.bounds.items()])):
            text = "nan" if value != value else "inf" if value == math.inf else str(value)
            out.append((f, text))
    return out


class _Bound:
    def __init__(self, op: str, value: Any) -> None:
        setattr(self, op, value)


FLAG_CASES = flag_cases()


def test_the_flag_table_covers_every_numeric_flag() -> None:
    assert {(f.command, f.flag) for f, _ in FLAG_CASES} == {(f.command, f.flag) for f in numeric_flags()}


@pytest.mark.parametrize(
    ("flag", "value"), FLAG_CASES, ids=[f"{f.command} {f.flag} {v}" for f, v in FLAG_CASES]
)
def test_a_bad_flag_value_is_one_line_naming_the_flag(
    flag: Flag,
    value: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In-process through the root's error handling (``rlver.cli._run``): exit 2, one ``error:`` line
    naming the flag, and nothing written."""
    from rlver.cli import _run

    monkeypatch.chdir(tmp_path)
    argv = [*flag.command.split(), *CLI_CONTEXT.get(flag.command, ()), flag.flag, value]  # the last wins
    with pytest.raises(SystemExit) as caught:
        _run(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert flag.flag in lines[0], lines[0]
    assert not list(tmp_path.iterdir()), "something was written before the flag was checked"
