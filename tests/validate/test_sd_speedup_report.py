"""The SD-validation summary (simulator/validate/sd_report.py) counts what it says it counts: mean |error|, losses
predicted, false losses, band coverage, per engine and mode — checked on hand-made outcomes against direct sums."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.validate.sd_corpus import read_corpus
from simulator.validate.sd_fit import Outcome, Validation
from simulator.validate.sd_report import _group, summary
from simulator.validate.sd_speedup import setup

ROWS = read_corpus()
BASE = next(r for r in ROWS if r.id == "sf339-q30b-2xh100-b1-s3k1n4")
SETUP = setup(BASE, ROWS)

point = st.tuples(st.floats(0.3, 3.0), st.floats(0.3, 3.0), st.floats(0.0, 0.5), st.floats(0.0, 0.5),
                  st.sampled_from(["sglang", "trtllm"]))


def _outcome(i, measured, predicted, lo, hi, engine):
    row = replace(BASE, id=f"r{i}", engine=engine, source_key=f"s{i % 3}")
    band = (predicted * (1 - lo), predicted * (1 + hi))
    return Outcome(row, "priced", "", SETUP, measured, predicted, predicted, predicted, band,
                   f"mode of {engine}", predicted)


@settings(max_examples=60, deadline=None)
@given(pts=st.lists(point, min_size=1, max_size=12))
def test_group_metrics_are_the_direct_counts(pts):
    os = [_outcome(i, *p) for i, p in enumerate(pts)]
    g = _group(os)
    meas = np.array([p[0] for p in pts])
    pred = np.array([p[1] for p in pts])
    assert g["rows"] == len(pts)
    assert g["mean_abs_error_held_out"] == pytest.approx(np.mean(np.abs(pred / meas - 1)))
    assert g["losses"] == int((meas < 1).sum())
    assert g["losses_predicted"] == int(((meas < 1) & (pred < 1)).sum())
    assert g["false_losses"] == int(((meas >= 1) & (pred < 1)).sum())
    inside = [o.band[0] <= o.measured <= o.band[1] for o in os]
    assert g["band_covered"] == sum(inside) and g["band_coverage"] == pytest.approx(sum(inside) / len(os))


def test_summary_groups_by_engine_and_mode_and_judges_the_targets():
    os = [_outcome(0, 0.8, 0.9, 0.2, 0.2, "sglang"), _outcome(1, 1.5, 1.6, 0.1, 0.1, "sglang"),
          _outcome(2, 2.0, 2.0, 0.0, 0.0, "trtllm")]
    s = summary(Validation("hand-made", tuple(os)))
    assert [(g["engine"], g["rows"]) for g in s["groups"]] == [("sglang", 2), ("trtllm", 1)]
    t = s["targets"]
    assert t["every_loss_predicted"]["met"] and t["band_coverage"]["met"]  # 0.8 < 0.9 · 1.2 and so on
    assert t["held_out_mean_abs_error"]["met"] == (s["overall"]["mean_abs_error_held_out"] <= 0.15)
    assert not t["six_cases_within"]["met"]  # none of the six is among these rows
    worse = summary(Validation("hand-made", (_outcome(0, 0.8, 1.2, 0.1, 0.1, "sglang"),)))["targets"]
    assert not worse["every_loss_predicted"]["met"] and not worse["band_coverage"]["met"]
