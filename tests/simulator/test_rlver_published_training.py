"""A real ``rlver train`` rollout sends what the published ``PlayerSimulator`` sends, byte for byte.

The reference is the fetched ``hard_player_simulator_dsv3.py`` run as the published rollout runs it
(RLVER ``rl_dataset.py:167-169`` makes one ``PlayerSimulator`` per prompt and calls ``reply(None)`` for
the opening; ``vllm_rollout_spmd.py:446-450`` gives each of the prompt's ``n`` dialogues a ``clone()``;
``:504`` calls ``reply(text)`` with the agent's decoded text after every reply), through its own
``__init__``, ``reply(None)``, ``clone()`` and ``reply(text)``, with ``call_api`` answering from the same
deterministic judge as the HTTP server that ``rlver train`` talks to. The judge varies its answers:
changes up and down (beyond ±10, to 100 and below 0), an answer whose change does not parse or that is
empty (re-sent), an empty reply, a goodbye.

The published code makes one more call in every ``__init__`` (``:69``; a clone runs ``__init__`` too,
``:395``) and throws its answer away; those calls are left out of the comparison (docs/published-text.md,
published bugs). Its profile file is the dialogue's own profile, and ``generate_role`` reads a ``topic``
the published profiles lack (``:91``): the test adds one.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers import published_training_argv, run_rlver
from rlver.simulator.llm import published_text
from rlver.testing.openai_server import FakeChatServer
from rlver.transcripts.native import read_transcript
from test_rlver_published import training_simulator_class
from test_sage_published import _fresh_texts  # noqa: F401 (an autouse fixture)

#: Stated changes, picked by a prompt's digest: up, down, beyond the ±10 clamp the training simulator
#: does not apply, with brackets and quotes, and the "变化" form whose last line is read.
CHANGES = ("+5", "-3", "+15", "-20", "[+7]", "0", "-45", "“+40”", "变化：\n+2", "-8", "+100")


class TrainingJudge:
    """Answers the published training simulator's two prompts, deterministically by the prompt.

    An appraisal prompt seen for the first time is, for some prompts, answered empty or with a change
    that does not parse (both sides then send it again); a reply is sometimes empty or a goodbye. One
    instance per side: each counts the prompts it has seen.
    """

    def __init__(self, appraisal_head: str) -> None:
        self.head = appraisal_head
        self.seen: Counter[str] = Counter()

    def __call__(self, prompt: str) -> str:
        digest = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
        if prompt.startswith(self.head):
            self.seen[prompt] += 1
            if self.seen[prompt] == 1 and digest % 9 == 0:
                return ""
            if self.seen[prompt] == 1 and digest % 9 == 1:
                return "Content:\n看不太懂\nReason:\n-\nActivity:\n-\nAnalyse:\n-\nChange:\n还行吧"
            change = CHANGES[digest // 9 % len(CHANGES)]
            return (
                f"Content:\n他在安慰我{digest % 7}\nReason:\n[部分达到]\n\nActivity:\n心里一动\n"
                f"Analyse:\n有点被理解\nChange:\n{change}"
            )
        if digest % 17 == 0:
            return ""
        if digest % 17 == 1:
            return "Thinking:\n不想聊了\nResponse:\n“好吧，再见。”"
        return f"Thinking:\n[想一想]\n\nResponse:\n嗯……{digest % 1000}，我再说说。"


class Recorder:
    """The published ``call_api``: records each prompt and answers with the judge."""

    def __init__(self, judge: TrainingJudge) -> None:
        self.judge = judge
        self.prompts: list[str] = []

    def __call__(self, prompt: str, mode: str = "dsv3") -> str:
        self.prompts.append(prompt)
        return self.judge(prompt)


def _published_group(
    cls: Any, row: dict[str, Any], dialogues: list[list[str]], tmp_path: Path, api: Recorder
) -> tuple[list[str], list[list[tuple[str, int]]]]:
    """One prompt of the published rollout: ``PlayerSimulator`` and ``reply(None)``, then per dialogue
    a ``clone()`` and ``reply(text)`` for each agent reply. Returns the prompts whose answers the code
    uses, and per dialogue the user's replies with the emotion after each."""
    (tmp_path / "data").mkdir(exist_ok=True)
    role = {**row, "topic": "-"}  # generate_role reads a key the published profiles lack (dsv3 :91)
    (tmp_path / "data" / "train_profile.jsonl").write_text(json.dumps(role, ensure_ascii=False) + "\n")
    base = cls(str(tmp_path))  # its __init__ calls the model once and drops the answer (dsv3 :69)
    api.prompts.clear()
    opening = base.reply(None)["content"]
    used = list(api.prompts)
    said: list[list[tuple[str, int]]] = []
    for replies in dialogues:
        simulator = base.clone()  # __init__ again, one more dropped call (dsv3 :395)
        api.prompts.clear()
        turns = [(opening, simulator.emo_point)]
        for k, text in enumerate(replies, start=1):
            answer = simulator.reply(text)["content"]
            turns.append((answer, simulator.emo_point))
            ends = k > 8 or "再见" in answer or "拜拜" in answer or simulator.emo_point <= 0
            assert ends == (k == len(replies)), (row["id"], k, answer, simulator.emo_point)
        used += api.prompts
        said.append(turns)
    return used, said


