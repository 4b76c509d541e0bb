"""The local sampler samples on the model's device, batch-independently, and drops finished rows.

Real tiny models (built locally, run on the CPU) and hand-built logits; no mocks of the sampler.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from rlver.llm.base import Completion, SamplingParams
from rlver.llm.local import LocalChatModel
from rlver.llm.sampling import inverse_cdf, row_uniforms, sample_tokens
from rlver.models.tiny import IM_END, build_tiny_model, tiny_model_and_tokenizer
from rlver.records import Message

WORDS = [
    "I",
    "feel",
    "tired",
    "and",
    "nobody",
    "seems",
    "to",
    "listen",
    "when",
    "I",
    "try",
    "to",
    "explain",
    "why",
    "it",
    "hurts",
    "so",
    "much",
]


def conversations(n: int) -> list[list[Message]]:
    """``n`` one-turn chats of different lengths (so every batch is left-padded)."""
    return [[Message(role="user", content=" ".join(WORDS[: 1 + (i * 5) % len(WORDS)]))] for i in range(n)]


@pytest.fixture(scope="module")
def decisive_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a wide init so tokens differ from prompt to prompt and seed to seed
    return build_tiny_model(tmp_path_factory.mktemp("sampler"), seed=0, initializer_range=0.2)


def chat_for(folder: Path, max_batch_size: int, end_bias: float = 2.5) -> LocalChatModel:
    """A tiny chat model whose <|im_end|> is pushed up, so some rows end early and others run on."""
    chat = LocalChatModel.from_pretrained(
        folder, device="cpu", dtype="float32", max_batch_size=max_batch_size
    )
    im_end = chat.tokenizer.convert_tokens_to_ids(IM_END)

    def bias(mod: Any, args: Any, out: Any) -> Any:
        out.logits[..., im_end] += end_bias
        return out

    chat.model.register_forward_hook(bias)
    return chat


def sample_each(chat: LocalChatModel, n: int, sampling: SamplingParams) -> list[Completion]:
    """Rows 0..n-1, row ``i`` with seed ``100 + i``, through the trainer's entry point."""
    samplings = [sampling.model_copy(update={"seed": 100 + i}) for i in range(n)]
    out = asyncio.run(chat.complete_each(conversations(n), samplings))
    assert all(isinstance(c, Completion) for c in out), out
    return [c for c in out if isinstance(c, Completion)]


SAMPLING = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=10, extra={"top_k": 50})


def test_same_seed_same_tokens_at_batch_1_8_32(decisive_dir: Path) -> None:
    by_batch = {b: sample_each(chat_for(decisive_dir, b), 32, SAMPLING) for b in (1, 8, 32)}
    reference = by_batch[1]
    reasons = [c.finish_reason for c in reference]
    assert "stop" in reasons and "length" in reasons  # rows did finish early, others ran to the end
    assert len({tuple(c.token_ids or []) for c in reference}) > 16  # seeds and prompts really differ
    for batch in (8, 32):
        for one, other in zip(reference, by_batch[batch], strict=True):
            assert other.token_ids == one.token_ids, batch
            assert other.token_logprobs == pytest.approx(one.token_logprobs, abs=1e-4)


def test_rows_that_finish_leave_the_batch(decisive_dir: Path) -> None:
    chat = chat_for(decisive_dir, 32)
    decode_rows: list[int] = []

    def record(mod: Any, args: Any, kwargs: Any) -> None:
        if kwargs.get("cache") is not None or kwargs.get("past_key_values") is not None:
            decode_rows.append(int(kwargs["input_ids"].shape[0]))

    chat.model.register_forward_pre_hook(record, with_kwargs=True)
    out = sample_each(chat, 32, SAMPLING)
    # Every token but a row's last is fed back exactly once, and only while the row is live: with
    # rows decoding to the longest one this sum would be 32 x (longest - 1).
    assert sum(decode_rows) == sum(len(c.token_ids or []) - 1 for c in out)
    assert decode_rows == sorted(decode_rows, reverse=True) and decode_rows[-1] < decode_rows[0] < 32


