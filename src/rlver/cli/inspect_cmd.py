"""``rlver inspect``: read a transcript in the terminal.

A researcher's first question about a run is rarely "what is the score" (``rlver score``) but "what
happened in *that* dialogue". ``rlver inspect RUN`` prints the run's settings and one row per dialogue;
``--dialogue ID`` replays one dialogue turn by turn: every message, the simulated user's emotion after
each appraisal with its change and tier, the simulator's reasoning (dimmed) and the agent's think blocks
(collapsed unless ``--think``). It reads our transcripts and the published result format alike
(:mod:`rlver.transcripts.files`), so a published leaderboard file can be read the same way.

Every piece of text shown came from a model or a data file, so it is printed as plain
:class:`rich.text.Text` (never parsed as markup) with terminal control characters removed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rlver.cli.safe_text import clean
from rlver.errors import InputError, Problem
from rlver.tables import indented, output_console, rule

if TYPE_CHECKING:
    from rich.console import Console

    from rlver.manifest import RunManifest
    from rlver.records import Appraisal, Episode, UserTurn

# Colours of the emotion tiers (S ≥ 100, A ≥ 70, B ≥ 40, C ≥ 10, F < 10), as in the HTML report.
TIER_STYLE = {"S": "bold green", "A": "green", "B": "yellow", "C": "dark_orange", "F": "bold red"}
PREVIEW_CHARS = 100  # collapsed think blocks and system prompts


def _preview(text: str) -> str:
    one_line = " ".join(clean(text, 10 * PREVIEW_CHARS).split())
    return one_line if len(one_line) <= PREVIEW_CHARS else one_line[: PREVIEW_CHARS - 1] + "…"


def dialogue_key(ep: Episode) -> str:
    """The id a dialogue is shown under and selected by: the profile id, ``#k`` for sample k > 0, and
    ``@N`` for a training dialogue of step N (a training run meets the same user at many steps)."""
    from rlver.transcripts.training import episode_step

    key = ep.profile_id if ep.sample_index == 0 else f"{ep.profile_id}#{ep.sample_index}"
    step = episode_step(ep)
    return key if step is None else f"{key}@{step}"


def find_dialogue(episodes: list[Episode], wanted: str, source: str) -> Episode:
    """Select by id (``profile``, ``profile#k``, the episode id), row number, or a unique id prefix."""
    for ep in episodes:
        if wanted in (dialogue_key(ep), ep.episode_id) or (
            ep.sample_index == 0 and wanted == f"{ep.profile_id}#0"
        ):
            return ep
    if wanted.isdigit() and 1 <= int(wanted) <= len(episodes):
        return episodes[int(wanted) - 1]
    matches = [ep for ep in episodes if dialogue_key(ep).startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    some = ", ".join(dialogue_key(ep) for ep in (matches or episodes)[:5])
    problem = (
        f"{len(matches)} dialogues start with {wanted!r} (e.g. {some}); give more of the id"
        if matches
        else f"no dialogue {wanted!r}; ids look like: {some} (or give the row number 1–{len(episodes)})"
    )
    raise InputError(Problem(source, None, "--dialogue", problem))


def _emotion_text(value: int) -> Any:
    from rich.text import Text

    from rlver.simulator.emotion import tier_of

    tier = tier_of(value)
    return Text(f"{value} (tier {tier})", style=TIER_STYLE[tier])


def _trajectory(ep: Episode) -> str:
    return "→".join(str(v) for v in [ep.start_emotion, *ep.emotions])


def _end_reason(ep: Episode) -> str:
    if ep.status != "finished":
        return ep.error_kind or "error"
    return ep.end_reason or "—"


def _manifest_rows(fmt: str, manifest: RunManifest) -> list[tuple[str, str]]:
    """The settings worth seeing at a glance (the full manifest is line 1 of the file)."""
    if fmt == "published":
        return [("format", "published result file (no settings recorded)")]
    rows: list[tuple[str, str]] = [("format", "rlver transcript")]

    def add(label: str, value: Any) -> None:
        if value not in (None, "", {}, []):
            rows.append((label, clean(str(value), 300)))

    add("kind", manifest.kind)
    add("created", manifest.created)
    add("rlver", manifest.rlver_version)
    agent = manifest.agent or {}
    add(
        "agent",
        " · ".join(dict.fromkeys(str(agent[k]) for k in ("model", "name", "class") if agent.get(k))),
    )
    sampling = manifest.agent_sampling or {}
    keys = ("temperature", "top_p", "max_tokens")
    add("agent sampling", ", ".join(f"{k}={sampling[k]}" for k in keys if k in sampling))
    sim = manifest.simulator or {}
    model = sim.get("model")
    model_name = (model.get("model") or model.get("name")) if isinstance(model, dict) else None
    parts = [manifest.simulator_kind, model_name, sim.get("version") or sim.get("prompt_version")]
    add("simulator", " · ".join(str(p) for p in parts if p))
    add(
        "difficulty / behaviour",
        " / ".join(str(sim.get(k)) for k in ("difficulty", "behaviour") if sim.get(k)),
    )
    rules = manifest.rules
    env = {
        "max_assistant_turns": rules.max_assistant_turns if rules else None,
        "appraise_final_reply": rules.appraise_final_reply if rules else None,
        "start_emotion": rules.start_emotion if rules else None,
        "think": manifest.think,
    }
    add("env", ", ".join(f"{k}={v}" for k, v in env.items() if v is not None))
    add("profiles", manifest.profiles)
    add("seed", manifest.seed)
    return rows


def print_summary(
    console: Console, path: Path, fmt: str, manifest: RunManifest, episodes: list[Episode], *, turns: bool
) -> None:
    """The run's settings, its headline numbers and one row per dialogue."""
    from rich.table import Table
    from rich.text import Text

    from rlver.eval.metrics import compute_metrics

    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("run", Text(clean(str(path))))
    for label, value in _manifest_rows(fmt, manifest):
        head.add_row(label, Text(value))
    metrics = compute_metrics(episodes)
    head.add_row("result", Text(metrics.headline()))
    if metrics.n_failed_runs:
        head.add_row("failed runs", Text(f"{metrics.n_failed_runs} (excluded from the score)", style="red"))
    console.print(head)

    table = Table(title=f"{len(episodes)} dialogues", title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("dialogue", overflow="fold")
    table.add_column("turns", justify="right")
    table.add_column("final (tier)", justify="right")
    table.add_column("status")
    table.add_column("ended")
    if turns:
        table.add_column("emotion after each appraisal", overflow="fold")
    for i, ep in enumerate(episodes, start=1):
        status = Text(ep.status, style="green" if ep.status == "finished" else "red")
        row: list[Any] = [
            str(i),
            Text(clean(dialogue_key(ep), 200)),
            str(ep.assistant_turns),
            _emotion_text(ep.final_emotion) if ep.status == "finished" else Text("—", style="dim"),
            status,
            Text(clean(_end_reason(ep), 100)),
        ]
        if turns:
            row.append(Text(_trajectory(ep)))
        table.add_row(*row)
    console.print(table)
    console.print(Text("rlver inspect RUN --dialogue ID (or row number) shows one dialogue", style="dim"))


def _appraisal_lines(appraisal: Appraisal, extra: dict[str, Any]) -> list[tuple[str, str]]:
    lines = [
        ("understood", appraisal.understanding),
        ("goal fit", appraisal.goal_fit),
        ("inner reaction", appraisal.inner_reaction),
        ("felt", appraisal.feeling),
    ]
    if appraisal.features:
        lines.append(("features", ", ".join(f"{k} {v:+.2f}" for k, v in appraisal.features.items())))
    if isinstance(extra.get("thinking"), str):
        lines += reply_plan_lines(extra["thinking"])
    return [(k, v) for k, v in lines if v.strip()]


#: The parts of SAGE's reply plan after its ``Thinking:`` (simulator_response.py's reply format:
#: ``Origin:`` the first draft, ``Change:`` how it was rewritten; SAGE keeps all of it as ``thinking``).
_PLAN_PARTS = re.compile(r"^[ \t]*(Origin|Change)[ \t]*[:：]", re.MULTILINE)
_PLAN_LABELS = {"Origin": "first draft", "Change": "draft rewritten"}


def reply_plan_lines(thinking: str) -> list[tuple[str, str]]:
    """How the user planned its reply, each part labelled: SAGE's ``Change:`` there is the rewrite of a
    draft reply, and shown unlabelled under the appraisal it read like the emotion's change."""
    parts = _PLAN_PARTS.split(thinking)
    lines = [("thinking", parts[0].strip())]
    for name, text in zip(parts[1::2], parts[2::2], strict=True):  # split keeps each name before its text
        lines.append((_PLAN_LABELS[name], text.strip().strip("[]")))
    return lines


def print_dialogue(console: Console, ep: Episode, *, show_think: bool) -> None:
    """One dialogue, message by message, each user turn with the appraisal that set its emotion."""
    from rich.text import Text

    _print_title(console, ep)
    n_user = 0
    n_assistant = 0
    for msg in ep.messages:
        if msg.role == "system":
            console.print(Text(f"system ({len(msg.content)} chars): {_preview(msg.content)}", style="dim"))
        elif msg.role == "assistant":
            n_assistant += 1
            _print_assistant(console, msg.content, n_assistant, show_think=show_think)
        else:
            turn = ep.user_turns[n_user] if n_user < len(ep.user_turns) else None
            n_user += 1
            _print_user(console, ep, msg.content, turn, first=n_user == 1)
    if ep.messages and ep.messages[-1].role == "assistant":
        console.print(
            indented(console, Text("(last reply not appraised: the dialogue had ended)", style="dim"))
        )
    _print_outcome(console, ep)


def _print_title(console: Console, ep: Episode) -> None:
    """A rule, then the dialogue's id, length, final emotion, status and the profile facts."""
    from rich.text import Text

    title = Text.assemble(
        (clean(dialogue_key(ep), 200), "bold"),
        f" · {ep.assistant_turns} assistant turns · final ",
        _emotion_text(ep.final_emotion),
        f" · {ep.status}",
        f" · ended: {_end_reason(ep)}",
    )
    console.print(rule(console))
    console.print(title)
    meta = ep.meta or {}
    facts = [f"{k}: {meta[k]}" for k in ("topic", "difficulty", "behaviour", "hidden_need") if meta.get(k)]
    if facts:
        console.print(Text(clean(" · ".join(str(f) for f in facts), 500), style="dim"))


def _print_assistant(console: Console, content: str, n: int, *, show_think: bool) -> None:
    """Assistant reply ``n``: its think block (in full, or a one-line preview), then the visible text."""
    from rich.text import Text

    from rlver.env.thinking import split_think

    split = split_think(content)
    console.print()
    console.print(Text(f"assistant {n}", style="bold green"))
    if split.thought:
        label = "think" if split.well_formed else "think (malformed)"
        shown = (
            f"{label}: {clean(split.thought)}"
            if show_think
            else f"▸ {label}, {len(split.thought)} chars: {_preview(split.thought)}"
        )
        console.print(indented(console, Text(shown, style="dim italic")))
    console.print(indented(console, Text(clean(split.visible) or "(nothing visible)")))


def _user_header(ep: Episode, turn: UserTurn | None, *, first: bool) -> Any:
    """``user`` plus the emotion move of this turn's appraisal (or the start value on the opening line)."""
    from rich.text import Text

    header = Text("user", style="bold blue")
    if turn is not None and turn.appraisal is not None:
        a = turn.appraisal
        header.append("  emotion ")
        header.append(f"{a.emotion_before} → ")
        header.append_text(_emotion_text(a.emotion_after))
        style = "green" if a.change > 0 else "red" if a.change < 0 else "dim"
        header.append(f"  ({a.change:+d})", style=style)
        if a.raw_change != a.change:
            header.append(f" clamped from {a.raw_change:+d}", style="dim")
    elif first:
        header.append("  emotion ")
        header.append_text(_emotion_text(ep.start_emotion))
        header.append(" (start)", style="dim")
    elif turn is not None:
        header.append("  (no appraisal recorded)", style="dim")
    return header


def _print_user(console: Console, ep: Episode, content: str, turn: UserTurn | None, *, first: bool) -> None:
    """A user message: the emotion header, the appraisal's reasoning (dimmed), the text, an ending."""
    from rich.text import Text

    console.print()
    console.print(_user_header(ep, turn, first=first))
    if turn is not None and turn.appraisal is not None:
        for label, value in _appraisal_lines(turn.appraisal, turn.extra or {}):
            console.print(indented(console, Text(f"{label}: {clean(value, 2000)}", style="dim")))
    console.print(indented(console, Text(clean(content))))
    if turn is not None and turn.ends_dialogue:
        console.print(
            indented(console, Text(f"[ends the dialogue: {turn.end_reason or 'goodbye'}]", style="italic"))
        )


def _print_outcome(console: Console, ep: Episode) -> None:
    """The failure (if any) and the emotion path with its final tier."""
    from rich.text import Text

    from rlver.simulator.emotion import tier_of

    console.print()
    if ep.status != "finished":
        console.print(
            Text(f"failed ({ep.error_kind or 'error'}): {clean(ep.error or '', 2000)}", style="bold red")
        )
    console.print(
        Text.assemble(
            ("emotion path: ", "bold"),
            _trajectory(ep),
            f"  (final tier {tier_of(ep.final_emotion)})",
        )
    )


def inspect_command(
    transcript: Path = typer.Argument(
        ...,
        help="A run folder written by `rlver eval` or `rlver train`, or a transcript file (ours or the "
        "published format).",
    ),
    dialogue: str | None = typer.Option(
        None,
        "--dialogue",
        "-d",
        help="Show one dialogue in full: its id (profile id, 'ID#k' for sample k), a unique id prefix, or a row number.",
    ),
    turns: bool = typer.Option(
        False, "--turns", help="Add each dialogue's emotion path (start → after each appraisal) to the table."
    ),
    think: bool = typer.Option(
        False, "--think", help="With --dialogue: print think blocks in full (default: a one-line preview)."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print JSON instead: the dialogue table, or with --dialogue the whole episode."
    ),
) -> None:
    """Read a transcript: the run's settings and its dialogues, or one dialogue turn by turn."""

    from rlver.transcripts.files import read_episodes, transcript_path

    fmt, manifest, episodes = read_episodes(transcript)
    source = str(transcript_path(transcript))
    if not episodes:
        raise InputError(Problem(source, None, None, "no dialogues in this transcript yet"))
    if dialogue is not None:
        ep = find_dialogue(episodes, dialogue, source)
        if as_json:
            typer.echo(json.dumps(ep.model_dump(mode="json"), ensure_ascii=False, indent=2))
            return
        print_dialogue(output_console(highlight=False), ep, show_think=think)
        return
    if as_json:
        rows = [
            {
                "dialogue": dialogue_key(ep),
                "profile_id": ep.profile_id,
                "sample_index": ep.sample_index,
                "turns": ep.assistant_turns,
                "final_emotion": ep.final_emotion,
                "status": ep.status,
                "end_reason": ep.end_reason,
                "emotions": [ep.start_emotion, *ep.emotions],
            }
            for ep in episodes
        ]
        typer.echo(
            json.dumps({"path": source, "format": fmt, "dialogues": rows}, ensure_ascii=False, indent=2)
        )
        return
    print_summary(output_console(highlight=False), Path(source), fmt, manifest, episodes, turns=turns)


def register(app: typer.Typer) -> None:
    """Add ``rlver inspect`` to the root app."""
    app.command("inspect")(inspect_command)
