"""The report in a real browser: headless Chromium renders every chart and transcript, and the
console stays silent. Skipped where Chromium is not installed (`make system-deps` installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kitchen.app.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)"
)


def chromium(page: Path, tmp_path: Path, *args: str) -> tuple[str, list[str]]:
    """Open `page` offline; return the DOM after scripts ran and the console messages."""
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
        *args,
        page.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    console = re.findall(r":CONSOLE[^\]]*\] (.*)", done.stderr)
    return done.stdout, console


def test_the_console_check_sees_errors(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>console.error('bad'); missing();</script></body></html>")
    _, console = chromium(page, tmp_path, "--dump-dom")
    assert any("bad" in m for m in console) and any("missing is not defined" in m for m in console)


def test_report_renders_curves_and_transcripts_without_console_errors(runs, tmp_path):
    page = write_report([runs["rl"], runs["sl"], runs["dpo"]], tmp_path / "report.html")
    dom, console = chromium(page, tmp_path, "--dump-dom")
    assert console == []
    charts = re.findall(
        r'<div class="chart js-plotly-plot" id="(chart-\d+)" data-family="([^"]+)"', dom
    )
    assert {"Loss / NLL", "Reward", "KL", "Entropy", "Learning rate", "Step time"} <= {
        f for _, f in charts
    }
    for chart_id, family in charts:
        body = dom.split(f'id="{chart_id}"', 1)[1].split('class="chart', 1)[0]
        assert 'class="main-svg"' in body and 'class="scatterlayer' in body, (
            family
        )  # drawn by plotly.js
    assert dom.count('class="traj"') == 3 * 8 * 8  # 3 iterations, 8 groups of 8 trajectories
    assert dom.count('class="tok"') > 3 * 8 * 8  # every sampled token shaded by its advantage
    assert "dpo: preference pairs" in dom and dom.count('class="pair-step"') == 3
    assert "samples before and after training" in dom

    shot = tmp_path / "report.png"
    chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1300,2600", "--hide-scrollbars")
    assert shot.stat().st_size > 50_000
