"""Residual analysis of a fit (calibrate/diagnose.py; issue 18): the reason a fit misses the goal is computed from
its residuals, and the reports print it."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.calibrate.diagnose import GOAL_FIT, GOAL_LOSO, Residuals, fit_least_squares, why
from simulator.calibrate.report import fit_why, index_markdown, report_markdown

pytestmark = pytest.mark.xdist_group("h100_calibration")  # the readers of the session's H100 calibration (conftest.py)


def _res(signed, groups, size, kernels=None, loso=()):
    n = len(signed)
    return Residuals(tuple(signed), tuple(groups), tuple(float(s) for s in size), "tokens",
                     tuple(kernels or [""] * n), tuple(loso))


def test_within_the_goal_has_no_reason():
    r = _res([0.5, -0.5], ["a", "b"], [1, 2])
    assert why(r, GOAL_FIT, GOAL_LOSO) == ""
    assert why(r, GOAL_FIT + 0.01, GOAL_LOSO) != ""


def test_a_trend_in_size_is_named():
    size = np.tile(np.arange(1, 9), 3)
    signed = np.where(size <= 4, 0.2, -0.2)  # the same step in every shape
    got = why(_res(signed, np.repeat(["a", "b", "c"], 8), size), 0.2, 0.2)
    assert got.startswith("form cannot follow tokens") and "+20%" in got and "-20%" in got


def test_one_shape_apart_is_named():
    groups = np.repeat(["a", "b", "c", "d"], 6)
    signed = np.where(groups == "c", -0.4, 0.02) + np.tile([0.01, -0.01], 12)
    got = why(_res(signed, groups, np.tile(np.arange(6), 4)), 0.12, 0.13)
    assert got.startswith("shapes sit apart: c -40%") and "over 4 shapes" in got


def test_a_bend_in_one_shape_is_named():
    groups = np.repeat(["2 GPUs", "4 GPUs"], 8)
    size = np.tile(np.arange(8), 2)
    signed = np.where((groups == "2 GPUs") & (size >= 6), -0.6, 0.0) + np.tile([0.01, -0.01], 8)
    got = why(_res(signed, groups, size), 0.15, 0.15)
    assert got.startswith("the curve bends differently by shape: shape 2 GPUs") and "-60%" in got


def test_mixed_kernels_and_scatter_are_named():
    rng = np.random.default_rng(0)
    signed = rng.normal(0, 0.15, 40)
    kernels = ["flashinfer"] * 20 + ["trtllm_mha"] * 20
    got = why(_res(signed, np.repeat(["a", "b"], 20), np.tile(np.arange(20), 2), kernels), 0.12, 0.12)
    assert got.startswith("rows of 2 kernels: flashinfer") and "row-to-row scatter" in got


def test_held_out_shape_carrying_the_error_is_named():
    r = _res([0.2, -0.2, 0.2, -0.2], ["a", "a", "b", "b"], [1, 2, 1, 2], loso=(("a", 0.05, 2), ("b", 0.9, 2)))
    assert "held out, shape b alone is 90%" in why(r, 0.2, 0.5)


def test_fit_least_squares_keeps_the_residuals():
    x = np.arange(1.0, 13.0)
    y = 2.0 * x
    groups = np.repeat(["a", "b", "c"], 4)

    def res(th, mask):
        return (th[0] * x[mask] - y[mask]) / y[mask]

    th, mf, ml, rs = fit_least_squares(res, [1.0], [0.0], [10.0], groups, np.ones(12, bool), x, "x")
    assert abs(th[0] - 2.0) < 1e-6 and mf < 1e-6 and ml < 1e-6
    assert len(rs.signed) == 12 and rs.groups[0] == "a" and [g for g, _, _ in rs.loso] == ["a", "b", "c"]


def test_reports_print_the_reason(h100_calibration):
    cal = h100_calibration
    over = [f for f in cal.fits if fit_why(f)]
    text, index = report_markdown(cal), index_markdown([cal])
    for f in cal.fits:
        assert ("residuals" in f.notes) and (bool(fit_why(f)) == (f.mape_fit > GOAL_FIT or f.mape_loso > GOAL_LOSO))
    assert over and all(f"[{i}]" in index for i in range(1, len(over) + 1)) and f"[{len(over) + 1}]" not in index
    for f in over:
        assert f"- {f.cls} {f.variant} ({f.mape_fit:.1%} / {f.mape_loso:.1%}): {fit_why(f)}" in text
        assert f". {cal.gpu} {cal.engine} {f.cls} {f.variant}: {fit_why(f)}" in index
