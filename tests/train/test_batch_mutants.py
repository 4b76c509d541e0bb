"""Tests that kill mutants of ``rlver.train.batch`` the first mutation run left alive (issue 42, item 3;
``python bench/mutants.py batch``): the padded tensors' types and values, the token budget's edge, and
``policy_forward``'s temperature and defaults against a plain ``log_softmax`` of the model's logits."""

from __future__ import annotations

import pytest
import torch

from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.train.batch import collate, micro_batches, policy_forward
from rlver.train.tokenize import TokenizedEpisode

CPU = torch.device("cpu")
LONG = TokenizedEpisode(
    input_ids=[5, 6, 7, 8, 9], assistant_mask=[0, 0, 1, 1, 1], turn_end_positions=[4], kept_turns=1
)
SHORT = TokenizedEpisode(input_ids=[5, 6, 7], assistant_mask=[0, 1, 1], turn_end_positions=[2], kept_turns=1)


def test_collate_pads_each_row_to_its_own_length_with_typed_masks() -> None:
    mb = collate([LONG, SHORT], [0, 1], pad_id=0, device=CPU)
    assert mb.input_ids.tolist() == [[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]]
    assert mb.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert mb.action_mask.tolist() == [[0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
    assert (mb.input_ids.dtype, mb.attention_mask.dtype, mb.action_mask.dtype) == (
        torch.long,
        torch.long,
        torch.float32,
    )
    assert mb.n_tokens == 8 and mb.padded_tokens == 10


def test_a_micro_batch_may_fill_the_budget_exactly() -> None:
    """``n * width > budget`` splits; a group of exactly the budget stays one micro-batch."""
    assert micro_batches([4, 4], [0, 1], token_budget=8) == [[0, 1]]
    assert micro_batches([4, 4], [0, 1], token_budget=7) == [[0], [1]]


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return tiny_model_and_tokenizer(0)[0].eval()


def _reference(model: torch.nn.Module, temperature: float) -> torch.Tensor:
    mb = collate([LONG, SHORT], [0, 1], pad_id=0, device=CPU)
    with torch.no_grad():
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits[:, :-1].float()
    scaled = logits / temperature if temperature > 0 else logits
    return scaled.log_softmax(-1).gather(-1, mb.input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_log_probs_are_those_of_the_logits_over_the_temperature(
    model: torch.nn.Module, temperature: float
) -> None:
    mb = collate([LONG, SHORT], [0, 1], pad_id=0, device=CPU)
    with torch.no_grad():
        logp, _ = policy_forward(model, mb, temperature)
    assert torch.allclose(logp, _reference(model, temperature), atol=1e-5)


def test_temperature_zero_scores_the_logits_unscaled_and_one_is_the_default(model: torch.nn.Module) -> None:
    """Greedy sampling (temperature 0) is scored on the plain logits, not divided by 0."""
    mb = collate([LONG, SHORT], [0, 1], pad_id=0, device=CPU)
    with torch.no_grad():
        zero, _ = policy_forward(model, mb, 0.0)
        default, entropy = policy_forward(model, mb)
    assert torch.allclose(zero, _reference(model, 1.0), atol=1e-5)
    assert torch.allclose(default, _reference(model, 1.0), atol=1e-5)
    assert entropy is None  # no entropy unless asked for


def test_the_entropy_carries_a_gradient_by_default(model: torch.nn.Module) -> None:
    mb = collate([LONG, SHORT], [0, 1], pad_id=0, device=CPU)
    _, entropy = policy_forward(model, mb, 1.0, with_entropy=True)
    assert entropy is not None and entropy.requires_grad
    _, detached = policy_forward(model, mb, 1.0, with_entropy=True, entropy_grad=False)
    assert detached is not None and not detached.requires_grad
