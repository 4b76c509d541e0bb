"""The RL maths, as pure tensor functions (no models, no I/O), each small enough to check by hand.

Conventions (CleanRL-style: every shape is written down):

* ``B`` sequences (dialogues) in a batch, ``T`` token positions; per-token tensors are ``[B, T]``.
* ``mask[b, t] = 1`` where token ``t`` of sequence ``b`` was written by the policy (an *action*);
  0 for system/user tokens and padding. User tokens are environment transitions: they are skipped by
  GAE, never carry loss, advantage, entropy or KL.
* Losses use the "token mean" over every action token of a (mini)batch by default, as verl does. Pass
  ``normalizer`` (the minibatch's action-token count) to the loss functions when a minibatch is split
  into micro-batches, so that the accumulated gradient equals the full-minibatch gradient. Another
  aggregation (verl's ``loss_agg_mode`` names, :data:`LOSS_AGG_MODES`) is an :class:`Aggregation`
  holding the minibatch's counts; the logged statistics stay token means whatever the loss's mode.

References: PPO (Schulman et al., 2017, arXiv:1707.06347), GAE (Schulman et al., 2016,
arXiv:1506.02438), GRPO (Shao et al., DeepSeekMath, 2024, arXiv:2402.03300), KL estimators k1/k3
(J. Schulman, "Approximating KL divergence", 2020).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------------- means
def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    return (x * mask).sum() if dim is None else (x * mask).sum(dim=dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None, normalizer: float | None = None) -> Tensor:
    """Mean of ``x`` over positions where ``mask`` is 1 (``normalizer`` replaces the count if given).

    An all-zero mask gives 0, not NaN: an empty micro-batch must not poison the gradient.
    """
    if normalizer is not None:
        return masked_sum(x, mask, dim) / max(float(normalizer), 1.0)
    count = mask.sum() if dim is None else mask.sum(dim=dim)
    return masked_sum(x, mask, dim) / count.clamp(min=1.0)


def masked_var(x: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    n = mask.sum()
    if unbiased and n > 1:
        var = var * n / (n - 1)
    return var


def explained_variance(predicted: Tensor, target: Tensor, mask: Tensor) -> float | None:
    """``1 - Var(target - predicted) / Var(target)`` over the masked positions (CleanRL's ``ppo.py``,
    population variances): how much of the returns' spread the critic's values account for. 1 is a
    perfect critic, 0 one no better than the mean, below 0 a worse one. ``None`` when the targets do not
    vary (the ratio is undefined; CleanRL logs NaN there)."""
    var_target = masked_var(target, mask, unbiased=False)
    if float(var_target) == 0.0:
        return None
    return float(1.0 - masked_var(target - predicted, mask, unbiased=False) / var_target)


def masked_whiten(x: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Normalise ``x`` to zero mean, unit variance over the masked positions (0 elsewhere)."""
    mean, var = masked_mean(x, mask), masked_var(x, mask)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * mask


# --------------------------------------------------------------------------------------- aggregation
#: How a loss's per-token values become one number, by verl 0.9.1's ``loss_agg_mode`` names
#: (``core_algos.agg_loss``, lines 1140-1206): the mean over every action token; the mean over samples
#: of each sample's token sum or token mean; and Dr. GRPO's (Liu et al., 2025, arXiv:2503.20783) sum
#: over samples of each token sum divided by a constant, TRL's ``loss_type="dr_grpo"``.
LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


@dataclass(frozen=True)
class Aggregation:
    """A loss aggregation and the counts of the whole minibatch it divides by, so that the losses of a
    minibatch's micro-batches add up to the minibatch's loss (each divides by the minibatch's counts,
    never its own).

    ``tokens``: the minibatch's action tokens (``token-mean``); ``samples``: its samples with at least
    one action token (the ``seq-mean-*`` modes; verl excludes fully masked rows the same way);
    ``horizon``: ``seq-mean-token-sum-norm``'s constant (verl's ``loss_scale_factor``, TRL's
    ``max_completion_length``). ``None``: counted on the tensors at hand (one micro-batch is the
    minibatch), and for ``horizon`` the mask's width, as verl does without ``loss_scale_factor``.
    """

    mode: str = "token-mean"
    tokens: float | None = None
    samples: float | None = None
    horizon: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in LOSS_AGG_MODES:
            raise ValueError(f"loss_agg_mode {self.mode!r}: expected one of {', '.join(LOSS_AGG_MODES)}")


