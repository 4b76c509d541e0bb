"""The parts of ``sage-published``: SAGE's parser reproduced on 1,000+ answers, the opening line, the
default for ``--profiles sage``, the fetched files (download, checksum, slots) and no published text in
rlver's source (issue 41)."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers import run_rlver
from rlver.eval.config import EvalConfig
from rlver.llm.openai_client import OpenAIChatModel
from rlver.profiles.loaders import load_profiles
from rlver.profiles.published_code import CODE_OF_SET, PUBLISHED_CODE, download_set
from rlver.simulator.llm import published_text
from rlver.simulator.llm.protocols.sage_published import read_sage_appraisal
from rlver.simulator.llm.user import LLMSimulator
from rlver.testing.openai_server import FakeChatServer
from test_sage_published import Stub, _fresh_texts, exec_published, reply_answer  # noqa: F401 (an autouse fixture)

REPO = Path(__file__).resolve().parents[2]


class Unparsed(BaseException):
    """Raised by the stub on SAGE's second call: SAGE could not parse the first answer (it would loop)."""


def answer_variants(n: int, seed: int = 0) -> list[str]:
    """Answers a judge might write: spacing, full-width colons, brackets, bold, missing fields, text
    around the number, no number, other digits."""
    rng = random.Random(seed)
    labels = ["Content", "TargetCompletion", "Activity", "Analyse", "Change"]
    numbers = [
        "+5",
        "-10",
        "5",
        "+15",
        "-3分",
        "[+5]",
        "变化：-5",
        "０",
        "+٣",
        "none",
        "",
        "-",
        "+ 5",
        "1e3",
        "99999",
    ]
    out = []
    for _ in range(n):
        parts = []
        for label in labels:
            if rng.random() < 0.08:
                continue  # a missing field
            colon = rng.choice([":", "：", ": ", " :"])
            star = rng.choice(["", "**", "*"])
            body = rng.choice(
                ["[理解]", "理解了", "[部分达到]\n细节", "", "有点失望。", "Change: +10 in text"]
            )
            if label == "Change":
                body = rng.choice(numbers)
            sep = rng.choice(["\n", "\n\n", " ", "\r\n"])
            parts.append(f"{star}{label}{star}{colon}{sep}{body}")
        text = rng.choice(["\n", "\n\n", ""]).join(parts)
        out.append(rng.choice(["", "好的。\n", "```\n"]) + text + rng.choice(["", "\n", "\n```"]))
    return out


