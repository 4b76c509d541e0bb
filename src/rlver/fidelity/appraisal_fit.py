"""Fitting the learned appraisal (:mod:`rlver.simulator.offline.learned`) on released SAGE result files.

The runtime scorer lives in the simulator layer; its fit lives here in :mod:`rlver.fidelity` because it
reads the released transcripts (``transcripts``) and strips thinking (``env``), both above the simulator.
:func:`appraised_replies` is the one walk over a released dialogue's appraised replies; an appraisal
with other features (e.g. the transfer appraisal's bench script) walks with it too.

``rlver simulator fit --data DIR --out PATH`` runs :func:`fit_artefact`: it reads every
``*_result.jsonl`` under ``DIR`` (through :mod:`rlver.transcripts.published`, the one reader of that
format), turns each appraised turn into the features the offline user computes at run time, validates
by leaving whole agent models out and whole profiles out, then fits on everything and writes the
weights with their provenance. Everything is deterministic (sorted inputs, sorted vocabulary, a fixed
number of conjugate-gradient steps, rounded weights), so the same data give the same bytes.

Ridge regression by conjugate gradients on a sparse matrix kept as CSR numpy arrays: the fit needs
numpy only and about 100 MB of memory, which matters on a shared 2-core box.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from rlver.env.thinking import visible_text
from rlver.errors import InputError, Problem
from rlver.io import file_sha256
from rlver.profiles.loaders import split_hidden_need
from rlver.profiles.schema import PUBLISHED_STYLES
from rlver.records import Episode
from rlver.simulator.offline.learned import (
    DENSE_NAMES,
    FEATURES_VERSION,
    ProfileText,
    ReplyContext,
    cjk_bigrams,
    dense_features,
    round_change,
    sparse_keys,
)
from rlver.stats import agreement as _agreement
from rlver.stats import spearman
from rlver.transcripts.published import read_published

MemoryT = TypeVar("MemoryT")

#: The fit's settings (recorded in the artefact). ``l2``: ridge penalty; ``min_df``: an n-gram must occur
#: in this many training turns to get a weight; ``cg_steps``: conjugate-gradient iterations;
#: ``ceiling_quantile``: the share of real replies whose n-gram part stays under the veto ceiling
#: (:func:`ngram_ceiling`).
DEFAULT_SETTINGS: dict[str, Any] = {
    "reply_ngram": 3,
    "user_ngram": 2,
    "min_df": 3,
    "l2": 3.0,
    "cg_steps": 60,
    "profile_folds": 5,
    "weight_digits": 6,
    "joint_holdout": False,
    "ceiling_quantile": 0.998,
}


@dataclass
class Turn:
    """One appraised turn of a released file, as the offline user would see it."""

    file: str
    simulator: str
    model: str
    dialogue: str
    reply: str
    last_user: str
    emotion: int
    turn: int
    change: int
    keys: set[str]
    dense: list[float]
    #: ``keys`` as sorted column numbers of the corpus-wide key list (set by :func:`index_keys`).
    ids: np.ndarray | None = None


def index_keys(turns: Sequence[Turn]) -> list[str]:
    """Number every key of the corpus (sorted) and store each turn's keys as column numbers."""
    keys = sorted(set().union(*(t.keys for t in turns)))
    index = {k: i for i, k in enumerate(keys)}
    for t in turns:
        t.ids = np.array(sorted(index[k] for k in t.keys), dtype=np.int64)
    return keys


def model_group(model: str) -> str:
    """The agent model a file belongs to, without its date suffix (gpt-4o-0806 and -0808 are one)."""
    return re.sub(r"-\d{4}$", "", model)


def find_result_files(data: Path) -> list[Path]:
    files = sorted(data.rglob("*_result.jsonl")) if data.is_dir() else [data]
    if not files:
        raise InputError(Problem(str(data), None, None, "no *_result.jsonl files found under it"))
    return files


