"""Bad input never crashes (issue 8, item 3): fuzz the loaders, configs and CLI flags with hypothesis.

The property everywhere: an input either loads, or the loader raises an :class:`rlver.errors.RlverError`
(``InputError`` / ``ConfigError``) whose message names the file (and the line, for a bad row) or the
config key. Any other exception — ``ValueError``, ``RecursionError``, ``KeyError``, a pydantic
``ValidationError`` — is a bug: the CLI would show a traceback.

Inputs are a valid record *mutated* (a field dropped, given a random JSON value of the wrong type, made
huge; an unknown field added; nested fields too), serialised as JSONL/YAML/a JSON array and then maybe
damaged at the byte level (cut short, invalid UTF-8, a BOM) or joined by a nasty payload (absurdly deep
nesting, a 5000-digit integer, NaN). Examples are derandomised so CI is reproducible; for a longer
campaign run ``RLVER_FUZZ_EXAMPLES=2000 RLVER_FUZZ_RANDOM=1 pytest tests/test_fuzz_inputs.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlver.errors import ConfigError, InputError, RlverError

EXAMPLES = int(os.environ.get("RLVER_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=os.environ.get("RLVER_FUZZ_RANDOM") != "1",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CLI_FUZZ = settings(FUZZ, max_examples=max(10, EXAMPLES // 3))

# -- valid records to start from -------------------------------------------------------------------

NATIVE_PROFILE: dict[str, Any] = {
    "id": "fz-1",
    "language": "en",
    "persona": "A night-shift nurse, 34.",
    "background": "Her manager moved her shifts again without asking.",
    "goal": "Decide whether to complain.",
    "hidden_need": "To hear that her anger is fair.",
    "traits": ["tired", "direct"],
    "style": "negative",
    "topic": "work",
}
PUBLISHED_PROFILE: dict[str, Any] = {
    "id": "fz-zh-1",
    "player": "一名夜班护士，34岁。",
    "scene": "经理又一次没有商量就调了她的班。\n####隐藏主题:\n希望被倾听",
    "main_cha": "负面型",
    "cha_group": ["疲惫", "直接"],
    "task": "决定要不要投诉。",
    "first_talk": "我真的受够了。",
}
APPRAISAL = {
    "understanding": "u",
    "goal_fit": "g",
    "inner_reaction": "i",
    "feeling": "f",
    "raw_change": 5,
    "change": 5,
    "emotion_before": 40,
    "emotion_after": 45,
    "tier": "B",
}
EPISODE: dict[str, Any] = {
    "type": "episode",
    "profile_id": "fz-1",
    "sample_index": 0,
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "ok"},
    ],
    "user_turns": [{"text": "hi"}, {"text": "ok", "appraisal": APPRAISAL}],
    "start_emotion": 40,
    "final_emotion": 45,
    "emotions": [45],
    "status": "finished",
    "meta": {"topic": "work"},
}
MANIFEST: dict[str, Any] = {
    "type": "manifest",
    "rlver_version": "0.1.0",
    "env": {"start_emotion": 40, "max_assistant_turns": 10, "appraise_final_reply": False},
}
PUBLISHED_RESULT: dict[str, Any] = {
    "id": "fz-zh-1",
    "emo_point": 45,
    "emo_state": "Emotion-B",
    "player": "p",
    "scene": "s",
    "history": [
        {"role": "user", "content": "你好", "emotion-point": 40},
        {"role": "assistant", "content": "你好", "think": "t"},
        {
            "role": "user",
            "content": "嗯",
            "emotion-point": 45,
            "planning": {
                "content": "c",
                "TargetCompletion": "t",
                "activity": "a",
                "analyse": "x",
                "change": 5,
            },
        },
    ],
}

# -- strategies ------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["", " ", "zz", "xx-XX", "35", "+5", "1" + "0" * 400, "Emotion-B", "\x00", "é"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
HUGE = "x" * 100_000  # a "huge field": 100 kB of text in one value


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a JSON-like value (dict keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: Any, *, delete: bool = False) -> None:
    for part in path[:-1]:
        obj = obj[part]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> Any:
    """``base`` with 0-3 random edits: drop a field, give it a random value, make it huge (text or
    number), add one, or give it a wrong language code."""
    rec = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(rec)
        action = draw(st.sampled_from(["drop", "value", "huge", "number", "add", "language"]))
        if action == "add" or not paths:
            rec[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
            continue
        path = draw(st.sampled_from(paths))
        if action == "drop":
            _set(rec, path, None, delete=True)
        elif action == "value":
            _set(rec, path, draw(json_values))
        elif action == "huge":
            _set(rec, path, HUGE)
        elif action == "number":  # 30 digits broke the metrics' decimal rounding; 1e400 a float()
            _set(rec, path, draw(st.sampled_from([10**30, -(10**30), 1e300, "1" + "0" * 400, 2**63, -1])))
        else:  # a wrong language code where the profile has one
            rec["language"] = draw(st.sampled_from(["de", "EN", "", "zh-CN", None, 7, ["en"]]))
    return rec if draw(st.integers(0, 9)) else draw(json_values)  # now and then not even an object


NASTY_LINES = [
    b"[" * 1100 + b"]" * 1100,  # deeper than the JSON parser's recursion limit
    b'{"id": ' + b"7" * 5000 + b"}",  # longer than Python's int-parsing limit
    b'{"id": NaN, "final_emotion": Infinity}',
    b"\xff\xfe\x00garbage",  # not UTF-8
    b"\xef\xbb\xbf{}",  # a byte-order mark
    b"null",
    b"[]",
    b'"just a string"',
    b"{",
    b"- yaml: [list\n  : {",
]
#: (Deep nesting in YAML is tried once, in test_yaml_duplicate_and_merged_profiles_keys: PyYAML's
#: pure-Python scanner is quadratic in the depth, ~1 s for 1500 levels.)
NASTY_YAML = ["a: " + "7" * 5000, "\ufeff- {}", "- !!python/object:os.system {}",
              "a: &x [*x]", "- [a, b\n- c", "{? [a]: b}", "%YAML 9.9\n---\n- a"]  # fmt: skip


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """Byte-level damage: cut short, a byte flipped, invalid UTF-8 inserted, or left alone."""
    how = draw(st.sampled_from(["none", "none", "cut", "flip", "utf8"]))
    if how == "cut" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip" and data:
        i = draw(st.integers(0, len(data) - 1))
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1 :]
    if how == "utf8":
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"])) + data[i:]
    return data


def _jsonl(records: list[Any]) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)


@st.composite
def jsonl_files(draw: st.DrawFn, first: dict[str, Any] | None, base: dict[str, Any]) -> bytes:
    """A JSONL file: maybe a header record, 1-3 (mutated) records, maybe a nasty line, maybe damaged."""
    records: list[Any] = [first] if first is not None and draw(st.booleans()) else []
    records += draw(st.lists(st.one_of(st.just(base), mutated(base)), min_size=1, max_size=3))
    data = _jsonl(records)
    if draw(st.integers(0, 4)) == 0:
        nasty = draw(st.sampled_from(NASTY_LINES))
        at = draw(st.sampled_from(["start", "end"]))
        data = nasty + b"\n" + data if at == "start" else data + nasty + b"\n"
    return draw(damaged(data))


# -- the property ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _file(data: bytes, suffix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="rlver-fuzz-") as tmp:
        path = Path(tmp) / f"input{suffix}"
        path.write_bytes(data)
        yield path


def loads_or_names_the_file(load: Callable[[Path], Any], path: Path) -> Any:
    """Run ``load``; an RlverError must name ``path`` (and the line, for a row's problem)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a skipped torn last line is reported as a warning
        try:
            return load(path)
        except RlverError as exc:
            message = str(exc)
            assert str(path) in message, message[:500]
            assert "Traceback" not in message
            if isinstance(exc, InputError):
                assert exc.problems and all(p.path == str(path) for p in exc.problems)
                for p in exc.problems:
                    if p.line is not None:
                        assert f"{path}:{p.line}" in message
            return None


def _line_of(exc: InputError) -> set[int | None]:
    return {p.line for p in exc.problems}


# -- profile loaders -------------------------------------------------------------------------------


@FUZZ
@given(data=st.one_of(jsonl_files(None, NATIVE_PROFILE), jsonl_files(None, PUBLISHED_PROFILE)))
def test_profile_jsonl_loader_never_crashes(data: bytes) -> None:
    from rlver.profiles.loaders import load_profiles

    with _file(data, ".jsonl") as path:
        profiles = loads_or_names_the_file(load_profiles, path)
        if profiles is not None:
            assert profiles and all(p.id.strip() and p.language in ("en", "zh") for p in profiles)


@FUZZ
@given(
    records=st.lists(st.one_of(mutated(NATIVE_PROFILE), mutated(PUBLISHED_PROFILE)), min_size=1, max_size=3),
    wrap=st.booleans(),
    garbage=st.one_of(st.none(), st.text(max_size=60), st.sampled_from(NASTY_YAML)),
)
def test_profile_yaml_loader_never_crashes(records: list[Any], wrap: bool, garbage: str | None) -> None:
    from rlver.profiles.loaders import load_profiles

    if garbage is not None:
        text = garbage
    else:
        try:
            text = yaml.safe_dump({"profiles": records} if wrap else records, allow_unicode=True)
        except (yaml.YAMLError, ValueError):
            text = "profiles: [1, 2"
    with _file(text.encode("utf-8", "surrogatepass"), ".yaml") as path:
        loads_or_names_the_file(load_profiles, path)


@pytest.mark.parametrize(
    ("scene", "ok"),
    [
        ("背景\n####隐藏主题:\n倾听", True),
        ("背景\n**隐藏主题：**\n夸奖", True),
        ("背景\nHidden need: to be heard", True),
        ("背景，没有隐藏主题的标题", False),
        ("背景\n####隐藏主题:\n   ", False),
        ("", False),
        ("####隐藏主题:" * 10_000, False),
    ],
)
def test_published_rows_with_odd_scenes(tmp_path: Path, scene: str, ok: bool) -> None:
    from rlver.profiles.loaders import load_profiles

    path = tmp_path / "pub.jsonl"
    path.write_bytes(_jsonl([{**PUBLISHED_PROFILE, "scene": scene}]))
    if ok:
        assert load_profiles(path)[0].hidden_need.strip()
    else:
        with pytest.raises(InputError) as info:
            load_profiles(path)
        assert f"{path}:1: scene:" in str(info.value)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (
            b'{"id": "a", "persona": "p", "background": "b", "goal": "g", "hidden_need": "h", "language": "de"}',
            "language",
        ),
        (b'{"id": "a", "persona": "p", "background": "b", "goal": "g"}', "hidden_need"),
        (b'{"id": 5, "persona": "p", "background": "b", "goal": "g", "hidden_need": "h"}', "id"),
        (
            b'{"id": "a", "persona": "p", "background": "b", "goal": "g", "hidden_need": "h", "traits": "x"}',
            "traits",
        ),
        (
            b'{"id": "a", "persona": "p", "background": "b", "goal": "g", "hidden_need": "h", "mood": 1}',
            "mood",
        ),
        (b'{"id": "a", "persona": "\xff", "background": "b"}', None),
        (b'{"id": ' + b"1" * 5000 + b"}", None),
        (b"[" * 1500 + b"]" * 1500, None),
    ],
)
def test_bad_profile_rows_name_file_line_and_field(tmp_path: Path, line: bytes, field: str | None) -> None:
    from rlver.profiles.loaders import load_profiles

    path = tmp_path / "bad.jsonl"
    path.write_bytes(_jsonl([NATIVE_PROFILE]) + line + b"\n")  # the bad row is line 2
    with pytest.raises(InputError) as info:
        load_profiles(path)
    assert _line_of(info.value) == {2}
    expected = f"{path}:2: {field}:" if field else f"{path}:2:"
    assert expected in str(info.value)


