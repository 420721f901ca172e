"""engine_round.FITTED is what the corpus fit gives and what the pricing path prices with: re-running the
leave-one-source-out fit on the bundled corpus reproduces the table; round_params (and so every priced row) reads
it; a parameter no row moves keeps its public band (docs/MODEL.md §4.6, §7.2)."""

from __future__ import annotations

import pytest

from simulator.cost.deployment import Deployment
from simulator.pricing import bound
from simulator.specdec import StepCache
from simulator.specdec.engine_round import FITTED, Band, round_params
from simulator.validate.sd_corpus import read_corpus
from simulator.validate.sd_fit import FIT_PARAMS, RowModel, fitted_bands, public_params
from simulator.validate.sd_report import fitted_matches, summary
from simulator.validate.sd_speedup import price_row, setup

ROWS = read_corpus()


pytestmark = pytest.mark.xdist_group("bundled_sd_fit")  # with the other reader of the fit (tests/validate/conftest.py)


def test_rerunning_the_fit_reproduces_the_fitted_table(validation):
    wanted = fitted_bands(validation)
    assert fitted_matches(wanted)
    assert summary(validation)["fitted_table_matches"]
    assert set(wanted) == set(FITTED)
    for e, d in wanted.items():
        assert set(d) == set(FITTED[e])
        for n, (lo, c, hi) in d.items():
            b = FITTED[e][n]
            assert (b.low, b.central, b.high) == pytest.approx((lo, c, hi), rel=1e-4, abs=1e-9)
            assert c == pytest.approx(validation.fits[e].values[FIT_PARAMS.index(n)], rel=1e-12)
            rng = getattr(public_params(e), n)
            assert rng.low <= b.low <= b.central <= b.high <= rng.high  # inside the evidence's range
    # a changed table no longer matches: the check can fail
    e, n = next((e, n) for e, d in FITTED.items() for n in d)
    shifted = {**wanted, e: {**wanted[e], n: tuple(x * 1.01 + 1e-6 for x in wanted[e][n])}}
    assert not fitted_matches(shifted)


def test_parameters_no_row_moves_keep_their_public_band(validation):
    for e, f in validation.fits.items():
        for i, n in enumerate(FIT_PARAMS):
            if f.rows == 0 or f.sensitivity[i] < 1e-6:
                assert n not in FITTED.get(e, {})
    # no TRT-LLM row moves a host parameter (overlap hides them); only the never-hidden offset per draft step
    assert set(FITTED.get("trtllm", {})) <= {"draft_step_offset"}


def _priced(rid):
    return price_row(setup(next(r for r in ROWS if r.id == rid), ROWS), StepCache())


def test_the_pricing_path_reads_the_fitted_values(monkeypatch):
    p = _priced("sf339-q30b-2xh100-b1-s3k1n4")
    hw = p.serving.step.hardware
    used = round_params(hw)
    for n, b in FITTED["sglang"].items():
        assert getattr(used, n) == b
    assert round_params(bound(hw, Deployment(engine="trtllm"))) == public_params("trtllm").with_(
        **FITTED.get("trtllm", {}))
    m = RowModel.of(p)
    assert m.predict() == pytest.approx(p.predicted(), rel=1e-12)
    assert m.predict() == pytest.approx(m.predict(public_params("sglang").with_(**FITTED["sglang"])), rel=1e-12)
    assert abs(m.predict() - m.predict(public_params("sglang"))) > 1e-3  # the fit changes the priced speedup
    # change the table and the priced row follows: the path reads FITTED, not a copy
    more = {**FITTED["sglang"], "round_host": Band(8e-3, 9e-3, 10e-3, "test")}
    monkeypatch.setitem(FITTED, "sglang", more)
    assert _priced("sf339-q30b-2xh100-b1-s3k1n4").predicted() < p.predicted()
