"""``sage-published`` sends the requests SAGE's own code builds, byte for byte (issue 41).

The reference is SAGE's code itself: the fetched ``simulator_response.py`` and ``npc_response.py`` are
executed here, in the test only (rlver never imports or runs them), with ``call_llm`` replaced by a stub
that records each prompt and answers with what the released transcript says the judge answered. The
same dialogues are then played by ``rlver eval`` against a real OpenAI-compatible server on 127.0.0.1,
which answers the same way, and every request it receives is compared with SAGE's.

Two published bugs are filled in, as docs/published-text.md says: ``planning_reply`` reads
``player_data["target"]``, which ``player_init`` never sets (a KeyError as released; any integer makes the
second ``{{target}}`` replace a no-op, as it is once the first has run), and ``npc_response.py`` calls a
``call_llm`` it never defines.
"""

from __future__ import annotations

import hashlib
import json
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import run_rlver
from rlver.env.thinking import system_prompt
from rlver.eval.report_view import run_setup
from rlver.manifest import RunManifest
from rlver.simulator.llm import published_text
from rlver.testing.openai_server import FakeChatServer
from rlver.transcripts.native import read_transcript

#: Released files: the one dialogue ended by a goodbye alone (at emotion 30) is qwen2.5-72b's #10.
RELEASED = (
    "sage_released/deepseek-v3-simulator/qwen2.5-72b_result.jsonl",
    "sage_released/deepseek-v3-simulator/gpt-4.1_result.jsonl",
)
GOODBYE = ("再见", "拜拜")


@pytest.fixture(autouse=True)
def _fresh_texts() -> Iterator[None]:
    published_text.clear_cache()
    yield
    published_text.clear_cache()


class Stub:
    """SAGE's ``call_llm``: records each prompt, answers from a queue."""

    def __init__(self) -> None:
        self.prompts: list[Any] = []
        self.answers: list[str] = []

    def __call__(self, prompt: Any) -> str:
        self.prompts.append(prompt)
        return self.answers.pop(0) if self.answers else ""


def exec_source(
    source: str, path: Path, monkeypatch: pytest.MonkeyPatch, stub: Any, call: str = "call_llm"
) -> dict[str, Any]:
    """Run a published file's top level (defining its functions) with its model call (``call``) as
    ``stub`` and no 3-second sleeps. Its unused ``import requests`` gets a stand-in if need be."""
    monkeypatch.setitem(sys.modules, "requests", sys.modules.get("requests") or types.ModuleType("requests"))
    namespace: dict[str, Any] = {"__name__": "published_" + path.stem, "__file__": str(path)}
    exec(compile(source, str(path), "exec"), namespace)
    namespace[call] = stub
    namespace["time"] = types.SimpleNamespace(sleep=lambda _s: None)
    return namespace


def exec_published(path: Path, monkeypatch: pytest.MonkeyPatch, stub: Stub) -> dict[str, Any]:
    """:func:`exec_source` of a published SAGE file as it is."""
    return exec_source(path.read_text(encoding="utf-8"), path, monkeypatch, stub)


def appraisal_answer(planning: dict[str, Any], fit: str = "TargetCompletion") -> str:
    """A judge's answer in SAGE's output format (``fit``: the training simulator's ``Reason``), holding
    what the released transcript recorded."""
    return (
        f"Content:\n{planning['content']}\n{fit}:\n{planning['TargetCompletion']}\n"
        f"Activity:\n{planning['activity']}\nAnalyse:\n{planning['analyse']}\nChange:\n{planning['change']}"
    )


def reply_answer(turn: dict[str, Any]) -> str:
    return f"Thinking:\n{turn.get('thinking', '')}\nOrigin:\n-\nChange:\n-\nResponse:\n{turn['content']}"


def state_of(emotion: int) -> str:
    for name, low in (("Emotion-S", 100), ("Emotion-A", 70), ("Emotion-B", 40), ("Emotion-C", 10)):
        if emotion >= low:
            return name
    return "Emotion-F"


