"""The verl launch path against the real verl package: the parquet loads with verl's own dataset class,
the overrides compose and validate with verl's own Hydra config, and the published settings map right.

Needs the ``verl`` extra (``make verl-test`` runs these in a separate venv); skipped cleanly without it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.dataset.rl_dataset import RLHFDataset

from rlver.errors import ConfigError
from rlver.integrations.verl import AGENT_LOOP_TARGET, AGENT_NAME
from rlver.integrations.verl.config import hydra_value
from rlver.integrations.verl.launch import (
    compose_verl_config,
    load_verl_config,
    main,
    prepare,
)
from rlver.integrations.verl.settings import DialogueTask
from verl_schema import PLUS_ADDITIONS, schema_problem, verl_schema

# The published PPO-think run: actor lr 1e-6, critic lr 5e-6, kl 0, temperature 1.0, batch 32, 8 turns.
PUBLISHED_PPO = [
    "model.path=tiny",
    "algorithm.name=ppo",
    "algorithm.kl_coef=0.0",
    "optim.actor_lr=1e-6",
    "optim.critic_lr=5e-6",
    "rollout.batch_size=16",  # profiles per step; the bundled en-train set has 18
    "rollout.n_per_profile=1",
    "rollout.rules.max_assistant_turns=8",
    "rollout.rules.start_emotion=30",
    "rollout.temperature=1.0",
    "rollout.think=true",
    "eval.limit=4",
]


def _plan(tmp_path: Path, *overrides: str):
    cfg = load_verl_config("tiny-offline", [f"verl.out_dir={tmp_path / 'run dir'}", *overrides])
    return cfg, prepare(cfg)


def test_ppo_overrides_compose_and_validate_with_verl(tmp_path: Path) -> None:
    cfg, plan = _plan(tmp_path, *PUBLISHED_PPO)
    vc = compose_verl_config(plan.overrides)
    assert vc.algorithm.adv_estimator == "gae" and need_critic(vc)
    assert not need_reference_policy(vc)  # kl 0: no reference model is built
    assert vc.actor_rollout_ref.actor.optim.lr == pytest.approx(1e-6)
    assert vc.critic.optim.lr == pytest.approx(5e-6)
    assert vc.actor_rollout_ref.rollout.temperature == 1.0
    assert vc.actor_rollout_ref.rollout.n == 1
    assert vc.data.train_batch_size == 16
    # the path with a space survived Hydra's quoting
    assert vc.data.train_files == str(plan.train_file) and " " in vc.data.train_files
    assert vc.actor_rollout_ref.rollout.agent.agent_loop_config_path == str(plan.agent_loop_yaml)
    assert (
        vc.actor_rollout_ref.model.path
        == vc.critic.model.path
        == str((plan.out_dir / "base_model").resolve())
    )
    # prompt + response = our per-dialogue token budget
    resolved = OmegaConf.to_container(vc.actor_rollout_ref.rollout, resolve=True)
    assert resolved["prompt_length"] + resolved["response_length"] == cfg.model.max_length
    # the agent-loop YAML is what verl's worker loads into its registry
    entries = OmegaConf.load(plan.agent_loop_yaml)
    assert [(e.name, e._target_) for e in entries] == [(AGENT_NAME, AGENT_LOOP_TARGET)]


def test_grpo_overrides_group_size_and_batch(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, "rollout.batch_size=8", "rollout.n_per_profile=4", "algorithm.kl_coef=0.01")
    vc = compose_verl_config(plan.overrides)
    assert vc.algorithm.adv_estimator == "grpo" and not need_critic(vc)
    assert vc.actor_rollout_ref.rollout.n == 4
    assert vc.data.train_batch_size == 8  # batch_size counts prompts: 8 profiles x 4 = 32 dialogues
    assert vc.actor_rollout_ref.actor.use_kl_loss and vc.actor_rollout_ref.actor.kl_loss_coef == 0.01
    assert need_reference_policy(vc)
    assert not vc.algorithm.use_kl_in_reward


def test_dr_grpo_reaches_verl_as_its_aggregation_and_constant(tmp_path: Path) -> None:
    """Dr. GRPO under verl: GRPO's estimator without the std, ``seq-mean-token-sum-norm`` over
    ``model.max_length`` (the constant the local trainer divides by), for the critic's loss too."""
    _, plan = _plan(tmp_path, "algorithm.name=dr_grpo", "rollout.n_per_profile=2", "model.max_length=3000")
    vc = compose_verl_config(plan.overrides)
    assert vc.algorithm.adv_estimator == "grpo" and vc.algorithm.norm_adv_by_std_in_grpo is False
    actor = vc.actor_rollout_ref.actor
    assert (actor.loss_agg_mode, actor.loss_scale_factor) == ("seq-mean-token-sum-norm", 3000)
    assert (vc.critic.loss_agg_mode, vc.critic.loss_scale_factor) == ("seq-mean-token-sum-norm", 3000)


