"""`rlver explain` (issues 36, 41): which settings of a run differ from the published protocol, each with
its docs/protocol.md row; a released SAGE result file is the published protocol itself.

Runs are real: one tiny offline evaluation through the CLI, and manifests written by rlver's own code
(``eval_manifest`` / ``RunManifest.create`` with a real simulator's ``describe()``). The published-text
protocol (``sage-published``) is another module's; its description is written here by hand, with the
keys that protocol records (``published_files``, the agent's ``system_prompt_file``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import SHARED_DATA, run_rlver
from rlver.env.dialogue import EnvConfig
from rlver.errors import RlverError
from rlver.eval.explain import ROWS, Difference, Explanation, explain, explain_manifest, judge_name
from rlver.eval.runner import agent_prompt_record
from rlver.llm.base import SamplingParams
from rlver.manifest import RunManifest
from rlver.simulator.factory import SimulatorSpec, build_simulator

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_MD = ROOT / "docs" / "protocol.md"
RELEASED = ROOT.parent / "shared" / "data" / "sage_released"


def _but_the_cap(found: Explanation | list[Difference]) -> list[Difference]:
    """The differences other than the agent's reply cap, which every benchmark run has: rlver sends
    one (8,192 tokens unless set), SAGE sends none."""
    differences = found.differences if isinstance(found, Explanation) else found
    return [d for d in differences if d.row != "agent-max-tokens"]


def _write_run(folder: Path, manifest: RunManifest) -> Path:
    folder.mkdir(parents=True)
    (folder / "transcript.jsonl").write_text(json.dumps(manifest.to_json()) + "\n", encoding="utf-8")
    return folder


#: What the ``sage-published`` protocol adds to the simulator's ``describe()`` (file name -> sha256).
PUBLISHED_FILES = {"sage/simulator_response.py": "027a3e" + "0" * 58, "sage/test_npc.py": "5b1c44" + "1" * 58}


#: What ``rlver-published`` adds (the training simulator's file).
TRAINING_FILES = {"rlver/hard_player_simulator_dsv3.py": "978a4e" + "2" * 58}


def _llm_user(
    model: str = "deepseek-chat", published: bool = True, protocol: str = "sage-published"
) -> dict[str, object]:
    """A real LLM user's description; ``published``: as the published-text protocol describes itself."""
    described = build_simulator(
        SimulatorSpec.model_validate(
            {
                "kind": "llm",
                "model": {"model": model, "base_url": "https://api.deepseek.com/v1"},
                "cache": None,
                "prompts": "sage",
            }
        )
    ).describe()
    if published:
        files = PUBLISHED_FILES if protocol == "sage-published" else TRAINING_FILES
        described.update(prompts=protocol, published_files=files, prompt_role="user")
        if protocol == "sage-published":
            described["shown_reply"] = "whole"
    return described


#: What ``env.agent_prompt: sage-published`` records (the fetched file, by its pinned sha256).
PUBLISHED_AGENT_PROMPT = {
    "name": "sage-published",
    "system_prompt_file": {"file": "sage/npc_response.py", "sha256": "a2345b" + "3" * 58},
}


def _as_published(**changes: object) -> RunManifest:
    """A benchmark run's manifest with every setting as published (a DeepSeek-V3 judge, SAGE's own
    prompts, SAGE's agent prompt, no temperature sent, the 100 SAGE profiles)."""
    env = EnvConfig.evaluation(agent_prompt="sage-published")
    settings: dict[str, object] = {
        "kind": "eval",
        "env": env,
        "agent_prompt": PUBLISHED_AGENT_PROMPT,
        "agent_sampling": SamplingParams(model_default=True, max_tokens=8192).model_dump(mode="json"),
        "simulator": _llm_user(),
        "profiles": "sage",
        "n_profiles": 100,
        "n_per_profile": 1,
    }
    return RunManifest.create(**{**settings, **changes})


def test_every_row_explain_names_is_an_anchor_in_protocol_md() -> None:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    missing = [row for row in ROWS if f'<a id="{row}"></a>' not in text]
    assert not missing, missing