def read_turns(files: Sequence[Path], root: Path, settings: dict[str, Any]) -> list[Turn]:
    """Every appraised turn of ``files`` with its features."""
    turns: list[Turn] = []
    for path in files:
        rel = str(path.relative_to(root)) if path.is_relative_to(root) else path.name
        for ep in read_published(path):
            turns.extend(episode_turns(ep, rel, path, settings))
    if not turns:  # an empty file, or files without appraisals: nothing to fit (numpy would say less)
        where = str(files[0]) if len(files) == 1 else str(root)
        raise InputError(
            Problem(where, None, None, "no appraised turns to fit on (empty or unjudged result files)")
        )
    return turns


def published_profile_parts(ep: Episode) -> tuple[str, str, str, str]:
    """A released record's profile as (hidden need, background, task, style): the scene split at the
    hidden need, the character's style in words. Every appraisal fitted on released files reads this."""
    pub = ep.meta.get("published", {})
    split = split_hidden_need(str(pub.get("scene", "")))
    background, need = split if split else (str(pub.get("scene", "")), "")
    style = str(pub.get("character", "")).strip()
    return need, background, str(pub.get("task", "")), PUBLISHED_STYLES.get(style, style)


def published_profile_text(ep: Episode) -> ProfileText:
    """The learned appraisal's view of a released record's profile."""
    return ProfileText.of(*published_profile_parts(ep))


@dataclass(frozen=True)
class AppraisedReply(Generic[MemoryT]):
    """One appraised agent reply of a released dialogue, with what the simulator had seen before it.

    ``previous`` holds every earlier visible reply of the dialogue, each as its caller's ``remember``
    made it; ``changes`` the user's earlier emotion changes, oldest first. Both are the walk's own
    lists, valid until the next step.
    """

    reply: str
    last_user: str
    emotion: int
    change: int
    previous: list[MemoryT]
    changes: list[int]

    @property
    def turn(self) -> int:
        """1-based number of this reply among the dialogue's visible replies."""
        return len(self.previous) + 1


def appraised_replies(ep: Episode, remember: Callable[[str], MemoryT]) -> Iterator[AppraisedReply[MemoryT]]:
    """Walk a released dialogue: each agent reply that the next user turn appraised, in order.

    A reply without an appraisal (or an empty visible reply) is not yielded but is still remembered.
    """
    users = iter(ep.user_turns)
    last_user, reply = "", ""
    previous: list[MemoryT] = []
    changes: list[int] = []
    for msg in ep.messages:
        if msg.role == "assistant":
            reply = visible_text(msg.content)
            continue
        if msg.role != "user":
            continue
        a = next(users).appraisal
        if a is not None and reply:
            change = a.emotion_after - a.emotion_before
            yield AppraisedReply(reply, last_user, a.emotion_before, change, previous, changes)
            changes.append(change)
        if reply:
            previous.append(remember(reply))
            reply = ""
        last_user = msg.content


def released_turn(
    r: AppraisedReply[Any], ep: Episode, rel: str, path: Path, keys: set[str], dense: list[float]
) -> Turn:
    """One appraised reply of the released file ``path`` (``rel`` under the data folder) as a fit row."""
    return Turn(
        file=rel,
        simulator=path.parent.name,
        model=path.name.removesuffix("_result.jsonl"),
        dialogue=ep.profile_id,
        reply=r.reply,
        last_user=r.last_user,
        emotion=r.emotion,
        turn=r.turn,
        change=r.change,
        keys=keys,
        dense=dense,
    )


def episode_turns(ep: Episode, rel: str, path: Path, settings: dict[str, Any]) -> list[Turn]:
    """The appraised turns of one released dialogue, each with what the simulator saw before it."""
    profile = published_profile_text(ep)
    out: list[Turn] = []
    for r in appraised_replies(ep, cjk_bigrams):
        context = ReplyContext(profile, r.emotion, r.turn, r.last_user, r.previous, r.changes)
        dense = dense_features(r.reply, context)
        out.append(released_turn(r, ep, rel, path, sparse_keys(r.reply, r.last_user, settings), dense))
    return out


