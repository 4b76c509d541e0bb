"""Tests that kill mutants of ``rlver.llm.sampling`` the first mutation run left alive (issue 42, item 3;
``python bench/mutants.py sampling``): an empty batch's uniforms, the defaults filtering nothing, and
the nucleus's two edges (a prefix that reaches ``top_p`` exactly, a first token that alone passes it)."""

from __future__ import annotations

import pytest
import torch

from rlver.llm.sampling import inverse_cdf, nucleus, row_uniforms, sample_tokens

CPU = torch.device("cpu")


def test_no_rows_draw_an_empty_float_grid_of_the_asked_steps() -> None:
    """A generation with no rows (every dialogue of a round already ended) still gets ``[0, steps]``."""
    empty = row_uniforms([], 7, CPU)
    assert empty.shape == (0, 7) and empty.dtype == torch.float32


def test_the_defaults_filter_nothing() -> None:
    """Without ``top_k``/``top_p`` every token keeps its mass: a uniform sweep draws each token in
    proportion to its probability (here 1/2, 1/4, 1/4), not only the most likely one."""
    probs = torch.tensor([0.5, 0.25, 0.25])
    uniforms = (torch.arange(1000) + 0.5) / 1000  # the unit interval, evenly
    ids, _ = sample_tokens(probs.log().expand(1000, -1), uniforms, 1.0)
    assert torch.bincount(ids, minlength=3).tolist() == [500, 250, 250]


def test_a_prefix_that_reaches_top_p_exactly_is_the_nucleus() -> None:
    """The smallest prefix whose mass reaches top_p: 0.5 reaches 0.5, so the tokens after it go (binary
    fractions, so the sums are exact)."""
    kept = nucleus(torch.tensor([[0.5, 0.25, 0.25]]), 0.5)
    assert kept.tolist() == [[0.5, 0.0, 0.0]]
    kept = nucleus(torch.tensor([[0.5, 0.25, 0.25]]), 0.75)
    assert kept.tolist() == [[0.5, 0.25, 0.0]]


def test_a_first_token_past_top_p_is_kept_alone() -> None:
    """The most likely token always stays, and when its mass alone passes ``top_p`` it is the nucleus."""
    kept = nucleus(torch.tensor([[0.625, 0.25, 0.125], [0.375, 0.375, 0.25]]), 0.5)
    assert kept.tolist() == [[0.625, 0.0, 0.0], [0.375, 0.375, 0.0]]
    assert nucleus(torch.tensor([[0.625, 0.25, 0.125]]), 0.0).tolist() == [[0.625, 0.0, 0.0]]


def test_greedy_needs_no_uniforms_and_sampling_says_it_needs_them() -> None:
    logits = torch.tensor([[0.0, 1.0]])
    with pytest.raises(ValueError, match=r"^sample_tokens: temperature > 0 needs one uniform per row$"):
        sample_tokens(logits, None, 0.7)


def test_filters_that_keep_everything_draw_what_no_filter_draws() -> None:
    """``top_k`` at the vocabulary size and ``top_p`` 1 are off: the same uniform draws the same token
    as with no filter, where a uniform inverts the cumulative distribution in vocabulary order
    (probabilities 1/4, 1/2, 1/4: u < 1/4 draws token 0)."""
    probs = torch.tensor([0.25, 0.5, 0.25])
    uniforms = (torch.arange(16) + 0.5) / 16
    logits = probs.log().expand(16, -1)
    plain, _ = sample_tokens(logits, uniforms, 1.0)
    assert plain.tolist() == [0] * 4 + [1] * 8 + [2] * 4
    for top_k, top_p in [(3, 1.0), (0, 1.0), (3, 1.5)]:
        ids, _ = sample_tokens(logits, uniforms, 1.0, top_p, top_k)
        assert ids.tolist() == plain.tolist(), (top_k, top_p)


def test_top_p_breaks_ties_by_token_id() -> None:
    """Equally likely tokens keep their vocabulary order in the nucleus's sort, so a top-p that keeps
    every token draws, uniform for uniform, what no filter draws (an unstable sort, as a GPU's or a
    long row's, would permute the ties and change the tokens a seed gives)."""
    probs = torch.full((32,), 0.5 / 31)
    probs[0] = 0.5
    uniforms = (torch.arange(64) + 0.5) / 64
    logits = probs.log().expand(64, -1)
    plain, _ = sample_tokens(logits, uniforms, 1.0)
    kept_all, _ = sample_tokens(logits, uniforms, 1.0, top_p=0.99)  # the last tie starts at 0.984
    assert kept_all.tolist() == plain.tolist()


def test_top_k_filters_whatever_the_batch_size() -> None:
    """A batch of fewer rows than ``top_k`` (here 2 rows, top 3 of 5 tokens) is filtered as any other."""
    probs = torch.tensor([0.05, 0.3, 0.1, 0.25, 0.3])
    ids, _ = sample_tokens(probs.log().expand(2, -1), torch.tensor([0.0, 0.999]), 1.0, top_k=3)
    assert set(ids.tolist()) <= {1, 3, 4}
    sweep = (torch.arange(100) + 0.5) / 100
    ids, _ = sample_tokens(probs.log().expand(100, -1), sweep, 1.0, top_k=3)
    assert set(ids.tolist()) == {1, 3, 4}


def test_a_uniform_on_a_boundary_draws_the_next_token() -> None:
    """Token i owns the half-open interval [cdf[i-1], cdf[i]) of the unit interval, so each token's
    chance is exactly its weight: u = 0 draws the first, u = 1/4 (where token 0's quarter ends) the
    second, u = 1/2 the third (binary fractions: the products are exact)."""
    weights = torch.tensor([[0.25, 0.25, 0.5]]).expand(4, -1)
    assert inverse_cdf(weights, torch.tensor([0.0, 0.25, 0.5, 0.75])).tolist() == [0, 1, 2, 2]
