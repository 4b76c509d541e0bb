"""Profile generation end to end against a real local OpenAI-compatible server (FakeChatServer).

The server's responder plays the LLM: it returns scripted profile JSON texts, including a malformed
answer and a near-duplicate, in the order requests arrive. Everything else (HTTP client, prompt,
parsing, validation, de-duplication, JSONL output, resume, rejection log) is the real code.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from rlver.cli.profiles import register
from rlver.errors import InputError
from rlver.io import iter_jsonl
from rlver.llm.scripted import ScriptedChatModel
from rlver.profiles.answer_check import Rejection, answer_to_profile, read_answer
from rlver.profiles.generate import GenerateSettings, generate_profiles, rejected_path_for
from rlver.profiles.generation_prompt import (
    SeedTopic,
    build_messages,
    bundled_seed_topics,
    load_seed_topics,
    plan_attempt,
)
from rlver.profiles.schema import Profile
from rlver.testing.openai_server import FakeChatServer

FAKE_KEY = "sk-test-GENERATE-0123456789abcdef"

# (name, age, occupation, persona, cause, conflict, goal, hidden need)
STORIES = [
    (
        "Ada Quinn",
        29,
        "night-shift nurse",
        "restores old bicycles in a cramped garage and hums while she works",
        "a patient she had grown fond of died on her ward during a chaotic December weekend",
        "she blames herself for missing a change in his breathing",
        "make sense of the guilt",
        "permission to grieve without being the strong one",
    ),
    (
        "Bram Osei",
        41,
        "bakery owner",
        "gets up at four, listens to highlife records and argues about football with regulars",
        "a chain store opened across the road and his takings halved within a quarter",
        "his wife wants to sell while he feels that closing would betray his late father",
        "decide whether to keep the shop open",
        "to hear that his worth is not the bakery's balance sheet",
    ),
    (
        "Carla Novak",
        35,
        "chemistry teacher",
        "grades papers on the tram and collects vintage lab glassware",
        "a parent filed a formal complaint accusing her of unfair marking",
        "the head teacher asked her to regrade quietly and she feels thrown under the bus",
        "plan what to say at the disciplinary meeting",
        "reassurance that she is still a good teacher",
    ),
    (
        "Dev Mehta",
        23,
        "junior architect",
        "sketches rooftops on napkins and plays cricket on Sunday mornings",
        "his design for a community library was credited to a senior partner at the launch",
        "he fears speaking up will end his career before it starts",
        "work out how to raise it with his boss",
        "to feel that his anger is legitimate",
    ),
    (
        "Elif Kaya",
        52,
        "freight dispatcher",
        "cooks enormous Sunday lunches and feeds stray cats behind the depot",
        "her only daughter emigrated to Canada and now calls once a month",
        "she wants closeness but every call turns into a quarrel about grandchildren",
        "find a way to stop the fights on the phone",
        "companionship and someone to notice her loneliness",
    ),
    (
        "Finn Doyle",
        19,
        "first-year engineering student",
        "speedruns retro video games and works weekends in a chip shop",
        "he failed two midterm exams after a semester of skipping lectures",
        "his parents remortgaged for his tuition and he cannot tell them",
        "make a study plan that could still save the year",
        "encouragement that he is not a lost cause",
    ),
    (
        "Greta Lind",
        67,
        "retired librarian",
        "does cryptic crosswords in ink and walks the same coastal path each dawn",
        "her husband of forty years moved into a memory-care home in spring",
        "she visits daily but he no longer recognises her and she dreads going",
        "decide whether it is acceptable to visit less often",
        "to be told she is allowed to have a life of her own",
    ),
    (
        "Hugo Reyes",
        33,
        "session violinist",
        "practises scales at midnight with a mute and brews far too much coffee",
        "a tendon injury in his bow arm cancelled a European tour",
        "freelance work dried up and he suspects the orchestra has replaced him",
        "figure out what to do while his arm heals",
        "perspective that one injury does not define his talent",
    ),
    (
        "Isla Moreau",
        27,
        "wedding photographer",
        "hoards film cameras and swims in the cold lake all winter",
        "a client couple posted a furious review claiming she ruined their day",
        "bookings stopped and she replays every shot wondering what went wrong",
        "answer the review without making it worse",
        "validation that one angry couple does not cancel years of good work",
    ),
    (
        "Jonas Weber",
        45,
        "payroll accountant",
        "builds model railways in the attic with his teenage son",
        "he discovered his business partner had been skimming invoices for years",
        "reporting it would bankrupt the firm that employs twelve friends",
        "weigh whether to go to the police",
        "someone to stay steady with him while he decides",
    ),
    (
        "Kemi Adeyemi",
        31,
        "dental hygienist",
        "sings alto in a gospel choir and braids her nieces' hair on Saturdays",
        "a third round of fertility treatment ended in miscarriage in July",
        "relatives keep asking when she will have children and she smiles through it",
        "learn how to answer family questions",
        "to be heard without anyone trying to fix it",
    ),
    (
        "Luca Ferri",
        38,
        "bus mechanic",
        "rebuilds vintage scooters and cooks risotto badly but proudly",
        "he was passed over for workshop foreman in favour of a man half his age",
        "he trained that man himself and now must take orders from him",
        "decide whether to quit or stay",
        "recognition of the years he gave the depot",
    ),
    (
        "Mira Sato",
        24,
        "PhD student in marine biology",
        "keeps an aquarium of shrimp and doodles octopuses in her notebooks",
        "her supervisor publicly mocked her first conference talk",
        "she now freezes before lab meetings and is thinking of dropping out",
        "prepare for the next lab meeting",
        "to hear that freezing under humiliation is a normal reaction",
    ),
    (
        "Nils Berg",
        58,
        "carpenter",
        "carves spoons from fallen birch and keeps an honest garden",
        "a hand injury at the workshop means he may never do fine joinery again",
        "his identity is his craft and he snaps at his wife whenever she offers help",
        "find work he could still do",
        "to grieve the loss of his craft before planning",
    ),
    (
        "Omar Haddad",
        26,
        "call-centre trainer",
        "runs half-marathons and posts film reviews nobody reads",
        "his fiancee postponed their wedding for the third time without a reason",
        "he suspects she has doubts but is terrified to ask directly",
        "work out how to bring the subject up",
        "clarity and the courage to hear an honest answer",
    ),
    (
        "Priya Nair",
        34,
        "pharmacist",
        "paints watercolour herons and volunteers at a reading club for children",
        "her younger brother borrowed her savings for a business that collapsed",
        "her parents insist family money is never discussed and take his side",
        "decide whether to ask for the money back",
        "validation that setting a boundary with family is fair",
    ),
    (
        "Quentin Roy",
        49,
        "warehouse supervisor",
        "fishes at dawn and reads military history in a battered armchair",
        "after twenty-six years the company laid him off in a fifteen-minute video call",
        "at his age every application is rejected and he hides it from his neighbours",
        "make a realistic plan for the next six months",
        "to feel that he still has something to offer",
    ),
    (
        "Rosa Vidal",
        42,
        "florist",
        "grows dahlias in an allotment and dances salsa on Thursday nights",
        "her teenage son stopped talking to her after the divorce and lives mostly with his father",
        "she is afraid every attempt to reach him pushes him further away",
        "find a way back to her son",
        "reassurance that the bond is not lost for good",
    ),
    (
        "Sami Laine",
        30,
        "data analyst",
        "plays chess online until two in the morning and keeps a fermenting crock of kimchi",
        "he moved to a new city for work eight months ago and has made no friends",
        "weekends stretch empty and he is starting to dread them",
        "find ways to meet people",
        "companionship and to feel less strange for being lonely",
    ),
    (
        "Tara Walsh",
        37,
        "park ranger",
        "photographs owls and writes long letters she never posts",
        "a close friend shared her private mental-health history with their whole group",
        "she wants to confront the friend but fears losing the entire circle",
        "decide whether and how to confront the friend",
        "to hear that feeling betrayed is a fair response",
    ),
]


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def story_answer(story: tuple[Any, ...], *, opening: bool = False) -> dict[str, Any]:
    """A complete, valid profile answer as an LLM would write it."""
    name, age, job, persona, cause, conflict, goal, need = story
    first = name.split()[0]
    obj: dict[str, Any] = {
        "name": name,
        "age": age,
        "occupation": job,
        "persona": f"{first} {persona}.",
        "background": {
            "cause": _cap(cause) + ".",
            "timeline": [f"Last year: {cause}", f"Since then: {conflict}", f"This week: {first} reached out"],
            "conflict": _cap(conflict) + ".",
            "tried": f"{first} tried to keep busy and not think about it.",
        },
        "reactions": {
            "high": "talks freely and jokes",
            "medium": "answers but stays guarded",
            "low": "gives short answers",
            "on_target": "opens up with details",
            "off_target": "withdraws and deflects",
        },
        "goal": _cap(goal) + ".",
        "hidden_need": _cap(need) + ".",
        "traits": ["proud", "anxious", "loyal"],
    }
    if opening:
        obj["opening"] = f"Hi. I am {first}, and honestly I do not know where to start."
    return obj


MALFORMED = 'Sure! Here is the profile you asked for:\n{"name": "Vera", "age": 30, "persona": '


def near_duplicate_of(index: int) -> str:
    obj = story_answer(STORIES[index])
    obj["name"] = "Wanda " + obj["name"].split()[1]
    obj["age"] = obj["age"] + 1
    return "```json\n" + json.dumps(obj, indent=2) + "\n```"


def scripted_answers() -> list[str]:
    """22 answers: the 20 stories, a malformed one at position 5 and a near-duplicate at 12."""
    answers = [json.dumps(story_answer(s)) for s in STORIES]
    answers.insert(5, MALFORMED)
    answers.insert(12, near_duplicate_of(2))
    return answers


class ScriptedResponder:
    """Answers requests in arrival order from a list (thread-safe: the server runs in a thread)."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.i = 0
        self.lock = threading.Lock()
        self.prompts: list[str] = []

    def __call__(self, request: dict[str, Any]) -> str:
        with self.lock:
            self.prompts.append(request["messages"][-1]["content"])
            text = self.answers[self.i % len(self.answers)]
            self.i += 1
            return text


