"""One meaning per word: docs/architecture.md's glossary against every name a user meets.

The glossary lists, for each word, what it means and the names that use it. A config key (every
field path of both config files, as docs/config.md prints them), a flag of any command, or a field
of a run manifest (the declared fields, and every key path of a manifest an offline eval writes)
that holds a glossary word must be one of those names or below one; anything else reuses the word
for another meaning (``eval.protocol`` after the rename, a ``backend`` that is not a rollout
backend). The renamed flags still work, with one deprecation line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import typer.main

from helpers import run_rlver
from rlver.cli import app
from rlver.cli.config_reference import render
from rlver.manifest import RunManifest
from rlver.simulator.llm.protocols.base import PROTOCOLS

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def glossary(text: str) -> dict[str, set[str]]:
    """``word → the names that use it``, read from the page's Glossary table; a word whose names
    start with "any" may be used by every name (it has one meaning wherever it appears)."""
    section = text.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z]+)` \| [^|]+ \| ([^|]+) \|$", section, re.M)
    return {word: set(re.findall(r"`([^`]+)`", names)) for word, names in rows if not names.startswith("any")}


def words_in(name: str) -> set[str]:
    """The words of a key, flag or field (``--sim-prompts`` → sim, prompts)."""
    return {part for part in re.split(r"[._\-]+", name.lower()) if part}


def reuses(names: Iterable[str], words: Mapping[str, set[str]]) -> list[str]:
    """Each name holding a glossary word (or its plural) that is neither a listed name nor below one."""
    found = []
    for name in sorted(set(names)):
        for word, allowed in words.items():
            if {word, word + "s"} & words_in(name) and not any(
                name == ok or name.startswith(ok + ".") for ok in allowed
            ):
                found.append(f"{name} uses {word!r} (glossary: {', '.join(sorted(allowed)) or 'no name'})")
    return found


def config_keys() -> list[str]:
    """Every field path of a training and an evaluation config, as docs/config.md prints them."""
    return re.findall(r"^\| `([^`]+)` \|", render(), re.M)


def flags() -> list[str]:
    """Every visible option of every ``rlver`` command (the hidden ones are the renamed flags)."""
    out: list[str] = []

    def walk(command: Any) -> None:
        for sub in (getattr(command, "commands", None) or {}).values():
            walk(sub)
        out.extend(o for p in command.params if not p.hidden for o in (*p.opts, *p.secondary_opts))

    walk(typer.main.get_command(app))
    return [f for f in out if f.startswith("--")]


def key_paths(record: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in record.items():
        yield prefix + key
        if isinstance(value, Mapping):
            yield from key_paths(value, f"{prefix}{key}.")


WORDS = glossary(ARCHITECTURE.read_text(encoding="utf-8"))


def test_the_glossary_names_each_word_once() -> None:
    assert {"backend", "engine", "trainer", "prompts", "protocol"} <= set(WORDS)
    assert WORDS["protocol"] == set()  # typing.Protocol and the published setup only


def test_no_config_key_or_flag_reuses_a_glossary_word() -> None:
    keys, options = config_keys(), flags()
    assert "eval.dialogue" in keys and "simulator.prompts.show_traits" in keys and "--dialogue" in options
    assert reuses(keys, WORDS) == []
    assert reuses(options, WORDS) == []


def test_the_check_sees_a_reuse() -> None:
    """A planted reuse is named: the old key, a backend that is a model's class, an engine flag."""
    planted = [
        "eval.protocol",
        "agent.backend",
        "--engine",
        "simulator.prompts.name",
        "rollout.backend_settings.x",
    ]
    assert reuses(planted, WORDS) == [
        "--engine uses 'engine' (glossary: agent.sampler.engine, verl.rollout_engine)",
        "agent.backend uses 'backend' (glossary: agent.rollout_backend, rollout.backend, rollout.backend_settings)",
        "eval.protocol uses 'protocol' (glossary: no name)",
    ]


def test_a_manifest_reuses_no_word_and_an_old_flag_says_its_new_name_once(tmp_path: Path) -> None:
    """An offline eval run with the old ``--protocol`` flag: it runs, says the new name in one line,
    and the manifest it writes (every key path) holds no word of the glossary in another meaning."""
    proc = run_rlver(
        "eval", "--agent-tiny", "--simulator", "offline", "--profiles", "en-test", "--limit", "1",
        "--agent-max-tokens", "8", "--set", "env.rules.max_assistant_turns=2",
        "--protocol", "benchmark", "--out", "run", "--no-report", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "deprecated" in line]
    assert said == [said[0]] and "--protocol is deprecated: write it as --dialogue" in said[0], proc.stderr
    transcript = next((tmp_path / "run").rglob("transcript.jsonl"))
    manifest = json.loads(transcript.read_text(encoding="utf-8").splitlines()[0])
    assert manifest["dialogue"].startswith("benchmark") and "class" in manifest["agent"]
    assert reuses([*key_paths(manifest), *RunManifest.model_fields], WORDS) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [({"protocol": "training"}, "training"), ({"dialogue": "training"}, "training")],
)
def test_an_old_eval_key_reads_as_the_new_one(old: dict[str, str], new: str, recwarn: Any) -> None:
    from rlver.eval.config import EvalConfig

    cfg = EvalConfig.model_validate({"agent_tiny": True, **old})
    assert cfg.dialogue == new and cfg.env.rules.start_emotion == 30
    moved = [str(w.message) for w in recwarn if issubclass(w.category, FutureWarning)]
    assert moved == (["protocol is deprecated: write it as dialogue"] if "protocol" in old else [])


def test_the_old_engine_flag_is_the_trainer_flag(tmp_path: Path) -> None:
    """``rlver train --engine X`` reads as ``--trainer X``: one deprecation line, then the refusal of
    a wrong value names the flag of today."""
    proc = run_rlver("train", "--engine", "bogus", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and "--engine is deprecated: write it as --trainer" in lines[0], lines
    assert lines[1] == "error: --trainer 'bogus': choose local or verl"


def test_the_old_sim_protocol_flag_is_the_sim_prompts_flag(tmp_path: Path) -> None:
    """``rlver eval --sim-protocol X`` reads as ``--sim-prompts X``: one deprecation line, and a wrong
    name is refused under the flag of today with the prompt sets' names."""
    proc = run_rlver("eval", "--agent-tiny", "--sim-protocol", "nope", "--out", "run", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "warning: --sim-protocol is deprecated: write it as --sim-prompts",
        f"error: --sim-prompts: unknown prompt set 'nope'; known: {', '.join(PROTOCOLS)}",
    ]
