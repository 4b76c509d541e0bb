"""The explicit sampling settings an engine records come from one helper, ``llm/sampling.explicit_settings``:
greedy decoding and ``top_k`` read the same on every engine, and no engine restates them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlver.llm.base import SamplingParams
from rlver.llm.hf_engine import sampling_settings
from rlver.llm.sampling import LOGPROB_CONVENTION, explicit_settings

SRC = Path(__file__).parents[2] / "src" / "rlver"


def test_greedy_records_no_filter_and_sampling_records_what_was_asked() -> None:
    sampled = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=12, seed=5, extra={"top_k": 20})
    greedy = sampled.model_copy(update={"temperature": 0.0})
    keys = frozenset({"top_k"})
    assert explicit_settings(sampled, extra_keys=keys, engine="e") == {
        "temperature": 0.7, "top_p": 0.9, "top_k": 20, "max_tokens": 12, "seed": 5, "stop": [],
    }  # fmt: skip
    stated = explicit_settings(greedy, extra_keys=keys, engine="e", repetition_penalty=1.0)
    assert (stated["top_p"], stated["top_k"], stated["repetition_penalty"]) == (1.0, 0, 1.0)


def test_a_setting_the_engine_cannot_honour_is_refused_naming_the_engine() -> None:
    asked = SamplingParams(extra={"min_p": 0.1})
    with pytest.raises(
        ValueError, match=r"sampling.extra: vLLM-ish supports only \['top_k'\], got \['min_p'\]"
    ):
        explicit_settings(asked, extra_keys=frozenset({"top_k"}), engine="vLLM-ish")
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        explicit_settings(SamplingParams(extra={"top_k": -1}), extra_keys=frozenset({"top_k"}), engine="e")


def test_the_transformers_engine_states_the_shared_settings_and_its_own() -> None:
    asked = SamplingParams(temperature=0.0, top_p=0.5, max_tokens=9, stop=["\n"], extra={"top_k": 3})
    assert sampling_settings(asked) == {
        "temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_tokens": 9, "seed": None, "stop": ["\n"],
        "repetition_penalty": 1.0, "logprob_convention": LOGPROB_CONVENTION,
    }  # fmt: skip
    with pytest.raises(ValueError, match="the local backend supports only"):
        sampling_settings(SamplingParams(extra={"repetition_penalty": 1.1}))


#: the greedy and top-k rules as an engine would restate them
RESTATED = re.compile(r"""if greedy else|extra\.get\(["']top_k["']""")


def test_no_engine_restates_the_greedy_and_top_k_rules() -> None:
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "sampling.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if RESTATED.search(line)
    ]
    assert not found, f"explicit sampling settings restated outside llm/sampling.py: {found}"