def test_tiny_run_from_30_names_the_start_emotion_with_its_row(tmp_path: Path) -> None:
    done = run_rlver(
        "eval", "--agent-tiny", "--simulator", "offline", "--profiles", "en-test", "--limit", "1",
        "--agent-max-tokens", "8", "--set", "env.rules.start_emotion=30",
        "--set", "env.rules.max_assistant_turns=2", "--no-report", "--out", "R", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = run_rlver("explain", "R", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "differ from the published benchmark protocol" in lines[0]
    start = next(line for line in lines if line.strip().startswith("start emotion:"))
    assert "30 (published: 40)" in start and "docs/protocol.md row start-emotion" in start
    assert any(line.strip().startswith("turn limit: 2 replies") for line in lines)
    assert any(line.strip().startswith("simulator: the offline user") for line in lines)
    # the agreement of the offline user that ran, read from its artefact (not the old lexicon's -0.026)
    learned = build_simulator(SimulatorSpec.model_validate({"kind": "offline"})).describe()["learned"]
    spearman = learned["validation"]["leave_model_out"]["overall"]["spearman"]
    assert any(f"per-turn Spearman {spearman}," in line for line in lines), out.stdout
    assert "-0.026" not in out.stdout
    assert not any(line.strip().startswith("think context") for line in lines)  # no think: nothing to say


def test_a_run_as_published_has_no_difference_and_each_change_is_named(tmp_path: Path) -> None:
    same = explain(_write_run(tmp_path / "same", _as_published()))
    assert _but_the_cap(same) == [], same.text()
    (cap,) = same.differences  # rlver sends a reply cap (8,192 unless set); SAGE's call_npc sends none
    assert (cap.setting, cap.run, cap.row) == ("agent reply cap", "8,192 tokens sent", "agent-max-tokens")
    assert "1 setting differs from the published benchmark protocol" in same.text()
    assert [d.setting for d in same.unknown] == ["simulator sampling"]  # SAGE did not record it
    assert "prompt files: sage/simulator_response.py sha256 027a3e" in same.text()
    coached = EnvConfig.evaluation(think=True, think_context="full", agent_prompt="coaching")
    changed = _as_published(
        env=coached,
        agent_prompt=agent_prompt_record(coached),
        agent_sampling=SamplingParams(temperature=0.7, max_tokens=512).model_dump(mode="json"),
        profiles="en-test",
    )
    rows = {d.row: d for d in explain(_write_run(tmp_path / "changed", changed)).differences}
    assert set(rows) == {"think-context", "agent-prompt", "agent-sampling", "agent-max-tokens", "profiles"}
    assert rows["agent-prompt"].run == "coaching + rlver's think instruction (--think)"
    assert rows["think-context"].published == "visible text only"


def test_sage_options_and_an_old_quote_cut_are_named(tmp_path: Path) -> None:
    described = {**_llm_user(published=False), "shared_rules": True, "goodbye_required": True}
    described.pop("max_quoted_chars")  # written before issue 36: quoted text was cut at 4,000
    found = explain(_write_run(tmp_path / "r", _as_published(simulator=described))).differences
    texts = {d.setting: d.run for d in found}
    assert texts["simulator options"] == "shared_rules, goodbye_required on"
    assert texts["agent reply shown to the simulator"] == "cut at 4000 characters"


def test_a_training_folder_is_compared_with_the_published_training_run(tmp_path: Path) -> None:
    env = EnvConfig.published_training(think=True, agent_prompt="rlver-published")
    base = {
        "kind": "train",
        "env": env,
        "agent_prompt": {
            "name": "rlver-published",
            "system_prompt_file": {"file": "rlver/system_prompt.py", "sha256": "f" * 64},
        },
        "agent_sampling": {"temperature": 1.0, "top_p": 1.0, "max_tokens": 5000},
        "simulator": _llm_user(protocol="rlver-published"),  # the published training simulator's text
        "profiles": "rlver-train",
    }
    same = explain(_write_run(tmp_path / "same", RunManifest.create(**base)))
    assert same.differences == [] and "published training run" in same.text()
    start_40 = RunManifest.create(**{**base, "env": env.model_copy(
        update={"rules": env.rules.but(start_emotion=40)})})  # fmt: skip
    (difference,) = explain(_write_run(tmp_path / "r", start_40)).differences
    assert (difference.run, difference.published, difference.row) == ("40", "30", "start-emotion")


def test_a_transcript_without_a_manifest_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text("", encoding="utf-8")
    folder = tmp_path / "run"
    folder.mkdir()
    episode_only = {"type": "episode", "profile_id": "p", "episode_id": "p#0", "messages": []}
    (folder / "transcript.jsonl").write_text(json.dumps(episode_only) + "\n", encoding="utf-8")
    for target in ("run", "missing-folder"):
        out = run_rlver("explain", target, cwd=tmp_path)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), out.stderr


def _published_record() -> dict[str, object]:
    return {
        "id": "p1", "emo_point": 45, "emo_state": "Emotion-B", "player": "a cook", "scene": "work",
        "history": [
            {"role": "user", "content": "hi", "emotion-point": 40},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "ok", "emotion-point": 45,
             "planning": {"content": "c", "TargetCompletion": "t", "activity": "a", "analyse": "f", "change": 5}},
            {"role": "assistant", "content": "bye"},
        ],
    }  # fmt: skip


