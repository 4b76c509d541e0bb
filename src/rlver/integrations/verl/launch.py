"""``rlver train --trainer verl``: write the dataset, the agent-loop YAML and the overrides; run verl.

Everything verl needs is written under ``verl.out_dir`` first, so a run can be inspected, re-run or
submitted by hand (``run.sh``), and ``--dry-run`` stops there:

    out_dir/
      train.parquet, val.parquet   profiles → rows (rlver.integrations.verl.dataset)
      agent_loops.yaml             registers our agent loop with verl (``_target_``)
      verl_overrides.txt           the Hydra overrides, one per line
      run.sh                       the exact command
      config.yaml                  our resolved config (secrets redacted)
      transcripts/                 one JSONL per worker process: every dialogue with its appraisals

The command is ``python -m verl.trainer.main_ppo <overrides>``; with ``verl.ray_address`` set it
joins an existing Ray cluster (``ray start --head`` / ``ray start --address``) instead of starting one.
On a cluster ``out_dir`` must be on storage every node sees, and rlver must be installed on every node
(verl's workers import our agent loop from the YAML's ``_target_``).
"""

from __future__ import annotations

import argparse
import atexit
import functools
import importlib.util
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlver.config import load_config
from rlver.env.dialogue import EnvConfig
from rlver.env.thinking import system_prompt
from rlver.errors import ConfigError, RlverError
from rlver.integrations.verl import AGENT_LOOP_TARGET, AGENT_NAME
from rlver.integrations.verl.config import VerlTrainConfig, refuse_unsupported, verl_overrides
from rlver.integrations.verl.dataset import build_rows, write_parquet
from rlver.io import atomic_write_text
from rlver.models.reference import base_model_folder, resolve_reference
from rlver.profiles.overlap import training_profiles
from rlver.profiles.schema import Profile
from rlver.profiles.sets import load_profile_set
from rlver.redaction import redacted
from rlver.train.algorithms import ALGORITHMS
from rlver.train.config import resolve_config_path


class ModelNotHere(ConfigError):
    """verl's validator could not read the model's config on this machine (checked only where it runs)."""


@dataclass
class LaunchPlan:
    """What :func:`prepare` wrote and the command that runs it."""

    out_dir: Path
    overrides: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    n_train: int = 0
    n_val: int = 0
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # stand-in data of a dry run, said out loud
    stand_in: bool = False  # a dry run: published data not downloaded is replaced, and said so

    @property
    def train_file(self) -> Path:
        return self.out_dir / "train.parquet"

    @property
    def val_file(self) -> Path:
        return self.out_dir / "val.parquet"

    @property
    def agent_loop_yaml(self) -> Path:
        return self.out_dir / "agent_loops.yaml"

    @property
    def shell_command(self) -> str:
        return shlex.join(self.command)


def load_verl_config(config_path: str | None, overrides: Sequence[str] = ()) -> VerlTrainConfig:
    """A training config (file or preset name) with the optional ``verl:`` section."""
    path = resolve_config_path(config_path) if config_path else None
    return load_config(VerlTrainConfig, path, list(overrides))


def agent_loop_yaml_text() -> str:
    """verl's ``agent_loop_config_path`` format: a list of ``{name, _target_}`` entries."""
    return yaml.safe_dump([{"name": AGENT_NAME, "_target_": AGENT_LOOP_TARGET}], sort_keys=False)


def _model_path(cfg: VerlTrainConfig, out_dir: Path) -> str:
    """The base model as verl wants it (a string; a folder made absolute), from the one home of the
    decision that the local trainer reads too (``models.reference.base_model_folder``)."""
    m = cfg.model
    folder = base_model_folder(m.path, out_dir, tiny_seed=m.tiny_seed, tiny_size=m.tiny_size)
    return str(folder.resolve()) if isinstance(folder, Path) else folder


def _profiles(
    cfg: VerlTrainConfig, *, stand_in: bool = False
) -> tuple[list[Profile], list[Profile], list[str]]:
    """The training and validation profiles, refused with a readable error when there are too few.

    ``stand_in`` (a dry run): a published set that is not downloaded is replaced by the bundled Chinese
    set (the published sets are Chinese), repeated to fill a step; the third value says so, one line
    per replaced set, for the dry run to print and write beside the data.
    """
    ro = cfg.rollout
    notes: list[str] = []
    train_profiles = _load_or_stand_in(
        ro.profiles, "zh-train", ro.profiles_per_step, stand_in, notes, ro.exclude_personas_of
    )
    val_profiles = _load_or_stand_in(cfg.eval.profiles, "zh-test", 1, stand_in, notes)[: cfg.eval.limit]
    if len(train_profiles) < ro.profiles_per_step:
        raise ConfigError(
            f"rollout.profiles: {ro.profiles} has {len(train_profiles)} profiles, fewer than the "
            f"{ro.profiles_per_step} one step needs (rollout.batch_size)"
        )
    if not val_profiles:
        raise ConfigError(f"eval.profiles: {cfg.eval.profiles} has no profiles")
    return train_profiles, val_profiles, notes


