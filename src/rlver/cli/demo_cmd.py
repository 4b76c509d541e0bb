"""``rlver demo`` (registered on the root app by :func:`register`): parse the options, run
:func:`rlver.demo.run_demo` (the flow: evaluate, train, evaluate, report) and print its result.

The demo module pulls in torch, so it is imported inside the command and only for type checking here:
``rlver --help`` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rlver.cli import checks
from rlver.cli.safe_text import clean
from rlver.errors import ConfigError
from rlver.extras import require_extra

if TYPE_CHECKING:
    from rlver.demo import DemoResult


def demo_command(
    out: Path = typer.Option(
        Path("rlver-demo"),
        "--out",
        help="Folder for the report and the run.",
        parser=checks.output_path("--out"),
    ),
    steps: int | None = checks.steps_option(
        "GRPO steps (default 30: about 2.5 CPU-minutes of training and evaluation)."
    ),
    minutes: float | None = typer.Option(
        None,
        "--minutes",
        "--time-budget",
        min=0.5,
        max=120.0,
        callback=checks.finite("--minutes"),
        help="Train for a time budget instead of --steps (the step count, and so the numbers, "
        "then depend on the machine's speed).",
    ),
    seed: int = checks.seed_option(0, "Run seed."),
    model: str = typer.Option(
        "tiny",
        "--model",
        help="The policy: the bundled tiny model (Chinese profiles), or a real model such as "
        "smollm2-135m-instruct (rlver models fetch; English profiles, the smollm2-offline preset).",
    ),
) -> None:
    """Offline end-to-end demo: tiny model → evaluate → train (GRPO) → evaluate → report."""
    require_extra("train", "rlver demo")
    from rlver.demo import DEMO_STEPS, run_demo

    if steps is not None and minutes is not None:
        raise ConfigError("give --steps or --minutes, not both")
    if minutes is not None:
        plan = f"for about {minutes:g} minutes"
    else:
        steps = steps or DEMO_STEPS
        plan = f"for {steps} GRPO steps"
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: a file is there; the demo writes a folder")
    if model != "tiny":
        from rlver.llm.factory import check_model_source

        check_model_source(model, "--model")  # before anything runs: a missing model fails in a second
        what = f"training {model} {plan} (offline, English profiles)"
    else:
        what = f"building a tiny model and training it {plan} (offline, Chinese profiles)"
    typer.echo(f"rlver demo: {what}...")
    # A terminal gets the progress bar; a file or a pipe gets plain lines as the demo goes (a bar
    # written to a file appears only once it is done, so the output said nothing for minutes).
    plain = not sys.stdout.isatty()
    say = (lambda line: typer.echo(line)) if plain else None
    result = run_demo(
        out, steps=steps or DEMO_STEPS, minutes=minutes, seed=seed, progress=not plain, say=say, model=model
    )
    for line in summary_lines(result):
        typer.echo(line)


def summary_lines(result: DemoResult) -> list[str]:
    """What the command prints: the offline user, the before/after score, one dialogue before and after
    (model and simulator text is untrusted: control characters are removed), and where the report is."""
    from rlver.demo import veto_text

    s = result.summary
    b, a, example = s["before"], s["after"], s["example"]
    lines = [
        clean(s["offline_user"]),
        f"held-out score  before {b['score']:.1f}  after {a['score']:.1f}  ({s['steps']} steps; "
        f"{s.get('protocol', 'training protocol')}, {b['n']} dialogues)",
        f"vetoed replies  before {veto_text(b)}  after {veto_text(a)}",
        "",
        "one held-out dialogue before training:",
        *(clean("  " + line) for line in example["before"]),
        "the same user after training:",
        *(clean("  " + line) for line in example["after"]),
        *_fragments_note([*example["before"], *example["after"]]),
        "",
        f"wall {s['wall_s']:.0f} s, peak memory {s['peak_rss_mb']:.0f} MB",
        f"report: {result.report_html}  (Markdown: {result.report_md})",
    ]
    return lines


def _fragments_note(lines: list[str]) -> list[str]:
    """A line saying what the replacement character in the replies is, when there is one: the tiny
    model writes byte-level tokens, and bytes that form no character decode to U+FFFD, which read as
    an encoding fault (mojibake) rather than as the model's broken text the vetoes count."""
    if not any("\ufffd" in line for line in lines):
        return []
    return [
        "  (\ufffd marks bytes the model wrote that form no character: its broken text, which the "
        "broken_text veto counts; not an encoding fault)"
    ]


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the root app."""
    app.command("demo")(demo_command)