def aggregate(per_token: Tensor, mask: Tensor, agg: Aggregation) -> Tensor:
    """``per_token`` ``[B, T]`` → a scalar, as ``agg.mode`` says (0, not NaN, for an empty mask)."""
    if agg.mode == "token-mean":
        return masked_mean(per_token, mask, normalizer=agg.tokens)
    row_tokens = mask.sum(dim=-1)
    if agg.mode == "seq-mean-token-mean":
        per_row = masked_sum(per_token, mask, dim=-1) / row_tokens.clamp(min=1.0)
    else:
        per_row = masked_sum(per_token, mask, dim=-1)
    samples = float((row_tokens > 0).sum()) if agg.samples is None else agg.samples
    loss = per_row.sum() / max(samples, 1.0)
    if agg.mode == "seq-mean-token-sum-norm":
        loss = loss / (float(mask.shape[-1]) if agg.horizon is None else agg.horizon)
    return loss


# ---------------------------------------------------------------------------------------- advantages
def compact(x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Move the masked entries of each row to the front, keeping their order.

    Returns ``(x_compact [B, T], mask_compact [B, T], order [B, T])`` with
    ``x_compact[b, j] = x[b, order[b, j]]``; :func:`scatter_back` undoes it.
    """
    order = torch.argsort((mask <= 0).to(torch.int8), dim=1, stable=True)
    counts = mask.gt(0).sum(dim=1, keepdim=True)
    positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)
    return x.gather(1, order), (positions < counts).to(x.dtype), order


def scatter_back(x_compact: Tensor, order: Tensor, mask: Tensor) -> Tensor:
    out = torch.zeros_like(x_compact).scatter(1, order, x_compact)
    return out * mask


@torch.no_grad()
def gae_advantages(
    rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over the assistant tokens only.

    rewards, values, mask: ``[B, T]``. The assistant tokens of a dialogue form one trajectory
    ``a_0, a_1, ...`` (user tokens are skipped: they are what the environment did between two
    actions, so the "next state" of a turn's last token is the first token of the next turn). After the
    last action the episode is over (next value 0).

        delta_j = r_j + gamma * V_{j+1} - V_j
        A_j     = delta_j + gamma * lam * A_{j+1}
        R_j     = A_j + V_j            (the value target)

    Returns ``(advantages, returns)``, both ``[B, T]`` and 0 outside the mask.
    """
    r, cm, order = compact(rewards, mask)
    v = values.gather(1, order) * cm
    pad = torch.zeros_like(cm[:, :1])
    has_next = torch.cat([cm[:, 1:], pad], dim=1)  # 0 after the last action: the episode ended
    next_v = torch.cat([v[:, 1:], pad], dim=1) * has_next
    n = int(cm.sum(dim=1).max().item()) if cm.numel() else 0
    adv = torch.zeros_like(r)
    last = torch.zeros_like(r[:, 0])
    for j in reversed(range(n)):
        delta = r[:, j] + gamma * next_v[:, j] - v[:, j]
        last = (delta + gamma * lam * has_next[:, j] * last) * cm[:, j]
        adv[:, j] = last
    returns = adv + v
    return scatter_back(adv, order, mask), scatter_back(returns, order, mask)


def group_advantages(
    scores: Tensor,
    groups: Sequence[int] | Tensor,
    eps: float = 1e-6,
    scale: bool = True,
    lone: Literal["zero", "raw"] = "zero",
    std_min: float = 0.0,
) -> Tensor:
    """GRPO: ``(score - group mean) / (group std + eps)`` per sequence.

    scores: ``[B]`` one scalar reward per dialogue; groups: ``[B]`` a group id per dialogue (the
    profile it was sampled for). The std is the unbiased sample std (as DeepSeekMath and verl).
    ``scale=False`` drops the std division (Dr. GRPO). ``std_min`` floors the std before ``eps`` is
    added (CTC-GRPO's ``grpo_std_min``: a group whose scores barely differ is not blown up); 0: none.

    A group of one sample has no baseline. ``lone="zero"``: advantage 0, so it teaches nothing rather
    than its score unbaselined. ``lone="raw"``: verl 0.9.1's choice (``core_algos.py:315-317``: mean 0,
    std 1 for a group of one), ``score / (1 + eps)`` with ``scale``, ``score`` without.
    """
    g = torch.as_tensor(groups, device=scores.device)
    adv = torch.zeros_like(scores)
    for gid in torch.unique(g):
        idx = (g == gid).nonzero(as_tuple=True)[0]
        if idx.numel() < 2:
            if lone == "raw":
                adv[idx] = scores[idx] / (1.0 + eps) if scale else scores[idx]
            continue
        s = scores[idx]
        centred = s - s.mean()
        adv[idx] = centred / (s.std().clamp(min=std_min) + eps) if scale else centred
    return adv


def broadcast_to_tokens(per_sequence: Tensor, mask: Tensor) -> Tensor:
    """``[B]`` → ``[B, T]``: the same value on every action token of a sequence (0 elsewhere)."""
    return per_sequence.unsqueeze(1) * mask


def token_rewards(
    turn_rewards: Sequence[Sequence[float]], turn_ends: Sequence[Sequence[int]], shape: tuple[int, int]
) -> Tensor:
    """Place each turn's reward on that turn's last token. ``turn_ends`` index the ``[B, T]`` grid."""
    out = torch.zeros(shape)
    for b, (rs, ends) in enumerate(zip(turn_rewards, turn_ends, strict=True)):
        for r, t in zip(rs, ends, strict=True):
            out[b, t] += r
    return out


# --------------------------------------------------------------------------------------------- KL
def kl_k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = log p - log q: unbiased per sample, can be negative; used as a reward penalty (PPO)."""
    return logp - ref_logp


#: verl 0.9.1's bound on each token's k3 estimate (``core_algos.kl_penalty_forward``, ``low_var_kl``,
#: lines 2239-2245: ``torch.clamp(kld, min=-10, max=10)``; k3 >= 0, so only the upper bound acts).
KL_K3_BOUND = 10.0


def kl_k3(logp: Tensor, ref_logp: Tensor, bound: float | None = KL_K3_BOUND) -> Tensor:
    """k3 = q/p - log(q/p) - 1 >= 0: low-variance, unbiased; used as a loss term (GRPO).

    As verl's ``low_var_kl``: the log-ratio is clamped to ±20 before ``exp``, and each token's estimate
    to at most ``bound`` (10), so one token whose policy has run far from the reference adds at most
    ``kl_coef * 10 / n`` to the loss and no gradient (the clamp's). ``bound=None``: no cap (the
    ``approx_kl`` diagnostic of :func:`policy_loss`, which verl does not compute with k3).
    """
    log_ratio = (ref_logp - logp).clamp(-20.0, 20.0)
    k3 = torch.exp(log_ratio) - log_ratio - 1.0
    return k3 if bound is None else k3.clamp(max=bound)


# ------------------------------------------------------------------------------------------- losses
@dataclass
class PolicyLossOut:
    loss: Tensor  # scalar, the thing to backward
    clip_fraction: Tensor  # share of action tokens where the clipped branch was taken
    approx_kl: Tensor  # mean k3(old || new): how far this update moved the policy (drives target_kl)
    ppo_kl: Tensor  # mean k1(old || new) = mean(old_logp - logp): verl's actor/ppo_kl, for comparison


def policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    normalizer: float | None = None,
    dual_clip: float | None = None,
    is_weights: Tensor | None = None,
    agg: Aggregation | None = None,
) -> PolicyLossOut:
    """The PPO-clip surrogate shared by PPO and GRPO (only the advantages differ).

    ratio = exp(logp - old_logp)
    loss  = mean over action tokens of max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps_high))

    ``dual_clip = c`` (Ye et al., 2020, arXiv:1912.09729; verl's ``clip_ratio_c``) also bounds a token
    with a negative advantage by ``-A * c``: when a stale token's ratio has run far above 1, the plain
    surrogate's penalty grows without limit; dual-clip caps it (and its gradient is then 0).

    ``is_weights`` (truncated importance sampling, :func:`rollout_is_weights`; detached) multiply each
    token's clipped loss before the mean, after dual-clip, where verl 0.9.1 applies them
    (``core_algos.compute_policy_loss_vanilla``, ``pg_losses = pg_losses * rollout_is_weights``).

    Two estimates of how far the update moved the policy, both over the action tokens: ``approx_kl``,
    k3(old ‖ new) (CleanRL's ``approx_kl``, never negative; what ``algorithm.target_kl`` reads), and
    ``ppo_kl``, k1 = mean(old − new) over the ±20-clamped log-ratio (verl's ``actor/ppo_kl``; unbiased
    but can be negative), so a local run and a verl run can be compared on verl's number.

    ``agg`` aggregates the loss (default: the token mean over ``normalizer`` tokens); the statistics
    are token means over ``normalizer`` tokens whatever it says, so that a clip fraction or a KL reads
    the same under every aggregation (verl's ``pg_metrics`` are token means too).
    """
    high = clip_eps if clip_eps_high is None else clip_eps_high
    log_ratio = (logp - old_logp).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_token = torch.maximum(unclipped, clipped)
    if dual_clip is not None:
        per_token = torch.where(advantages < 0, torch.minimum(per_token, -advantages * dual_clip), per_token)
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    with torch.no_grad():
        clip_fraction = masked_mean((clipped > unclipped).float(), mask, normalizer=normalizer)
        approx_kl = masked_mean(kl_k3(old_logp, logp, bound=None), mask, normalizer=normalizer)
        ppo_kl = masked_mean(-log_ratio, mask, normalizer=normalizer)  # k1, clamped to ±20 as verl's
    loss = (
        masked_mean(per_token, mask, normalizer=normalizer)
        if agg is None
        else aggregate(per_token, mask, agg)
    )
    return PolicyLossOut(loss, clip_fraction, approx_kl, ppo_kl)


#: verl 0.9.1's bound on a log importance ratio before ``exp`` (``rollout_corr_helper.SAFETY_BOUND``).
IS_LOG_BOUND = 20.0


@dataclass
class ISWeights:
    weights: Tensor  # [B, T], detached; 0 outside the mask, 1 where no sampling log-prob is known
    clipped: Tensor  # [B, T] bool: action tokens whose weight the threshold cut


@torch.no_grad()
def rollout_is_weights(
    old_logp: Tensor, sample_logp: Tensor, mask: Tensor, level: str, threshold: float
) -> ISWeights:
    """Truncated importance sampling (TIS) weights: how much likelier the trained policy finds each
    sampled token than the sampler did, so that samples drawn by a sampler that computes differently
    (bf16, another kernel, vLLM) are reweighted towards the policy being trained.

    ``old_logp``: the trainer's pre-update log-probs ``[B, T]``; ``sample_logp``: the sampler's, NaN
    where unknown (those tokens keep weight 1: nothing to correct with). As verl 0.9.1
    (``trainer/ppo/rollout_corr_helper.py``: ``compute_rollout_correction_and_add_to_batch``
    ``log_ratio = old_log_prob - rollout_log_prob``; ``compute_rollout_correction_weights`` lines
    572-596):

    * ``token``: ``w_t = min(exp(clamp(old_t - sample_t, ±20)), threshold)``;
    * ``sequence``: one weight per row, ``min(exp(clamp(sum_t (old_t - sample_t), ±20)), threshold)``
      over its action tokens, on every action token of the row.

    No lower bound (verl's TIS clamps ``max`` only).
    """
    known = ~torch.isnan(sample_logp) & (mask > 0)
    log_ratio = torch.where(known, old_logp - torch.nan_to_num(sample_logp), torch.zeros_like(old_logp))
    if level == "token":
        raw = torch.exp(log_ratio.clamp(-IS_LOG_BOUND, IS_LOG_BOUND))
    elif level == "sequence":
        per_row = log_ratio.sum(dim=1, keepdim=True).clamp(-IS_LOG_BOUND, IS_LOG_BOUND)
        raw = torch.exp(per_row).expand_as(log_ratio)
    else:
        raise ValueError(f"rollout_is level {level!r}: expected 'token' or 'sequence'")
    on = mask > 0
    return ISWeights(torch.where(on, raw.clamp(max=threshold), 0.0), on & (raw > threshold))


#: Action tokens in one sample past which sequence-level TIS is warned about. A row's weight is
#: exp(sum of its per-token log-ratios); with the bf16 sampler's measured gap (mean |gap| 0.0335 nats
#: a token on SmolLM2, tests/models/test_models_real.py and docs/sampling.md; a normal spread of 0.042),
#: independent per-token errors sum to a spread of 0.042 * sqrt(n), which reaches ln 2 (the default
#: threshold's log) near n = 272: past it a large share of weights clip at 2 or sit near 0.
SEQUENCE_IS_LONG_TOKENS = 256


def sequence_is_warning(mask: Tensor, level: str | None, threshold: float) -> str | None:
    """The warning for sequence-level TIS over samples longer than :data:`SEQUENCE_IS_LONG_TOKENS`
    action tokens (``mask`` ``[B, T]``), else ``None``. verl 0.9.1 has only ``token`` and ``sequence``
    levels (``rollout_corr_helper.compute_rollout_correction_weights``, line 565); its geometric mean is
    a rejection filter (``rollout_rs="seq_mean_k1"``), not a weight, so ``token`` is the advice."""
    if level != "sequence" or mask.numel() == 0:
        return None
    longest = int(mask.gt(0).sum(dim=1).max())
    if longest <= SEQUENCE_IS_LONG_TOKENS:
        return None
    return (
        f"algorithm.rollout_is=sequence with samples of up to {longest} action tokens: each weight is "
        f"exp(sum of the row's per-token log-ratios), whose spread grows as sqrt(tokens), so past "
        f"{SEQUENCE_IS_LONG_TOKENS} tokens many weights clip at {threshold:g} or sit near 0 "
        "(docs/sampling.md); algorithm.rollout_is=token weighs each token alone"
    )


@dataclass
class ValueLossOut:
    loss: Tensor
    clip_fraction: Tensor


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip_range: float | None = 0.2,
    normalizer: float | None = None,
    agg: Aggregation | None = None,
) -> ValueLossOut:
    """0.5 * max((V - R)^2, (V_clipped - R)^2), V_clipped = clamp(V, V_old - c, V_old + c).

    The clamp is of ``V`` itself between its bounds (verl 0.9.1's ``clip_by_value``), not
    ``V_old + clamp(V - V_old, ±c)``: inside the bounds ``V_clipped`` is then ``V`` bit for bit, so
    ``clip_fraction`` (the share of action tokens whose clipped error is the larger) counts only tokens
    the clip moved. The other form rounds ``V_old + (V - V_old)`` away from ``V`` by an ulp where ``V``
    is much smaller than ``V_old`` (a young critic's values near 0), and counted that noise as clipping
    (5 % of such tokens, ``test_the_value_clip_fraction_counts_only_tokens_the_clip_moved``).

    ``agg`` aggregates the loss as :func:`policy_loss`'s does (verl's ``compute_value_loss`` reads the
    same ``loss_agg_mode``); the clip fraction stays a token mean.
    """
    agg = Aggregation(tokens=normalizer) if agg is None else agg
    err = (values - returns) ** 2
    if clip_range is None:
        return ValueLossOut(0.5 * aggregate(err, mask, agg), torch.zeros(()))
    v_clipped = torch.clamp(values, min=old_values - clip_range, max=old_values + clip_range)
    err_clipped = (v_clipped - returns) ** 2
    with torch.no_grad():
        frac = masked_mean((err_clipped > err).float(), mask, normalizer=normalizer)
    return ValueLossOut(0.5 * aggregate(torch.maximum(err, err_clipped), mask, agg), frac)


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Per-position entropy of the categorical distribution: logsumexp(z) - sum softmax(z) * z."""
    log_z = torch.logsumexp(logits, dim=-1)
    return log_z - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)


def logprobs_from_logits(logits: Tensor, labels: Tensor) -> Tensor:
    """``log softmax(logits)[labels]`` without materialising the full log-softmax twice."""
    return torch.gather(logits.log_softmax(dim=-1), -1, labels.unsqueeze(-1)).squeeze(-1)