def test_ray_address_and_raw_overrides_reach_verl(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, "verl.ray_address=ray://head:10001", "verl.overrides=[trainer.nnodes=2]")
    vc = compose_verl_config(plan.overrides)
    assert vc.ray_kwargs.ray_init.address == "ray://head:10001"
    assert vc.trainer.nnodes == 2  # raw overrides come last and win


def test_bad_override_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, "verl.overrides=[trainer.no_such_key=1]")
    with pytest.raises(ConfigError, match=r"trainer\.no_such_key"):
        compose_verl_config(plan.overrides)


def test_parquet_loads_with_verls_dataset_class(tmp_path: Path) -> None:
    from rlver.models.tiny import tiny_model_and_tokenizer

    _, plan = _plan(
        tmp_path, "eval.limit=3", "rollout.rules.max_assistant_turns=3", "rollout.rules.start_emotion=30"
    )
    vc = compose_verl_config(plan.overrides)
    _, tokenizer = tiny_model_and_tokenizer()
    train = RLHFDataset(str(plan.train_file), tokenizer, vc.data)
    val = RLHFDataset(str(plan.val_file), tokenizer, vc.data)
    assert len(train) == plan.n_train == 18 and len(val) == plan.n_val == 3
    item = train[5]
    assert item["agent_name"] == AGENT_NAME and item["index"] == 5
    assert item["raw_prompt"][0]["role"] == "system"
    task = DialogueTask.from_row(item["extra_info"])
    assert task.profile.id == item["extra_info"]["profile_id"]
    assert task.env.rules.max_assistant_turns == 3 and task.env.rules.start_emotion == 30  # the config's
    assert task.simulator.kind == "offline"
    assert task.seed == 5  # run.seed + row index
    if task.profile.opening:  # the opening line is the user's first message
        assert item["raw_prompt"][1] == {"role": "user", "content": task.profile.opening}


def test_hydra_value_quoting() -> None:
    assert hydra_value("plain/path.parquet") == "plain/path.parquet"
    assert hydra_value("a b") == "'a b'"
    assert hydra_value("it's") == "'it\\'s'"
    assert hydra_value("1e-6") == "'1e-6'"  # a string that looks numeric stays a string
    assert hydra_value(1e-6) == "1e-06"
    assert hydra_value(None) == "null" and hydra_value(True) == "true"
    assert hydra_value(["console", "tensorboard"]) == "[console,tensorboard]"


def test_dry_run_writes_files_and_prints_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dry"
    code = main("tiny-offline", [f"verl.out_dir={out}", "eval.limit=2"], dry_run=True)
    assert code == 0
    printed = capsys.readouterr().out
    assert "-m verl.trainer.main_ppo" in printed and "accepted" in printed
    for name in (
        "train.parquet",
        "val.parquet",
        "agent_loops.yaml",
        "verl_overrides.txt",
        "run.sh",
        "config.yaml",
    ):
        assert (out / name).is_file(), name
    assert "verl.trainer.main_ppo" in (out / "run.sh").read_text()
    assert not (out / "checkpoints").exists()  # nothing was started


def test_too_few_profiles_is_a_clear_error(tmp_path: Path) -> None:
    cfg = load_verl_config("tiny-offline", [f"verl.out_dir={tmp_path}", "rollout.batch_size=400"])
    with pytest.raises(ConfigError, match=r"rollout\.profiles"):
        prepare(cfg)


def test_missing_model_is_reported_not_fetched(tmp_path: Path) -> None:
    from rlver.integrations.verl.launch import ModelNotHere

    _, plan = _plan(tmp_path, "model.path=/nonexistent/model-folder", "eval.limit=1")
    with pytest.raises(ModelNotHere, match="/nonexistent/model-folder"):
        compose_verl_config(plan.overrides)