def _app() -> typer.Typer:
    """A root with the real ``profiles`` group on it, registered as cli/__init__.py's table does."""
    app = typer.Typer()
    register(app)
    return app


def _generate(server: FakeChatServer, out: Path, n: int, *extra: str, catch: bool = False) -> Any:
    args = [
        "profiles",
        "generate",
        "--n",
        str(n),
        "--out",
        str(out),
        "--model",
        "fake-writer",
        "--base-url",
        server.url,
        "--key-env",
        "RLVER_TEST_GEN_KEY",
        "--lang",
        "en",
        "--concurrency",
        "3",
        "--json",
        *extra,
    ]
    return CliRunner().invoke(_app(), args, catch_exceptions=catch)


@pytest.fixture()
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLVER_TEST_GEN_KEY", FAKE_KEY)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [obj for _, obj in iter_jsonl(path)]


def test_generate_twenty_with_rejections_and_resume(tmp_path: Path, key_env: None) -> None:
    responder = ScriptedResponder(scripted_answers())
    out = tmp_path / "gen" / "profiles.jsonl"
    with FakeChatServer(responder) as server:
        first = _generate(server, out, 12)
        assert first.exit_code == 0, first.output
        assert len(_lines(out)) == 12
        # Resume: the same command with a larger n continues from what is there.
        second = _generate(server, out, 20)
        assert second.exit_code == 0, second.output
        summary = json.loads(second.stdout)
        # A third run has nothing to do and makes no request.
        served = server.served
        third = _generate(server, out, 20)
        assert third.exit_code == 0, third.output
        assert server.served == served

    assert summary["existing"] == 12 and summary["total"] == 20 and summary["complete"]
    profiles = [Profile.model_validate(obj) for obj in _lines(out)]
    assert len(profiles) == 20
    assert len({p.id for p in profiles}) == 20
    names = {p.persona.splitlines()[0] for p in profiles}
    assert names == {f"Name: {s[0]}" for s in STORIES}  # every story once, the duplicate never
    assert all(p.language == "en" and p.source == "generated:fake-writer" for p in profiles)
    assert all(p.style in ("negative", "passive", "avoidant") and p.need_type and p.topic for p in profiles)
    assert all("Timeline:" in p.background and "To an off-target reply:" in p.background for p in profiles)
    assert responder.i == 22  # 20 accepted + 2 rejected, no wasted calls

    rejected = _lines(rejected_path_for(out))
    assert sorted(r["kind"] for r in rejected) == ["duplicate", "parse"]
    parse = next(r for r in rejected if r["kind"] == "parse")
    assert "not a single JSON object" in parse["reason"] and parse["answer"].startswith("Sure!")
    dup = next(r for r in rejected if r["kind"] == "duplicate")
    assert "near-duplicate of gen-en-" in dup["reason"] and dup["similarity"] >= 0.5
    original = next(p for p in profiles if p.persona.startswith(f"Name: {STORIES[2][0]}"))
    assert dup["similar_to"] == original.id

    # The prompts carried the seed topics, and the key never reached a file.
    topics = {t.topic for t in bundled_seed_topics("en")}
    assert all(any(t in prompt for t in topics) for prompt in responder.prompts)
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert FAKE_KEY not in f.read_text(encoding="utf-8")


