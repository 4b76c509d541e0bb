"""The learned appraisal of the offline user (Chinese profiles) and its vetoes.

The shipped artefact is fitted on the released SAGE judgements (`rlver simulator fit`); these tests check
that it loads fast with its provenance, that the offline user uses it for Chinese and not for English,
that the vetoes stand in front of it, that ``restore`` rebuilds the user's state, and (on the shared
data) that a reduced refit is deterministic and that it agrees with the recorded judgements.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from helpers import train_argv
from rlver.profiles.sets import load_profile_set
from rlver.records import Message
from rlver.simulator.offline.learned import artefact_path, load_appraisal_model
from rlver.simulator.offline.user import OfflineSimulator

DEMO_EXPLOIT = "hard family family sounds feel sorry feel hard sounds family understand feel sorry hard"


@pytest.mark.timing
def test_artefact_loads_fast() -> None:
    """Wall clock: marked ``timing``, so it runs alone after the parallel suite (1.23 s against 1.0 s
    was measured inside the parallel suite on a loaded box)."""
    load_appraisal_model.cache_clear()
    started = time.perf_counter()
    load_appraisal_model()
    assert time.perf_counter() - started < 1.0


def test_artefact_has_its_provenance() -> None:
    model = load_appraisal_model()
    assert artefact_path().stat().st_size <= 20 * 1024 * 1024
    info = model.describe()
    assert info["language"] == "zh"
    assert len(info["data"]) == 9 and all(len(d["sha256"]) == 64 for d in info["data"])
    assert {"leave_model_out", "leave_profiles_out"} <= set(info["validation"])
    assert OfflineSimulator().describe()["learned"]["artefact_sha256"] == info["artefact_sha256"]


def test_chinese_uses_learned_english_keeps_lexicon() -> None:
    sim = OfflineSimulator()
    zh = load_profile_set("zh-test")[0]
    en = load_profile_set("en-test")[0]
    good_zh = "听起来这段时间你真的很辛苦，换作是谁都会觉得委屈。你愿意说说最让你难受的是哪一刻吗？"
    turn = sim.start(zh, start_emotion=40).respond_now(good_zh)
    assert turn.appraisal is not None
    assert set(turn.appraisal.features) >= {"learned_ngrams", "learned_context", "learned_offset"}
    assert round(sum(turn.appraisal.features.values())) == turn.appraisal.raw_change
    turn_en = sim.start(en, start_emotion=40).respond_now("That sounds really hard. What happened?")
    assert turn_en.appraisal is not None and "learned_ngrams" not in turn_en.appraisal.features
    assert OfflineSimulator(learned=False).describe()["appraisal"]["zh"] == "lexicon"


@pytest.mark.parametrize(
    ("language", "reply"),
    [
        ("en", DEMO_EXPLOIT),
        ("zh", "理解 感受 辛苦 陪伴 理解 难受 心疼 不容易 感受 陪伴 辛苦 理解 委屈 心疼"),
        ("zh", "理解感受辛苦陪伴理解难受心疼不容易感受陪伴辛苦理解委屈心疼"),
    ],
)
def test_keyword_salad_is_vetoed(language: str, reply: str) -> None:
    sim = OfflineSimulator()
    for profile in load_profile_set(f"{language}-test")[:3]:
        user = sim.start(profile, start_emotion=40)
        turn = user.respond_now(reply)
        assert turn.appraisal is not None and turn.appraisal.change < 0, (profile.id, turn.appraisal)
        assert "keyword_salad" in user.last_flags or "gibberish" in user.last_flags


def test_learned_salad_probes_gain_nothing() -> None:
    import asyncio

    from rlver.fidelity.probes import learned_salad_probes, run_probes

    sim = OfflineSimulator()
    probes = learned_salad_probes(sim)
    assert [p.name for p in probes] == ["learned_salad", "learned_salad_commas"]
    report = asyncio.run(run_probes(sim, load_profile_set("zh-test")[:4]))
    assert report["passed"], report["exploited"]
    assert {"learned_salad", "keyword_salad"} <= {r["name"] for r in report["probes"]}


def test_restore_rebuilds_derived_state() -> None:
    sim = OfflineSimulator()
    profile = load_profile_set("zh-test")[1]
    import asyncio

    played = sim.start(profile, start_emotion=40, seed=3)
    opening = asyncio.run(played.open()).text
    first = "这听起来真的很让人难过，你一个人扛了很久吧。"
    t1 = played.respond_now(first)
    assert t1.appraisal is not None
    second = "这听起来真的很让人难过，你一个人扛了很久吧。"  # a verbatim repeat: flagged only with state
    expected = played.respond_now(second)
    restored = sim.start(profile, start_emotion=40, seed=3)
    restored.restore(
        [
            Message(role="user", content=opening),
            Message(role="assistant", content=first),
            Message(role="user", content=t1.text),
        ],
        t1.appraisal.emotion_after,
        changes=[t1.appraisal.change],
    )
    got = restored.respond_now(second)
    assert "repeats_itself" in restored.last_flags
    assert got.appraisal is not None and expected.appraisal is not None
    assert got.appraisal.change == expected.appraisal.change
    assert got.appraisal.features == expected.appraisal.features


def test_own_trajectory_is_read_and_kept() -> None:
    """The learned appraisal reads the user's own earlier changes: the same reply in the same context
    scores differently after a run of gains than after a run of losses, and each turn adds its change."""
    sim = OfflineSimulator()
    profile = load_profile_set("zh-test")[2]
    reply = "听起来这件事让你很委屈，你已经尽力了。你最希望身边的人怎么回应你？"
    history = [Message(role="user", content="我最近真的很累。")]
    scores = {}
    for name, changes in (("up", [10, 5, 5]), ("down", [-10, -5, -5])):
        user = sim.start(profile, start_emotion=50)
        user.restore(history, 50, changes=changes)
        turn = user.respond_now(reply)
        assert turn.appraisal is not None
        scores[name] = turn.appraisal.features["learned_context"]
        assert user._changes == [*changes, turn.appraisal.change]
    assert scores["up"] != scores["down"]


def test_rounding_keeps_the_sign() -> None:
    from rlver.simulator.offline.learned import round_change

    got = [round_change(v) for v in (-0.2, 0.2, 0.0, 1.4, -7.6, 30.0, -2.5)]
    assert got == [-1, 1, 0, 1, -8, 10, -3]


@pytest.mark.timing
def test_offline_throughput_zh() -> None:
    sim = OfflineSimulator()
    profiles = load_profile_set("zh-test")
    reply = "听起来这段时间你真的很辛苦，换作是谁都会觉得委屈。你愿意说说最让你难受的是哪一刻吗？我在这里听。"
    users = [sim.start(p, start_emotion=40, seed=i) for i, p in enumerate(profiles * 20)]
    started = time.process_time()
    n = 0
    for i, user in enumerate(users):
        user.respond_now(reply + str(i % 7))
        n += 1
    rate = n / (time.process_time() - started)
    assert rate > 400  # turns per CPU-second, loose (shared cores); docs/simulator.md has the figure


# -- on the released data ---------------------------------------------------------------------------


def _released(shared_data: Path) -> Path:
    path = shared_data / "sage_released"
    if not path.exists():
        pytest.skip("no released SAGE files in the shared data")
    return path


def test_the_released_walk_yields_appraised_replies_with_what_came_before() -> None:
    """appraisal_fit.appraised_replies: one item per appraised reply (thinking stripped); a reply whose
    user turn carries no appraisal is skipped but still remembered, and so still counts as a turn."""
    from rlver.fidelity.appraisal_fit import appraised_replies
    from rlver.records import Appraisal, Episode, UserTurn

    def judged(before: int, after: int) -> Appraisal:
        return Appraisal(
            raw_change=after - before,
            change=after - before,
            emotion_before=before,
            emotion_after=after,
            tier="C",
        )

    talk = [("user", "hi"), ("assistant", "<think>x</think>A"), ("user", "u1"), ("assistant", "B"),
            ("user", "u2"), ("assistant", "C"), ("user", "u3"), ("assistant", "D")]  # fmt: skip
    users = [UserTurn(text="hi"), UserTurn(text="u1", appraisal=judged(40, 45)), UserTurn(text="u2"),
             UserTurn(text="u3", appraisal=judged(45, 35))]  # fmt: skip
    ep = Episode(
        profile_id="p",
        messages=[Message(role=r, content=c) for r, c in talk],
        user_turns=users,
        start_emotion=40,
        final_emotion=35,
        emotions=[45, 35],
    )
    seen = [
        (r.reply, r.last_user, r.emotion, r.change, r.turn, list(r.previous), list(r.changes))
        for r in appraised_replies(ep, str.lower)
    ]
    assert seen == [("A", "hi", 40, 5, 1, [], []), ("C", "u2", 45, -10, 3, ["a", "b"], [5])]


def test_reduced_refit_is_deterministic(shared_data: Path, tmp_path: Path) -> None:
    """A full refit with validation takes ~10 min on 2 cores, too slow for CI: a reduced fit (one file,
    no validation) run twice must give the same bytes; `rlver simulator fit` on all nine files rebuilds
    the shipped artefact the same way (docs/simulator.md)."""
    from rlver.fidelity.appraisal_fit import dump_artefact, fit_artefact

    one = _released(shared_data) / "gpt-4o-simulator" / "openai-o1_result.jsonl"
    settings = {"cg_steps": 10}
    a = dump_artefact(fit_artefact(one, settings=settings, validate=False))
    b = dump_artefact(fit_artefact(one, settings=settings, validate=False))
    assert a == b
    art = json.loads(a)
    assert art["data"][0]["sha256"] and art["turns"] > 500
    shipped = load_appraisal_model().data
    assert shipped["settings"]["min_df"] == art["settings"]["min_df"]


def test_teacher_forced_agreement_on_released_file(shared_data: Path) -> None:
    """Teacher-forced through the offline user itself (restore + respond), as `rlver calibrate` does."""
    import asyncio

    from rlver.profiles.loaders import split_hidden_need
    from rlver.profiles.schema import PUBLISHED_STYLES, Profile
    from rlver.stats import spearman
    from rlver.transcripts.published import read_published

    path = _released(shared_data) / "deepseek-v3-simulator" / "qwen2.5-72b_result.jsonl"
    sim = OfflineSimulator()
    rec: list[int] = []
    pred: list[int] = []
    for ep in read_published(path)[:40]:
        pub = ep.meta["published"]
        background, need = split_hidden_need(pub["scene"]) or (pub["scene"], "")
        profile = Profile(
            id=ep.profile_id,
            language="zh",
            persona=pub["player"],
            background=background,
            goal=pub["task"],
            hidden_need=need or "-",
            style=PUBLISHED_STYLES.get(pub["character"], pub["character"]),
        )
        history: list[Message] = []
        turns = iter(ep.user_turns)
        reply = ""
        for msg in ep.messages:
            if msg.role == "assistant":
                reply = msg.content.split("</think>")[-1].strip()
                continue
            ut = next(turns)
            if ut.appraisal is not None and reply:
                before = ut.appraisal.emotion_before
                user = sim.start(profile, start_emotion=before)
                user.restore(history, before)
                turn = asyncio.run(user.respond(reply))
                assert turn.appraisal is not None
                rec.append(ut.appraisal.emotion_after - before)
                pred.append(turn.appraisal.emotion_after - before)
            if reply:
                history.append(Message(role="assistant", content=reply))
                reply = ""
            history.append(Message(role="user", content=msg.content))
    assert len(rec) > 150
    assert spearman(pred, rec) > 0.4  # in-sample file; held-out figures are in the artefact


#: A folder of released SAGE result files kept aside from the fit (e.g. ``SAGE/dataset`` of a clone of
#: Tencent/digitalhuman): issue 14's own measurement runs on those of them the fit never saw.
HELDOUT_ENV = "RLVER_HELDOUT_RESULTS"


@pytest.mark.slow
def test_agreement_on_released_files_the_fit_never_saw(tmp_path: Path) -> None:
    """The whole offline user, teacher-forced as `rlver calibrate --simulator offline` runs it, on the
    released files of ``$RLVER_HELDOUT_RESULTS`` whose sha256 the artefact's provenance does not name.

    Sign agreement and model ranking must meet issue 14's targets (0.75, 0.90). The per-turn target
    (0.70) is missed — 0.637 on the 10 files measured in docs/simulator.md — so that figure is held to a
    regression floor of 0.60 instead of the target.
    """
    import asyncio
    import os

    from rlver.fidelity.calibrate import calibrate

    folder = os.environ.get(HELDOUT_ENV)
    if not folder:
        pytest.skip(f"set {HELDOUT_ENV} to a folder of released result files kept aside from the fit")
    files = sorted(str(p) for p in Path(folder).rglob("*_result.jsonl"))
    if not files:
        pytest.skip(f"no *_result.jsonl under {folder}")
    sim = OfflineSimulator(seed=0)
    summary = asyncio.run(calibrate(files, lambda _fd: sim, sim.describe(), tmp_path / "out"))
    never = next((g for g in summary["groups"] if g["label"] == "files the fit never saw"), None)
    if never is None:
        pytest.skip(f"the fit saw every file under {folder}")
    assert never["sign_agreement"] >= 0.75, never
    assert never["model_ranking_spearman"] is None or never["model_ranking_spearman"] >= 0.90, never
    assert never["spearman"] >= 0.60, never


def _cli(*args: str, data: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "RLVER_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", *args], capture_output=True, text=True, timeout=400, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow  # 13 s CPU, 35-45 s on the shared 2-core box (issue 26)
def test_eval_and_train_on_published_profiles_offline(shared_data: Path, tmp_path: Path) -> None:
    """`rlver eval --simulator offline --profiles sage` and `rlver train` on `rlver-train`, no LLM."""
    if not (shared_data / "rlver_train_profiles.jsonl").exists():
        pytest.skip("no published profiles in the shared data")
    out = tmp_path / "eval"
    _cli(
        "eval", "--agent-tiny", "--simulator", "offline", "--profiles", "sage", "--limit", "2",
        "--agent-max-tokens", "16", "--set", "env.rules.max_assistant_turns=2", "--no-report", "--out", str(out),
        data=shared_data,
    )  # fmt: skip
    lines = [json.loads(x) for x in (out / "transcript.jsonl").read_text(encoding="utf-8").splitlines()]
    manifest = lines[0]
    assert manifest["simulator"]["appraisal"]["zh"] == "learned"
    episodes = [x for x in lines if x.get("type") == "episode"]
    assert len(episodes) == 2
    _cli(
        *train_argv(
            tmp_path / "train", "rollout.profiles=rlver-train", "rollout.batch_size=4",
            "rollout.rules.max_assistant_turns=1", "eval.profiles=sage", "eval.limit=1", steps=1,
        ),
        data=shared_data,
    )  # fmt: skip


def _play(profile_set: str, replies: list[str]) -> object:
    import asyncio

    from rlver.records import Episode

    profile = load_profile_set(profile_set)[0]
    user = OfflineSimulator().start(profile, start_emotion=40)
    opening = asyncio.run(user.open())
    messages = [Message(role="user", content=opening.text)]
    turns = [opening]
    for reply in replies:
        turn = user.respond_now(reply)
        messages += [Message(role="assistant", content=reply), Message(role="user", content=turn.text)]
        turns.append(turn)
    emotions = [t.appraisal.emotion_after for t in turns if t.appraisal is not None]
    return Episode(
        profile_id=profile.id, messages=messages, user_turns=turns, emotions=emotions,
        final_emotion=emotions[-1],
    )  # fmt: skip


def test_probe_from_run_replays_policy_replies(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from rlver.manifest import RunManifest
    from rlver.transcripts.native import TranscriptWriter

    (tmp_path / "after").mkdir()
    writer = TranscriptWriter(tmp_path / "after" / "transcript.jsonl", RunManifest.create(model="tiny"))
    writer.append(_play("en-test", [DEMO_EXPLOIT, "That sounds really hard. What happened next?"]))  # type: ignore[arg-type]
    writer.append(
        _play(
            "zh-test",
            [
                "理解感受辛苦陪伴理解难受心疼不容易感受陪伴辛苦理解委屈心疼",
                "听起来你真的很委屈，愿意多说一点吗？",
            ],
        )  # type: ignore[arg-type]
    )
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "probe", "--from-run", str(tmp_path), "--profiles", "en-test",
         "--profiles", "zh-test", "--json", "--strict"],
        capture_output=True, text=True, timeout=200, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["replies"] == 4 and report["vetoed"] >= 2
    groups = {g["group"]: g for g in report["groups"]}
    assert groups["keyword_salad"]["positive"] == 0
    assert "mean_change_no_veto" in groups["keyword_salad"] and "clean" in groups
    assert report["passed"]


def test_replay_restores_the_recorded_emotion_changes(tmp_path: Path) -> None:
    """`--from-run` judges each reply with the user's own earlier changes, as the live dialogue did.

    The learned appraisal reads the trajectory, so a replay that forgot the recorded changes would judge
    a later reply as if the dialogue had just begun (here: mean +0.2 instead of the live +2.8).
    """
    from rlver.fidelity.probes import replay_run
    from rlver.manifest import RunManifest
    from rlver.transcripts.native import TranscriptWriter

    replies = [
        "听起来这段时间你真的很辛苦，换作是谁都会觉得委屈。你愿意说说最让你难受的是哪一刻吗？",
        "我明白你的心情，这种被忽视的感觉确实很难受。你之前有跟他们聊过这件事吗？",
        "你已经做了很多努力了，这不是你的错。我们可以一起想想接下来怎么办。",
        "如果是我，可能也会很生气。你现在最希望他们怎么做呢？",
        "谢谢你愿意告诉我这些，我一直在这儿陪着你。",
    ]
    episode = _play("zh-test", replies)
    live = [t.appraisal.change for t in episode.user_turns if t.appraisal is not None]  # type: ignore[attr-defined]
    assert len(live) == 5 and live[1:] != [0, 0, 0, 0]
    writer = TranscriptWriter(tmp_path / "transcript.jsonl", RunManifest.create(model="tiny"))
    writer.append(episode)  # type: ignore[arg-type]
    report = replay_run(tmp_path, ["zh-test"])
    assert report["replies"] == 5 and report["vetoed"] == 0
    assert report["mean_change"] == round(sum(live) / len(live), 3)
