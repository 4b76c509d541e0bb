"""`rlver chat`, driven like a person would: a real subprocess with its stdin fed line by line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from rlver.testing.openai_server import FakeChatServer
from rlver.transcripts.audit import audit_file
from rlver.transcripts.native import read_transcript


def chat(*args: str, stdin: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", "chat", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_play_the_assistant_against_the_offline_user_with_no_setup(tmp_path: Path) -> None:
    save = tmp_path / "chat.jsonl"
    lines = [
        "That sounds really stressful. What did the complaint say?",
        "",  # empty lines are ignored
        "It makes sense that you keep replaying it; you clearly care about doing right by him.",
        "/quit",
        "never read",
    ]
    done = chat("--save", str(save), stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "You are the assistant" in out
    assert out.count("[emotion ") == 3  # opening + two appraised replies
    assert "tier " in out and "(you ended the dialogue)" in out
    assert "Dialogue over (ended by you)" in out
    t = read_transcript(save)
    [ep] = t.episodes
    assert ep.assistant_turns == 2 and len(ep.emotions) == 2
    assert ep.messages[2].content == lines[0]
    assert t.manifest["simulator"]["name"] == "offline"
    assert audit_file(save).ok


def test_save_is_checked_before_the_dialogue_and_a_folder_gets_a_transcript(tmp_path: Path) -> None:
    """A folder given to --save holds the dialogue as FOLDER/transcript.jsonl (what inspect reads);
    a path that cannot be written is refused before the first line is played, not after it."""
    folder = tmp_path / "chats"
    folder.mkdir()
    done = chat("--save", str(folder), stdin="That sounds hard. What happened?\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert read_transcript(folder / "transcript.jsonl").episodes
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    refused = chat("--save", str(blocker / "chat.jsonl"), stdin="That sounds hard.\n/quit\n")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("error: --save") and "is a file" in refused.stderr
    assert "You are the assistant" not in refused.stdout  # refused before the dialogue began


def test_dialogue_runs_to_the_turn_limit_in_chinese(tmp_path: Path) -> None:
    done = chat(
        "--language",
        "zh",
        "--max-assistant-turns",
        "2",
        stdin="听起来你真的很累。\n我在听，你慢慢说。\n多余的一行\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("[emotion ") == 3
    assert "Dialogue over (" in done.stdout and "多余的一行" not in done.stdout


def test_profile_file_and_end_of_input(tmp_path: Path) -> None:
    profile = {
        "id": "mine-1",
        "language": "en",
        "persona": "- Name: Sam\n- Job: baker",
        "background": "The shop's oven broke before the busiest weekend of the year.",
        "goal": "Vent about the oven.",
        "hidden_need": "To hear that panicking is understandable.",
        "opening": "The oven died. Of course it did, right before Saturday.",
    }
    path = tmp_path / "profiles.jsonl"
    path.write_text(json.dumps(profile) + "\n", encoding="utf-8")
    done = chat("--profile-file", str(path), stdin="Oh no, that timing is awful.\n")  # then EOF
    assert done.returncode == 0, done.stderr
    assert "Profile mine-1" in done.stdout and "The oven died." in done.stdout
    assert "(you ended the dialogue)" in done.stdout


def test_play_the_user_against_a_model_served_over_http(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def responder(body: dict[str, Any]) -> str:
        seen.append(body)
        return "<think>they sound low</think>I'm here. Do you want to tell me more?"

    save = tmp_path / "played-user.jsonl"
    with FakeChatServer(responder) as server:
        done = chat(
            "--play-user",
            "--model-base-url",
            server.url,
            "--model",
            "helper",
            "--think",
            "--show-thoughts",
            "--save",
            str(save),
            stdin="I had a rough day.\nMy boss yelled at me.\n/quit\n",
            env={"OPENAI_API_KEY": "sk-test-never-stored-4242"},
        )
    assert done.returncode == 0, done.stderr
    # Saved as a transcript with a chat manifest, like the other direction, so inspect/audit read it.
    t = read_transcript(save)
    [ep] = t.episodes
    assert t.manifest["kind"] == "chat" and t.manifest["agent"]["name"] == "helper"
    assert t.manifest["simulator"]["name"] == "person"
    assert [m.role for m in ep.messages][:3] == ["system", "user", "assistant"] and ep.assistant_turns == 2
    assert "sk-test-never-stored-4242" not in save.read_text()  # the key's variable name only
    assert ep.final_emotion == 40 and audit_file(save).ok, audit_file(save)
    assert done.stdout.count("Assistant: I'm here. Do you want to tell me more?") == 2
    assert "(thinking: they sound low)" in done.stdout
    assert len(seen) == 2
    roles = [m["role"] for m in seen[1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"] and "<think>" in seen[1]["messages"][0]["content"]


def test_usage_errors_are_clean() -> None:
    done = chat("--play-user", stdin="")
    assert done.returncode == 2 and "--model-base-url" in done.stderr and "Traceback" not in done.stderr
    done = chat("--language", "fr", stdin="")
    assert done.returncode == 2 and "expected en or zh" in done.stderr
    done = chat("--difficulty", "extreme", stdin="")
    assert done.returncode == 2 and "difficulty" in done.stderr and "Traceback" not in done.stderr
    done = chat("--profile", "no-such-profile-id", stdin="")
    assert done.returncode == 2 and "no-such-profile-id" in done.stderr


def test_play_follows_the_environments_rules_with_a_person_on_either_side() -> None:
    """rollout/interactive.py: `rlver chat` runs through DialogueEnv, so its turn limit and unappraised
    final reply are the environment's, and a person stopping on either side ends it with no reason."""
    import asyncio

    from rlver.env.dialogue import DialogueEnv, EnvConfig
    from rlver.llm.base import Completion
    from rlver.records import Message
    from rlver.rollout.interactive import PersonAsUser, person_profile, play

    def person(*said: str | None) -> Any:
        """A person who types ``said`` in turn; what was read is kept in ``asked``."""
        lines = iter(said)

        async def ask() -> str | None:
            line = next(lines)
            asked.append(line)
            return line

        return ask

    async def model(context: list[Message]) -> Completion:
        return Completion(text=f"reply {sum(m.role == 'assistant' for m in context) + 1}")

    async def quits(context: list[Message]) -> Completion | None:
        return None

    def run(user: Any, agent: Any, turns: int = 10, language: Any = "en") -> Any:
        env = DialogueEnv(PersonAsUser(user), EnvConfig.evaluation(max_assistant_turns=turns))
        return asyncio.run(play(env, person_profile(language), agent))

    asked: list[str | None] = []
    ep = run(person("hello", "still here", "never read"), model, turns=2)
    assert ep.end_reason == "turn_limit" and asked == ["hello", "still here"]  # the 2nd reply: no answer
    assert [m.content for m in ep.messages[1:]] == ["hello", "reply 1", "still here", "reply 2"]

    ep = run(person("hi", None), model, language="zh")  # the person quits after the first reply
    assert ep.end_reason is None and [m.role for m in ep.messages] == ["system", "user", "assistant"]
    ep = run(person("hi"), quits)  # the agent's side quits before replying
    assert ep.end_reason is None and ep.assistant_turns == 0


