"""What a set of profiles covers: distributions, field lengths and a diversity measure.

The published method guards against reward hacking by training against many *different* users; this
module makes "different" visible. Diversity is the mean pairwise distance (1 - similarity) over
persona + background + hidden need, with the same similarity measures that generation uses to reject
near-duplicates (:mod:`rlver.profiles.similarity`), plus the closest pairs so duplicates can be found.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rlver.profiles.schema import Profile
from rlver.profiles.similarity import Embedder, load_embedder, pairwise_similarities, profile_text

LENGTH_FIELDS: tuple[str, ...] = ("persona", "background", "goal", "hidden_need", "opening")
UNSET = "(unset)"


def _length_summary(values: list[int]) -> dict[str, float]:
    if not values:
        return {"count": 0, "min": 0, "mean": 0.0, "median": 0.0, "max": 0}
    return {
        "count": len(values),
        "min": min(values),
        "mean": round(statistics.fmean(values), 1),
        "median": float(statistics.median(values)),
        "max": max(values),
    }


def diversity(
    profiles: Sequence[Profile],
    method: str = "ngram",
    *,
    embedder: Embedder | None = None,
    max_pairs: int = 50_000,
    closest: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean pairwise distance (1 - similarity) and the ``closest`` most similar pairs."""
    texts = [profile_text(p) for p in profiles]
    if method == "embed" and embedder is None:
        embedder = load_embedder()
    sims = pairwise_similarities(texts, method, embedder=embedder, max_pairs=max_pairs, seed=seed)
    model = {"model": getattr(embedder, "name", "custom")} if method == "embed" else {}
    if not sims:
        return {
            "method": method,
            **model,
            "pairs": 0,
            "sampled": False,
            "mean_distance": None,
            "min_distance": None,
            "closest_pairs": [],
        }
    values = [s for _, _, s in sims]
    top = sorted(sims, key=lambda t: -t[2])[:closest]
    total = len(profiles) * (len(profiles) - 1) // 2
    return {
        "method": method,
        **model,
        "pairs": len(sims),
        "sampled": len(sims) < total,
        "mean_distance": round(1.0 - statistics.fmean(values), 4),
        "min_distance": round(1.0 - max(values), 4),
        "closest_pairs": [
            {"a": profiles[i].id, "b": profiles[j].id, "similarity": round(s, 4)} for i, j, s in top
        ],
    }


def profile_stats(
    profiles: Sequence[Profile],
    *,
    methods: Sequence[str] = ("ngram",),
    embedder: Embedder | None = None,
    max_pairs: int = 50_000,
) -> dict[str, Any]:
    """Everything ``rlver profiles stats`` shows, as plain JSON-ready data."""
    if "embed" in methods and embedder is None:
        embedder = load_embedder()  # once, before any work: a missing extra fails fast
    counts: dict[str, Counter[str]] = {
        "language": Counter(p.language for p in profiles),
        "topic": Counter(p.topic or UNSET for p in profiles),
        "style": Counter(p.style or UNSET for p in profiles),
        "need_type": Counter(p.need_type or UNSET for p in profiles),
        "behaviour": Counter(p.behaviour or "cooperative" for p in profiles),
        "trait": Counter(t for p in profiles for t in p.traits),
        "source": Counter(p.source or UNSET for p in profiles),
    }
    lengths = {
        f: _length_summary([len(getattr(p, f)) for p in profiles if getattr(p, f) is not None])
        for f in LENGTH_FIELDS
    }
    return {
        "profiles": len(profiles),
        "with_opening": sum(1 for p in profiles if p.opening),
        "distributions": {k: dict(c.most_common()) for k, c in counts.items()},
        "distinct": {k: len(c) for k, c in counts.items()},
        "lengths": lengths,
        "diversity": [
            {"language": lang, **diversity(group, m, embedder=embedder, max_pairs=max_pairs)}
            for m in methods
            for lang, group in _language_groups(profiles)
        ],
    }


def _language_groups(profiles: Sequence[Profile]) -> list[tuple[str, list[Profile]]]:
    """Diversity per language (pairs across languages share no n-grams and would inflate it),
    plus ``all`` when the set mixes languages."""
    langs = sorted({p.language for p in profiles})
    groups: list[tuple[str, list[Profile]]] = [
        (lang, [p for p in profiles if p.language == lang]) for lang in langs
    ]
    return [("all", list(profiles)), *groups] if len(langs) > 1 else groups


def render_stats(stats: dict[str, Any], *, top: int = 15) -> None:
    """Print ``stats`` as rich tables."""
    from rich.table import Table

    from rlver.tables import output_console

    console = output_console()
    console.print(f"[bold]{stats['profiles']}[/] profiles, {stats['with_opening']} with an opening line")
    total = max(1, stats["profiles"])  # share of profiles (a profile has several traits)
    for key, dist in stats["distributions"].items():
        if not dist:
            continue
        title = f"{key} ({stats['distinct'][key]} distinct)"
        table = Table(title=title, title_justify="left", show_edge=False)
        table.add_column(key)
        table.add_column("count", justify="right")
        table.add_column("share", justify="right")
        items = list(dist.items())
        for name, count in items[:top]:
            table.add_row(str(name), str(count), f"{count / total:.0%}")
        if len(items) > top:
            rest = sum(c for _, c in items[top:])
            table.add_row(f"... {len(items) - top} more", str(rest), f"{rest / total:.0%}")
        console.print(table)
    lengths = Table(title="field lengths (characters)", title_justify="left", show_edge=False)
    for col in ("field", "count", "min", "mean", "median", "max"):
        lengths.add_column(col, justify="left" if col == "field" else "right")
    for name, s in stats["lengths"].items():
        lengths.add_row(name, *(str(s[k]) for k in ("count", "min", "mean", "median", "max")))
    console.print(lengths)
    div = Table(
        title="diversity (1 - similarity of persona + background + hidden need)",
        title_justify="left",
        show_edge=False,
    )
    for col in ("method", "language", "pairs", "mean distance", "min distance", "closest pair"):
        div.add_column(col, justify="left" if col in ("method", "language", "closest pair") else "right")
    for d in stats["diversity"]:
        pair = d["closest_pairs"][0] if d["closest_pairs"] else None
        div.add_row(
            d["method"],
            d["language"],
            f"{d['pairs']}{' (sampled)' if d['sampled'] else ''}",
            "-" if d["mean_distance"] is None else f"{d['mean_distance']:.3f}",
            "-" if d["min_distance"] is None else f"{d['min_distance']:.3f}",
            f"{pair['a']} ~ {pair['b']}" if pair else "-",
        )
    console.print(div)