def test_resume_after_a_torn_line(tmp_path: Path, key_env: None) -> None:
    """A crash mid-append leaves a partial line: resume skips it and carries on."""
    out = tmp_path / "p.jsonl"
    with FakeChatServer(ScriptedResponder([json.dumps(story_answer(s)) for s in STORIES])) as server:
        assert _generate(server, out, 3).exit_code == 0
        with out.open("a", encoding="utf-8") as fh:
            fh.write('{"id": "gen-en-torn", "persona": "half a li')
        with pytest.warns(UserWarning, match="incomplete trailing line"):
            result = _generate(server, out, 5)
        assert result.exit_code == 0, result.output
    profiles = [Profile.model_validate(o) for o in _lines(out)]
    assert len(profiles) == 5 and len({p.id for p in profiles}) == 5


def test_attempts_are_bounded(tmp_path: Path, key_env: None) -> None:
    out = tmp_path / "p.jsonl"
    responder = ScriptedResponder(["I am sorry, I cannot write profiles today."])
    with FakeChatServer(responder) as server:
        result = _generate(server, out, 4, "--max-attempts", "7", catch=True)
    assert result.exit_code != 0
    assert "stopped after 7 attempts with 0/4 profiles" in str(result.exception or result.output)
    assert responder.i == 7
    assert not out.exists()
    assert [r["kind"] for r in _lines(rejected_path_for(out))] == ["parse"] * 7


