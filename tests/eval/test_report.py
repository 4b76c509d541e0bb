"""`rlver report`: a self-contained, escaped HTML report (checked in headless Chromium) + Markdown."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rlver.manifest import RunManifest
from rlver.records import Appraisal, Episode, Message, UserTurn
from rlver.simulator.emotion import tier_of
from rlver.transcripts.native import TranscriptWriter
from svg_check import inline_figures, read_figure

EVIL = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'


def make_episode(
    pid: str, changes: list[int], *, think: bool = False, evil: bool = False, status: str = "finished"
) -> Episode:
    emotion = 40
    messages = [Message(role="system", content="be kind"), Message(role="user", content=f"opening of {pid}")]
    turns = [UserTurn(text=f"opening of {pid}")]
    emotions = []
    for i, change in enumerate(changes):
        reply = f"reply {i} {EVIL if evil else ''}"
        if think:
            reply = f"<think>private plan {i} {EVIL if evil else ''}</think>{reply}"
        messages.append(Message(role="assistant", content=reply))
        before, emotion = emotion, max(0, min(100, emotion + change))
        turns.append(
            UserTurn(
                text=f"user answer {i}",
                appraisal=Appraisal(
                    understanding=f"the agent asked about {i}",
                    goal_fit=EVIL if evil else "fits",
                    inner_reaction="relieved",
                    feeling="heard",
                    raw_change=change,
                    change=change,
                    emotion_before=before,
                    emotion_after=emotion,
                    tier=tier_of(emotion),
                ),
                ends_dialogue=emotion >= 100,
                end_reason="satisfied" if emotion >= 100 else None,
            )
        )
        messages.append(Message(role="user", content=f"user answer {i}"))
        emotions.append(emotion)
    messages.append(Message(role="assistant", content="last reply, never appraised"))
    return Episode(
        profile_id=pid,
        messages=messages,
        user_turns=turns,
        start_emotion=40,
        final_emotion=emotion,
        emotions=emotions,
        status=status,  # type: ignore[arg-type]
        end_reason="turn_limit",
        error="TimeoutError: slow" if status == "failed" else None,
        error_kind="timeout" if status == "failed" else None,
        meta={"topic": "work", "behaviour": "cooperative"},
    )


def write_run(run_dir: Path, name: str, episodes: list[Episode]) -> Path:
    writer = TranscriptWriter(run_dir / "transcript.jsonl", RunManifest.create(kind="eval", run_name=name))
    for ep in episodes:
        writer.append(ep)
    return run_dir


@pytest.fixture()
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    a = write_run(
        tmp_path / "base",
        "baseline",
        [
            make_episode("p1", [5, 5, -10]),
            make_episode("p2", [-10, -10, -10, -5]),
            make_episode("p3", [0, 5], status="failed"),
        ],
    )
    b = write_run(
        tmp_path / "trained",
        f"trained {EVIL}",
        [
            make_episode("p1", [10, 10, 10, 10, 10, 10], think=True, evil=True),
            make_episode("p2", [5, 5]),
            make_episode("p3", [5, -5]),
        ],
    )
    return a, b


def _rlver(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlver", *args], capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def test_report_is_self_contained_and_escaped(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp.html"
    proc = _rlver("report", str(two_runs[0]), str(two_runs[1]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text(encoding="utf-8")
    # untrusted text is escaped everywhere (replies, think blocks, reasoning, run names)
    assert "<script" not in html.lower()
    assert "<img src=x" not in html
    assert html.count("&lt;script&gt;") >= 4
    # no external assets: every image is inline, nothing is fetched
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html)
    assert "<link" not in html.lower()
    # the figures are inline SVG, each naming both runs in its legend or on its axis
    figures = [read_figure(svg) for svg in inline_figures(html)]
    assert [f.title for f in figures] == [
        "Emotion trajectory (mean, band = 25th–75th percentile)",
        "Final emotion",
        "Success and failure per run",
    ]
    for fig in figures:
        names = [*fig.legend, *fig.axis_labels]
        assert "baseline" in names and any(n.startswith("trained <script>alert(") for n in names)
    # content: metrics, paired comparison, per-profile links to dialogues, appraisal, collapsed think
    assert "Paired comparison" in html
    assert 'href="#r1-p1-0"' in html and 'id="r1-p1-0"' in html
    assert "emotion 40 →" in html and "the agent asked about 0" in html
    assert '<details class="think"><summary>think block' in html and "private plan 0" in html
    assert "Not appraised" in html and "FAILED RUN (timeout)" in html
    assert "By behaviour" in html
    md = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "| baseline |" in md and "Paired comparison" in md
    for name, fig in zip(("trajectory", "final_histogram", "outcomes"), figures, strict=True):
        assert f"cmp_files/{name}.svg" in md  # the same figure, written beside the Markdown
        assert read_figure((tmp_path / "cmp_files" / f"{name}.svg").read_text(encoding="utf-8")) == fig
    assert "<script>" not in md


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(browser: str, page: Path, shot: Path, size: tuple[int, int]) -> bytes:
    """Headless Chromium's picture of ``page`` (a local file, nothing fetched), as PNG bytes."""
    with tempfile.TemporaryDirectory() as profile_dir:
        subprocess.run(
            [
                browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile_dir}",
                f"--screenshot={shot}", f"--window-size={size[0]},{size[1]}", page.resolve().as_uri(),
            ],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
    assert shot.exists(), "chromium wrote no screenshot"
    return shot.read_bytes()


