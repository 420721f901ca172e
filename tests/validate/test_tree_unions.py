"""Tree unions (validate.tree_unions; the study analysis tree_unions, experiments/moe-spec-trees.yaml): predictions
never depend on the measured values, and the prose follows the numbers (inside/outside, which floors bracket)."""

from __future__ import annotations

from dataclasses import replace

from simulator.experiments import load_experiment
from simulator.experiments.runner import run_analysis
from simulator.validate.tree_unions import Tree

STUDY = load_experiment("moe-spec-trees")


def run(settings):
    return run_analysis(STUDY, "tree_unions", settings=settings)


def _settings(m31: float, m255: float):
    s = load_experiment("moe-spec-trees").analyses["tree_unions"]
    return replace(s, trees=(Tree(2, 4, m31), Tree(2, 7, m255)))


def _predicted(part):
    return [row[2:] for row in part.tables[0].rows]  # everything after nodes and measured


def test_measured_values_are_not_inputs():
    a, b = run(_settings(39, 54)), run(_settings(10, 60))
    assert _predicted(a) == _predicted(b)


def test_findings_follow_the_numbers():
    part = run(_settings(39, 54))
    rows = {(r[0], r[5]): r[6:] for r in part.tables[0].rows}
    pure31 = rows[(31, 1.0)]
    assert min(pure31) <= 39 <= max(pure31)
    text = " ".join(part.findings)
    assert f"31 nodes {min(pure31):.1f}–{max(pure31):.1f} (measured 39 inside, between f = 0.2 and 0.25)" in text
    far = " ".join(run(_settings(63.5, 54)).findings)
    assert "(measured 63.5 outside)" in far and "(measured 39 inside" not in far
    lag1 = [r[3] for r in part.tables[0].rows]
    assert lag1[0] > 39 and "it overcounts every tree" in text
    default31 = part.tables[0].rows[0][4]  # the tree default with the central long-lag assumption
    assert default31 < lag1[0]  # longer-range correlation: fewer experts than the lag-1 chain
    assert f"{default31:.1f} for 31 nodes (measured 39, {default31 / 39 - 1:+.1%})" in text
    low = " ".join(run(_settings(61, 64.5)).findings)
    assert "does not overcount every tree" in low
