"""The mutants ``bench/mutants.py`` leaves out of a module's score, each with the change it was read as and
why no test kills it.

A label is keyed by mutmut's name (``rlver.train.update.xǁPPOUpdateǁupdate__mutmut_56``), and mutmut numbers
a function's mutants in order: an edit to the function renames them, and a label written for one mutant
then names another, or none. So each label also records the change it was written for, ``line`` as the
source has it and ``mutated`` as the mutant has it (stripped of indentation; several lines joined by a
newline where a mutant changes more than one). ``bench/mutants.py`` leaves a mutant out only while its
diff is that change, reports a label whose mutant no longer exists, and ``--check-labels`` regenerates
every labelled mutant from the current source to check them all without a run.

The three lists, and the rule for each:

* :data:`EQUIVALENT`: no input, on any device, can tell the mutant from the original;
* :data:`CPU_UNTESTABLE`: only a device (CUDA) can (``.to(None)``, ``device=None``, an autocast without
  its dtype): on the CPU the tests run on, the mutant computes what the original does.
  ``tests/train/test_batch_cuda_only.py`` kills them on a GPU (``bench/cuda_mutants.py``, no mutmut needed);
* :data:`OUT_OF_REACH`: mutmut cannot switch the mutant on (code that runs at import, before it forks).

A reason that argues from what the callers pass ("by construction") is a reason no *run* shows the
mutant, not that no input can: such a mutant is a survivor, and a test that feeds the function the
input kills it.
"""

from __future__ import annotations

from typing import NamedTuple


class Label(NamedTuple):
    """One listed mutant: the source ``line`` it changes, the ``mutated`` line, and ``why`` it is listed."""

    line: str
    mutated: str
    why: str


_ZIP_SAME = (
    "zip's strict= only acts on unequal lengths; both lists hold one value per assistant turn by construction"
)
_USE_CACHE = "use_cache only decides whether the forward also returns a KV cache; the logits are the same"
_TWO_D = "the sampler's tensors are [rows, vocab] (or [rows, 1]): dim/axis 1 is dim -1"
_FLOAT32 = "float32 is torch's default dtype: dtype=None or no dtype gives the same tensor"
_DEVICE = "on a CPU the tensor is already where it must be"
_TO_NONE = f".to(None) leaves the tensor where it is: {_DEVICE}; on CUDA it stays on the CPU"
_NO_DEVICE = f"device=None makes the tensor on the CPU: {_DEVICE}; on CUDA it is on the wrong device"
_GUARD = (
    "the zero-weight guard acts only when a device's parallel cumsum rounds a zero weight's step above "
    "0; on a CPU the step is exactly 0 and searchsorted(right=True) never picks it (no killing test: "
    "no input that makes a GPU's cumsum do it is known)"
)
_CUDA_INDEX = "device=None puts the group ids on the CPU, and CUDA indexes a CUDA tensor with them all the same: the same advantages on the scores' device (survived tests/train/test_batch_cuda_only.py on an H200, bench/cuda_mutants.py, 2026-11-28)"
_CAST_ON_ASSIGN = "the int mask is cast on assignment into the float32 tensor"
_CUT_EXACT = "the cut episode holds exactly kept_turns turns, so sample_rewards has no later turn to fold in: kept_turns changes nothing"
_UNBIASED_NONE = "unbiased=None is falsy: the population variance"
_LONE_DEFAULT = "lone acts only through lone == 'raw': any other default is 'zero'"
_SINCE_WRITTEN = "since is written by the first enter() before anything reads it"
_ZIP_ONE_PER_REQUEST = "zip's strict= only acts on unequal lengths; generate() returns one result per request (a wrong count becomes one error per row)"
_SORT_DEFAULTS = "topk/sort: dim=-1 and sorted=True are the defaults"
_TOP_P_ONE = "top_p 1 after top_k: the nucleus then drops only tokens under 2**-24 of the row's mass, whose cdf step rounds to 0 in float32 (never drawn either way)"
_OUTCOME_ZIP = (
    "zip's strict= only acts on unequal lengths; order and outcome are made in the function, outcome by "
    "group_advantages of one score per entry of order: always the same length, whatever the input"
)
_FULL_INT64 = "torch.full with an int fill value (a pad id, -1) is int64 without a dtype"
_ZEROS_FLOAT32 = "torch.zeros is float32 without dtype="
_WIDTH_ONE = "width starts at 1, not 0: max(width, length) is the same for every length >= 1"
_AUTOCAST = "autocast without its dtype is bf16 on a CPU, as asked, and fp16 on CUDA"