def test_a_released_result_file_reads_as_the_published_protocol(tmp_path: Path) -> None:
    folder = tmp_path / "gpt-4o-simulator"
    folder.mkdir()
    file = folder / "some-model_result.jsonl"
    file.write_text(json.dumps(_published_record(), ensure_ascii=False) + "\n", encoding="utf-8")
    out = run_rlver("explain", str(file), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "published protocol, simulator gpt-4o" in out.stdout and "agent some-model" in out.stdout


@pytest.mark.skipif(not RELEASED.is_dir(), reason="the released SAGE files are not in ../shared/data")
def test_the_real_released_files_read_as_the_published_protocol() -> None:
    for file in sorted(RELEASED.glob("*/*_result.jsonl"))[:2]:
        simulator = file.parent.name.removesuffix("-simulator")
        assert f"published protocol, simulator {simulator}" in explain(file).text()


def test_sage_based_simulator_folders_name_the_simulator(tmp_path: Path) -> None:
    """SAGE's own folder names (``deepseek-v3_based_simulator/``) name the simulator as rlver's copy does."""
    folder = tmp_path / "deepseek-v3_based_simulator"
    folder.mkdir()
    file = folder / "gpt-4.1_result.jsonl"
    file.write_text(json.dumps(_published_record(), ensure_ascii=False) + "\n", encoding="utf-8")
    text = explain(file).text()
    assert "published protocol, simulator deepseek-v3;" in text and "not named" not in text


@pytest.mark.parametrize(
    ("model", "judge"),
    [
        ("deepseek-chat", "deepseek-v3"),
        ("DeepSeek-V3", "deepseek-v3"),
        ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
        ("gpt-4o", None),  # undated: today's snapshot, not the released files' judge
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini", None),
        ("gpt-4o-mini-2024-07-18", None),
        ("deepseek-v3.1", None),
        ("my-gpt-4o", None),
    ],
)
def test_judges_are_matched_by_whole_name(model: str, judge: str | None) -> None:
    assert judge_name(model) == judge


def test_gpt_4o_mini_is_another_judge(tmp_path: Path) -> None:
    mini = explain(_write_run(tmp_path / "mini", _as_published(simulator=_llm_user("gpt-4o-mini"))))
    (line,) = [d for d in mini.differences if d.row == "simulator"]
    assert line.run == "LLM gpt-4o-mini"
    dated = explain(_write_run(tmp_path / "dated", _as_published(simulator=_llm_user("gpt-4o-2024-08-06"))))
    assert _but_the_cap(dated) == [], dated.text()


SAGE_FILE = RELEASED.parent / "sage_test_profiles.jsonl"


@pytest.mark.skipif(not SAGE_FILE.is_file(), reason="the SAGE profiles are not in ../shared/data")
def test_the_published_profile_file_by_path_is_the_published_set(tmp_path: Path) -> None:
    from rlver.eval.explain import PUBLISHED_PROFILE_IDS
    from rlver.profiles.loaders import load_profiles
    from rlver.profiles.sets import profile_ids_sha256

    ids = profile_ids_sha256(load_profiles(SAGE_FILE))
    assert ids == PUBLISHED_PROFILE_IDS["sage-test"]  # the pinned value is the file's
    train = RELEASED.parent / "rlver_train_profiles.jsonl"
    if train.is_file():
        assert profile_ids_sha256(load_profiles(train)) == PUBLISHED_PROFILE_IDS["rlver-train"]
    by_ids = _as_published(profiles=str(tmp_path / "gone" / "profiles.jsonl"), profile_ids_sha256=ids)
    assert _but_the_cap(explain(_write_run(tmp_path / "ids", by_ids))) == []
    # an older manifest without the ids: the file named is read, and its content decides
    copy = tmp_path / "my_copy.jsonl"
    copy.write_bytes(SAGE_FILE.read_bytes())
    assert _but_the_cap(explain(_write_run(tmp_path / "file", _as_published(profiles=str(copy))))) == []
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"".join(SAGE_FILE.read_bytes().splitlines(keepends=True)[1:]))  # 99 of them
    found = _but_the_cap(explain(_write_run(tmp_path / "other", _as_published(profiles=str(other)))))
    assert [d.row for d in found] == ["profiles"]
    renamed = _as_published(profiles="sage", profile_ids_sha256="0" * 64)  # the name, other content
    (line,) = _but_the_cap(explain(_write_run(tmp_path / "renamed", renamed)))
    assert line.row == "profiles" and "profile ids sha256 000000000000" in line.run