def _load_or_stand_in(
    name: str, bundled: str, at_least: int, stand_in: bool, notes: list[str], exclude: str | None = None
) -> list[Profile]:
    """``name``'s profiles; for a dry run, a labelled stand-in when ``name`` is a published set not yet
    downloaded: the bundled set ``bundled``, repeated (ids ``<id>~standin<k>``) to ``at_least`` rows."""
    from rlver.profiles.sets import PUBLISHED_SETS, find_data_file, load_bundled

    if not (stand_in and name in PUBLISHED_SETS and find_data_file(PUBLISHED_SETS[name]) is None):
        return load_profile_set(name) if exclude is None else training_profiles(name, exclude)
    base = load_bundled(bundled)
    rows = [
        p.model_copy(update={"id": f"{p.id}~standin{k}"})
        for k in range(-(-at_least // len(base)))
        for p in base
    ]
    notes.append(
        f"STAND-IN: {name} is not downloaded, so these rows are the bundled {bundled} set ({len(base)} "
        f"profiles) repeated to {len(rows)}; the dry run checks the wiring, not the data "
        f"(`rlver data download {PUBLISHED_SETS[name]}` for the real rows)"
    )
    return rows


def _write_datasets(
    cfg: VerlTrainConfig, plan: LaunchPlan, train_profiles: list[Profile], val_profiles: list[Profile]
) -> None:
    """``train.parquet`` and ``val.parquet``: one row per profile with its dialogue rules and reward.

    The rules are the config's one mapping to the environment (``TrainConfig.env_config``), the same
    the local trainer runs: validation rows follow ``eval.dialogue`` as its in-training evaluation does.
    """
    ro = cfg.rollout
    train_env = _prompt_or_stand_in(cfg.env_config(), plan)
    if train_env.rules.shared_opening and any(p.opening is None for p in train_profiles):
        # verl's agent loop runs each of the n copies of a prompt on its own, so they cannot wait
        # for one shared opening; profiles with a recorded opening share it anyway (docs/protocol.md).
        warnings.warn(
            "rollout.rules.shared_opening is not applied under verl for profiles without an opening line: "
            "each dialogue writes its own (the local trainer shares one per group)",
            stacklevel=3,
        )
    common: dict[str, Any] = {
        "simulator": cfg.simulator,
        "reward": ro.reward,
        "max_reply_tokens": ro.max_new_tokens,
        "simulator_concurrency": ro.simulator_concurrency,
        "transcript_dir": str(plan.out_dir / "transcripts") if cfg.verl.transcripts else None,
    }
    write_parquet(
        build_rows(
            train_profiles,
            env=train_env,
            seed=cfg.run.seed,
            split="train",
            group_size=ro.n_per_profile if ALGORITHMS.get(cfg.algorithm.name).min_group_size > 1 else 1,
            **common,
        ),
        plan.train_file,
    )
    val_env = _prompt_or_stand_in(cfg.env_config(evaluation=True), plan)
    # the held-out user is the one `rlver eval` builds (TrainConfig.eval_simulator), as locally
    val_common = {**common, "simulator": cfg.eval_simulator()}
    write_parquet(
        build_rows(val_profiles, env=val_env, seed=cfg.eval.seed, split="val", **val_common),
        plan.val_file,
    )


#: What a dry run writes as each row's system message when the published agent prompt is not here.
STAND_IN_PROMPT = "STAND-IN: the published agent prompt is not downloaded (rlver data download rlver-train)"


def _prompt_or_stand_in(env: EnvConfig, plan: LaunchPlan) -> EnvConfig:
    """``env``; for a dry run whose agent prompt is published text not yet downloaded, ``env`` with a
    labelled stand-in prompt (said in the plan's notes), so the dry run still checks the wiring."""
    if not plan.stand_in or env.system_prompt:
        return env
    try:
        system_prompt(env.think, env.language or "zh", env.agent_prompt)
    except RlverError as exc:
        note = f"STAND-IN: the agent prompt is a placeholder in every row: {str(exc).split(';')[0]}"
        if note not in plan.notes:
            plan.notes.append(note)
        return env.model_copy(update={"system_prompt": STAND_IN_PROMPT})
    return env


def _write_run_files(
    cfg: VerlTrainConfig, out_dir: Path, overrides: list[str], command: list[str]
) -> list[Path]:
    """The overrides, ``run.sh`` (the exact command) and the resolved config, secrets redacted."""
    overrides_file = out_dir / "verl_overrides.txt"
    atomic_write_text(overrides_file, "\n".join(overrides) + "\n")
    run_sh = out_dir / "run.sh"
    body = " \\\n    ".join(shlex.quote(part) for part in command)
    atomic_write_text(
        run_sh, f"#!/usr/bin/env bash\n# written by `rlver train --trainer verl`\nset -euo pipefail\n{body}\n"
    )
    run_sh.chmod(0o755)
    config_file = out_dir / "config.yaml"
    atomic_write_text(config_file, yaml.safe_dump(redacted(cfg), sort_keys=False, allow_unicode=True))
    return [overrides_file, run_sh, config_file]


#: The one command that installs what ``--trainer verl`` needs. rlver is not on the package index, so
#: the extra is installed from the checkout (``make verl-setup`` puts it in a venv of its own).
INSTALL_HINT = "pip install -e '.[verl]' (in the rlver checkout; see docs/multinode.md)"


def require_pyarrow() -> None:
    """Refuse (exit 2) when pyarrow, which writes the datasets even for a dry run, is not installed."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"--trainer verl writes its datasets as parquet, which needs pyarrow (not installed here): "
            f"{INSTALL_HINT}"
        ) from None


def prepare(cfg: VerlTrainConfig, *, python: str | None = None, stand_in: bool = False) -> LaunchPlan:
    """Write the run folder for ``cfg`` and return the plan (nothing is started). ``stand_in``: see
    :func:`_profiles` (dry runs only). A folder this call creates is removed again when writing fails
    (pyarrow missing, a bad setting found late), so a failed run leaves nothing behind."""
    refuse_unsupported(cfg)  # a setting verl cannot honour is refused before anything is written
    plan = LaunchPlan(Path(cfg.verl.out_dir).expanduser().resolve())
    train_profiles, val_profiles, plan.notes = _profiles(cfg, stand_in=stand_in)
    plan.stand_in = stand_in
    require_pyarrow()  # the datasets are parquet: refused here, before the run folder is made
    created = not plan.out_dir.exists()
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    try:
        _write_plan(cfg, plan, train_profiles, val_profiles, python)
    except BaseException:
        if created:
            shutil.rmtree(plan.out_dir, ignore_errors=True)
        raise
    return plan


def _write_plan(
    cfg: VerlTrainConfig,
    plan: LaunchPlan,
    train_profiles: list[Profile],
    val_profiles: list[Profile],
    python: str | None,
) -> None:
    """The datasets, the agent-loop YAML, the overrides and the run files of ``plan``."""
    plan.n_train, plan.n_val = len(train_profiles), len(val_profiles)
    _write_datasets(cfg, plan, train_profiles, val_profiles)
    atomic_write_text(plan.agent_loop_yaml, agent_loop_yaml_text())
    plan.overrides = verl_overrides(
        cfg,
        model_path=_model_path(cfg, plan.out_dir),
        train_files=plan.train_file,
        val_files=plan.val_file,
        agent_loop_yaml=plan.agent_loop_yaml,
        n_train_profiles=plan.n_train,
    )
    plan.command = [python or sys.executable, "-m", "verl.trainer.main_ppo", *plan.overrides]
    run_files = _write_run_files(cfg, plan.out_dir, plan.overrides, plan.command)
    plan.files = [plan.train_file, plan.val_file, plan.agent_loop_yaml, *run_files]
    if plan.notes:
        stand_in = plan.out_dir / "STAND-IN.txt"
        atomic_write_text(stand_in, "\n".join(plan.notes) + "\n")
        plan.files.append(stand_in)


def compose_verl_config(overrides: Sequence[str]) -> Any:
    """verl's ``ppo_trainer`` config with ``overrides`` applied, composed by Hydra exactly as
    ``python -m verl.trainer.main_ppo`` would, and checked with verl's own validator. Starts nothing.

    Raises :class:`ConfigError` naming the problem (an unknown key, a bad value, batch sizes that do
    not divide) so a mistake costs seconds here instead of a cluster allocation.
    """
    import verl
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            cfg = compose(config_name="ppo_trainer", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"verl rejected the configuration: {exc}") from None
    # verl's validator loads the model's config.json; never wait on a hub from a dry run.
    model_path = str(cfg.actor_rollout_ref.model.path)
    checked = cfg
    if not _model_config_here(model_path):
        shipped = shipped_model_config(model_path)
        if shipped is None:
            raise ModelNotHere(
                f"verl's checks need the model's config.json, and {model_path} is neither a local folder "
                f"nor in the Hugging Face cache here, nor one of the shipped configs ({', '.join(SHIPPED)})"
            )
        checked = _with_model_folder(cfg, model_path, str(_stand_in_folder(shipped)))
    try:
        validate_config(checked, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    except (HydraException, OmegaConfBaseException, AssertionError, ValueError, OSError) as exc:
        if "HFModelConfig" in str(exc) or isinstance(exc, OSError):
            raise ModelNotHere(
                f"verl's checks need the model's config.json, and {cfg.actor_rollout_ref.model.path} is not "
                "available on this machine (download it or run where it is)"
            ) from None
        raise ConfigError(f"verl rejected the configuration: {exc}") from None
    return cfg


#: Shipped ``config.json`` files (facts, no weights) of the models the presets name, by hub id.
SHIPPED_CONFIGS = Path(__file__).parent / "model_configs"
SHIPPED = sorted(
    p.name.replace("--", "/", 1) for p in SHIPPED_CONFIGS.iterdir() if (p / "config.json").is_file()
)


def shipped_model_config(model_path: str) -> Path | None:
    """The shipped ``config.json`` of a hub model (``Qwen/Qwen2.5-7B-Instruct``), or None."""
    path = SHIPPED_CONFIGS / model_path.replace("/", "--", 1) / "config.json"
    return path if "/" in model_path and path.is_file() else None


@functools.cache
def _stand_in_folder(config_json: Path) -> Path:
    """A model folder for verl's validator: the shipped config.json, the tiny model's ChatML tokenizer.

    The validator reads the architecture (config.json) and loads a tokenizer; it checks batch and length
    arithmetic, not the vocabulary, so a stand-in tokenizer changes no verdict. Never used for training.
    """
    from rlver.models.tiny import train_tokenizer

    folder = Path(tempfile.mkdtemp(prefix="rlver-verl-check-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    train_tokenizer().save_pretrained(folder)
    shutil.copyfile(config_json, folder / "config.json")
    return folder


def _with_model_folder(cfg: Any, model_path: str, folder: str) -> Any:
    """A copy of verl's config whose model paths equal to ``model_path`` point at ``folder``."""
    from omegaconf import OmegaConf

    copy = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    for section in (copy.actor_rollout_ref.model, copy.critic.model):
        if str(section.get("path")) == model_path:
            section.path = folder
    return copy


def _model_config_here(path: str) -> bool:
    """Whether ``path``'s config.json can be read without a network call (a folder's, or the hub
    cache's: :meth:`rlver.models.reference.ModelReference.config_file`)."""
    return resolve_reference(path).config_file() is not None


def main(config_path: str | None, overrides: Sequence[str] = (), dry_run: bool = False) -> int:
    """Entry point of ``rlver train --trainer verl``; returns the process exit code."""
    cfg = load_verl_config(config_path, overrides)
    if not dry_run:
        from rlver.integrations.verl.preflight import check_launch

        if importlib.util.find_spec("verl") is None:
            raise RlverError(f"verl is not installed in this environment: {INSTALL_HINT}")

        check_launch(cfg)  # the key, the GPUs, the model: refused here, before anything is written
    plan = prepare(cfg, stand_in=dry_run)
    for note in plan.notes:
        print(note)
    print(f"wrote {plan.out_dir} ({plan.n_train} training rows, {plan.n_val} validation rows):")
    for path in plan.files:
        print(f"  {path}")
    print("command:")
    print(plan.shell_command)
    if importlib.util.find_spec("verl") is None:
        print("(verl is not installed here, so the overrides were not checked against its config)")
        return 0  # a dry run: a launch without verl was refused above
    try:
        compose_verl_config(plan.overrides)
        print("verl's config loader accepted the overrides.")
    except ModelNotHere as exc:
        print(f"note: the overrides compose, but {exc}; the cluster will load it.")
    if dry_run:
        return 0
    completed = subprocess.run(plan.command, check=False)
    return completed.returncode


def _cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rlver.integrations.verl.launch", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--config", required=True, help="a config file or preset name")
    parser.add_argument("--dry-run", action="store_true", help="write everything and print the command only")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. verl.nnodes=2")
    args = parser.parse_args(argv)
    try:
        return main(args.config, args.overrides, args.dry_run)
    except RlverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_cli())
