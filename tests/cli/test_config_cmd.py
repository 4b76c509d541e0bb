"""`rlver config show`: resolved YAML, errors that name the key, secrets shown as ***."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

from rlver.cli.config_cmd import mask_secret_values, render_config
from rlver.errors import ConfigError


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    base_url: str = "http://localhost:8000/v1"
    api_key: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(default=30.0, gt=0)


class Demo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "demo"
    turns: int = 8
    endpoint: Endpoint = Field(default_factory=Endpoint)
    notes: list[str] = Field(default_factory=list)


def test_file_and_overrides_resolve(tmp_path: Path) -> None:
    cfg = tmp_path / "demo.yaml"
    cfg.write_text("name: from-file\nendpoint:\n  timeout_s: 5\n")
    out = yaml.safe_load(render_config(Demo, cfg, ["turns=3", "endpoint.base_url=http://h:1/v1"]))
    assert out == {
        "name": "from-file",
        "turns": 3,
        "endpoint": {
            "base_url": "http://h:1/v1",
            "api_key": None,
            "api_key_env": "OPENAI_API_KEY",
            "timeout_s": 5.0,
        },
        "notes": [],
    }


def test_secrets_are_masked(tmp_path: Path) -> None:
    cfg = tmp_path / "demo.yaml"
    cfg.write_text(
        "endpoint:\n  api_key: hunter2-very-secret\n  base_url: https://bob:pa55word@proxy.example/v1\n"
        "notes: [sk-abcdefghijklmnopqrstuvwxyz0123, plain text]\n"
    )
    text = render_config(Demo, cfg)
    for secret in ("hunter2", "pa55word", "sk-abcdefghijklmnop"):
        assert secret not in text
    out = yaml.safe_load(text)
    assert out["endpoint"]["api_key"] == "***"
    assert out["endpoint"]["api_key_env"] == "OPENAI_API_KEY"  # the variable's name is not a secret
    assert out["endpoint"]["base_url"] == "https://bob:***@proxy.example/v1"
    assert out["notes"] == ["***", "plain text"]


def test_mask_leaves_ordinary_values() -> None:
    assert mask_secret_values({"a": ["sky-high", "http://localhost:8000/v1", 3]}) == {
        "a": ["sky-high", "http://localhost:8000/v1", 3]
    }


def test_unknown_key_is_named(tmp_path: Path) -> None:
    cfg = tmp_path / "demo.yaml"
    cfg.write_text("endpoint:\n  base_ulr: x\n")
    with pytest.raises(ConfigError) as info:
        render_config(Demo, cfg)
    assert "endpoint.base_ulr: unknown key" in str(info.value) and str(cfg) in str(info.value)
    with pytest.raises(ConfigError, match="trns: unknown key"):
        render_config(Demo, None, ["trns=3"])


def test_wrong_type_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        render_config(Demo, None, ["endpoint.timeout_s=soon", "turns=[1,2]"])
    text = str(info.value)
    assert "endpoint.timeout_s:" in text and "'soon'" in text
    assert "turns:" in text


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", "config", "show", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_cli_eval_config_show_and_errors(tmp_path: Path) -> None:
    pytest.importorskip("rlver.eval.config")
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(
        "agent: {kind: openai, base_url: 'https://u:topsecret@llm.example/v1', model: m, api_key_env: MY_KEY}\n"
        "profiles: en-test\n"
    )
    ok = _cli(str(cfg), "--set", "limit=2")
    assert ok.returncode == 0, ok.stderr
    data = yaml.safe_load(ok.stdout)
    assert data["limit"] == 2 and data["profiles"] == "en-test" and data["agent"]["api_key_env"] == "MY_KEY"
    assert "topsecret" not in ok.stdout and "u:***@llm.example" in ok.stdout
    bad = _cli(str(cfg), "--set", "agent.modle=x", "--set", "limit=many")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "agent.modle: unknown key" in bad.stderr and "limit:" in bad.stderr


def test_cli_train_config_kind_guessed(tmp_path: Path) -> None:
    pytest.importorskip("rlver.train.config")
    cfg = tmp_path / "train.yaml"
    cfg.write_text("algorithm: {name: grpo}\nrollout: {n_per_profile: 2}\n")
    ok = _cli(str(cfg))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("# train config") and yaml.safe_load(ok.stdout)["algorithm"]["name"] == "grpo"
    bad = _cli("--kind", "nonsense")
    assert bad.returncode == 2 and "expected eval or train" in bad.stderr