EQUIVALENT: dict[str, Label] = {
    "rlver.env.rewards.x_mixed_rewards__mutmut_18": Label(
        "return [w * f + (1.0 - w) * d for f, d in zip(final, delta, strict=True)]",
        "return [w * f + (1.0 - w) * d for f, d in zip(final, delta, strict=None)]",
        _ZIP_SAME,
    ),
    "rlver.env.rewards.x_mixed_rewards__mutmut_21": Label(
        "return [w * f + (1.0 - w) * d for f, d in zip(final, delta, strict=True)]",
        "return [w * f + (1.0 - w) * d for f, d in zip(final, delta, )]",
        _ZIP_SAME,
    ),
    "rlver.env.rewards.x_mixed_rewards__mutmut_22": Label(
        "return [w * f + (1.0 - w) * d for f, d in zip(final, delta, strict=True)]",
        "return [w * f + (1.0 - w) * d for f, d in zip(final, delta, strict=False)]",
        _ZIP_SAME,
    ),
    "rlver.env.rewards.x_mixed_rewards__mutmut_4": Label(
        "final, delta = final_rewards(episode, spec), delta_rewards(episode, spec)",
        "final, delta = final_rewards(episode, None), delta_rewards(episode, spec)",
        "final_rewards ignores its spec argument",
    ),
    "rlver.env.rewards.x_mixed_rewards__mutmut_8": Label(
        "final, delta = final_rewards(episode, spec), delta_rewards(episode, spec)",
        "final, delta = final_rewards(episode, spec), delta_rewards(episode, None)",
        "delta_rewards ignores its spec argument",
    ),
    "rlver.env.rewards.x_place_on_tokens__mutmut_11": Label(
        "row[end] += r",
        "row[end] = r",
        "row[end] = r vs += r: turn ends are distinct positions, each row starts at 0",
    ),
    "rlver.env.rewards.x_sample_rewards__mutmut_12": Label(
        "if kept_turns is not None and 0 < kept_turns < len(rewards):",
        "if kept_turns is not None and 0 <= kept_turns < len(rewards):",
        "0 <= k: for k = 0, [*r[:-1], sum(r[-1:])] == r, the unchanged list",
    ),
    "rlver.env.rewards.x_sample_rewards__mutmut_13": Label(
        "if kept_turns is not None and 0 < kept_turns < len(rewards):",
        "if kept_turns is not None and 0 < kept_turns <= len(rewards):",
        "k <= len(r): for k = len(r), [*r[:k-1], sum(r[k-1:])] == r, unchanged",
    ),
    "rlver.llm.sampling.x_inverse_cdf__mutmut_20": Label(
        "target = torch.minimum(uniforms[:, None].to(cdf.dtype) * total, below_total)",
        "target = torch.minimum(uniforms[:, None].to(None) * total, below_total)",
        "u.to(None): the product with the cdf's total promotes to its dtype anyway",
    ),
    "rlver.llm.sampling.x_inverse_cdf__mutmut_3": Label(
        "cdf = weights.cumsum(dim=-1)", "cdf = weights.cumsum(dim=+1)", _TWO_D
    ),
    "rlver.llm.sampling.x_inverse_cdf__mutmut_30": Label(
        "index = torch.searchsorted(cdf, target, right=True).clamp(max=weights.shape[-1] - 1)",
        "index = torch.searchsorted(cdf, target, right=True).clamp(max=weights.shape[-1] + 1)",
        "the clamp never acts: the target is held below the total, so searchsorted (right=True) returns at most vocab - 1",
    ),
    "rlver.llm.sampling.x_inverse_cdf__mutmut_31": Label(
        "index = torch.searchsorted(cdf, target, right=True).clamp(max=weights.shape[-1] - 1)",
        "index = torch.searchsorted(cdf, target, right=True).clamp(max=weights.shape[+1] - 1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_inverse_cdf__mutmut_39": Label(
        "picked = weights.gather(-1, index)", "picked = weights.gather(+1, index)", _TWO_D
    ),
    "rlver.llm.sampling.x_inverse_cdf__mutmut_54": Label(
        "index = torch.where(picked > 0, index, weights.argmax(dim=-1, keepdim=True))",
        "index = torch.where(picked > 0, index, weights.argmax(dim=+1, keepdim=True))",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_inverse_cdf__mutmut_58": Label(
        "return index.squeeze(-1)", "return index.squeeze(+1)", _TWO_D
    ),
    "rlver.llm.sampling.x_nucleus__mutmut_13": Label(
        "mass_before = (sorted_probs.cumsum(dim=-1) - sorted_probs) / total",
        "mass_before = (sorted_probs.cumsum(dim=+1) - sorted_probs) / total",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_nucleus__mutmut_6": Label(
        "total = sorted_probs.sum(dim=-1, keepdim=True)",
        "total = sorted_probs.sum(dim=+1, keepdim=True)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_row_uniforms__mutmut_13": Label(
        "drawn = torch.stack([torch.rand(steps, generator=g, dtype=torch.float32) for g in generators])",
        "drawn = torch.stack([torch.rand(steps, generator=g, dtype=None) for g in generators])",
        _FLOAT32,
    ),
    "rlver.llm.sampling.x_row_uniforms__mutmut_16": Label(
        "drawn = torch.stack([torch.rand(steps, generator=g, dtype=torch.float32) for g in generators])",
        "drawn = torch.stack([torch.rand(steps, generator=g, ) for g in generators])",
        _FLOAT32,
    ),
    "rlver.llm.sampling.x_row_uniforms__mutmut_3": Label(
        "return torch.empty((0, steps), dtype=torch.float32, device=device)",
        "return torch.empty((0, steps), dtype=None, device=device)",
        _FLOAT32,
    ),
    "rlver.llm.sampling.x_row_uniforms__mutmut_6": Label(
        "return torch.empty((0, steps), dtype=torch.float32, device=device)",
        "return torch.empty((0, steps), device=device)",
        _FLOAT32,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_1": Label(
        "top_p: float = 1.0,",
        "top_p: float = 2.0,",
        "top_p 2 as the default: any top_p >= 1 is off in both of its tests",
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_10": Label(
        "logp = torch.log_softmax(logits, dim=-1)", "logp = torch.log_softmax(logits, dim=+1)", _TWO_D
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_104": Label(
        "ids = order.gather(-1, inverse_cdf(kept, uniforms)[:, None]).squeeze(-1)",
        "ids = order.gather(-1, inverse_cdf(kept, uniforms)[:, None]).squeeze(+1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_111": Label(
        "return ids, logp.gather(-1, ids[:, None]).squeeze(-1)",
        "return ids, logp.gather(+1, ids[:, None]).squeeze(-1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_113": Label(
        "return ids, logp.gather(-1, ids[:, None]).squeeze(-1)",
        "return ids, logp.gather(-1, ids[:, None]).squeeze(+1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_14": Label(
        "ids = logp.argmax(dim=-1)", "ids = logp.argmax(dim=+1)", _TWO_D
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_21": Label(
        "return ids, logp.gather(-1, ids[:, None]).squeeze(-1)",
        "return ids, logp.gather(+1, ids[:, None]).squeeze(-1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_23": Label(
        "return ids, logp.gather(-1, ids[:, None]).squeeze(-1)",
        "return ids, logp.gather(-1, ids[:, None]).squeeze(+1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_35": Label(
        "logp = torch.log_softmax(logits / temperature, dim=-1)",
        "logp = torch.log_softmax(logits / temperature, dim=+1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_39": Label(
        "vocab = probs.shape[-1]", "vocab = probs.shape[+1]", _TWO_D
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_51": Label(
        "kept, order = torch.topk(probs, top_k, dim=-1, sorted=True)",
        "kept, order = torch.topk(probs, top_k, sorted=True)",
        _SORT_DEFAULTS,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_52": Label(
        "kept, order = torch.topk(probs, top_k, dim=-1, sorted=True)",
        "kept, order = torch.topk(probs, top_k, dim=-1, )",
        _SORT_DEFAULTS,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_53": Label(
        "kept, order = torch.topk(probs, top_k, dim=-1, sorted=True)",
        "kept, order = torch.topk(probs, top_k, dim=+1, sorted=True)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_64": Label(
        "kept, order = torch.sort(probs, dim=-1, descending=True, stable=True)",
        "kept, order = torch.sort(probs, descending=True, stable=True)",
        _SORT_DEFAULTS,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_67": Label(
        "kept, order = torch.sort(probs, dim=-1, descending=True, stable=True)",
        "kept, order = torch.sort(probs, dim=+1, descending=True, stable=True)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_81": Label(
        "return ids, logp.gather(-1, ids[:, None]).squeeze(-1)",
        "return ids, logp.gather(+1, ids[:, None]).squeeze(-1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_83": Label(
        "return ids, logp.gather(-1, ids[:, None]).squeeze(-1)",
        "return ids, logp.gather(-1, ids[:, None]).squeeze(+1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_sample_tokens__mutmut_85": Label("if top_p < 1.0:", "if top_p <= 1.0:", _TOP_P_ONE),
    "rlver.llm.sampling.x_sample_tokens__mutmut_86": Label("if top_p < 1.0:", "if top_p < 2.0:", _TOP_P_ONE),
    "rlver.llm.sampling.x_sample_tokens__mutmut_98": Label(
        "ids = order.gather(-1, inverse_cdf(kept, uniforms)[:, None]).squeeze(-1)",
        "ids = order.gather(+1, inverse_cdf(kept, uniforms)[:, None]).squeeze(-1)",
        _TWO_D,
    ),
    "rlver.llm.sampling.x_to_host__mutmut_3": Label(
        "packed = torch.stack([ids.to(torch.float32), logps.to(torch.float32)]).tolist()",
        "packed = torch.stack([ids.to(None), logps.to(torch.float32)]).tolist()",
        "stacking int64 ids with float32 log-probs promotes to float32 anyway",
    ),
    "rlver.llm.sampling.x_to_host__mutmut_4": Label(
        "packed = torch.stack([ids.to(torch.float32), logps.to(torch.float32)]).tolist()",
        "packed = torch.stack([ids.to(torch.float32), logps.to(None)]).tolist()",
        "the log-probs sample_tokens returns are float32 already (logits.float())",
    ),
    "rlver.rollout.batching.xǁBusyǁ__init____mutmut_3": Label(
        "self.since = 0.0", "self.since = None", _SINCE_WRITTEN
    ),
    "rlver.rollout.batching.xǁBusyǁ__init____mutmut_4": Label(
        "self.since = 0.0", "self.since = 1.0", _SINCE_WRITTEN
    ),
    "rlver.rollout.batching.xǁPolicyQueueǁ_run__mutmut_20": Label(
        "for r, result in zip(batch, results, strict=True):",
        "for r, result in zip(batch, results, strict=None):",
        _ZIP_ONE_PER_REQUEST,
    ),
    "rlver.rollout.batching.xǁPolicyQueueǁ_run__mutmut_23": Label(
        "for r, result in zip(batch, results, strict=True):",
        "for r, result in zip(batch, results, ):",
        _ZIP_ONE_PER_REQUEST,
    ),
    "rlver.rollout.batching.xǁPolicyQueueǁ_run__mutmut_24": Label(
        "for r, result in zip(batch, results, strict=True):",
        "for r, result in zip(batch, results, strict=False):",
        _ZIP_ONE_PER_REQUEST,
    ),
    "rlver.train.algorithms.base.xǁAlgorithmǁactor_loss__mutmut_37": Label(
        "if settings.entropy_coef > 0:",
        "if settings.entropy_coef >= 0:",
        "entropy_coef >= 0: at 0 it subtracts 0 x entropy, the same loss and gradient",
    ),
    "rlver.train.algorithms.ctc_grpo.xǁCTCGRPOǁadvantages__mutmut_38": Label(
        "outcome_of = dict(zip(order, outcome.tolist(), strict=True))",
        "outcome_of = dict(zip(order, outcome.tolist(), strict=None))",
        _OUTCOME_ZIP,
    ),
    "rlver.train.algorithms.ctc_grpo.xǁCTCGRPOǁadvantages__mutmut_41": Label(
        "outcome_of = dict(zip(order, outcome.tolist(), strict=True))",
        "outcome_of = dict(zip(order, outcome.tolist(), ))",
        _OUTCOME_ZIP,
    ),
    "rlver.train.algorithms.ctc_grpo.xǁCTCGRPOǁadvantages__mutmut_42": Label(
        "outcome_of = dict(zip(order, outcome.tolist(), strict=True))",
        "outcome_of = dict(zip(order, outcome.tolist(), strict=False))",
        _OUTCOME_ZIP,
    ),
    "rlver.train.algorithms.core.x_compact__mutmut_35": Label(
        "return x.gather(1, order), (positions < counts).to(x.dtype), order",
        "return x.gather(1, order), (positions < counts).to(None), order",
        "GAE multiplies, sums and concatenates the bool mask as its float copy",
    ),
    "rlver.train.algorithms.core.x_compact__mutmut_6": Label(
        "order = torch.argsort((mask <= 0).to(torch.int8), dim=1, stable=True)",
        "order = torch.argsort((mask <= 0).to(torch.int8), stable=True)",
        "argsort's default dim is -1, the T axis of the [B, T] mask",
    ),
    "rlver.train.algorithms.core.x_compact__mutmut_8": Label(
        "order = torch.argsort((mask <= 0).to(torch.int8), dim=1, stable=True)",
        "order = torch.argsort((mask <= 0).to(None), dim=1, stable=True)",
        "argsort of the bool mask orders it as its int8 copy does",
    ),
    "rlver.train.algorithms.core.x_explained_variance__mutmut_18": Label(
        "return float(1.0 - masked_var(target - predicted, mask, unbiased=False) / var_target)",
        "return float(1.0 - masked_var(target - predicted, mask, unbiased=None) / var_target)",
        _UNBIASED_NONE,
    ),
    "rlver.train.algorithms.core.x_explained_variance__mutmut_4": Label(
        "var_target = masked_var(target, mask, unbiased=False)",
        "var_target = masked_var(target, mask, unbiased=None)",
        _UNBIASED_NONE,
    ),
    "rlver.train.algorithms.core.x_group_advantages__mutmut_3": Label(
        'lone: Literal["zero", "raw"] = "zero",', 'lone: Literal["zero", "raw"] = "XXzeroXX",', _LONE_DEFAULT
    ),
    "rlver.train.algorithms.core.x_group_advantages__mutmut_4": Label(
        'lone: Literal["zero", "raw"] = "zero",', 'lone: Literal["zero", "raw"] = "ZERO",', _LONE_DEFAULT
    ),
    "rlver.train.algorithms.core.x_group_advantages__mutmut_8": Label(
        "g = torch.as_tensor(groups, device=scores.device)",
        "g = torch.as_tensor(groups, device=None)",
        _CUDA_INDEX,
    ),
    "rlver.train.algorithms.core.x_group_advantages__mutmut_10": Label(
        "g = torch.as_tensor(groups, device=scores.device)", "g = torch.as_tensor(groups, )", _CUDA_INDEX
    ),
    "rlver.train.algorithms.core.x_masked_mean__mutmut_16": Label(
        "count = mask.sum() if dim is None else mask.sum(dim=dim)",
        "count = mask.sum() if (dim is None) and False else mask.sum(dim=dim)",
        "mask.sum(dim=None) is the full sum, as mask.sum()",
    ),
    "rlver.train.algorithms.core.x_masked_sum__mutmut_1": Label(
        "return (x * mask).sum() if dim is None else (x * mask).sum(dim=dim)",
        "return (x * mask).sum() if (dim is None) and False else (x * mask).sum(dim=dim)",
        "sum(dim=None) is the full sum, as sum()",
    ),
    "rlver.train.algorithms.core.x_policy_loss__mutmut_46": Label(
        "per_token = torch.where(advantages < 0, torch.minimum(per_token, -advantages * dual_clip), per_token)",
        "per_token = torch.where(advantages <= 0, torch.minimum(per_token, -advantages * dual_clip), per_token)",
        "advantages <= 0 in the dual clip: at A = 0 both sides are 0",
    ),
    "rlver.train.algorithms.core.x_token_rewards__mutmut_18": Label(
        "out[b, t] += r",
        "out[b, t] = r",
        "row[end] = r vs += r: turn ends are distinct positions of a zero grid",
    ),
    "rlver.train.algorithms.x_settings_for__mutmut_16": Label(
        "assert cls is not None and issubclass(cls, AlgorithmSettings)  # every entry names one (entry())",
        "assert cls is not None or issubclass(cls, AlgorithmSettings)  # every entry names one (entry())",
        "and -> or in an assertion every entry meets (entry() always names the settings class): it can fail only for a table entry built by hand without one",
    ),
    "rlver.train.algorithms.x_settings_for__mutmut_8": Label(
        'data = {**data.model_dump(exclude_unset=True), "name": data.name}',
        'data = {**data.model_dump(exclude_unset=False), "name": data.name}',
        "dumping unset fields adds only defaults: the shared ones are the same in every settings class, another algorithm's are dropped quietly at their defaults",
    ),
    "rlver.train.batch.x__body_and_head__mutmut_17": Label(
        "if get_decoder is None or get_head is None:",
        "if get_decoder is None and get_head is None:",
        "and for or: a missing get_output_embeddings is then called as None, a TypeError the try returns None for",
    ),
    "rlver.train.batch.x_collate__mutmut_10": Label(
        "ids = torch.full((len(chosen), width), pad_id, dtype=torch.long)",
        "ids = torch.full((len(chosen), width), pad_id, )",
        _FULL_INT64,
    ),
    "rlver.train.batch.x_collate__mutmut_18": Label(
        "amask = torch.zeros((len(chosen), width), dtype=torch.float32)",
        "amask = torch.zeros((len(chosen), width), dtype=None)",
        _ZEROS_FLOAT32,
    ),
    "rlver.train.batch.x_collate__mutmut_20": Label(
        "amask = torch.zeros((len(chosen), width), dtype=torch.float32)",
        "amask = torch.zeros((len(chosen), width), )",
        _ZEROS_FLOAT32,
    ),
    "rlver.train.batch.x_collate__mutmut_29": Label(
        "amask[row, :n] = torch.tensor(s.assistant_mask, dtype=torch.float32)",
        "amask[row, :n] = torch.tensor(s.assistant_mask, dtype=None)",
        _CAST_ON_ASSIGN,
    ),
    "rlver.train.batch.x_collate__mutmut_31": Label(
        "amask[row, :n] = torch.tensor(s.assistant_mask, dtype=torch.float32)",
        "amask[row, :n] = torch.tensor(s.assistant_mask, )",
        _CAST_ON_ASSIGN,
    ),
    "rlver.train.batch.x_collate__mutmut_7": Label(
        "ids = torch.full((len(chosen), width), pad_id, dtype=torch.long)",
        "ids = torch.full((len(chosen), width), pad_id, dtype=None)",
        _FULL_INT64,
    ),
    "rlver.train.batch.x_micro_batches__mutmut_15": Label("width = 0", "width = 1", _WIDTH_ONE),
    "rlver.train.batch.x_micro_batches__mutmut_28": Label(
        "current, width = [], 0", "current, width = [], 1", _WIDTH_ONE
    ),
    "rlver.train.batch.x_policy_forward__mutmut_10": Label(
        "out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)",
        "out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=None)",
        _USE_CACHE,
    ),
    "rlver.train.batch.x_policy_forward__mutmut_13": Label(
        "out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)",
        "out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, )",
        _USE_CACHE,
    ),
    "rlver.train.batch.x_policy_forward__mutmut_14": Label(
        "out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)",
        "out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=True)",
        _USE_CACHE,
    ),
    "rlver.train.batch.x_policy_forward__mutmut_33": Label(
        "hidden = body(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)",
        "hidden = body(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=None)",
        _USE_CACHE,
    ),
    "rlver.train.batch.x_policy_forward__mutmut_36": Label(
        "hidden = body(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)",
        "hidden = body(input_ids=mb.input_ids, attention_mask=mb.attention_mask, )",
        _USE_CACHE,
    ),
    "rlver.train.batch.x_policy_forward__mutmut_37": Label(
        "hidden = body(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)",
        "hidden = body(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=True)",
        _USE_CACHE,
    ),
    "rlver.train.batch.x_policy_forward__mutmut_70": Label(
        "for start in range(0, flat.shape[0], max(1, chunk_tokens)):",
        "for start in range(0, flat.shape[0], max(2, chunk_tokens)):",
        "chunks of at least 2 instead of 1: chunking is exact, the numbers do not depend on the size",
    ),
    "rlver.train.batch.x_policy_forward__mutmut_75": Label(
        "if torch.is_grad_enabled() and h.requires_grad:",
        "if torch.is_grad_enabled() or h.requires_grad:",
        "checkpointing a chunk whose input needs no gradient recomputes the same numbers",
    ),
    "rlver.train.learner.x_make_samples__mutmut_17": Label(
        'turn = q.meta.get("turn") if q.meta.get("per_turn") else None',
        'turn = q.meta.get("turn") if (q.meta.get("per_turn")) or True else None',
        "episode_turn_samples marks every sample it returns meta['per_turn'] = True: the condition is always true",
    ),
    "rlver.train.learner.x_make_samples__mutmut_59": Label(
        "samples.append(Sample(cut, q, sample_rewards(cut, rollout.reward, kept_turns=q.kept_turns)))",
        "samples.append(Sample(cut, q, sample_rewards(cut, rollout.reward, kept_turns=None)))",
        _CUT_EXACT,
    ),
    "rlver.train.learner.x_make_samples__mutmut_62": Label(
        "samples.append(Sample(cut, q, sample_rewards(cut, rollout.reward, kept_turns=q.kept_turns)))",
        "samples.append(Sample(cut, q, sample_rewards(cut, rollout.reward, )))",
        _CUT_EXACT,
    ),
    "rlver.train.learner.x_turn_indices__mutmut_4": Label(
        "out = torch.full(mask.shape, -1, dtype=torch.long)",
        "out = torch.full(mask.shape, -1, dtype=None)",
        _FULL_INT64,
    ),
    "rlver.train.learner.x_turn_indices__mutmut_7": Label(
        "out = torch.full(mask.shape, -1, dtype=torch.long)",
        "out = torch.full(mask.shape, -1, )",
        _FULL_INT64,
    ),
    "rlver.train.learner.x_pad_batch__mutmut_10": Label(
        "mask = torch.zeros((len(seqs), width), dtype=torch.float32)",
        "mask = torch.zeros((len(seqs), width), )",
        _FLOAT32,
    ),
    "rlver.train.learner.x_pad_batch__mutmut_16": Label(
        "mask[i, : len(q) - 1] = torch.tensor(q.assistant_mask[1:], dtype=torch.float32)",
        "mask[i, : len(q) - 1] = torch.tensor(q.assistant_mask[1:], dtype=None)",
        _CAST_ON_ASSIGN,
    ),
    "rlver.train.learner.x_pad_batch__mutmut_18": Label(
        "mask[i, : len(q) - 1] = torch.tensor(q.assistant_mask[1:], dtype=torch.float32)",
        "mask[i, : len(q) - 1] = torch.tensor(q.assistant_mask[1:], )",
        _CAST_ON_ASSIGN,
    ),
    "rlver.train.learner.x_pad_batch__mutmut_8": Label(
        "mask = torch.zeros((len(seqs), width), dtype=torch.float32)",
        "mask = torch.zeros((len(seqs), width), dtype=None)",
        _FLOAT32,
    ),
    "rlver.train.learner.xǁLearnerǁ__init____mutmut_15": Label(
        "self.warned_sequence_is = False",
        "self.warned_sequence_is = None",
        "warned_sequence_is = None: only `if` reads it, and None is falsy as False is",
    ),
    "rlver.train.learner.xǁLearnerǁ_advantages__mutmut_43": Label(
        "within[i, : len(q) - 1] = True",
        "within[i, : len(q) + 1] = True",
        "a wider `within` lets through only zeros: every registered algorithm's advantages and returns are 0 outside the mask already",
    ),
    "rlver.train.learner.xǁLearnerǁ_logp__mutmut_8": Label(
        "model, mb, self.parts.temperature, chunk_tokens=self.parts.update.logit_chunk_tokens\n)[0]",
        "model, mb, self.parts.temperature, )[0]",
        "the chunk size is exact: the numbers do not depend on logit_chunk_tokens (batch's policy_forward_70 likewise)",
    ),
    "rlver.train.optim.x_lr_lambda__mutmut_2": Label(
        "if warmup and n < warmup:",
        "if warmup and n <= warmup:",
        "n <= warmup: at n == warmup the warm-up gives 1.0, as every decay does at progress 0",
    ),
    "rlver.train.update.x_clip_and_norm__mutmut_15": Label(
        'norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else float("inf"))',
        'norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else float("INF"))',
        'float("INF") is float("inf"): float() ignores case',
    ),
    "rlver.train.update.xǁPPOUpdateǁ_micro_batch__mutmut_28": Label(
        "entropy_grad=a.entropy_coef > 0, chunk_tokens=self.parts.update.logit_chunk_tokens,\n)  # fmt: skip",
        "entropy_grad=a.entropy_coef > 0, )  # fmt: skip",
        "chunk_tokens left at policy_forward's default: the chunking is exact, the numbers do not depend on its size",
    ),
}

CPU_UNTESTABLE: dict[str, Label] = {
    "rlver.llm.sampling.x_inverse_cdf__mutmut_48": Label(
        "index = torch.where(picked > 0, index, weights.argmax(dim=-1, keepdim=True))",
        "index = torch.where(picked >= 0, index, weights.argmax(dim=-1, keepdim=True))",
        _GUARD,
    ),
    "rlver.llm.sampling.x_inverse_cdf__mutmut_50": Label(
        "index = torch.where(picked > 0, index, weights.argmax(dim=-1, keepdim=True))",
        "index = torch.where(picked > 0, index, weights.argmax(dim=None, keepdim=True))",
        _GUARD,
    ),
    "rlver.llm.sampling.x_inverse_cdf__mutmut_52": Label(
        "index = torch.where(picked > 0, index, weights.argmax(dim=-1, keepdim=True))",
        "index = torch.where(picked > 0, index, weights.argmax(keepdim=True))",
        _GUARD,
    ),
    "rlver.llm.sampling.x_row_uniforms__mutmut_17": Label(
        "return drawn.to(device)", "return drawn.to(None)", _TO_NONE
    ),
    "rlver.llm.sampling.x_row_uniforms__mutmut_4": Label(
        "return torch.empty((0, steps), dtype=torch.float32, device=device)",
        "return torch.empty((0, steps), dtype=torch.float32, device=None)",
        _NO_DEVICE,
    ),
    "rlver.llm.sampling.x_row_uniforms__mutmut_7": Label(
        "return torch.empty((0, steps), dtype=torch.float32, device=device)",
        "return torch.empty((0, steps), dtype=torch.float32, )",
        _NO_DEVICE,
    ),
    "rlver.train.algorithms.core.x_compact__mutmut_25": Label(
        "positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)",
        "positions = torch.arange(mask.shape[1], device=None).unsqueeze(0)",
        _NO_DEVICE,
    ),
    "rlver.train.algorithms.core.x_compact__mutmut_27": Label(
        "positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)",
        "positions = torch.arange(mask.shape[1], ).unsqueeze(0)",
        _NO_DEVICE,
    ),
    "rlver.train.batch.x__compute_region__mutmut_7": Label(
        "return torch.autocast(device_type=device.type, dtype=dtype)",
        "return torch.autocast(device_type=device.type, dtype=None)",
        _AUTOCAST,
    ),
    "rlver.train.batch.x__compute_region__mutmut_9": Label(
        "return torch.autocast(device_type=device.type, dtype=dtype)",
        "return torch.autocast(device_type=device.type, )",
        _AUTOCAST,
    ),
    "rlver.train.batch.x_collate__mutmut_41": Label(
        "return MicroBatch(list(indices), ids.to(device), attn.to(device), amask[:, 1:].to(device))",
        "return MicroBatch(list(indices), ids.to(None), attn.to(device), amask[:, 1:].to(device))",
        _TO_NONE,
    ),
    "rlver.train.batch.x_collate__mutmut_42": Label(
        "return MicroBatch(list(indices), ids.to(device), attn.to(device), amask[:, 1:].to(device))",
        "return MicroBatch(list(indices), ids.to(device), attn.to(None), amask[:, 1:].to(device))",
        _TO_NONE,
    ),
    "rlver.train.batch.x_collate__mutmut_43": Label(
        "return MicroBatch(list(indices), ids.to(device), attn.to(device), amask[:, 1:].to(device))",
        "return MicroBatch(list(indices), ids.to(device), attn.to(device), amask[:, 1:].to(None))",
        _TO_NONE,
    ),
    "rlver.train.learner.xǁBatchǁrows__mutmut_1": Label(
        "return x[mb.indices, : mb.action_mask.shape[1]].to(mb.action_mask.device)",
        "return x[mb.indices, : mb.action_mask.shape[1]].to(None)",
        _TO_NONE,
    ),
    "rlver.train.update.xǁPPOUpdateǁ_micro_batch__mutmut_7": Label(
        "mb = collate(b.seqs, group, self.parts.pad_id, self.parts.device)",
        "mb = collate(b.seqs, group, self.parts.pad_id, None)",
        "collate(..., None) leaves the micro-batch on the CPU: on CUDA the model's forward gets CPU tensors",
    ),
}

OUT_OF_REACH: dict[str, Label] = {
    "rlver.train.algorithms.x_entry__mutmut_2": Label(
        "return Entry(algorithm.name, description, algorithm, algorithm.settings_class)",
        "return Entry(algorithm.name, None, algorithm, algorithm.settings_class)",
        "entry() runs when the package is imported, before mutmut forks and switches a mutant on (test_every_algorithm_has_a_description checks the value)",
    ),
}
