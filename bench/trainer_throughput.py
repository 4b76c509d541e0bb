"""Benchmark 3: tokens per second of one GRPO update, ours vs TRL's GRPOTrainer, same model and batch.

What is timed is everything after generation, for both: the scoring passes each trainer decides it
needs (old/reference log-probs), the advantages, forward + backward over the batch and the optimiser
step. Generation is taken out of both: the same fixed token sequences (``--batch`` sequences of
``--prompt-len`` prompt + ``--completion-len`` completion tokens, groups of ``--group``) are fed to
our :class:`rlver.train.trainer.Trainer` update path and, through TRL's ``rollout_func`` hook, to
``trl.GRPOTrainer``. Single-turn prompts, since TRL cannot run our multi-turn dialogues.

Fairness: fp32 for both, one micro-batch per step for both (our ``micro_batch_tokens`` = the batch's
tokens; TRL's ``per_device_train_batch_size`` = the batch), same learning rate, clip range, gradient
clipping (1.0), AdamW, KL off (TRL's default ``beta=0``), one optimiser step per batch, no gradient
checkpointing and no dropout (TRL's defaults turn both on; ours has both off), and
``torch.set_num_threads(--threads)`` for both, in the same process. The two alternate (``--passes``
rounds of ``--steps`` timed updates each), so a change of machine load during the run hits both
sides; the median and the best update are reported.

Tokens/s = batch × (prompt + completion) tokens / median seconds per update (after ``--warmup``
updates). TRL is looked up at run time: run this script with the ``.venv-bench`` interpreter (see
docs/performance.md); without TRL only our numbers are reported.

``--model PATH`` runs a real model folder (or a name ``rlver models fetch`` knows, e.g.
``smollm2-135m-instruct``) instead of the built tiny sizes; its result goes to
``trainer_throughput_model.json``.

Usage: python bench/trainer_throughput.py [--sizes tiny small] [--steps 5] [--threads 2] [--model PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_result


def workload(
    tokenizer: Any, batch: int, prompt_len: int, completion_len: int, seed: int = 0
) -> dict[str, Any]:
    """Fixed random token sequences (special tokens excluded; each completion ends with EOS)."""
    import torch

    special = set(tokenizer.all_special_ids)
    pool = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    g = torch.Generator().manual_seed(seed)
    eos = int(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    prompts = [pool[torch.randint(len(pool), (prompt_len,), generator=g)].tolist() for _ in range(batch)]
    completions = []
    for _ in range(batch):
        ids = pool[torch.randint(len(pool), (completion_len - 1,), generator=g)].tolist()
        completions.append([*ids, eos])
    rewards = torch.rand(batch, generator=g).tolist()
    return {"prompts": prompts, "completions": completions, "rewards": rewards}


# ------------------------------------------------------------------------------------------------ ours
def run_ours(model_dir: Path, work: dict[str, Any], args: argparse.Namespace) -> list[float]:
    """Seconds per update of our trainer: Learner.score (the passes it needs, then the GRPO advantages)
    + Learner.update."""
    from types import SimpleNamespace

    import torch

    from rlver.train.algorithms.grpo import GRPOSettings
    from rlver.train.config import (
        ModelSettings,
        OptimSettings,
        RolloutSettings,
        RunSettings,
        TrainConfig,
        UpdateSettings,
    )
    from rlver.train.learner import Sample
    from rlver.train.tokenize import TokenizedEpisode
    from rlver.train.trainer import Trainer

    seq_tokens = args.prompt_len + args.completion_len
    cfg = TrainConfig(
        model=ModelSettings(path=str(model_dir), device="cpu", max_length=seq_tokens + 8),
        algorithm=GRPOSettings(kl_coef=0.0, epochs=1, minibatches=1),
        update=UpdateSettings(micro_batch_tokens=args.batch * seq_tokens),
        optim=OptimSettings(actor_lr=1e-6, max_grad_norm=1.0),
        rollout=RolloutSettings(
            batch_size=args.batch // args.group,
            n_per_profile=args.group,
            temperature=1.0,
            max_new_tokens=args.completion_len,  # below model.max_length (the config refuses more)
        ),
        run=RunSettings(steps=1000, tensorboard=False, progress=False),
    )
    seqs = [
        TokenizedEpisode(
            input_ids=p + c,
            assistant_mask=[0] * len(p) + [1] * len(c),
            turn_end_positions=[len(p) + len(c) - 1],
            kept_turns=1,
        )
        for p, c in zip(work["prompts"], work["completions"], strict=True)
    ]
    # each sequence its fixed reward on its last token, grouped as the GRPO groups of the other trainers
    samples = [
        Sample(SimpleNamespace(profile_id=str(i // args.group)), q, [r])  # type: ignore[arg-type]
        for i, (q, r) in enumerate(zip(seqs, work["rewards"], strict=True))
    ]
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rlver-bench-ours-") as out:
        trainer = Trainer(cfg, out)
        for step in range(args.warmup + args.steps):
            gen = torch.Generator().manual_seed(step)
            t0 = time.perf_counter()
            batch = trainer.learner.score(samples)
            trainer.learner.update(batch, step + 1, gen)
            if step >= args.warmup:
                times.append(time.perf_counter() - t0)
    return times


# ------------------------------------------------------------------------------------------------- TRL
def trl_version() -> str | None:
    try:
        import trl
    except ImportError:
        return None
    return str(trl.__version__)


def run_trl(model_dir: Path, work: dict[str, Any], args: argparse.Namespace) -> list[float]:
    """Seconds per optimiser step of trl.GRPOTrainer, generation replaced by the fixed sequences."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32")
    by_prompt: dict[str, list[int]] = {}
    prompts = [f"prompt {i // args.group}" for i in range(args.batch)]
    for i, p in enumerate(prompts):
        by_prompt.setdefault(p, []).append(i)
    reward_of = {}

    def rollout_func(batch_prompts: list[str], trainer: Any) -> dict[str, Any]:
        # Each prompt arrives once per wanted completion; hand out that prompt's fixed sequences in turn.
        seen: dict[str, int] = {}
        rows = []
        for p in batch_prompts:
            k = seen.get(p, 0)
            seen[p] = k + 1
            rows.append(by_prompt[p][k % len(by_prompt[p])])
        for r in rows:
            reward_of[tuple(work["completions"][r])] = work["rewards"][r]
        return {
            "prompt_ids": [work["prompts"][r] for r in rows],
            "completion_ids": [work["completions"][r] for r in rows],
            "logprobs": [[0.0] * len(work["completions"][r]) for r in rows],
        }

    def reward(completions: Any, completion_ids: Any = None, **_: Any) -> list[float]:
        return [reward_of.get(tuple(ids), 0.0) for ids in completion_ids]

    times: list[float] = []

    class Timer(TrainerCallback):
        start = 0.0

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            Timer.start = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            times.append(time.perf_counter() - Timer.start)

    with tempfile.TemporaryDirectory(prefix="rlver-bench-trl-") as out:
        config = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=args.batch,
            num_generations=args.group,
            max_completion_length=args.completion_len,
            max_steps=args.warmup + args.steps,
            learning_rate=1e-6,
            lr_scheduler_type="constant",
            optim="adamw_torch",
            max_grad_norm=1.0,
            beta=0.0,
            epsilon=0.2,
            loss_type="dapo",  # token mean over the batch, as ours
            num_iterations=1,
            gradient_accumulation_steps=1,
            temperature=1.0,
            # TRL turns these on by default; ours are off by default: compare like with like.
            gradient_checkpointing=False,
            disable_dropout=True,
            use_cpu=True,
            bf16=False,
            fp16=False,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
            seed=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=Dataset.from_dict({"prompt": prompts * (args.warmup + args.steps)}),
            processing_class=tokenizer,
            callbacks=[Timer()],
            rollout_func=rollout_func,
        )
        trainer.train()
    return times[args.warmup :]


