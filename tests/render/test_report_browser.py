"""The HTML report in a real browser (Debian's headless Chromium; `.ci/run` installs it): every chart renders, every
option of every control switches to a view that renders, the console shows no error, nothing is fetched (the page's
Content-Security-Policy blocks any fetch and the page records every blocked one), every chart's numbers are ready
as CSV. ``python tests/render/test_report_browser.py`` writes the README's screenshot (docs/figures/report.png)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from simulator.pricing import request
from simulator.sweep.htmlreport import build_report, report_html
from simulator.sweep.plan import plan

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CHARTS = ("chart-speedup", "chart-throughput", "chart-breakdown", "chart-walk", "chart-plan")


def small_report() -> str:
    data = build_report(["qwen3-30b-a3b"], ["h100-sxm"], request(gpus=1), engines=("trtllm", "vllm"),
                        drafters=("eagle", "model:qwen3-0.6b"), batch=(1, 4, 16, 64), draft_len=(1, 2, 3, 4))
    pl = plan("qwen3-30b-a3b", "h100-sxm", 1, tpot_ms=20, engines=("trtllm",), concurrency=(1, 8, 64), max_k=3)
    return report_html(data, plan=pl)


def chromium(args: list[str], timeout: int = 60) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(small_report(), encoding="utf-8")
    return path


def test_report_renders_switches_and_fetches_nothing(page, tmp_path):
    text = page.read_text(encoding="utf-8")
    assert len(text.encode()) < 5e6
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)\s*=\s*[\"']?(https?:)?//", text, re.I)
    png = tmp_path / "report.png"
    out = chromium(["--virtual-time-budget=10000", "--window-size=1300,1700", f"--screenshot={png}", "--dump-dom",
                    page.as_uri() + "#selftest"])
    m = re.search(r'<pre id="selftest"[^>]*>(.*?)</pre>', out.stdout, re.S)
    assert m and m.group(1), out.stderr[-2000:]
    res = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                     .replace("&gt;", ">"))
    assert res["errors"] == []  # no exception, no console error, no blocked fetch
    assert res["switched"] == 1 + 1 + 2 + 2  # every option of model, gpu, engine, drafter
    assert res["missing"] == 0 and len(set(res["views"])) == 3  # each option lands on a priced view
    for chart in CHARTS:  # each chart drawn, and re-drawn on every switch (the plan once)
        assert res["rendered"].get(chart, 0) >= (1 if chart == "chart-plan" else res["switched"]), chart
    assert res["canvases"] >= len(CHARTS)
    for chart in ("speedup", "throughput", "breakdown", "walk", "schedule", "plan"):
        assert res["csv_rows"].get(chart, 0) > 1, chart  # header + the plotted numbers
    assert png.exists() and png.stat().st_size > 50_000 and png.read_bytes()[:4] == b"\x89PNG"


if __name__ == "__main__":  # the README's screenshot, of the default study's report
    from simulator.sweep.htmlreport import report_html as html

    out = Path(__file__).resolve().parents[2] / "docs" / "figures" / "report.png"
    with tempfile.TemporaryDirectory() as d:
        page_path = Path(d) / "report.html"
        page_path.write_text(html(build_report(engines=("trtllm", "sglang", "vllm"))), encoding="utf-8")
        chromium(["--virtual-time-budget=60000", "--window-size=1300,1500", f"--screenshot={out}",
                  page_path.as_uri()], timeout=120)
    print(f"wrote {out}", file=sys.stderr)