def test_prompt_files_and_the_protocols_source_are_named() -> None:
    """A hand-made manifest: the published-text protocol's files and the agent's prompt file are printed
    one line each; rlver's own ``sage`` is named as a paraphrase with its pre-filled end flag."""
    env = EnvConfig.evaluation()
    record = {
        "name": "sage-published",
        "system_prompt_file": {"file": "sage/npc_response.py", "sha256": "9f" * 32},
    }
    published = _as_published(agent_prompt=record).to_json()
    text = explain_manifest(published, "hand-made").text()
    assert "1 setting differs from the published benchmark protocol" in text, text  # the reply cap
    lines = [line.strip() for line in text.splitlines()]
    assert (
        "simulator prompt files: sage/simulator_response.py sha256 027a3e000000…, "
        "sage/test_npc.py sha256 5b1c44111111…"
    ) in lines
    assert "agent prompt file: sage/npc_response.py sha256 9f9f9f9f9f9f…" in lines
    own = _as_published(simulator=_llm_user(published=False), agent_prompt=agent_prompt_record(env))
    found = {d.setting: d for d in _but_the_cap(explain_manifest(own.to_json()))}
    assert set(found) == {"simulator prompts", "simulator answer format", "agent prompt"}
    assert (found.pop("agent prompt").run, "neutral") == ("neutral", "neutral")  # rlver's words for SAGE's
    assert "rlver's paraphrase" in found["simulator prompts"].run
    assert "sage-published" in found["simulator prompts"].published
    assert '"end_dialogue": false' in found["simulator answer format"].run
    assert {d.row for d in found.values()} == {"simulator-options"}
    assert "prompt files" not in explain_manifest(own.to_json()).text()


