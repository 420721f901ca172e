"""Per-op validation on the bundled measurements: the row sets are the calibration's own, the MAPE table adds up,
and predictions follow the profile they are made with."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.calibrate.measured import ALL_FORMATS, ALL_TRT, CALIB, SETS, read_csv
from simulator.calibrate.op_errors import validate_ops
from simulator.errors import ConfigError
from simulator.specs.catalog import load_hardware, measured_dir

pytestmark = pytest.mark.xdist_group("h100_calibration")  # the readers of the session's H100 calibration (conftest.py)


@pytest.fixture(scope="module")
def v():
    return validate_ops("h100-sxm")


def test_calibration_rows_are_the_rows_the_fit_uses(v, h100_calibration):
    """One home for the row filters: every fit's row count equals the validation's calibration-row sample."""
    cal = h100_calibration
    n = {(s.op, s.variant): s.measured.size for s in v.samples if s.set == CALIB}
    for f in cal.fits:
        assert n[(f.cls, f.variant)] == f.rows, (f.cls, f.variant)
        s = next(s for s in v.samples if (s.op, s.variant, s.set) == (f.cls, f.variant, CALIB))
        assert np.mean(np.abs(s.rel)) == pytest.approx(f.mape_fit, abs=2e-3)  # bundled profile vs refit


def test_pooled_rows_add_up(v):
    rows = v.table()
    for op in v.ops:
        for st in SETS:
            per = [r for r in rows if r.op == op and r.set == st and r.variant != ALL_FORMATS]
            pooled = [r for r in rows if r.op == op and r.set == st and r.variant == ALL_FORMATS]
            if not per:
                assert not pooled
                continue
            (p,) = pooled
            assert p.n == sum(r.n for r in per)
            assert p.mape == pytest.approx(sum(r.mape * r.n for r in per) / p.n)
            assert v.mape(op, st) == p.mape
    assert [r.op for r in rows] == sorted(r.op for r in rows)


def test_every_row_is_predicted_or_counted_as_excluded(v):
    data = measured_dir("h100-sxm")
    moe = read_csv(data / "moe.csv")
    coll = read_csv(data / "collectives.csv")
    assert v.excluded["MoE power-law rows"] == sum(x["distribution"].startswith("power_law") for x in moe)
    n_trt = sum(s.measured.size for s in v.samples if s.op == "moe" and s.set != CALIB)
    assert n_trt + v.excluded["MoE power-law rows"] == len(moe)
    n_coll = sum(s.measured.size for s in v.samples if s.op == "collective" and s.set != CALIB)
    assert n_coll + v.excluded["eager all-reduce and reduce-scatter rows"] == len(coll)


def test_calibrated_profile_fits_its_own_rows(v):
    assert v.mape("moe") < 0.05 and v.mape("gemm") < 0.1
    assert v.mape("moe") <= v.mape("moe", ALL_TRT)  # the filters drop the rows the fit cannot describe


def test_predictions_follow_the_profile(v):
    hw = load_hardware("h100-sxm")
    slow = hw.with_changes(hbm_bandwidth=hw.hbm_bandwidth / 2)
    w = validate_ops(slow)
    a = next(s for s in v.samples if (s.op, s.variant, s.set) == ("moe", "fp8_block", CALIB))
    b = next(s for s in w.samples if (s.op, s.variant, s.set) == ("moe", "fp8_block", CALIB))
    assert np.all(b.predicted > a.predicted) and np.array_equal(a.measured, b.measured)


def test_missing_folder_is_one_line_naming_the_parameter(tmp_path):
    with pytest.raises(ConfigError, match="'data' parameter") as e:
        validate_ops("h100-sxm", tmp_path)
    assert "\n" not in str(e.value)