def test_rlver_train_engine_verl_dry_run_cli(tmp_path: Path) -> None:
    """The user's one command: `rlver train --trainer verl --dry-run` writes the run folder and exits 0."""
    import subprocess
    import sys

    out = tmp_path / "run dir"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlver",
            "train",
            "--config",
            "tiny-offline",
            "--trainer",
            "verl",
            "--dry-run",
            "--out",
            str(out),
            "--set",
            "eval.limit=2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "-m verl.trainer.main_ppo" in proc.stdout
    assert (out / "train.parquet").is_file() and (out / "run.sh").is_file()
    assert not (out / "checkpoints").exists()


def test_relative_out_dir_gives_absolute_paths_to_verl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every path handed to verl is absolute, the checkpoint folder included (workers may run elsewhere)."""
    monkeypatch.chdir(tmp_path)
    cfg = load_verl_config("tiny-offline", ["verl.out_dir=rel-run", "eval.limit=1"])
    plan = prepare(cfg)
    values = dict(o.split("=", 1) for o in plan.overrides)
    assert values["trainer.default_local_dir"] == str(tmp_path.resolve() / "rel-run" / "checkpoints")
    for key in ("data.train_files", "data.val_files", "trainer.default_local_dir"):
        assert Path(values[key].strip("'\"")).is_absolute(), key


def _preset_verl_config(cfg: Any, tmp_path: Path) -> Any:
    """verl's composed config for a preset that names a hub model (Qwen2.5-7B): its shipped
    config.json stands in for the weights, so nothing is loaded or fetched."""
    from rlver.integrations.verl.config import verl_overrides

    overrides = verl_overrides(
        cfg,
        model_path=cfg.model.path,
        train_files=tmp_path / "train.parquet",
        val_files=tmp_path / "val.parquet",
        agent_loop_yaml=tmp_path / "agent_loops.yaml",
        n_train_profiles=1000,
    )
    return compose_verl_config(overrides)


def test_every_preset_passes_verls_validator_without_the_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The published presets name Qwen/Qwen2.5-7B-Instruct; its shipped config.json lets verl's own
    validator check them on a machine that has neither the weights nor a network."""
    from rlver.integrations.verl.launch import SHIPPED, shipped_model_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))  # nothing cached: only the shipped facts
    assert "Qwen/Qwen2.5-7B-Instruct" in SHIPPED
    for preset in ("ppo-think", "ppo-nothink", "grpo-think", "grpo-nothink"):
        cfg = load_verl_config(preset, [f"verl.out_dir={tmp_path}"])
        assert shipped_model_config(cfg.model.path) is not None, preset
        vc = _preset_verl_config(cfg, tmp_path)  # raises ModelNotHere / ConfigError otherwise
        assert vc.actor_rollout_ref.model.path == "Qwen/Qwen2.5-7B-Instruct"  # the run keeps the real id
        assert need_critic(vc) == (cfg.algorithm.name == "ppo")
        assert vc.actor_rollout_ref.actor.clip_ratio_c == cfg.algorithm.dual_clip == 3.0


def test_engine_differences_are_mapped_or_refused(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, "optim.schedule=cosine", "optim.warmup_steps=5", "algorithm.dual_clip=null")
    vc = compose_verl_config(plan.overrides)
    optim = vc.actor_rollout_ref.actor.optim
    assert (optim.lr_scheduler_type, optim.lr_warmup_steps, optim.min_lr_ratio) == ("cosine", 5, 0.0)
    assert vc.actor_rollout_ref.actor.clip_ratio_c >= 1e9  # dual-clip off on both engines
    assert vc.trainer.v1.sampler.sync_refill_failed_groups
    with pytest.raises(ConfigError, match=r"optim\.schedule=linear"):
        _plan(tmp_path, "optim.schedule=linear")
    with pytest.raises(ConfigError, match="n_per_profile >= 2"):
        _plan(tmp_path, "rollout.n_per_profile=1")


def test_rows_carry_the_configs_one_env_mapping_and_reward_spec(tmp_path: Path) -> None:
    """verl's rows read the dialogue rules and the reward from the mapping the local trainer reads."""
    import pyarrow.parquet as pq

    from rlver.env.rewards import RewardSpec

    cfg, plan = _plan(
        tmp_path, "eval.limit=2", "rollout.reward.mode=delta", "rollout.reward.format_penalty=0.1"
    )
    for path, env in ((plan.train_file, cfg.env_config()), (plan.val_file, cfg.env_config(evaluation=True))):
        tasks = [DialogueTask.from_row(row) for row in pq.read_table(path).column("extra_info").to_pylist()]
        assert tasks and all(t.env == env for t in tasks)
        assert all(t.reward == RewardSpec(mode="delta", format_penalty=0.1) for t in tasks)
    # validation follows eval.dialogue as the local trainer's evaluation does (tiny-offline: training)
    assert cfg.eval.dialogue == "training" and cfg.env_config(evaluation=True) == cfg.env_config()
    _, bench = _plan(tmp_path / "bench", "eval.limit=1", "eval.dialogue=benchmark")
    row = pq.read_table(bench.val_file).column("extra_info").to_pylist()[0]
    assert DialogueTask.from_row(row).env.rules.start_emotion == 40  # the benchmark's, not training's 30