def test_the_parser_reads_every_answer_as_sages_own_code(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = Stub()
    sage = exec_published(
        shared_data / "published_code" / "sage" / "simulator_response.py", monkeypatch, stub
    )

    def sage_reads(text: str) -> dict[str, Any] | None:
        calls = [text]

        def llm(_prompt: str) -> str:
            if not calls:
                raise Unparsed
            return calls.pop()

        sage["call_llm"] = llm
        player = {
            "emo_point": 40,
            "emo_state": "Emotion-B",
            "player": "p",
            "scene": "s",
            "history": [],
            "target": 0,
        }
        try:
            data, planning = sage["planning_reply"](player)
        except Unparsed:
            return None
        return {**planning, "emo_point": data["emo_point"]}

    variants = answer_variants(1400)
    parsed = disagreements = 0
    for text in variants:
        expected = sage_reads(text)
        try:
            ours = read_sage_appraisal(text)
        except ValueError:
            ours = None
        if expected is None or ours is None:
            disagreements += (expected is None) != (ours is None)
            continue
        parsed += 1
        applied = max(-10, min(10, ours.change))
        got = {
            "content": ours.understanding,
            "TargetCompletion": ours.goal_fit,
            "activity": ours.inner_reaction,
            "analyse": ours.feeling,
            "change": applied,
            "emo_point": min(40 + applied, 100),
        }
        assert got == expected, text
    assert disagreements == 0
    assert parsed >= 1000  # the others are answers neither parses (no integer after Change:)


def test_the_opening_line_is_sages_when_a_profile_has_none(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile without ``first_talk``: the reply call with no appraisal and an empty history."""
    row = json.loads((shared_data / "sage_test_profiles.jsonl").read_text().splitlines()[3])
    row.pop("first_talk")
    stub = Stub()
    sage = exec_published(
        shared_data / "published_code" / "sage" / "simulator_response.py", monkeypatch, stub
    )
    stub.answers = [reply_answer({"content": "最近有点烦。", "thinking": "想想"})]
    sage["chat_player"](
        {
            "emo_point": 40,
            "emo_state": "Emotion-B",
            "player": row["player"],
            "scene": row["scene"],
            "history": [],
            "target": 0,
        }
    )

    with FakeChatServer(lambda _r: reply_answer({"content": "最近有点烦。", "thinking": "想想"})) as server:
        model = OpenAIChatModel(base_url=server.url, model="sim", api_key_env=None)
        simulator = LLMSimulator(model, protocol="sage-published")
        turn = asyncio.run(_open(simulator, _profile_from_row(row, shared_data)))
        sent = [r["messages"] for r in server.requests]
    assert sent == [[{"role": "user", "content": stub.prompts[0]}]]
    # SAGE's thinking is everything before ``Response:`` (its draft and rewrite too)
    assert turn.text == "最近有点烦。" and turn.extra["thinking"] == "想想\nOrigin:\n-\nChange:\n-"


async def _open(simulator: LLMSimulator, profile: Any) -> Any:
    try:
        return await simulator.start(profile, start_emotion=40).open()
    finally:
        await simulator.aclose()


def _profile_from_row(row: dict[str, Any], folder: Path) -> Any:
    """The profile rlver loads from a published row (written to a temporary file)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        file = Path(d) / "p.jsonl"
        file.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
        return load_profiles(file)[0]


def test_the_system_reading_sends_the_prompt_as_a_system_message(shared_data: Path) -> None:
    row = json.loads((shared_data / "sage_test_profiles.jsonl").read_text().splitlines()[0])
    with FakeChatServer(lambda _r: reply_answer({"content": "嗯", "thinking": ""})) as server:
        model = OpenAIChatModel(base_url=server.url, model="sim", api_key_env=None)
        from rlver.simulator.llm.protocols.sage_published import SagePublishedProtocol

        simulator = LLMSimulator(model, protocol=SagePublishedProtocol(prompt_role="system"))
        row.pop("first_talk")
        asyncio.run(_open(simulator, _profile_from_row(row, shared_data)))
        roles = [[m["role"] for m in r["messages"]] for r in server.requests]
    assert roles == [["system"]]


def test_profiles_sage_with_an_llm_user_defaults_to_the_published_protocol_and_prompt() -> None:
    llm = {
        "kind": "llm",
        "model": {"model": "judge", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None},
    }
    cfg = EvalConfig.model_validate({"agent_tiny": True, "simulator": llm, "profiles": "sage"})
    assert cfg.simulator.prompts.name == "sage-published"  # type: ignore[attr-defined]
    assert cfg.env.agent_prompt == "sage-published"
    chosen = EvalConfig.model_validate(
        {"agent_tiny": True, "simulator": {**llm, "protocol": "sage"}, "profiles": "sage"}
    )
    assert chosen.simulator.prompts.name == "sage"  # type: ignore[attr-defined]
    english = EvalConfig.model_validate({"agent_tiny": True, "simulator": llm, "profiles": "en-test"})
    assert english.simulator.prompts.name == "sage" and english.env.agent_prompt == "neutral"  # type: ignore[attr-defined]
    offline = EvalConfig.model_validate({"agent_tiny": True, "profiles": "sage"})
    assert offline.env.agent_prompt == "neutral"


def test_without_the_fetched_files_eval_exits_2_naming_the_download(tmp_path: Path) -> None:
    done = run_rlver(
        "eval", "--agent-tiny", "--simulator", "llm", "--sim-base-url", "http://127.0.0.1:9/v1",
        "--sim-model", "judge", "--sim-key-env", "", "--profiles", "sage", "--out", "run", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    assert "rlver data download sage-test" in lines[0]
    assert not (tmp_path / "run").exists()


def _copy_data(shared_data: Path, dest: Path) -> Path:
    (dest / "published_code").mkdir(parents=True)
    shutil.copytree(shared_data / "published_code" / "sage", dest / "published_code" / "sage")
    shutil.copytree(shared_data / "published_code" / "rlver", dest / "published_code" / "rlver")
    return dest


def test_a_changed_file_or_an_unknown_slot_is_refused_in_one_line(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _copy_data(shared_data, tmp_path / "data")
    monkeypatch.setenv("RLVER_DATA_DIR", str(data))
    monkeypatch.delenv("RLVER_SHARED_DATA")
    file = data / "published_code" / "sage" / "simulator_response.py"
    file.chmod(0o644)
    file.write_text(file.read_text(encoding="utf-8").replace("{{emotion}}", "{{mood}}"), encoding="utf-8")
    with pytest.raises(Exception, match=r"sha256 .* is not the published file.s") as caught:
        published_text.sage_texts()
    assert getattr(caught.value, "exit_code", None) == 2
    # the same edit with its checksum accepted (a future published version): the slot is named
    from rlver.profiles import published_code

    digest = published_code.sha256_of(file.read_bytes())
    monkeypatch.setitem(
        published_code.PUBLISHED_CODE,
        "sage/simulator_response.py",
        published_code.PUBLISHED_CODE["sage/simulator_response.py"].__class__(
            **{**published_code.PUBLISHED_CODE["sage/simulator_response.py"].__dict__, "sha256": digest}
        ),
    )
    published_text.clear_cache()
    with pytest.raises(
        Exception, match=r"a slot rlver does not know: \{\{mood\}\}; no slot for \{\{emotion\}\}"
    ):
        published_text.sage_texts()


def test_the_training_file_is_read_despite_its_published_syntax_error(shared_data: Path) -> None:
    texts = published_text.training_texts()
    assert [p.field for p in texts.planning_parts if p.field] == ["reason", "analyse"]
    assert set(published_text.training_agent_prompts()) == {False, True}


def test_data_download_fetches_the_published_code_pinned_and_atomic(
    shared_data: Path, tmp_path: Path
) -> None:
    """A real HTTP server on 127.0.0.1 serves the repository paths; a changed file is not kept."""
    served: dict[str, bytes] = {}
    for name, spec in PUBLISHED_CODE.items():
        served[spec.paths[0]] = (shared_data / "published_code" / name).read_bytes()
    served["SAGE/profile/simulator_profile_withfirsttalk.jsonl"] = (
        shared_data / "sage_test_profiles.jsonl"
    ).read_bytes()
    with _FileServer(served) as url:
        paths = download_set("sage-test", tmp_path / "d", base_url=url)
        assert [p.relative_to(tmp_path / "d").as_posix() for p in paths] == [
            "sage_test_profiles.jsonl",
            *(f"published_code/{n}" for n in CODE_OF_SET["sage-test"]),
        ]
        served["SAGE/npc_response.py"] += b"# changed\n"
        with pytest.raises(Exception, match="checksum mismatch"):
            download_set("sage-test", tmp_path / "e", base_url=url)
    assert not (tmp_path / "e" / "published_code" / "sage" / "npc_response.py").exists()


class _FileServer:
    """Serves ``{path: bytes}`` over HTTP on 127.0.0.1 (404 for anything else)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def __enter__(self) -> str:
        import http.server
        import threading

        files = self.files

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = files.get(self.path.lstrip("/"))
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                if body is not None:
                    self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


#: The length of a run of published text the source may not hold.
RUN = 30


def _published_runs() -> set[str]:
    """Every run of :data:`RUN` characters of the published prompt, agent and training texts that is
    no stretch of plain ASCII or whitespace (code and English words any text shares)."""
    sage, training = published_text.sage_texts(), published_text.training_texts()
    texts = [
        sage.appraisal_template, sage.reply_template, sage.target, training.appraisal_template,
        training.reply_template, training.target, published_text.sage_agent_prompt(),
        *published_text.training_agent_prompts().values(),
    ]  # fmt: skip
    runs = {t[i : i + RUN] for t in texts for i in range(len(t) - RUN + 1)}
    return {r for r in runs if len(r.strip()) == RUN and not r.isascii()}


def _runs_in(sources: dict[str, str], runs: set[str]) -> list[str]:
    """``file: run`` for each run of ``runs`` a source holds: every window of each source looked up in
    the set (linear in the source's length; a run holds a non-ASCII character, so an ASCII file
    holds none and is skipped whole). The same question as ``run in source`` for every run, which
    scanned the whole source once per run (125 s)."""
    found = set()
    for name, text in sources.items():
        if text.isascii():
            continue
        found |= {
            f"{name}: {text[i : i + RUN]}" for i in range(len(text) - RUN + 1) if text[i : i + RUN] in runs
        }
    return sorted(found)


def _source_files() -> dict[str, str]:
    return {
        str(p.relative_to(REPO)): p.read_text(encoding="utf-8")
        for p in (REPO / "src").rglob("*")
        if p.suffix in {".py", ".md", ".yaml", ".txt", ".json", ".html"}
    }


def test_no_published_prompt_text_is_in_rlvers_source(shared_data: Path) -> None:
    """No 30-character run of any published prompt, agent or training text appears under src/."""
    found = _runs_in(_source_files(), _published_runs())
    assert not found, found[:3]


def test_the_scan_finds_a_published_sentence_planted_in_a_source_file(shared_data: Path) -> None:
    """The scan's power: one published sentence (40 characters of SAGE's appraisal template, at a
    non-ASCII stretch) planted in the middle of a real source file, once as it is and once with a
    line of Chinese of our own before it, is found, named by its file."""
    runs = _published_runs()
    template = published_text.sage_texts().appraisal_template
    at = next(i for i in range(len(template)) if template[i : i + RUN] in runs)
    sentence = template[at : at + 40]
    sources = _source_files()
    name = "src/rlver/simulator/base.py"
    text = sources[name]
    planted = {**sources, name: text[: len(text) // 2] + sentence + text[len(text) // 2 :]}
    found = _runs_in(planted, runs)
    assert found and all(f.startswith(f"{name}: ") for f in found)
    assert any(f.endswith(template[at : at + RUN]) for f in found)
    ours = {name: "# 这是我们自己写的一句话。\n" + sentence}
    assert _runs_in(ours, runs)