def test_yaml_duplicate_and_merged_profiles_keys(tmp_path: Path) -> None:
    """Two ``profiles:`` keys or a ``<<`` merge used to crash (zip length / StopIteration)."""
    from rlver.profiles.loaders import load_profiles

    one = yaml.safe_dump([NATIVE_PROFILE])
    dup = tmp_path / "dup.yaml"
    dup.write_text("profiles: []\nprofiles:\n" + "".join("  " + ln + "\n" for ln in one.splitlines()))
    assert [p.id for p in load_profiles(dup)] == ["fz-1"]
    merged = tmp_path / "merged.yaml"
    merged.write_text("<<: {profiles: [{id: a, persona: p, background: b, goal: g}]}\n")
    with pytest.raises(InputError, match=r"merged\.yaml:1: hidden_need: missing"):
        load_profiles(merged)
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 1500 + "]" * 1500)
    with pytest.raises(InputError, match="nested too deeply"):
        load_profiles(deep)


# -- transcript readers ----------------------------------------------------------------------------


def _transcript_readers() -> list[Callable[[Path], Any]]:
    from rlver.eval.runs import load_run
    from rlver.transcripts.audit import audit_file
    from rlver.transcripts.native import read_transcript
    from rlver.transcripts.published import read_published

    return [read_transcript, read_published, load_run, audit_file]