@functools.cache
def _verl_readers() -> tuple[dict[Path, str], dict[Path, str]]:
    """verl's own Python code outside its config definitions, and its YAML configs (read once)."""
    import verl

    root = Path(verl.__file__).parent
    code = {p: p.read_text(errors="ignore") for p in root.rglob("*.py") if "config" not in p.parent.name}
    yamls = {p: p.read_text(errors="ignore") for p in root.rglob("*.yaml")}
    return code, yamls


def _is_read(leaf: str, code: dict[Path, str], yamls: dict[Path, str]) -> bool:
    """Whether verl reads a setting called ``leaf``: an attribute/item access or keyword in its code, or
    an interpolation in its YAML. A field that only its config dataclass mentions is never read. By name
    only: whether the key sits at the right place is :func:`schema_problem`'s job."""
    import re

    access = re.compile(rf"(\.{leaf}\b|\[[\"']{leaf}[\"']\]|get\([\"']{leaf}[\"']|\b{leaf}=)")
    interpolated = re.compile(rf"\$\{{[^}}]*\b{leaf}\}}")
    return any(access.search(t) for t in code.values()) or any(interpolated.search(t) for t in yamls.values())


@pytest.mark.parametrize("algorithm", ["ppo", "grpo", "dr_grpo"])
def test_every_key_we_write_is_in_verls_schema_and_read(tmp_path: Path, algorithm: str) -> None:
    """Each override names a setting at its exact dotted path in verl's own schema (``verl_schema``: the
    tree verl composes and the dataclass behind each ``_target_`` on the way, without our overrides in
    it), or is a documented ``+`` addition; and verl's code reads a setting of that name. The read check
    goes by leaf name only, so it cannot tell ``critic.optim.lr`` from ``actor.optim.lr`` (the path walk
    does), but it tells ``clip_grad`` from ``grad_clip``: ``actor.grad_clip`` is in the schema yet never
    read, verl clips with ``optim.clip_grad``."""
    extra = ["rollout.n_per_profile=1"] if algorithm == "ppo" else ["rollout.n_per_profile=2"]
    extra += ["algorithm.loss_scale_factor=64"] if algorithm == "dr_grpo" else []
    _, plan = _plan(
        tmp_path,
        f"algorithm.name={algorithm}",
        "algorithm.kl_coef=0.1",
        "model.lora.enabled=true",  # the LoRA keys too
        "verl.ray_address=ray://head:10001",  # and the one `+` addition
        *extra,
    )
    # not composed here: verl's validator wants vLLM installed for a LoRA rollout (the tests above
    # compose the same keys without LoRA)
    schema = verl_schema()
    keys = [override.split("=", 1)[0] for override in plan.overrides]
    assert "+ray_kwargs.ray_init.address" in keys and "actor_rollout_ref.model.lora_rank" in keys
    unknown = [problem for key in keys if (problem := schema_problem(key, schema))]
    assert not unknown, unknown
    code, yamls = _verl_readers()
    unread = [
        key
        for key in keys
        if key.removeprefix("+") not in PLUS_ADDITIONS and not _is_read(key.rsplit(".", 1)[1], code, yamls)
    ]
    assert not unread, f"keys verl 0.9.1 never reads: {unread}"
    assert _is_read("clip_grad", code, yamls) and not _is_read("grad_clip", code, yamls)  # the check works


@pytest.mark.parametrize(
    "key",
    [
        "actor_rollout_ref.actor.optim.lrr",  # a typo under a dataclass node
        "actor_rollout_ref.optim.lr",  # a real setting, one level too high
        "critic.optim.clip_gradient",
        "trainer.enable",  # `enable` is a setting (critic.enable), not of the trainer
        "+trainer.enable",  # Hydra composes this one: only the walk refuses it
        "+ray_kwargs.ray_init.adress",  # an addition, misspelt
        "+critic.enable",  # `+` on a key verl has
        "actor_rollout_ref.ref.log_prob_micro_batch_size",  # in verl's YAML, not in the ref's dataclass
    ],
)
def test_the_schema_walk_refuses_a_wrong_path(key: str) -> None:
    problem = schema_problem(key, verl_schema())
    assert problem is not None and problem.startswith(f"{key}: "), problem