@pytest.mark.slow  # a real `rlver train` of 8 dialogues of up to 9 replies: ~1 min on the 2-core box
def test_a_training_rollout_sends_the_published_player_simulators_requests(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        json.loads(line) for line in (shared_data / "rlver_train_profiles.jsonl").read_text().splitlines()[:3]
    ]
    train, held_out = rows[:2], rows[2:]
    for name, chosen in (("train.jsonl", train), ("held_out.jsonl", held_out)):
        (tmp_path / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chosen))
    head = published_text.training_texts().appraisal_template[:40]
    server_judge = TrainingJudge(head)
    answers: list[str] = []

    def answer(request: dict[str, Any]) -> str:
        answers.append(server_judge(request["messages"][0]["content"]))
        return answers[-1]

    with FakeChatServer(answer) as server:
        argv = published_training_argv(
            server.url, "rollout.rules.max_assistant_turns=8", "rollout.batch_size=2",
            "rollout.n_per_profile=4", "rollout.max_new_tokens=12", "model.max_length=8192",
            "eval.profiles=held_out.jsonl", "eval.dialogue=training",
        )  # fmt: skip
        done = run_rlver(*argv, cwd=tmp_path, timeout=900)
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    episodes = read_transcript(tmp_path / "run" / "transcript.jsonl").episodes
    assert len(episodes) == 8 and all(ep.status == "finished" for ep in episodes)

    def players(prompt: str) -> set[str]:
        return {r["id"] for r in rows if r["player"] in prompt}

    sent = [
        r["messages"] for r in requests if players(r["messages"][0]["content"]) & {r["id"] for r in train}
    ]
    monkeypatch.chdir(tmp_path)  # the published code reads data/train_profile.jsonl from here
    api = Recorder(TrainingJudge(head))
    cls = training_simulator_class(shared_data, monkeypatch, api)
    expected: list[str] = []
    for row in train:
        group = sorted((ep for ep in episodes if ep.profile_id == row["id"]), key=lambda ep: ep.sample_index)
        replies = [[m.content for m in ep.messages if m.role == "assistant"] for ep in group]
        used, said = _published_group(cls, row, replies, tmp_path, api)
        expected += used
        for ep, turns in zip(group, said, strict=True):
            users = [m.content for m in ep.messages if m.role == "user"]
            assert users == [text for text, _ in turns], ep.episode_id
            emotions = [t.appraisal.emotion_after for t in ep.user_turns if t.appraisal is not None]
            assert emotions == [emotion for _, emotion in turns[1:]], ep.episode_id
            assert ep.final_emotion == turns[-1][1]

    as_sent = [[{"role": "user", "content": prompt}] for prompt in expected]
    key = lambda messages: json.dumps(messages, ensure_ascii=False)  # noqa: E731
    assert sorted(map(key, sent)) == sorted(map(key, as_sent))
    assert len(sent) >= 96, len(sent)
    # the bodies too: the published call_api takes the prompt alone (dsv3 :35), so no sampling field
    assert all(set(r) == {"model", "messages"} for r in requests), {tuple(sorted(r)) for r in requests}
    extra = read_transcript(tmp_path / "run" / "transcript.jsonl").manifest.get("requests")
    assert extra == {"simulator": dict.fromkeys(("temperature", "top_p", "max_tokens"), "server default")}
    # what the judge's answers exercised (on both sides: the requests are the same)
    assert "" in answers and any("再见" in a for a in answers)
    assert any(n > 1 for n in server_judge.seen.values())  # a malformed or empty appraisal was re-sent
    finals = [ep.final_emotion for ep in episodes]
    assert max(finals) > 40 and min(finals) < 30, finals  # moved both ways, beyond a ±10 clamp's reach