@FUZZ
@given(
    data=st.one_of(jsonl_files(MANIFEST, EPISODE), jsonl_files(None, PUBLISHED_RESULT)),
    array=st.booleans(),
)
def test_transcript_readers_never_crash(data: bytes, array: bool) -> None:
    if array and data.count(b"\n") <= 4:  # the published format may also be one JSON array
        lines = [ln for ln in data.split(b"\n") if ln.strip()]
        data = b"[" + b",\n".join(lines) + b"]"
    with _file(data, ".jsonl") as path:
        for reader in _transcript_readers():
            loads_or_names_the_file(reader, path)


def test_corrupted_trailing_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    from rlver.eval.runs import load_run
    from rlver.transcripts.audit import audit_file
    from rlver.transcripts.native import read_transcript

    path = tmp_path / "transcript.jsonl"
    second = {**EPISODE, "profile_id": "fz-2"}
    full = _jsonl([MANIFEST, EPISODE, second])
    path.write_bytes(full[: len(full) - len(json.dumps(second)) // 2])  # the last line cut in half
    with pytest.warns(UserWarning, match=r"transcript\.jsonl:3: skipped incomplete trailing line"):
        assert [e.profile_id for e in read_transcript(path).episodes] == ["fz-1"]
    with pytest.warns(UserWarning, match="incomplete"):
        assert load_run(path).metrics.n == 1
    # an audit is a check: a line it could not read is an error, not a skipped line (issue 16.8)
    with pytest.raises(InputError, match=r"transcript\.jsonl:3: not valid JSON"):
        audit_file(path)
    # a bad line that is *not* the last one is an error naming the line
    path.write_bytes(_jsonl([MANIFEST]) + b'{"type": "episode", "profile_\n' + _jsonl([EPISODE]))
    with pytest.raises(InputError, match=r"transcript\.jsonl:2: not valid JSON"):
        read_transcript(path)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1" + "0" * 400, "expected an integer|out of range"),
        (10**30, "out of range"),
        ("", "expected an integer"),
    ],
)
def test_published_numbers_out_of_range_are_reported(tmp_path: Path, value: Any, message: str) -> None:
    """A 400-digit ``emo_point`` string overflowed float→int; a 30-digit one broke the metrics."""
    from rlver.eval.runs import load_run

    path = tmp_path / "x_result.jsonl"
    path.write_text(json.dumps({**PUBLISHED_RESULT, "emo_point": value}) + "\n")
    with pytest.raises(InputError, match=message) as info:
        load_run(path)
    assert f"{path}:1: emo_point:" in str(info.value)