def test_with_opening_and_chinese(tmp_path: Path) -> None:
    zh = {
        "name": "林晓雯",
        "age": 28,
        "occupation": "幼儿园老师",
        "persona": "林晓雯性格温和，喜欢周末去郊外骑车，说话慢条斯理，但遇到委屈时会突然沉默很久。",
        "background": {
            "cause": "园长当着家长的面批评她照顾孩子不周，事后也没有给她解释的机会。",
            "timeline": [
                "三月：一个孩子在户外活动时摔伤了膝盖",
                "四月：家长在群里公开指责她",
                "五月：园长在例会上点名批评",
            ],
            "conflict": "她觉得自己已经尽力，却被所有人当成了替罪羊。",
            "tried": "她试着向同事倾诉，但同事们都不敢替她说话。",
        },
        "reactions": {
            "high": "会主动分享班里孩子的趣事",
            "medium": "会回答问题但不多说",
            "low": "只回一两个字，甚至想结束对话",
            "on_target": "会松一口气，说出更多细节",
            "off_target": "会觉得又一次没人理解自己",
        },
        "goal": "想知道该不该去找园长再谈一次。",
        "hidden_need": "希望有人承认她受了委屈。",
        "traits": ["敏感", "负责", "隐忍"],
        "opening": "我今天真的不想再去上班了。",
    }
    english = json.loads(json.dumps(story_answer(STORIES[0], opening=True)))
    model = ScriptedChatModel([json.dumps(english, ensure_ascii=False), json.dumps(zh, ensure_ascii=False)])
    out = tmp_path / "zh.jsonl"
    settings = GenerateSettings(n=1, language="zh", with_opening=True, concurrency=1)
    report = asyncio.run(generate_profiles(model, bundled_seed_topics("zh"), out, settings))
    assert report.accepted == 1 and report.rejected == {"language": 1}
    (profile,) = [Profile.model_validate(o) for o in _lines(out)]
    assert profile.language == "zh" and profile.opening == "我今天真的不想再去上班了。"
    assert profile.persona.startswith("姓名：林晓雯")
    # The prompt itself was Chinese and asked for the opening line.
    system, user = model.calls[0]
    assert "只输出一个 JSON 对象" in system and '"opening"' in system and "话题" in user


def test_read_answer_is_strict() -> None:
    obj = {"a": 1}
    assert read_answer(json.dumps(obj)) == obj
    assert read_answer("```json\n" + json.dumps(obj) + "\n```") == obj
    assert read_answer("<think>planning</think>\n" + json.dumps(obj)) == obj
    for bad, why in [
        ("", "empty"),
        ("Here you go: " + json.dumps(obj), "not a single JSON object"),
        (json.dumps(obj) + " hope this helps", "not a single JSON object"),
        ("[1, 2]", "expected a JSON object"),
        ("x" * 40_000, "limit"),
    ]:
        with pytest.raises(Rejection, match=why):
            read_answer(bad)