def test_the_vocab_sized_log_probs_never_go_to_the_host(
    decisive_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the CPU host and device share memory, so this checks the calls that copy on a GPU: no
    tensor whose last dimension is the vocabulary is ever read back (.cpu/.to(cpu)/.tolist/.item/
    .numpy). The former per-row loop copied the whole ``[rows, vocab]`` log-softmax with ``.cpu()``."""
    chat = chat_for(decisive_dir, 8)
    vocab = int(chat.model.config.vocab_size)
    read_back: list[tuple[str, tuple[int, ...]]] = []
    for name in ("cpu", "tolist", "item", "numpy", "to"):
        original = getattr(torch.Tensor, name)

        def spy(self: torch.Tensor, *args: Any, _name: str = name, _f: Any = original, **kw: Any) -> Any:
            to_host = _name != "to" or any(str(a) == "cpu" for a in (*args, kw.get("device")))
            if to_host:
                read_back.append((_name, tuple(self.shape)))
            return _f(self, *args, **kw)

        monkeypatch.setattr(torch.Tensor, name, spy)
    out = sample_each(chat, 8, SAMPLING)
    monkeypatch.undo()
    assert sum(len(c.token_ids or []) for c in out) > 8
    assert any(shape == (2, 8) for _, shape in read_back)  # the step's one packed copy was seen
    assert not [r for r in read_back if r[1][-1:] == (vocab,)], read_back


# -- the sampling function on hand-built logits --------------------------------------------------------
# distinct values (no ties at a top-k edge), not in sorted order, so the sampler must sort
PROBS = torch.tensor([0.02, 0.3, 0.11, 0.05, 0.15, 0.01, 0.2, 0.03, 0.09, 0.04])


def expected(top_k: int, top_p: float) -> torch.Tensor:
    """The filtered distribution, computed the slow obvious way."""
    order = sorted(range(len(PROBS)), key=lambda i: -float(PROBS[i]))
    kept = order[:top_k] if top_k else order
    mass, nucleus = 0.0, []
    total = float(PROBS[kept].sum())
    for i in kept:
        if mass >= top_p:
            break
        nucleus.append(i)
        mass += float(PROBS[i]) / total
    out = torch.zeros_like(PROBS)
    out[nucleus] = PROBS[nucleus]
    return out / out.sum()


@pytest.mark.parametrize(("top_k", "top_p"), [(0, 1.0), (4, 1.0), (0, 0.7), (5, 0.6), (1, 1.0)])
def test_filtered_tokens_are_never_drawn_and_frequencies_match(top_k: int, top_p: float) -> None:
    draws = 40_000
    logits = PROBS.log().expand(draws, -1)
    uniforms = row_uniforms([torch.Generator().manual_seed(7)], draws, torch.device("cpu"))[0]
    ids, logps = sample_tokens(logits, uniforms, 1.0, top_p, top_k)
    want = expected(top_k, top_p)
    freq = torch.bincount(ids, minlength=len(PROBS)).double() / draws
    assert (freq[want == 0] == 0).all()  # a filtered-out token is never drawn
    assert freq.tolist() == pytest.approx(want.tolist(), abs=0.01)  # ~4 standard errors at 40 k draws
    # the log-prob is the tempered softmax's, before filtering (the trainer's convention)
    assert torch.allclose(logps, PROBS.log()[ids], atol=1e-6)


def test_top_p_after_top_k_measures_the_mass_of_the_kept_tokens() -> None:
    """S2 (issue 42): top-p after top-k renormalises over the k kept tokens, as the slow reference above
    and transformers' warpers do (top-k masks to -inf, top-p then takes a fresh softmax). Top 4 of
    PROBS = 0.30 0.20 0.15 0.11 (mass 0.76), renormalised 0.395 0.263 0.197 0.145: with top_p 0.55
    the nucleus is the first two (0.395 < 0.55 <= 0.658). Measured against the whole vocabulary's mass
    (0.30, 0.50 < 0.55) the third, PROBS[4] = 0.15, would stay."""
    from rlver.llm.sampling import nucleus

    kept = nucleus(torch.tensor([[0.30, 0.20, 0.15, 0.11]]), 0.55)
    assert (kept > 0).tolist() == [[True, True, False, False]]
    assert expected(4, 0.55).nonzero().flatten().tolist() == [1, 6]
    uniforms = torch.linspace(0.0, 0.999, 1000)  # the whole unit interval, evenly
    ids, _ = sample_tokens(PROBS.log().expand(1000, -1), uniforms, 1.0, 0.55, 4)
    assert set(ids.tolist()) == {1, 6}
    assert (ids == 1).float().mean().item() == pytest.approx(0.30 / 0.50, abs=0.002)


def test_extreme_uniforms_stay_inside_the_kept_tokens() -> None:
    logits = torch.tensor([[0.0, float("-inf"), 1.0, float("-inf"), 0.5, float("-inf")]]).expand(4, -1)
    just_below_one = torch.nextafter(torch.tensor(1.0), torch.tensor(0.0)).item()
    uniforms = torch.tensor([0.0, 0.5, just_below_one, 1.0])  # 1.0 itself: no generator draws it
    for top_k, top_p in [(0, 1.0), (2, 1.0), (0, 0.5), (6, 0.999)]:
        ids, _ = sample_tokens(logits, uniforms, 1.0, top_p, top_k)
        assert all(i in (0, 2, 4) for i in ids.tolist()), (top_k, top_p, ids)
    # with everything after the first weight zero, any uniform picks that first index
    weights = torch.tensor([[0.4, 0.0, 0.0], [0.0, 0.0, 1e-30]])
    assert inverse_cdf(weights, torch.tensor([just_below_one, just_below_one])).tolist() == [0, 2]


def test_greedy_is_argmax_and_temperature_scales_the_log_prob() -> None:
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 2.9]])
    ids, logps = sample_tokens(logits, None, 0.0)
    assert ids.tolist() == [1, 0]
    assert torch.allclose(logps, torch.log_softmax(logits, -1)[[0, 1], [1, 0]])
    ids, logps = sample_tokens(logits, torch.tensor([0.3, 0.9]), 0.5)
    assert torch.allclose(logps, torch.log_softmax(logits / 0.5, -1).gather(1, ids[:, None]).squeeze(1))


# -- the static-cache (compiled-decode) path, run eagerly on the CPU ---------------------------------------
def test_static_cache_samples_what_the_dynamic_cache_samples(decisive_dir: Path) -> None:
    dynamic = sample_each(chat_for(decisive_dir, 16, end_bias=4.0), 16, SAMPLING)
    static_chat = chat_for(decisive_dir, 16, end_bias=4.0)
    static_chat.engine.decoder.static_cache = True  # the compiled path's cache, without torch.compile
    static = sample_each(static_chat, 16, SAMPLING)
    held = static_chat.engine.decoder.held_static
    again = sample_each(static_chat, 16, SAMPLING)  # the same shapes: the held cache, reset, again
    assert held is not None and static_chat.engine.decoder.held_static is held
    assert [c.token_ids for c in again] == [c.token_ids for c in static]
    assert "stop" in {c.finish_reason for c in dynamic} and "length" in {c.finish_reason for c in dynamic}
    for d, s in zip(dynamic, static, strict=True):
        assert s.token_ids == d.token_ids
        assert s.token_logprobs == pytest.approx(d.token_logprobs, abs=1e-5)
        assert s.finish_reason == d.finish_reason


def test_the_static_cache_path_stops_decoding_when_every_row_has_finished(decisive_dir: Path) -> None:
    """S7 (issue 42): on the static-cache path a finished row keeps its slot but is marked finished, so
    the loop ends when the last row ends. Counted in decode steps (forward passes of one token per
    row after the prefill), not in time: the longest reply's length, not the token budget's (its ids
    are read back one step late, so the step after the last row's last token has already run)."""
    chat = chat_for(decisive_dir, 16, end_bias=5.0)  # replies of 1 to 18 tokens
    chat.engine.decoder.static_cache = True  # the compiled path's cache, without torch.compile
    decode_steps: list[int] = []

    def record(mod: Any, args: Any, kwargs: Any) -> None:
        if kwargs["input_ids"].shape[1] == 1:
            decode_steps.append(int(kwargs["input_ids"].shape[0]))

    chat.model.register_forward_pre_hook(record, with_kwargs=True)
    budget = 40
    out = sample_each(chat, 16, SAMPLING.model_copy(update={"max_tokens": budget}))
    longest = max(len(c.token_ids or []) for c in out)
    assert {c.finish_reason for c in out} == {"stop"} and longest < budget  # every row ended early
    assert len(set(len(c.token_ids or []) for c in out)) > 1  # ... at different steps
    assert decode_steps == [16] * longest  # the slots stay (static shapes); the loop stops


def test_compile_decode_on_cpu_warns_once_and_stays_eager(capsys: pytest.CaptureFixture[str]) -> None:
    model, tokenizer = tiny_model_and_tokenizer()
    chat = LocalChatModel(model, tokenizer, device="cpu", compile_decode=True)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: compile_decode needs a CUDA device")
    assert (
        chat.compile_decode is False
        and chat.engine.decoder.compiled_forward is None
        and not chat.engine.decoder.static_cache
    )
    assert chat.describe()["sampler"]["compile_decode"] is False
    out = asyncio.run(
        chat.complete([Message(role="user", content="hi")], SamplingParams(max_tokens=3, seed=1))
    )
    assert 1 <= out.completion_tokens <= 3


def test_rollout_compile_decode_reaches_the_sampler_and_the_run_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlver.train.config import load_train_config
    from rlver.train.trainer import Trainer

    assert load_train_config("tiny-offline").rollout.backend_settings.compile_decode is False  # opt-in
    overrides = [
        "rollout.backend_settings.compile_decode=true",
        "model.device=cpu",  # the warning is for a model off CUDA, also where CUDA is at hand
        "run.steps=1",
        "run.progress=false",
        "run.tensorboard=false",
    ]
    trainer = Trainer(load_train_config("tiny-offline", overrides), tmp_path)
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "compile_decode needs a CUDA device" in warnings[0]
    recorded = json.loads((tmp_path / "sampling.json").read_text())["sampler"]
    assert recorded["compile_decode_asked"] is True and recorded["compile_decode"] is False
    manifest_agent = trainer.backend.describe()  # the run manifest's ``agent``
    assert manifest_agent["sampler"]["compile_decode_asked"] is True


def test_a_local_model_spec_passes_compile_decode_on(capsys: pytest.CaptureFixture[str]) -> None:
    """The eval side: ``kind: local`` specs carry the same opt-in to the sampler."""
    from rlver.llm.factory import build_chat_model
    from rlver.llm.spec import ModelSpec
    from rlver.models.tiny import tiny_model_dir

    spec = ModelSpec(kind="local", model=str(tiny_model_dir()), device="cpu", compile_decode=True)
    chat = build_chat_model(spec)
    assert isinstance(chat, LocalChatModel) and chat.describe()["sampler"]["compile_decode_asked"] is True
    assert [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")] == [
        "warning: compile_decode needs a CUDA device; the model is on cpu, so decoding stays eager "
        "(dynamic KV cache)"
    ]
