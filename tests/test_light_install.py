"""The release as a user installs it: the wheel ``python -m build`` made (``make dist``: the sdist, and
the wheel built from it), installed alone in a fresh venv, no extra, not ``-e``:
``pip install -c constraints.txt dist/rlver-<version>-py3-none-any.whl``.

Built and run by ``make light-test`` (part of ``make test``), which sets ``RLVER_LIGHT_VENV``; without
it these tests skip (the suite itself never installs anything: building the venv here would cost CI a
second copy of what ``make`` builds once). tests/core/test_extras_light_core.py checks the import paths of
every core command in this venv with the [train] extra's modules refused.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rlver.extras import EXTRA_MODULES, install_command
from rlver.testing.openai_server import FakeChatServer
from rlver.testing.responders import policy_and_simulator
from svg_check import inline_figures, read_figure

REPO = Path(__file__).resolve().parents[1]
#: The bound the light core must stay under (site-packages, pip and its .pyc files included; 1,379 MB
#: with torch, 236 MB with matplotlib drawing the report's figures). Measured 139 MB (2026-11-28, the
#: figures drawn as SVG by pygal): numpy 71, pip and setuptools 22, the rest 46, of which pygal and what
#: it needs 1.3 (docs/notes/2026-11-28-light-core-and-integrations.md).
MAX_SITE_PACKAGES_MB = 150

pytestmark = pytest.mark.skipif(
    not os.environ.get("RLVER_LIGHT_VENV"), reason="needs the light venv: make light-test"
)


@pytest.fixture(scope="module")
def venv() -> Path:
    path = Path(os.environ["RLVER_LIGHT_VENV"])
    return path if path.is_absolute() else REPO / path


def run(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A program of the light venv, with nothing of this venv's on its path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OPENAI_API_KEY")}
    env.update(COLUMNS="200", HF_HUB_OFFLINE="1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    proc = subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=cwd,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def site_packages(venv: Path) -> Path:
    [path] = (venv / "lib").glob("python3*/site-packages")
    return path


def megabytes(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def test_the_light_venv_holds_the_wheel_and_no_training_stack(venv: Path, tmp_path: Path) -> None:
    """rlver is the wheel's copy in the venv's site-packages (pip's ``direct_url.json`` names the
    wheel file, not an editable checkout), beside its sdist in dist/; no module of [train] is there."""
    probe = (
        "import importlib.metadata as md, importlib.util, rlver; print(rlver.__file__); "
        "print(md.distribution('rlver').read_text('direct_url.json')); "
        f"print([m for m in {EXTRA_MODULES['train']!r} if importlib.util.find_spec(m)])"
    )
    where, direct_url, found = run(venv, "python", "-c", probe, cwd=tmp_path).stdout.split("\n")[:3]
    assert Path(where).is_relative_to(site_packages(venv)) and not Path(where).is_relative_to(REPO / "src")
    installed = json.loads(direct_url)
    assert installed["url"].endswith("-py3-none-any.whl") and "dir_info" not in installed  # not -e
    version = installed["url"].rsplit("/", 1)[1].split("-")[1]
    assert (REPO / "dist" / f"rlver-{version}.tar.gz").is_file()  # python -m build made both
    assert found == "[]"
    size = megabytes(site_packages(venv))
    print(f"light venv site-packages: {size:.0f} MB")
    assert size <= MAX_SITE_PACKAGES_MB


def test_an_endpoint_benchmark_with_its_report_runs_in_the_light_venv(venv: Path, tmp_path: Path) -> None:
    with FakeChatServer(policy_and_simulator) as server:
        proc = run(
            venv, "rlver", "eval", "--agent-base-url", server.url, "--agent-model", "policy",
            "--agent-key-env", "", "--simulator", "offline", "--profiles", "en-test", "--limit", "2",
            "--out", "run", cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "score " in said and "2 finished / 0 failed" in said
    for name in ("transcript.jsonl", "metrics.json", "report.html", "report.md"):
        assert (tmp_path / "run" / name).is_file(), name
    # the report's figures are drawn here too: inline in the page, and as files beside the Markdown
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    titles = [read_figure(svg).title for svg in inline_figures(page)]
    assert titles[:2] == ["Emotion trajectory (mean, band = 25th–75th percentile)", "Final emotion"]
    assert (tmp_path / "run" / "report_files" / "trajectory.svg").is_file()
    assert "OK" in run(venv, "rlver", "audit", "run/transcript.jsonl", cwd=tmp_path).stdout


def test_train_refuses_in_one_line_naming_the_pip_command(venv: Path, tmp_path: Path) -> None:
    proc = run(venv, "rlver", "train", "--config", "tiny-offline", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: rlver train needs the [train] extra") and install_command("train") in line
    assert not (tmp_path / "out").exists()