# -- configs ---------------------------------------------------------------------------------------


def _keys(model: Any, prefix: str = "") -> list[str]:
    """Every dotted key of a pydantic config model (sections and leaves)."""
    from pydantic import BaseModel

    out = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        out.append(key)
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += _keys(ann, key + ".")
    return out


def _config_models() -> dict[str, Any]:
    from rlver.eval.config import EvalConfig
    from rlver.train.config import TrainConfig

    return {"eval": EvalConfig, "train": TrainConfig}


override_values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        ["-1", "0", "1e400", ".nan", "[1, 2]", "{a: 1}", "null", "true", "x" * 5000, "9" * 5000, "[" * 1100]
    ),
)


@st.composite
def overrides(draw: st.DrawFn, kind: str) -> list[str]:
    keys = _keys(_config_models()[kind])
    key = draw(st.one_of(st.sampled_from(keys), st.text(max_size=12)))
    return [f"{key}={draw(override_values)}" if draw(st.integers(0, 9)) else key]


@FUZZ
@given(kind=st.sampled_from(["eval", "train"]), data=st.data())
def test_config_overrides_load_or_name_the_key(kind: str, data: st.DataObject) -> None:
    from rlver.config import load_config

    model = _config_models()[kind]
    sets = data.draw(overrides(kind))
    base = {"agent_tiny": True} if kind == "eval" else {}
    try:
        load_config(model, None, sets, base=base)
    except ConfigError as exc:
        key = sets[0].partition("=")[0].strip()
        message = str(exc)
        assert key.split(".")[0] in message or repr(sets[0][:80]) in message, (sets, message)
        assert len(message) < 2000