def test_every_schema_problem_is_reported() -> None:
    obj = story_answer(STORIES[0])
    del obj["hidden_need"]
    obj["age"] = "old"
    obj["background"]["timeline"] = ["only one entry here"]
    obj["reactions"].pop("off_target")
    obj["traits"] = ["one"]
    obj["persona"] = "short"
    plan = plan_attempt([SeedTopic("t")], 0, 0)
    with pytest.raises(Rejection) as info:
        answer_to_profile(obj, plan, "en", with_opening=True, source="t")
    reason = info.value.reason
    for expected in (
        "hidden_need: expected a string, got nothing",
        "age: expected an integer",
        "background.timeline: expected 2-12 entries, got 1",
        "reactions.off_target: expected a string",
        "traits: expected 2-5 words, got 1",
        "persona: length 5 outside",
        "opening: expected a string",
    ):
        assert expected in reason
    assert info.value.kind == "schema"


def test_plans_are_deterministic_and_cover_topics() -> None:
    topics = [SeedTopic(f"topic {i}") for i in range(10)]
    plans = [plan_attempt(topics, 3, i) for i in range(10)]
    assert plans == [plan_attempt(topics, 3, i) for i in range(10)]
    assert {p.topic.topic for p in plans} == {t.topic for t in topics}
    assert [p.topic for p in plans] != [p.topic for p in (plan_attempt(topics, 4, i) for i in range(10))]
    msgs = build_messages(plans[0], "en", with_opening=False)
    assert '"opening"' not in msgs[0].content and plans[0].topic.topic in msgs[1].content


def test_seed_topic_files(tmp_path: Path) -> None:
    for lang in ("en", "zh"):
        topics = bundled_seed_topics(lang)
        assert len(topics) >= 30 and sum(1 for t in topics if t.openings) >= 5
        assert len({t.topic for t in topics}) == len(topics)
    txt = tmp_path / "t.txt"
    txt.write_text("# comment\nlosing a job\n\nmoving abroad\n", encoding="utf-8")
    assert [t.topic for t in load_seed_topics(txt)] == ["losing a job", "moving abroad"]
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"topic": "ok"}\n{"openings": []}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"t.jsonl:2: topic"):
        load_seed_topics(bad)


def test_cli_errors_are_clear(tmp_path: Path, fake_server: FakeChatServer) -> None:
    runner = CliRunner()
    result = runner.invoke(
        _app(),
        [
            "profiles",
            "generate",
            "--n",
            "1",
            "--out",
            str(tmp_path / "o.jsonl"),
            "--model",
            "m",
            "--base-url",
            fake_server.url,
            "--lang",
            "fr",
        ],
    )
    assert result.exit_code != 0 and isinstance(result.exception, InputError)
    assert "--lang" in str(result.exception)
    missing = tmp_path / "nope.jsonl"
    result = runner.invoke(
        _app(),
        [
            "profiles",
            "generate",
            "--n",
            "1",
            "--out",
            str(tmp_path / "o.jsonl"),
            "--model",
            "m",
            "--base-url",
            fake_server.url,
            "--seed-topics",
            str(missing),
        ],
    )
    assert isinstance(result.exception, InputError) and "no such seed-topic file" in str(result.exception)


def test_generate_through_the_installed_cli(tmp_path: Path) -> None:
    """The real entry point (`python -m rlver profiles generate`) as a subprocess."""
    import os
    import subprocess
    import sys

    out = tmp_path / "cli.jsonl"
    responder = ScriptedResponder([json.dumps(story_answer(s, opening=True)) for s in STORIES[:3]])
    with FakeChatServer(responder) as server:
        result = subprocess.run(
            [
                sys.executable, "-m", "rlver", "profiles", "generate",
                "--n", "3", "--out", str(out), "--model", "fake", "--base-url", server.url,
                "--key-env", "RLVER_TEST_GEN_KEY", "--with-opening", "--seed", "5", "--json",
            ],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "RLVER_TEST_GEN_KEY": FAKE_KEY},
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total"] == 3
    profiles = [Profile.model_validate(o) for o in _lines(out)]
    assert all(p.opening and p.opening.startswith("Hi. I am") for p in profiles)
    assert FAKE_KEY not in result.stdout + result.stderr