def test_only_the_path_walk_refuses_a_known_name_at_a_wrong_place(tmp_path: Path) -> None:
    """``lr`` and ``enable`` are names verl reads, so the leaf-name check passes ``trainer.enable``. And
    Hydra composes ``+trainer.enable=true``: a ``+`` key is in the config it adds itself to, so the old
    walk (leaf in the composed node, leaf read anywhere) accepted it. Why the walk reads verl's schema."""
    code, yamls = _verl_readers()
    assert _is_read("enable", code, yamls) and _is_read("lr", code, yamls)
    _, plan = _plan(tmp_path, "verl.overrides=[+trainer.enable=true]")
    assert compose_verl_config(plan.overrides).trainer.enable is True
    assert "trainer.enable" in (schema_problem("+trainer.enable", verl_schema()) or "")
    assert schema_problem("actor_rollout_ref.actor.optim.lr", verl_schema()) is None
    assert schema_problem("+ray_kwargs.ray_init.address", verl_schema()) is None


def test_optimiser_settings_reach_verls_optimiser(tmp_path: Path) -> None:
    """Grad clip, betas and eps arrive in the dataclass verl's FSDP engine clips and builds AdamW from."""
    import torch
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config.optimizer import build_optimizer

    _, plan = _plan(
        tmp_path,
        "algorithm.name=ppo",
        "rollout.n_per_profile=1",
        "optim.max_grad_norm=0.5",
        "optim.eps=1e-5",
        "optim.betas=[0.8,0.95]",
    )
    vc = compose_verl_config(plan.overrides)
    for node in (vc.actor_rollout_ref.actor.optim, vc.critic.optim):
        optim = omega_conf_to_dataclass(node)
        assert optim.clip_grad == 0.5
        built = build_optimizer([torch.nn.Parameter(torch.zeros(2))], optim)
        group = built.param_groups[0]
        assert group["eps"] == 1e-5 and tuple(group["betas"]) == (0.8, 0.95)


def test_settings_verl_cannot_honour_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"algorithm\.whiten_advantages=false"):
        _plan(tmp_path, "algorithm.name=ppo", "rollout.n_per_profile=1", "algorithm.whiten_advantages=false")
    with pytest.raises(ConfigError, match=r"algorithm\.grpo_eps=0\.001"):
        _plan(tmp_path, "algorithm.grpo_eps=0.001")
    with pytest.raises(ConfigError, match=r"algorithm\.target_kl=0\.02"):
        _plan(tmp_path, "algorithm.target_kl=0.02")
    with pytest.raises(ConfigError, match=r"optim\.schedule=linear"):
        _plan(tmp_path, "optim.schedule=linear")


@pytest.mark.parametrize("preset", ["grpo-think", "ppo-think", "grpo-nothink"])
def test_both_engines_take_the_same_optimiser_steps_per_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preset: str
) -> None:
    """Issue 33: the published think run took about one optimiser step per assistant turn (a sample
    per turn, mini-batches of train_batch_size × n samples). The config rlver writes for verl and the
    local learner size a mini-batch alike, so for any sample count both take the same steps."""
    import inspect
    import math

    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    # the scaling by rollout.n this relies on, as verl 0.9.1 writes it (ray_trainer.py:1352-1353)
    assert "ppo_mini_batch_size * self.config.actor_rollout_ref.rollout.n" in inspect.getsource(RayPPOTrainer)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = load_verl_config(preset, [f"verl.out_dir={tmp_path}"])
    vc = _preset_verl_config(cfg, tmp_path)
    verl_minibatch = vc.actor_rollout_ref.actor.ppo_mini_batch_size * vc.actor_rollout_ref.rollout.n
    assert verl_minibatch == cfg.minibatch_samples() == cfg.rollout.dialogues_per_step  # minibatches 1
    per_turn = cfg.rollout.think and cfg.rollout.think_context == "visible"
    turns = cfg.env_config().rules.max_assistant_turns if per_turn else 1
    samples = cfg.rollout.dialogues_per_step * turns  # every dialogue to the turn limit
    assert samples % verl_minibatch == 0  # verl's iterator requires whole mini-batches
    assert samples // verl_minibatch == math.ceil(samples / cfg.minibatch_samples()) == turns