@FUZZ
@given(kind=st.sampled_from(["eval", "train"]), data=st.data())
def test_config_files_load_or_name_the_file(kind: str, data: st.DataObject) -> None:
    from rlver.config import load_config

    model = _config_models()[kind]
    valid = {"agent_tiny": True, "profiles": "en-test"} if kind == "eval" else {"run": {"steps": 2}}
    content = data.draw(st.one_of(mutated(valid), st.text(max_size=80)))
    text = content if isinstance(content, str) else yaml.safe_dump(content, allow_unicode=True)
    raw = data.draw(damaged(text.encode("utf-8", "surrogatepass")))
    with _file(raw, ".yaml") as path:
        loads_or_names_the_file(lambda p: load_config(model, p), path)


# -- CLI flags -------------------------------------------------------------------------------------


def run_cli(args: list[str]) -> tuple[int, str]:
    """Run ``rlver ARGS`` in this process exactly as the console script does; return (code, output).

    ``main()`` turns an RlverError into a message and an exit code; anything else propagates and fails
    the test (it would be a traceback for the user).
    """
    from rlver.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["rlver", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = argv
    return code, out.getvalue() + err.getvalue()


def assert_clean_failure(code: int, output: str, allowed: tuple[int, ...] = (1, 2)) -> None:
    assert code in allowed, (code, output[-2000:])
    assert "Traceback" not in output, output[-2000:]
    if code:
        assert "error" in output.lower(), output[-2000:]


@pytest.fixture(scope="module")
def guarded_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run folders that stop a *valid* eval/train at once (existing transcript / checkpoint), so that
    a fuzzed flag that happens to be fine does not start a real run."""
    root = tmp_path_factory.mktemp("guard")
    ev = root / "eval"
    ev.mkdir()
    (ev / "transcript.jsonl").write_bytes(_jsonl([MANIFEST]))
    tr = root / "train"
    ckpt = tr / "checkpoints" / "step_000001"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.pt").write_bytes(b"not used")
    return {"eval": ev, "train": tr}


flag_values = st.one_of(
    st.sampled_from(["-1", "0", "1e9", "nan", "abc", "", "99999999999999999999999", "--", "nope.yaml"]),
    st.text(max_size=12),
)
EVAL_FLAGS = ["--limit", "--concurrency", "--n-per-profile", "--batch-size", "--seed", "--agent-temperature",
              "--agent-max-tokens", "--simulator", "--profiles", "--config", "--set", "--sim-model"]  # fmt: skip
TRAIN_FLAGS = ["--config", "--set", "--steps", "--trainer"]


@CLI_FUZZ
@given(flags=st.lists(st.tuples(st.sampled_from(EVAL_FLAGS), flag_values), min_size=1, max_size=3))
def test_eval_flags_fail_cleanly(guarded_dirs: dict[str, Path], flags: list[tuple[str, str]]) -> None:
    args = ["eval", "--agent-tiny", "--out", str(guarded_dirs["eval"]), "--no-report"]
    for flag, value in flags:
        args += [flag, value]
    assert_clean_failure(*run_cli(args))


@CLI_FUZZ
@given(flags=st.lists(st.tuples(st.sampled_from(TRAIN_FLAGS), flag_values), min_size=1, max_size=3))
def test_train_flags_fail_cleanly(guarded_dirs: dict[str, Path], flags: list[tuple[str, str]]) -> None:
    args = ["train", "--out", str(guarded_dirs["train"])]
    if not any(f == "--config" for f, _ in flags):
        args += ["--config", "tiny-offline"]
    for flag, value in flags:
        args += [flag, value]
    assert_clean_failure(*run_cli(args))


@CLI_FUZZ
@given(
    data=st.one_of(
        jsonl_files(MANIFEST, EPISODE), jsonl_files(None, PUBLISHED_RESULT), jsonl_files(None, NATIVE_PROFILE)
    )
)
def test_file_commands_fail_cleanly(data: bytes) -> None:
    """score / audit / profiles validate / config show on fuzzed files: 0, 1 or 2, never a traceback."""
    with _file(data, ".jsonl") as path:
        for args in (
            ["score", str(path)],
            ["audit", str(path)],
            ["profiles", "validate", str(path)],
            ["config", "show", str(path)],
        ):
            assert_clean_failure(*run_cli(args), allowed=(0, 1, 2))


@pytest.mark.parametrize(
    "args",
    [
        ["score", "no/such/file.jsonl"],
        ["audit", "no/such/file.jsonl"],
        ["profiles", "validate", "no/such/file.jsonl"],
        ["profiles", "list", "no-such-set"],
        ["config", "show", "no-such-preset"],
        ["train", "--config", "no-such-preset"],
        ["eval", "--agent-tiny", "--profiles", "no/such/profiles.jsonl"],
        ["eval", "--agent-tiny", "--config", "no/such/eval.yaml"],
    ],
)
def test_missing_files_and_unknown_names(tmp_path: Path, args: list[str]) -> None:
    args = [*args, "--out", str(tmp_path / "run")] if args[0] in ("eval", "train") else args
    code, output = run_cli(args)
    assert_clean_failure(code, output)
    assert "no/such" in output or "no-such" in output


# a few real subprocesses: what a user's shell sees (exit code, one short message, no traceback)
SUBPROCESS_CASES = [
    (["eval", "--agent-tiny", "--limit", "-1"], 2, "--limit"),
    (["eval", "--agent-tiny", "--concurrency", "0"], 2, "--concurrency"),
    (
        ["eval", "--agent-tiny", "--set", "env.rules.max_assistant_turns=many"],
        2,
        "env.rules.max_assistant_turns",
    ),
    (["train", "--config", "no-such-preset"], 2, "no-such-preset"),
    (["train", "--config", "tiny-offline", "--set", "run.steps=abc"], 2, "run.steps"),
    (["score", "missing.jsonl"], 2, "missing.jsonl"),
]


@pytest.mark.parametrize(("args", "code", "named"), SUBPROCESS_CASES)
def test_cli_subprocess_bad_flags(tmp_path: Path, args: list[str], code: int, named: str) -> None:
    if args[0] in ("eval", "train"):
        args = [*args, "--out", str(tmp_path / "run")]
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == code, output
    assert "Traceback" not in output
    assert named in output
    assert len(output.strip().splitlines()) <= 12, output  # a short message, not a dump
    assert not (tmp_path / "run").exists()  # nothing was started


def test_absurd_emotion_numbers_in_our_transcripts_are_reported(tmp_path: Path) -> None:
    """A 30-digit ``final_emotion`` used to crash ``rlver score`` in the metrics (decimal overflow)."""
    from rlver.eval.runs import load_run

    path = tmp_path / "transcript.jsonl"
    path.write_bytes(_jsonl([MANIFEST, {**EPISODE, "final_emotion": 10**30}]))
    with pytest.raises(InputError, match=r"transcript\.jsonl:2: final_emotion:"):
        load_run(path)
    path.write_bytes(_jsonl([MANIFEST, {**EPISODE, "final_emotion": 130, "emotions": [-5]}]))
    assert load_run(path).metrics.n == 1  # out of 0-100 but sane: readable, for `rlver audit` to flag