def test_without_think_a_reply_whose_think_block_the_simulator_never_saw_is_named(tmp_path: Path) -> None:
    from rlver.records import Episode, Message

    def episode(reply: str) -> dict[str, object]:
        messages = [Message(role="user", content="hi"), Message(role="assistant", content=reply)]
        return Episode(profile_id="p", episode_id="p#0", messages=messages).model_dump(mode="json")

    def run(folder: str, reply: str, think: bool, published: bool = False) -> Path:
        env = EnvConfig.evaluation(think=think)
        simulator = _llm_user(published=published)  # rlver's sage shows the text after </think>
        manifest = _as_published(
            env=env, agent_prompt=agent_prompt_record(env), simulator=simulator
        ).to_json()
        path = tmp_path / folder
        path.mkdir()
        lines = [json.dumps(manifest), json.dumps({"type": "episode", **episode(reply)})]
        (path / "transcript.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def rows(path: Path) -> list[Difference]:
        return [d for d in explain(path).differences if d.row in ("think-context", "agent-prompt")]

    (_, hidden) = rows(run("hidden", "<think>plan</think>Sounds hard.", think=False))
    assert hidden.row == "think-context" and hidden.run.startswith("1 of 1 replies held </think>")
    assert [d.row for d in rows(run("plain", "Sounds hard.", think=False))] == ["agent-prompt"]  # neutral
    thinking = rows(run("think", "<think>plan</think>Sounds hard.", think=True))
    assert [d.row for d in thinking] == ["agent-prompt"]  # the think instruction, not the hidden text
    # sage-published shows the simulator the whole reply, as SAGE does: nothing was hidden
    assert not [
        d
        for d in rows(run("whole", "<think>plan</think>Hm.", think=False, published=True))
        if d.row == "think-context"
    ]


# ------------------------------------------------------------------ every setting is named or listed
#: Values for fields whose type alone does not give a valid non-default one.
WALK_VALUES: dict[str, list[object]] = {
    "simulator.kind": ["offline"],
    "simulator.prompts.name": ["rlver-v1"],
    "simulator.behaviour": ["escalating"],
    "simulator.model.model": ["gpt-4o-mini"],
    "profiles": ["en-test"],
    "env.system_prompt": ["You are a helpful assistant."],
    # above its default guard the bound is the published loop still; below it, a difference
    "simulator.prompts.parse_attempts": [2],
}


def _companions(
    path: str, table: dict[str, dict[str, object]], candidate: object = None
) -> dict[str, object]:
    """What must change with ``path``: its entry in ``table``; for the model's own sampling block,
    ``simulator.sampling`` unset (a read spec states its sampling in full there, and that wins).
    ``model_default`` turned off (a published prompt set's default is on) needs no companion."""
    if path.endswith("sampling.model_default") and candidate is False:
        return {"simulator.sampling": None} if path.startswith("simulator.model.") else {}
    if path.startswith("simulator.model.sampling."):
        return {"simulator.sampling": None, **table.get(path, {})}
    return table.get(path, {})


#: Fields that can only change together with another (``model_default`` sends no temperature).
WALK_WITH: dict[str, dict[str, object]] = {
    "agent.sampling.temperature": {"agent.sampling.model_default": False},
    "agent.sampling.top_p": {"agent.sampling.model_default": False},
    # a published prompt set sends no sampling field by default: a temperature set is then sent
    "simulator.sampling.temperature": {"simulator.sampling.model_default": False},
    "simulator.sampling.top_p": {"simulator.sampling.model_default": False},
    # model_default sends no temperature or top_p: a block of that alone
    "simulator.sampling.model_default": {"simulator.sampling": {"model_default": True}},
}
#: The seven settings issue 41 found explain silent on, and the row that names each.
SEVEN = {
    "simulator.max_change": "change-bound",
    "simulator.behaviour": "user-behaviour",
    "simulator.difficulty": "user-behaviour",
    "simulator.prompt_language": "language",
    "env.language": "language",
    "env.max_reply_chars": "reply-chars",  # no-effect under a published-text protocol (quoted uncut)
    "env.think": "agent-prompt",
}


def _walk_base(simulator: dict[str, object]) -> dict[str, object]:
    """An ``rlver eval`` config as published but for ``--think`` (so the think settings act): an
    OpenAI-compatible agent with the model's own sampling, the benchmark dialogue, SAGE's profiles."""
    agent = {"kind": "openai", "model": "agent-under-test", "base_url": "http://127.0.0.1:9/v1"}
    return {
        "agent": {**agent, "sampling": {"model_default": True}},
        "simulator": simulator,
        "env": {"think": True},
    }


def _leaves(model: object, prefix: str = "") -> list[tuple[str, object, object]]:
    """Every settable field below ``model``: (dotted path, annotation, value), sub-models walked."""
    from pydantic import BaseModel

    out: list[tuple[str, object, object]] = []
    for name, info in type(model).model_fields.items():  # type: ignore[attr-defined]
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out += _leaves(value, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", info.annotation, value))
    return out


def _candidates(path: str, annotation: object, value: object) -> list[object]:
    """Values other than ``value`` that a field of ``annotation`` may take, most plausible first."""
    import types
    import typing

    from pydantic import BaseModel

    if path in WALK_VALUES:
        return WALK_VALUES[path]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:  # a bounded type (rlver.seeding.Seed): its base type
        return _candidates(path, args[0], value)
    if origin in (typing.Union, types.UnionType):
        return [c for arg in args if arg is not type(None) for c in _candidates(path, arg, value)]
    if origin is typing.Literal:
        return [a for a in args if a != value]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [{}]  # a block left unset: its defaults, stated
    if annotation is bool:
        return [not value]
    if annotation is int:
        return [value + 1, value - 1] if isinstance(value, int) else [1, 2]
    if annotation is float:
        return [value + 0.25, value / 2] if isinstance(value, float) else [0.5]
    if annotation is str:
        return [f"{value}-other" if value else "other"]
    if origin is list:
        return [["\n\n"]]
    if origin is dict:
        return [{"top_k": 5}]
    return []


def _model_default(path: str, config: object) -> list[object]:
    """The model block's ``model_default`` walked away from the simulator's effective one (on under a
    published prompt set, which sends no sampling field; off elsewhere): its own default may be the
    effective value, which is no change."""
    sampling = getattr(getattr(config, "simulator", None), "sampling", None)
    if path != "simulator.model.sampling.model_default" or sampling is None:
        return []
    return [not sampling.model_default]


def _set(block: dict[str, object], path: str, value: object) -> None:
    *parents, last = path.split(".")
    for key in parents:
        block = block.setdefault(key, {})  # type: ignore[assignment]
    block[last] = value


def _explained(config: object) -> list[str]:
    """``rlver explain``'s lines (not its head) for a manifest written as ``rlver eval`` writes it."""
    from rlver.eval.config import EvalConfig
    from rlver.eval.explain import PUBLISHED_PROFILE_IDS
    from rlver.eval.runner import agent_spec, build_agent, eval_manifest
    from rlver.profiles.sets import load_profile_set, profile_ids_sha256

    assert isinstance(config, EvalConfig)
    if config.profiles == "sage":  # the published set by its ids (the file itself may not be here)
        ids, count = PUBLISHED_PROFILE_IDS["sage-test"], 100
    else:
        profiles = load_profile_set(config.profiles)
        ids, count = profile_ids_sha256(profiles), len(profiles)
    spec = agent_spec(config)
    simulator = build_simulator(config.simulator)
    n = min(count, config.limit or count)
    manifest = eval_manifest(config, spec, build_agent(spec), simulator, n, ids)
    return explain_manifest(manifest.to_json()).text().splitlines()[1:]


def _walk(base: dict[str, object], kind: str, only: str = "") -> tuple[dict[str, list[str]], list[str]]:
    """Each field (under ``only``) set to a non-default value: the lines ``explain`` added, changed or
    dropped, and the fields with no valid non-default value (a new field needs a WALK_VALUES entry)."""
    from pydantic import ValidationError

    from rlver.eval.config import EvalConfig

    start = EvalConfig.model_validate(base)
    before = _explained(start)
    dumped = start.model_dump(mode="json", exclude_unset=True)
    assert _explained(EvalConfig.model_validate(dumped)) == before  # the walk starts where it says
    changed: dict[str, list[str]] = {}
    stuck = []
    for path, annotation, value in _leaves(start):
        if not path.startswith(only) or (only and path == "simulator.kind"):
            continue  # the kind itself is walked from the LLM user's run
        if _listed(path, kind):  # does not move a score: nothing to build
            changed[path] = []
            continue
        for candidate in _model_default(path, start) or _candidates(path, annotation, value):
            block = json.loads(json.dumps(dumped))
            for other, companion in {path: candidate, **_companions(path, WALK_WITH, candidate)}.items():
                _set(block, other, companion)
            try:
                config = EvalConfig.model_validate(block)
                after = _explained(config)
            except (ValidationError, RlverError):  # a published file not fetched here, SAGE's Chinese only
                continue
            changed[path] = [x for x in after if x not in before] + [x for x in before if x not in after]
            break
        else:
            stuck.append(path)
    return changed, stuck


def _listed(path: str, kind: str) -> bool:
    from rlver.eval.explain import NOT_SCORED

    qualified = path.replace("simulator.", f"simulator({kind}).", 1)
    return path in NOT_SCORED or qualified in NOT_SCORED


def test_every_non_default_setting_is_named_or_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every field of an ``rlver eval`` run's settings, set to a value other than its default, either
    changes what ``explain`` says or is in ``NOT_SCORED`` (with its reason). A field added later with
    neither fails here. The LLM user's run walks every field; the offline user's, its simulator's."""
    import rlver.simulator.offline.user as offline_user
    from rlver.eval.explain import NOT_SCORED

    class Embedder:  # stands in for the MiniLM extra (never called: only the description is read)
        name = "test-embedder"

        def __call__(self, texts: list[str]) -> list[list[float]]:
            raise AssertionError("not called while a manifest is written")

    monkeypatch.setattr(offline_user, "load_minilm_embedder", Embedder)
    monkeypatch.setenv("RLVER_CACHE_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # a path-valued setting (a cache file) lands here, not in the checkout
    judge: dict[str, object] = {
        "kind": "llm",
        "model": {"model": "deepseek-chat", "base_url": "http://127.0.0.1:9/v1"},
        "cache": None,
    }
    llm_base = _walk_base(judge)
    if (SHARED_DATA / "published_code" / "sage").is_dir():  # the default: SAGE's fetched text
        monkeypatch.setenv("RLVER_SHARED_DATA", str(SHARED_DATA))
    else:  # a fresh clone: rlver's own protocol and prompt, each field walked the same way
        judge["prompts"] = "sage"
        llm_base["env"] = {"think": True, "agent_prompt": "neutral"}
    walked: set[str] = set()
    silent, stuck_all = [], []
    for kind, base, only in (
        ("llm", llm_base, ""),
        ("offline", _walk_base({"kind": "offline"}), "simulator."),
    ):
        changed, stuck = _walk(base, kind, only)
        stuck_all += [f"{kind}: {path}" for path in stuck]
        walked |= {p.replace("simulator.", f"simulator({kind}).", 1) for p in changed} | set(changed)
        silent += [f"{kind}: {p}" for p, lines in changed.items() if not lines and not _listed(p, kind)]
        if kind == "llm":
            for path, row in SEVEN.items():
                rows = (row, "no-effect")  # a setting the run's simulator never reads is named as such
                assert any(f"docs/protocol.md row {r}" in line for line in changed[path] for r in rows), (
                    path,
                    changed[path],
                )
    assert not stuck_all, f"no valid non-default value (add one to WALK_VALUES): {stuck_all}"
    assert not silent, f"explain is silent on these settings and NOT_SCORED does not list them: {silent}"
    stale = sorted(set(NOT_SCORED) - walked)
    assert not stale, f"NOT_SCORED lists settings a run does not have: {stale}"


# ------------------------------------------------------------- every training setting is named or listed
#: Values for training fields whose type alone does not give a valid non-default one.
TRAIN_WALK_VALUES: dict[str, list[object]] = {
    **WALK_VALUES,
    "rollout.profiles": ["en-train"],
    "rollout.agent_prompt": ["coaching"],
    "eval.profiles": ["en-train"],
    "eval.rules": [{"max_assistant_turns": 4}],
    "model.path": ["tiny"],
    "algorithm.name": ["ppo"],
    "optim.betas": [[0.9, 0.99]],
    "rollout.reward.mode": ["delta"],
}
TRAIN_WALK_WITH: dict[str, dict[str, object]] = {
    **WALK_WITH,
    "simulator.kind": {"simulator": {"kind": "offline"}},
    # model_default sends no temperature or top_p: a block of that alone
    "simulator.model.sampling.model_default": {"simulator.model.sampling": {"model_default": True}},
    "optim.warmup_steps": {"optim.actor_warmup_ratio": 0.0, "optim.critic_warmup_ratio": 0.0},
}


def _train_listed(path: str) -> bool:
    """Listed as not changing what is trained: the training comparison's own list, or a setting of
    how the simulator is reached (the eval walk's list)."""
    from rlver.eval.explain import NOT_SCORED
    from rlver.train.published_run import NOT_SCORED as TRAIN_NOT_SCORED
    from rlver.train.published_run import listed

    return listed(path, TRAIN_NOT_SCORED) is not None or (
        path.startswith("simulator.") and path in NOT_SCORED
    )


def _train_explained(config: object, out: Path) -> list[str]:
    """``rlver explain``'s lines, its head included, for a manifest written as ``rlver train`` writes it."""
    from rlver.llm.base import SamplingParams
    from rlver.train.config import TrainConfig
    from rlver.train.transcript_writer import training_manifest

    assert isinstance(config, TrainConfig)
    simulator = build_simulator(config.simulator)
    r = config.rollout
    sampling = SamplingParams(temperature=r.temperature, top_p=r.top_p, max_tokens=r.max_new_tokens)
    manifest = training_manifest(
        config, out, agent={"name": config.model.path}, sampling=sampling.model_dump(mode="json"),
        simulator=simulator.describe(), reply_cut=simulator.cuts_reply,
    )  # fmt: skip
    return explain_manifest(manifest.to_json()).text().splitlines()


def test_every_non_default_training_setting_is_named_or_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every field of a training config, set to a value other than the published preset's, changes
    what ``explain`` says of the run (head included: the preset it is compared with) or is listed as
    not changing what is trained (``train/published_run.NOT_SCORED``, the simulator's serving)."""
    from pydantic import ValidationError

    from rlver.train.config import TrainConfig, load_train_config

    monkeypatch.setenv("RLVER_CACHE_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sets: list[str] = []
    if (SHARED_DATA / "published_code" / "rlver").is_dir():  # the preset as it is: the fetched text
        monkeypatch.setenv("RLVER_SHARED_DATA", str(SHARED_DATA))
    else:  # a fresh clone: rlver's own protocol and prompt, each field walked the same way
        sets = ["simulator.prompts=sage", "rollout.agent_prompt=published", "eval.profiles=en-test"]
    start = load_train_config("grpo-think", sets)
    before = _train_explained(start, tmp_path)
    dumped = start.model_dump(mode="json")
    assert (
        _train_explained(TrainConfig.model_validate(dumped), tmp_path) == before
    )  # config.yaml reloads the same
    silent, stuck = [], []
    for path, annotation, value in _leaves(start):
        if _train_listed(path):
            continue
        for candidate in (
            _model_default(path, start) or TRAIN_WALK_VALUES.get(path) or _candidates(path, annotation, value)
        ):
            block = json.loads(json.dumps(dumped))
            for other, companion in {
                path: candidate,
                **_companions(path, TRAIN_WALK_WITH, candidate),
            }.items():
                _set(block, other, companion)
            try:
                after = _train_explained(TrainConfig.model_validate(block), tmp_path)
            except (ValidationError, RlverError):
                continue
            if after == before:
                silent.append(path)
            break
        else:
            stuck.append(path)
    assert not stuck, f"no valid non-default value (add one to TRAIN_WALK_VALUES): {stuck}"
    assert not silent, f"explain is silent on these training settings and no list names them: {silent}"


def test_a_training_run_names_its_model_batch_steps_length_and_group_size_per_algorithm(
    tmp_path: Path,
) -> None:
    """The tiny preset against the published GRPO run: the model, batch size, steps and max_length
    are named, and its 4 dialogues per profile are GRPO's published n (PPO's is 1)."""
    from rlver.train.config import load_train_config

    tiny = load_train_config("tiny-offline")
    lines = _train_explained(tiny, tmp_path)
    text = "\n".join(lines)
    assert "preset grpo-nothink" in lines[0]
    for setting in ("model.path: tiny", "rollout.batch_size: 8", "run.steps: 30", "model.max_length: 2048"):
        assert f"  {setting} (published: " in text, (setting, text)
    assert "rollout.n_per_profile" not in text and "dialogues per profile" not in text  # 4 is GRPO's n
    ppo = "\n".join(_train_explained(load_train_config("tiny-offline", ["algorithm.name=ppo"]), tmp_path))
    assert "rollout.n_per_profile: 4 (published: 1, preset ppo-nothink)" in ppo
    assert "in-training evaluation: training protocol: 2 replies from 30 on en-test" in text