def test_set_reaches_the_simulator_kinds_own_options(tmp_path: Path) -> None:
    """``--set simulator.KEY=VALUE`` (eval's syntax) reaches an option only the kind reads: the offline
    user without its learned Chinese appraisal says so in the saved manifest. A key the kind does not
    read, or one outside ``simulator.``, exits 2 naming it, before the dialogue."""
    save = tmp_path / "chat.jsonl"
    done = chat(
        "--language", "zh", "--set", "simulator.learned=false", "--save", str(save), stdin="我在听。\n/quit\n"
    )
    assert done.returncode == 0, done.stderr
    assert read_transcript(save).manifest["simulator"]["appraisal"]["zh"] == "lexicon"
    plain = chat("--language", "zh", "--save", str(tmp_path / "plain.jsonl"), stdin="我在听。\n/quit\n")
    assert read_transcript(tmp_path / "plain.jsonl").manifest["simulator"]["appraisal"]["zh"] == "learned"
    assert plain.returncode == 0
    for bad, named in (
        ("simulator.show_traits=true", "simulator kind offline"),
        ("env.x=1", "simulator.KEY"),
    ):
        refused = chat("--set", bad, stdin="hi\n/quit\n")
        assert refused.returncode == 2 and named in refused.stderr, refused.stderr
        assert "You are the assistant" not in refused.stdout
