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


class _OwnForwardOnly(torch.nn.Module):
    """A causal LM that exposes only ``forward`` (the tiny model's), or a body/head pair that is not a
    plain split: ``decoder`` is returned by ``get_decoder`` and ``head`` by ``get_output_embeddings``
    when given, so ``policy_forward`` must score it through its own forward."""

    def __init__(self, inner: torch.nn.Module, decoder: object = None, head: object = None) -> None:
        super().__init__()
        self.inner = inner
        if decoder is not None:
            self.get_decoder = lambda: self if decoder == "self" else decoder
            self.get_output_embeddings = lambda: head

    def forward(self, **kwargs: object) -> object:
        return self.inner(**kwargs)


@pytest.mark.parametrize(
    "wrap",
    [
        lambda m: _OwnForwardOnly(m),  # no get_decoder / get_output_embeddings at all
        lambda m: _OwnForwardOnly(m, decoder="self", head=m.get_output_embeddings()),  # body is the model
        lambda m: _OwnForwardOnly(m, decoder=m.get_decoder(), head=None),  # no head module
        # a plain split but no config: the chunked path, as for a model whose config has no transforms
        lambda m: _OwnForwardOnly(m, decoder=m.get_decoder(), head=m.get_output_embeddings()),
    ],
    ids=["forward-only", "body-is-model", "no-head", "split-without-config"],
)
def test_a_model_without_a_plain_body_and_head_is_scored_through_its_forward(
    model: torch.nn.Module, wrap
) -> None:
    mb = collate([LONG, SHORT], [0, 1], pad_id=0, device=CPU)
    with torch.no_grad():
        logp, entropy = policy_forward(wrap(model), mb, 0.5)
    assert torch.allclose(logp, _reference(model, 0.5), atol=1e-5)
    assert entropy is None


@pytest.mark.parametrize("scaling", [2, 2.0, 0.5])
def test_a_model_whose_logits_are_scaled_is_scored_through_its_own_forward(scaling: float) -> None:
    """A Granite model divides its head's logits by ``config.logits_scaling``; ``head(body(x))`` alone
    would lose that. Only the values that change nothing (``None``, 1, 1.0) may take the split path;
    2 and 2.0 must not (an int or a float in the config, each against its own entry of that list)."""
    from transformers import GraniteConfig, GraniteForCausalLM

    torch.manual_seed(0)
    config = GraniteConfig(
        vocab_size=16, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=32, logits_scaling=scaling,
    )  # fmt: skip
    model = GraniteForCausalLM(config).eval()
    mb = collate([LONG, SHORT], [0, 1], pad_id=0, device=CPU)
    with torch.no_grad():
        logp, _ = policy_forward(model, mb, 1.0)
    assert torch.allclose(logp, _reference(model, 1.0), atol=1e-6)


def test_under_bf16_the_split_forward_computes_as_the_models_own_forward() -> None:
    """``compute_in_bf16`` wraps the model's forward; the chunked path calls body and head directly, so
    it must enter the same autocast (``_compute_region``): bit-equal to the wrapped forward here, where
    the tiny model's fp32 and bf16 log-probs differ by up to 1e-3."""
    from rlver.llm.precision import compute_in_bf16

    torch.manual_seed(0)
    bf16 = compute_in_bf16(tiny_model_and_tokenizer(0)[0].eval(), CPU)
    mb = collate([LONG, SHORT], [0, 1], pad_id=0, device=CPU)
    with torch.no_grad():
        logp, _ = policy_forward(bf16, mb, 1.0)
    assert torch.allclose(logp, _reference(bf16, 1.0), atol=1e-6)


def test_the_value_of_every_prefix_but_the_last() -> None:
    from rlver.train.batch import value_forward
    from rlver.train.loading import ValueModel

    torch.manual_seed(0)
    body = tiny_model_and_tokenizer(0)[0].get_decoder()
    critic = ValueModel(body, int(body.config.hidden_size))
    torch.nn.init.normal_(critic.head.weight)
    mb = collate([LONG, SHORT], [0, 1], pad_id=0, device=CPU)
    with torch.no_grad():
        values = value_forward(critic, mb)
        whole = critic(mb.input_ids, mb.attention_mask)
    assert values.shape == (2, 4) and torch.equal(values, whole[:, :-1])
