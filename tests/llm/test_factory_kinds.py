"""Model kinds are a registry (as simulator kinds are): a kind added at run time is accepted by a
config block and built by ``build_chat_model`` like the built-in ones; an unknown kind is refused
when the spec is read, naming the kinds there are."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from helpers import add_for_test, restore_after_test
from rlver.llm.base import SamplingParams
from rlver.llm.cache import CachedChatModel
from rlver.llm.factory import KINDS, ModelKind, build_chat_model, model_kind_names, register_model_kind
from rlver.llm.scripted import ScriptedChatModel
from rlver.llm.spec import ModelSpec
from rlver.records import Message


def test_the_built_in_kinds_and_an_unknown_one() -> None:
    assert model_kind_names()[:2] == ("openai", "local")
    known = ", ".join(model_kind_names())
    with pytest.raises(ValidationError, match=rf"unknown model kind 'vllm-offline'; known: {known} \[type"):
        ModelSpec.model_validate({"kind": "vllm-offline", "model": "m"})
    with pytest.raises(ValidationError, match=r"unknown model kind 'locl'; did you mean 'local'\?"):
        ModelSpec.model_validate({"kind": "locl", "model": "m"})


def test_a_kind_registered_at_run_time_is_read_from_a_block_and_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    built: list[ModelSpec] = []

    def build(spec: ModelSpec) -> ScriptedChatModel:
        built.append(spec)
        return ScriptedChatModel([f"echo from {spec.model}"], name=spec.model)

    add_for_test(monkeypatch, KINDS, ModelKind("echo", "answers with its own name", build))
    assert "echo" in model_kind_names()
    spec = ModelSpec.model_validate({"kind": "echo", "model": "parrot", "cache": str(tmp_path / "c.sqlite")})
    model = build_chat_model(spec)
    assert isinstance(model, CachedChatModel) and built == [spec]  # the cache wraps any kind
    reply = asyncio.run(model.complete([Message(role="user", content="hi")], SamplingParams(temperature=0)))
    assert reply.text == "echo from parrot"
    KINDS.remove("echo")
    with pytest.raises(ValidationError, match="unknown model kind 'echo'"):
        ModelSpec(kind="echo", model="parrot")


def test_register_returns_the_kind_and_replaces_one_of_the_same_name(monkeypatch: pytest.MonkeyPatch) -> None:
    restore_after_test(monkeypatch, KINDS)
    first = register_model_kind(ModelKind("echo", "one", lambda s: ScriptedChatModel(["1"])))
    second = register_model_kind(ModelKind("echo", "two", lambda s: ScriptedChatModel(["2"])))
    assert first.description == "one" and KINDS.entry("echo") is second
