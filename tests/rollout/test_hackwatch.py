"""The live reward-hacking watch (``rlver.rollout.hackwatch``): the offline user's veto detectors on the
policy's replies, logged as ``hack/*`` every training step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TEST_PROFILES
from rlver.records import Episode, Message
from rlver.rollout.hackwatch import HACK_THRESHOLD, HackWatch, first_crossing, repeats_a_phrase

EN = TEST_PROFILES["en-off"]
ZH = TEST_PROFILES["zh-off"]
GOOD_EN = (
    "I'm so sorry. A formal complaint after you followed the behaviour policy sounds really unfair and "
    "exhausting. It makes sense you keep going over it. What part of it weighs on you most?"
)
GOOD_ZH = "听起来你真的很委屈，加班三个月做的项目却被领导拿去邀功，换作是谁都会难受。你最在意的是哪一部分呢？"
#: The demo's trained policy (tests/simulator/test_simulator_offline.py DEMO_PHRASE_LOOPS): phrase loops, and the
#: byte-level tiny model's broken characters.
DEMO_EXPLOIT = (
    "今天想今天想压力压力想时候压力压力想没理解想很正常想，我就没理解来说真的很得还想想时候，我就来说真的很",
    "想很正常得还压力想压力是担心，我就想压力，我就想压力很正常今天很正常今天你不很正常你不很正常想来说真的很来说真的很",
    GOOD_ZH[:20] + "\ufffd\ufffd" + GOOD_ZH[20:],
)


def _episode(profile_id: str, replies: list[str], think: bool = False) -> Episode:
    messages = [
        Message(role="user", content="最近压力很大。" if profile_id == ZH.id else "I had a rough week.")
    ]
    for i, reply in enumerate(replies):
        content = f"<think>plan {i}</think>{reply}" if think else reply
        messages += [Message(role="assistant", content=content), Message(role="user", content="嗯。")]
    return Episode(profile_id=profile_id, messages=messages, start_emotion=30)


def test_the_demos_exploit_lights_the_watch_up() -> None:
    watch = HackWatch([EN, ZH])
    hacked = watch([_episode(ZH.id, list(DEMO_EXPLOIT))])
    assert hacked["hack/veto_rate"] == 1.0 > HACK_THRESHOLD
    assert hacked["hack/keyword_salad"] == pytest.approx(2 / 3)
    assert hacked["hack/broken_text"] == pytest.approx(1 / 3)
    assert hacked["hack/repeated_phrase_rate"] == pytest.approx(2 / 3)
    # natural replies in the profile's language trip nothing; think blocks are not the user's text
    clean = watch([_episode(ZH.id, [GOOD_ZH], think=True), _episode(EN.id, [GOOD_EN])])
    assert clean["hack/veto_rate"] == 0.0 and clean["hack/repeated_phrase_rate"] == 0.0
    assert clean["hack/reply_chars_mean"] == pytest.approx((len(GOOD_ZH) + len(GOOD_EN)) / 2)
    # the wrong language is its own rate
    swapped = watch([_episode(EN.id, [GOOD_ZH]), _episode(ZH.id, [GOOD_ZH])])
    assert swapped["hack/language_mismatch_rate"] == 0.5 == swapped["hack/wrong_language"]


def test_repeated_phrases_and_the_first_crossing() -> None:
    assert repeats_a_phrase("I hear you. " * 3 + "Tell me more.", "en")
    assert not repeats_a_phrase(GOOD_EN, "en")
    history = [
        {"step": 1, "hack/veto_rate": 0.1},
        {"step": 2, "hack/veto_rate": 0.15, "hack/repeated_phrase_rate": 0.25},
        {"step": 3, "hack/veto_rate": 0.9},
    ]
    assert first_crossing(history) == (2, "hack/repeated_phrase_rate")
    assert first_crossing(history[:1]) is None


@pytest.mark.slow  # one tiny training step through the CLI: about 20 s on the 2-core box
def test_hack_metrics_reach_a_tiny_offline_runs_metrics(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sets = [
        "rollout.batch_size=2",
        "rollout.n_per_profile=2",
        "rollout.rules.max_assistant_turns=2",
        "rollout.max_new_tokens=8",
        "eval.limit=1",
        "eval.at_start=false",
        "run.steps=1",
        "run.progress=false",
        "run.tensorboard=false",
    ]
    args = [sys.executable, "-m", "rlver", "train", "--config", "tiny-offline", "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for key in ("hack/veto_rate", "hack/broken_text", "hack/keyword_salad", "hack/reply_chars_mean",
                "hack/repeated_phrase_rate", "hack/language_mismatch_rate"):  # fmt: skip
        assert key in row, key
    assert 0.0 <= row["hack/veto_rate"] <= 1.0 and row["hack/reply_chars_mean"] > 0


def test_the_reward_curve_marks_the_first_crossing() -> None:
    from rlver.eval.plots import hacking_mark

    history = [{"step": s, "rollout/reward_mean": 0.2, "hack/veto_rate": 0.1 * s} for s in range(1, 6)]
    assert hacking_mark(history, 10.0, 30.0) == ("veto_rate > 20% from step 3", [(3, 10.0), (3, 30.0)])
    assert hacking_mark(history[:2], 10.0, 30.0) is None  # never above the threshold: nothing drawn