# --------------------------------------------------------------------------------------------------
# the solver


@dataclass
class Design:
    """A design matrix: CSR n-gram block (rows scaled by 1/sqrt(keys)) plus a standardised dense block."""

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    dense: np.ndarray
    n_sparse: int

    def matvec(self, ws: np.ndarray, wd: np.ndarray) -> np.ndarray:
        prod = self.values * ws[self.indices]
        sums = np.zeros(len(self.indptr) - 1)
        nonempty = self.indptr[:-1] < self.indptr[1:]
        sums[nonempty] = np.add.reduceat(prod, self.indptr[:-1][nonempty])
        return sums + self.dense @ wd

    def rmatvec(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = np.diff(self.indptr)
        sparse = np.bincount(
            self.indices, weights=self.values * np.repeat(v, counts), minlength=self.n_sparse
        )
        # float even with no n-gram column at all (a dense-only design: the transfer appraisal's fit)
        return sparse.astype(np.float64, copy=False), self.dense.T @ v


def build_design(
    turns: Sequence[Turn], column: np.ndarray, n_columns: int, mean: np.ndarray, scale: np.ndarray
) -> Design:
    """``column`` maps a corpus key number to its column in this fit (-1: not in the vocabulary)."""
    parts: list[np.ndarray] = []
    norms: list[np.ndarray] = []
    indptr = [0]
    for t in turns:
        assert t.ids is not None
        cols = column[t.ids]
        cols = cols[cols >= 0]
        parts.append(cols)
        norms.append(np.full(len(cols), 1.0 / math.sqrt(len(t.ids)) if len(t.ids) else 0.0))
        indptr.append(indptr[-1] + len(cols))
    dense = (np.array([t.dense for t in turns], dtype=np.float64) - mean) / scale
    return Design(
        np.array(indptr, dtype=np.int64),
        np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64),
        np.concatenate(norms) if norms else np.zeros(0),
        dense,
        n_columns,
    )


