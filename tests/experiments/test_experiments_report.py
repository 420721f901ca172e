"""docs/RESULTS.md is what the report command writes from the bundled studies today (regenerate it with
``python -m simulator experiment --all --report docs/RESULTS.md`` when this fails)."""

from __future__ import annotations

from pathlib import Path

from experiments_helpers import bundled_outcomes

from simulator.experiments import REPORT_COMMAND, bundled_names, report_markdown

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "RESULTS.md"


def test_results_md_is_current():
    assert RESULTS.is_file(), f"docs/RESULTS.md is missing: run {REPORT_COMMAND}"
    text = report_markdown(list(bundled_outcomes().values()))
    assert all(f"[{n}]" in text for n in bundled_names())
    assert RESULTS.read_text(encoding="utf-8") == text, f"docs/RESULTS.md is stale: run {REPORT_COMMAND}"


def test_report_order_and_figure_links():
    text = report_markdown(list(bundled_outcomes().values()))
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[0].startswith("## paper-headline") and heads[-1].startswith("## validation")
    assert "](figures/paper-headline-waterfall.png)" in text