def pick_dialogues(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A goodbye, a dialogue to the turn limit (its 10th reply unappraised) and an emotion end."""

    def last_user(r: dict[str, Any]) -> dict[str, Any]:
        return [m for m in r["history"] if m["role"] == "user"][-1]

    def goodbye(r: dict[str, Any]) -> bool:
        last = last_user(r)
        return any(w in last["content"] for w in GOODBYE) and 10 <= last["emotion-point"] < 100

    def limit(r: dict[str, Any]) -> bool:
        return sum(m["role"] == "assistant" for m in r["history"]) == 10

    def emotion_end(r: dict[str, Any]) -> bool:
        last = last_user(r)
        return not any(w in last["content"] for w in GOODBYE) and not 10 <= r["emo_point"] < 100

    chosen: list[dict[str, Any]] = []
    for rule in (goodbye, limit, emotion_end):
        chosen.append(next(r for r in records if rule(r) and r["id"] not in {c["id"] for c in chosen}))
    return chosen


def sage_requests(
    record: dict[str, Any], simulator: dict[str, Any], npc: dict[str, Any], stub: Stub
) -> tuple[list[str], list[list[dict[str, str]]]]:
    """SAGE's simulator prompts and agent messages for every state of a released dialogue."""
    history = record["history"]
    prompts: list[str] = []
    agent: list[list[dict[str, str]]] = []
    for k in range(1, sum(m["role"] == "assistant" for m in history) + 1):
        stub.prompts.clear()
        npc["call_npc"]([{"role": m["role"], "content": m["content"]} for m in history[: 2 * k - 1]])
        agent.append(stub.prompts[0])
        if 2 * k >= len(history):
            break  # the last reply of a dialogue at the turn limit is never appraised
        before = history[2 * k - 2]["emotion-point"]
        player_data = {
            "emo_point": before,
            "emo_state": "Emotion-B" if k == 1 else state_of(before),
            "player": record["player"],
            "scene": record["scene"],
            "history": [{"role": m["role"], "content": m["content"]} for m in history[: 2 * k]],
            "target": 0,  # read by planning_reply, never set by the published code
        }
        stub.prompts.clear()
        stub.answers = [appraisal_answer(history[2 * k]["planning"]), reply_answer(history[2 * k])]
        after = simulator["chat_player"](player_data)
        assert after["emo_point"] == history[2 * k]["emotion-point"]  # the stub answered as released
        prompts.extend(stub.prompts)
    return prompts, agent


class ReleasedJudge:
    """The server's answers: the released agent replies and the released judge's appraisals."""

    def __init__(self, records: list[dict[str, Any]], appraisal_head: str) -> None:
        self.records = records
        self.appraisal_head = appraisal_head

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request["messages"]
        if request["model"] == "policy":
            record = next(r for r in self.records if r["history"][0]["content"] == messages[1]["content"])
            k = sum(m["role"] == "assistant" for m in messages) + 1
            return str(record["history"][2 * k - 1]["content"])
        prompt = messages[0]["content"]
        record = next(r for r in self.records if r["player"] in prompt)
        k = prompt.count('"role": "NPC"')
        turn = record["history"][2 * k]
        return (
            appraisal_answer(turn["planning"])
            if prompt.startswith(self.appraisal_head)
            else reply_answer(turn)
        )


def _dialogue_of(records: list[dict[str, Any]]) -> Callable[[dict[str, Any]], int]:
    def which(request: dict[str, Any]) -> int:
        messages = request["messages"]
        if request["model"] == "policy":
            return next(
                i for i, r in enumerate(records) if r["history"][0]["content"] == messages[1]["content"]
            )
        return next(i for i, r in enumerate(records) if r["player"] in messages[0]["content"])

    return which


def run_sage_published_eval(responder: Any, folder: Path, *flags: str) -> list[dict[str, Any]]:
    """``rlver eval`` of ``folder/profiles.jsonl`` with SAGE's prompts on both sides, the agent and
    the judge answered by ``responder`` on a local server; the requests it received."""
    with FakeChatServer(responder) as server:
        done = run_rlver(
            "eval", *flags, "--agent-base-url", server.url, "--agent-model", "policy",
            "--simulator", "llm", "--sim-base-url", server.url, "--sim-model", "sim", "--sim-key-env", "",
            "--profiles", str(folder / "profiles.jsonl"), "--sim-prompts", "sage-published",
            "--agent-prompt", "sage-published", "--out", "run", "--no-report",
            cwd=folder,
        )  # fmt: skip
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    return requests


def test_an_eval_sends_sages_own_requests_byte_for_byte(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = [
        json.loads(line)
        for name in RELEASED
        for line in (shared_data / name).read_text(encoding="utf-8").splitlines()
    ]
    records = pick_dialogues(released)
    rows = {
        json.loads(line)["id"]: line
        for line in (shared_data / "sage_test_profiles.jsonl").read_text().splitlines()
    }
    (tmp_path / "profiles.jsonl").write_text(
        "\n".join(rows[r["id"]] for r in records) + "\n", encoding="utf-8"
    )
    stub = Stub()
    code = shared_data / "published_code" / "sage"
    simulator = exec_published(code / "simulator_response.py", monkeypatch, stub)
    npc = exec_published(code / "npc_response.py", monkeypatch, stub)

    head = published_text.sage_texts().appraisal_template[:40]
    requests = run_sage_published_eval(ReleasedJudge(records, head), tmp_path)

    which = _dialogue_of(records)
    compared = 0
    for i, record in enumerate(records):
        prompts, agent_messages = sage_requests(record, simulator, npc, stub)
        sent_sim = [r["messages"] for r in requests if r["model"] == "sim" and which(r) == i]
        sent_agent = [r for r in requests if r["model"] == "policy" and which(r) == i]
        assert sent_sim == [[{"role": "user", "content": p}] for p in prompts]
        assert [r["messages"] for r in sent_agent] == agent_messages
        assert all("seed" not in r for r in sent_agent)  # SAGE's call_npc sends none
        compared += len(prompts) // 2
    assert compared >= 20  # states (an appraisal and a reply each), the first turn and a goodbye among them

    episodes = {ep.profile_id: ep for ep in read_transcript(tmp_path / "run" / "transcript.jsonl").episodes}
    for record in records:
        ep = episodes[record["id"]]
        released_emotions = [m["emotion-point"] for m in record["history"][2::2]]
        assert [t.appraisal.emotion_after for t in ep.user_turns[1:] if t.appraisal] == released_emotions
        assert ep.final_emotion == record["emo_point"]
    manifest = read_transcript(tmp_path / "run" / "transcript.jsonl").manifest
    assert manifest["simulator"]["prompts"] == "sage-published"
    assert manifest["simulator"]["published_files"]["sage/simulator_response.py"].startswith("027a3eca")
    assert manifest["agent_prompt"]["system_prompt_file"]["file"] == "sage/npc_response.py"
    setup = run_setup(RunManifest.read(manifest))  # the report's header says which text ran
    assert "sage-published: sage/simulator_response.py sha256 027a3eca735e" in setup["simulator prompts"]
    assert setup["agent prompt"].startswith("sage/npc_response.py (sha256 a2345b4728a4")


def think_reply(k: int) -> str:
    """The agent's k-th reply under ``--think``: a thought and a reply, a thought cut at the token cap
    (no ``</think>``), another spelling of the tag (text, not a tag), and text on both sides."""
    return (
        f"<think>第{k}句，先想想他的感受</think>\n我在听，慢慢说。{k}",
        f"<think>第{k}句还没想完",
        f"<THINK>第{k}句大写</THINK>嗯，明白。",
        f"先说一句{k}<think>中间想一下</think> 再说一句{k} ",
    )[k % 4]


def shown_in_think_layout(raw: str) -> str:
    """The documented think layout (docs/published-text.md, "The reply layout"; RLVER
    vllm_rollout_spmd_think.py:402-406): the text after the last ``</think>``, stripped, else the reply."""
    return raw.split("</think>")[-1].strip() if "</think>" in raw else raw


class ThinkJudge:
    """A deterministic judge in SAGE's format: the change and the reply depend on the whole prompt."""

    def __init__(self, appraisal_head: str) -> None:
        self.head = appraisal_head

    def __call__(self, prompt: str) -> str:
        digest = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
        if prompt.startswith(self.head):
            change = ("+5", "-5", "+10", "0", "-10")[digest % 5]
            return f"Content:\n理解{digest % 9}\nTargetCompletion:\n一半\nActivity:\n想\nAnalyse:\n还行\nChange:\n{change}"
        return f"Thinking:\n想一想\nResponse:\n嗯，{digest % 100}。"


def test_a_think_eval_sends_the_documented_layout(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--think`` under ``sage-published``: the simulator is shown, and the agent's later turns see,
    the text after each reply's last ``</think>`` (one history, as in SAGE's loop, holding what the
    think rollout shows); SAGE's system prompt gains rlver's think instruction, which says exactly that.
    Compared request by request with SAGE's own ``chat_player`` and ``call_npc`` fed that history."""
    rows = [
        json.loads(line) for line in (shared_data / "sage_test_profiles.jsonl").read_text().splitlines()[:3]
    ]
    (tmp_path / "profiles.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    judge = ThinkJudge(published_text.sage_texts().appraisal_template[:40])

    def answer(request: dict[str, Any]) -> str:
        messages = request["messages"]
        if request["model"] == "policy":
            return think_reply(sum(m["role"] == "assistant" for m in messages) + 1)
        return judge(messages[0]["content"])

    requests = run_sage_published_eval(answer, tmp_path, "--think")

    class Loop:  # SAGE's call_llm for both files: the agent's reply, or the judge's answer
        k = 0
        prompts: list[Any] = []

        def __call__(self, prompt: Any) -> str:
            self.prompts.append(prompt)
            return think_reply(self.k) if isinstance(prompt, list) else judge(prompt)

    loop = Loop()
    code = shared_data / "published_code" / "sage"
    simulator = exec_published(code / "simulator_response.py", monkeypatch, loop)  # type: ignore[arg-type]
    npc = exec_published(code / "npc_response.py", monkeypatch, loop)  # type: ignore[arg-type]
    instruction = system_prompt(True, "zh", "sage-published").removeprefix(published_text.sage_agent_prompt())
    thoughts_hidden = 0
    for row in rows:
        player: dict[str, Any] = {
            "emo_point": 40, "emo_state": "Emotion-B", "player": row["player"], "scene": row["scene"],
            "history": [{"role": "user", "content": row["first_talk"], "emotion-point": 40}], "target": 0,
        }  # fmt: skip
        agent_expected, simulator_expected = [], []
        for k in range(1, 11):  # SAGE's loop (test_npc.py:90-115) with the layout's history
            loop.k, loop.prompts = k, []
            npc["call_npc"](player["history"])
            system, *rest = loop.prompts[0]
            agent_expected.append([{**system, "content": system["content"] + instruction}, *rest])
            shown = shown_in_think_layout(think_reply(k))
            thoughts_hidden += shown != think_reply(k)
            player["history"].append({"role": "assistant", "content": shown})
            if k == 10:
                break  # the 10th reply is never appraised
            loop.prompts = []
            player = simulator["chat_player"](player)
            simulator_expected += [[{"role": "user", "content": p}] for p in loop.prompts]
            last = player["history"][-1]
            if any(w in last["content"] for w in GOODBYE) or not 10 <= last["emotion-point"] < 100:
                break
        mine = [r for r in requests if row["first_talk"] in json.dumps(r["messages"], ensure_ascii=False)]
        assert [r["messages"] for r in mine if r["model"] == "policy"] == agent_expected, row["id"]
        assert [r["messages"] for r in mine if r["model"] == "sim"] == simulator_expected, row["id"]
    assert thoughts_hidden >= 6  # replies whose thoughts the layout kept from both sides
    assert "</think>" in instruction  # the instruction names the tag
    manifest = read_transcript(tmp_path / "run" / "transcript.jsonl").manifest
    assert manifest["reply_layout"] == {
        "simulator": "after_think",
        "agent_history": "after_think",
        "cut_at": None,
    }