@pytest.mark.browser
def test_report_renders_in_headless_chromium(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium); cannot check rendering")
    out = tmp_path / "report.html"
    proc = _rlver("report", str(two_runs[0]), str(two_runs[1]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    shot = tmp_path / "shot.png"
    screenshot(browser, out, shot, (1280, 2000))
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1280, 2000)
        colours = im.convert("RGB").getcolors(maxcolors=1_000_000) or []
    # a blank or error page has a handful of colours; text + plots give thousands
    assert len(colours) > 500


def test_stray_think_tag_in_no_think_run_is_not_called_malformed(tmp_path: Path) -> None:
    """In a run without think mode a stray ``</think>`` is not a broken think block: label it neutrally."""
    from rlver.eval.report import render_html
    from rlver.eval.report_view import ReportView, dialogue_view
    from rlver.eval.runs import load_run

    ep = make_episode("p1", [5])
    ep.messages[2] = Message(role="assistant", content="some musing</think>reply 0")
    writer = TranscriptWriter(
        tmp_path / "nothink" / "transcript.jsonl",
        RunManifest.create(kind="eval", run_name="nothink", env={"think": False}),
    )
    writer.append(ep)
    html = render_html(ReportView.build([load_run(tmp_path / "nothink")]))
    assert "malformed" not in html
    assert "text hidden from the user by a think tag" in html and "some musing" in html
    # the same reply in a think-mode run (or one whose mode is unknown) is still a malformed think block
    assert dialogue_view(ep, think=True)[2].well_formed is False
    think_run = tmp_path / "think" / "transcript.jsonl"
    TranscriptWriter(
        think_run, RunManifest.create(kind="eval", run_name="think", env={"think": True})
    ).append(ep)
    assert "think block (11 chars) — malformed" in render_html(ReportView.build([load_run(think_run.parent)]))


def test_preface_puts_a_summary_and_featured_dialogues_above_the_standard_report(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """An orchestrating command (the demo) adds its summary to the standard report instead of writing a
    page of its own: paragraphs and featured dialogues are escaped like everything else, the preface's
    figures are embedded and written beside the Markdown twin, and the standard sections stay."""
    from rlver.eval.plots import reward_curve_svg
    from rlver.eval.report import write_report
    from rlver.eval.report_parts import Featured, Figure, Preface
    from rlver.eval.report_view import dialogue_lines
    from rlver.eval.runs import load_run

    runs = [load_run(two_runs[0]), load_run(two_runs[1])]
    curve = Figure(
        "reward_curve",
        "reward curve",
        reward_curve_svg([{"step": s, "rollout/reward_mean": 0.2 + 0.01 * s} for s in range(1, 8)], [{"step": 0, "score": 20.0}]),
    )  # fmt: skip
    featured = runs[1].episodes[0]
    preface = Preface(
        paragraphs=(f"held-out score went up {EVIL}",),
        figures=(curve,),
        featured=(Featured(f"after training {EVIL}", 1, featured),),
    )
    html_path, md_path = write_report(runs, tmp_path / "demo.html", title="demo", preface=preface)
    html = html_path.read_text(encoding="utf-8")
    assert "<script" not in html.lower() and "held-out score went up &lt;script&gt;" in html
    assert html.index('id="summary"') < html.index('id="metrics"') < html.index('id="dialogues"')
    assert 'id="featured-r1-p1-0"' in html and 'id="r1-p1-0"' in html  # featured copy and the full list
    figures = [read_figure(svg) for svg in inline_figures(html)]
    assert len(figures) == 4  # the reward curve + the three standard figures
    assert "held-out score" in figures[0].legend[-1]
    assert "Paired comparison" in html
    md = md_path.read_text(encoding="utf-8")
    assert "demo_files/reward_curve.svg" in md
    assert (
        read_figure((tmp_path / "demo_files" / "reward_curve.svg").read_text(encoding="utf-8")) == figures[0]
    )
    lines = dialogue_lines(featured)
    assert lines[0] == "user: opening of p1" and lines[1].startswith("assistant: reply 0")
    assert lines[2] == "    (emotion 40 -> 50, +10)"
    assert "\n".join(lines) in md


def test_dialogue_lines_cut_long_messages() -> None:
    from rlver.eval.report_view import dialogue_lines

    ep = make_episode("p1", [5])
    ep.messages[2] = ep.messages[2].model_copy(update={"content": "word " * 100})
    lines = dialogue_lines(ep, width=40)
    assert len(lines[1]) == len("assistant: ") + 40 and lines[1].endswith("…")