# ------------------------------------------------------------------------------------------------ main
def _models(args: argparse.Namespace, tmp: Path, build: Any) -> list[tuple[str, Path]]:
    """(label, folder) of each model to run: ``--model`` alone when given, else the tiny ``--sizes``."""
    if args.model:
        from rlver.models.fetch import resolve_model_path

        folder = Path(resolve_model_path(args.model))
        return [(folder.name, folder)]
    return [(size, build(tmp / size, seed=0, size=size)) for size in args.sizes]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", nargs="+", default=["tiny", "small"], choices=["tiny", "small"])
    ap.add_argument("--batch", type=int, default=16, help="sequences per update")
    ap.add_argument("--group", type=int, default=4, help="GRPO group size")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--completion-len", type=int, default=192)
    ap.add_argument("--steps", type=int, default=3, help="timed updates per side and pass")
    ap.add_argument("--passes", type=int, default=2, help="alternating rounds of ours, then TRL")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--no-trl", action="store_true", help="measure ours only")
    ap.add_argument("--model", help="a real model folder (or fetched name) instead of --sizes")
    args = ap.parse_args()

    import torch
    from transformers import AutoTokenizer

    from rlver.models.tiny import build_tiny_model

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    version = None if args.no_trl else trl_version()
    tokens = args.batch * (args.prompt_len + args.completion_len)
    rows: list[list[Any]] = []
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rlver-bench-model-") as tmp:
        for size, model_dir in _models(args, Path(tmp), build_tiny_model):
            tokenizer = AutoTokenizer.from_pretrained(model_dir)
            from transformers import AutoModelForCausalLM

            n_params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model_dir).parameters())
            work = workload(tokenizer, args.batch, args.prompt_len, args.completion_len)
            # Alternate the two, --passes times, so a change of machine load hits both sides.
            ours: list[float] = []
            trl_times: list[float] = []
            for _ in range(args.passes):
                ours += run_ours(model_dir, work, args)
                if version:
                    trl_times += run_trl(model_dir, work, args)
            ours_tps = tokens / statistics.median(ours)
            trl_tps = tokens / statistics.median(trl_times) if trl_times else None
            ratio = ours_tps / trl_tps if trl_tps else None
            rows.append(
                [
                    size,
                    f"{n_params / 1e6:.1f} M",
                    f"{statistics.median(ours):.3f} (best {min(ours):.3f})",
                    f"{ours_tps:,.0f}",
                    f"{statistics.median(trl_times):.3f} (best {min(trl_times):.3f})" if trl_times else "n/a",
                    f"{trl_tps:,.0f}" if trl_tps else "n/a",
                    f"{ratio:.2f}×" if ratio else "n/a",
                    f"{min(trl_times) / min(ours):.2f}×" if trl_times else "n/a",
                ]
            )
            records.append(
                {
                    "size": size,
                    "parameters": n_params,
                    "tokens_per_update": tokens,
                    "ours_s": ours,
                    "ours_tokens_per_s": ours_tps,
                    "trl_s": trl_times,
                    "trl_tokens_per_s": trl_tps,
                    "ours_over_trl": ratio,
                    "ours_over_trl_best": min(trl_times) / min(ours) if trl_times else None,
                }
            )
    title = (
        f"GRPO update, {args.batch} seq × ({args.prompt_len}+{args.completion_len}) tokens, fp32, "
        f"{args.threads} threads, median of {args.passes * args.steps} updates each"
    )
    print_table(
        title,
        ["model", "params", "ours s", "ours tok/s", "TRL s", "TRL tok/s", "ours/TRL", "best/best"],
        rows,
    )
    path = write_result(
        "trainer_throughput_model" if args.model else "trainer_throughput",
        {
            "trl": version,
            "settings": {k: v for k, v in vars(args).items()},
            "results": records,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