def ridge_cg(x: Design, y: np.ndarray, l2: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Solve ``(XᵀX + l2·I) w = Xᵀy`` by a fixed number of conjugate-gradient steps."""
    bs, bd = x.rmatvec(y)
    ws, wd = np.zeros_like(bs), np.zeros_like(bd)
    rs, rd = bs.copy(), bd.copy()
    ps, pd = rs.copy(), rd.copy()
    rr = float(rs @ rs + rd @ rd)
    for _ in range(steps):
        if rr <= 1e-20:
            break
        xp = x.matvec(ps, pd)
        qs, qd = x.rmatvec(xp)
        qs += l2 * ps
        qd += l2 * pd
        alpha = rr / float(ps @ qs + pd @ qd)
        ws += alpha * ps
        wd += alpha * pd
        rs -= alpha * qs
        rd -= alpha * qd
        rr_new = float(rs @ rs + rd @ rd)
        beta = rr_new / rr
        ps = rs + beta * ps
        pd = rd + beta * pd
        rr = rr_new
    return ws, wd


@dataclass
class Fitted:
    vocab: list[str]
    column: np.ndarray
    weights: np.ndarray
    dense_weights: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    intercept: float
    slope: float
    offset: float

    def predict_scores(self, turns: Sequence[Turn]) -> np.ndarray:
        x = build_design(turns, self.column, len(self.vocab), self.mean, self.scale)
        return x.matvec(self.weights, self.dense_weights) + self.intercept

    def predict_changes(self, turns: Sequence[Turn]) -> np.ndarray:
        values = self.slope * self.predict_scores(turns) + self.offset
        return np.array([round_change(float(v)) for v in values], dtype=np.float64)


def fit(turns: Sequence[Turn], keys: Sequence[str], settings: dict[str, Any]) -> Fitted:
    """Ridge on ``turns`` (indexed against the corpus key list ``keys`` by :func:`index_keys`)."""
    df = np.bincount(np.concatenate([t.ids for t in turns if t.ids is not None]), minlength=len(keys))
    kept = np.flatnonzero(df >= int(settings["min_df"]))
    column = np.full(len(keys), -1, dtype=np.int64)
    column[kept] = np.arange(len(kept))
    vocab = [keys[int(i)] for i in kept]
    dense = np.array([t.dense for t in turns], dtype=np.float64)
    mean = dense.mean(axis=0)
    scale = dense.std(axis=0)
    scale[scale < 1e-9] = 1.0
    x = build_design(turns, column, len(vocab), mean, scale)
    y = np.array([t.change for t in turns], dtype=np.float64)
    intercept = float(y.mean())
    ws, wd = ridge_cg(x, y - intercept, float(settings["l2"]), int(settings["cg_steps"]))
    scores = x.matvec(ws, wd) + intercept
    # Ridge shrinks: stretch the scores so their spread matches the recorded changes (ranking unchanged).
    sd = float(scores.std()) or 1.0
    slope = float(y.std()) / sd
    offset = float(y.mean()) - slope * float(scores.mean())
    return Fitted(vocab, column, ws, wd, mean, scale, intercept, slope, offset)


# --------------------------------------------------------------------------------------------------
# validation


def _rho(a: Any, b: Any) -> float | None:
    value = spearman(list(a), list(b))
    return None if value is None else round(value, 4)


def agreement(turns: Sequence[Turn], predicted: np.ndarray) -> dict[str, Any]:
    """Per-turn Spearman, sign agreement, MAE, and model-ranking Spearman over the files present."""
    rec = np.array([t.change for t in turns], dtype=np.float64)
    files = sorted({t.file for t in turns})
    mean_rec = [float(rec[[t.file == f for t in turns]].mean()) for f in files]
    mean_pred = [float(predicted[[t.file == f for t in turns]].mean()) for f in files]
    # (predicted, recorded): the order the shipped figures were computed in (see rlver.stats.agreement)
    return {
        **_agreement(predicted, rec, digits=4),
        "files": len(files),
        "model_ranking_spearman": _rho(mean_pred, mean_rec) if len(files) > 2 else None,
        "per_file": [
            {"file": f, "mean_recorded_change": round(r, 3), "mean_predicted_change": round(p, 3)}
            for f, r, p in zip(files, mean_rec, mean_pred, strict=True)
        ],
    }


def _report(turns: Sequence[Turn], predicted: np.ndarray) -> dict[str, Any]:
    out = {"overall": agreement(turns, predicted)}
    for sim in sorted({t.simulator for t in turns}):
        mask = np.array([t.simulator == sim for t in turns])
        out[sim] = agreement([t for t in turns if t.simulator == sim], predicted[mask])
    return out


def cross_validate(
    turns: Sequence[Turn], settings: dict[str, Any], log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Leave-one-model-out and k-fold leave-profiles-out out-of-fold predictions, scored."""
    keys = index_keys(turns)
    result: dict[str, Any] = {}
    groups = sorted({model_group(t.model) for t in turns})
    pred = np.zeros(len(turns))
    for g in groups:
        test = [i for i, t in enumerate(turns) if model_group(t.model) == g]
        train = [t for t in turns if model_group(t.model) != g]
        f = fit(train, keys, settings)
        pred[test] = f.predict_changes([turns[i] for i in test])
        log(f"leave-model-out: held out {g} ({len(test)} turns)")
    result["leave_model_out"] = _report(turns, pred)
    profiles = sorted({t.dialogue for t in turns})
    k = int(settings["profile_folds"])
    fold_of = {p: int(hashlib.sha256(p.encode()).hexdigest(), 16) % k for p in profiles}
    pred = np.zeros(len(turns))
    for fold in range(k):
        test = [i for i, t in enumerate(turns) if fold_of[t.dialogue] == fold]
        train = [t for t in turns if fold_of[t.dialogue] != fold]
        f = fit(train, keys, settings)
        pred[test] = f.predict_changes([turns[i] for i in test])
        log(f"leave-profiles-out: fold {fold + 1}/{k} ({len(test)} turns)")
    result["leave_profiles_out"] = _report(turns, pred)
    if not settings.get("joint_holdout"):
        return result
    pred = np.zeros(len(turns))
    for g in groups:
        for fold in range(k):
            test = [
                i for i, t in enumerate(turns) if model_group(t.model) == g and fold_of[t.dialogue] == fold
            ]
            train = [t for t in turns if model_group(t.model) != g and fold_of[t.dialogue] != fold]
            if not test:
                continue
            f = fit(train, keys, settings)
            pred[test] = f.predict_changes([turns[i] for i in test])
        log(f"leave-model-and-profiles-out: held out {g}")
    result["leave_model_and_profiles_out"] = _report(turns, pred)
    return result


def fit_artefact(
    data: Path,
    *,
    settings: dict[str, Any] | None = None,
    validate: bool = True,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The artefact (a JSON-able dict) fitted on every result file under ``data``."""
    settings = {**DEFAULT_SETTINGS, **(settings or {})}
    files = find_result_files(data)
    root = data if data.is_dir() else data.parent
    started = time.perf_counter()
    turns = read_turns(files, root, settings)
    log(f"read {len(turns)} appraised turns from {len(files)} files")
    validation = cross_validate(turns, settings, log) if validate else {}
    final = fit(turns, index_keys(turns), settings)
    digits = int(settings["weight_digits"])

    def rnd(values: Any) -> list[float]:
        return [float(f"{v:.{digits}g}") for v in values]

    keep = [i for i, w in enumerate(final.weights) if abs(w) >= 10 ** -(digits - 1)]
    log(f"fitted in {time.perf_counter() - started:.1f} s; {len(keep)} n-gram weights")
    artefact = {
        "features_version": FEATURES_VERSION,
        "language": "zh",
        "target": "emotion change after - before of the released SAGE simulator, per appraised turn",
        "data": [
            {"file": str(p.relative_to(root)) if p.is_relative_to(root) else p.name, "sha256": file_sha256(p)}
            for p in files
        ],
        "turns": len(turns),
        "settings": settings,
        "validation": validation,
        "intercept": rnd([final.intercept])[0],
        "calibration": {"slope": rnd([final.slope])[0], "offset": rnd([final.offset])[0]},
        "dense_names": list(DENSE_NAMES),
        "dense_weights": rnd(final.dense_weights),
        "dense_mean": rnd(final.mean),
        "dense_scale": rnd(final.scale),
        "vocab": [final.vocab[i] for i in keep],
        "weights": rnd(final.weights[keep]),
    }
    artefact["ngram_ceiling"] = ngram_ceiling(artefact, turns)
    return artefact


def ngram_ceiling(artefact: dict[str, Any], turns: Sequence[Turn]) -> float:
    """The ``ceiling_quantile`` of the n-gram part real replies of the data earn under the final weights.

    A reply above it stacks more rewarded phrases than (nearly) any real reply the model was fitted and
    validated on — in practice keyword salad built from the weights: the offline user vetoes it. Not the
    maximum: the top real replies are the fit's own most overfitted rows, and the probe's salad of the
    24 top n-grams landed just under that maximum (6.83 vs 6.88) while far above the 99.8th percentile.
    """
    weights = dict(zip(artefact["vocab"], artefact["weights"], strict=True))
    parts = [sum(weights.get(k, 0.0) for k in t.keys) / math.sqrt(len(t.keys)) for t in turns if t.keys]
    if not parts:
        return 0.0
    value = float(np.quantile(np.array(parts), float(artefact["settings"]["ceiling_quantile"])))
    return float(f"{value:.6g}")


def dump_artefact(artefact: dict[str, Any]) -> bytes:
    """Canonical bytes (sorted keys, no float noise beyond the rounding): what bit-identity is checked on."""
    return (json.dumps(artefact, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n").encode()
