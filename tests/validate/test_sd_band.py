"""The model-error band (simulator/validate/sd_band.py; docs/MODEL.md §4.6, §7.2): engine_round.MODEL_ERROR is what
re-running the split-conformal fit gives; a held-out author's band never sees that author's measurements (from any of
its sources); the quantiles are the stated finite-sample ranks; a row whose AL was measured at another batch carries
an acceptance band."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from simulator.specdec import StepCache
from simulator.specdec.engine_round import MODEL_ERROR, POOLED
from simulator.validate.sd_band import COVERAGE, conformal, error_bands, matches, score
from simulator.validate.sd_corpus import read_corpus
from simulator.validate.sd_fit import fitted_params
from simulator.validate.sd_report import summary
from simulator.validate.sd_speedup import al_batch_spread, price_row, setup

ROWS = read_corpus()


pytestmark = pytest.mark.xdist_group("bundled_sd_fit")  # with the other reader of the fit (tests/validate/conftest.py)


def test_rerunning_the_fit_reproduces_model_error(validation):
    eb = validation.error
    assert matches(eb.constant, MODEL_ERROR) and summary(validation)["error_band"]["matches"]
    for g, (lo, hi) in MODEL_ERROR.items():
        assert (lo, hi) == pytest.approx(eb.constant[g], abs=1e-5) and lo <= 0.0 <= hi
    assert POOLED in MODEL_ERROR and "trtllm" in eb.pooled_engines  # one TRT-LLM author: pooled, said so
    shifted = {**eb.constant, POOLED: (eb.constant[POOLED][0] - 0.01, eb.constant[POOLED][1])}
    assert not matches(shifted, MODEL_ERROR)  # the check can fail


def test_reported_coverage_is_the_held_out_one(validation):
    pr = validation.priced
    covered = sum(o.band[0] <= o.measured <= o.band[1] for o in pr)
    assert summary(validation)["overall"]["band_covered"] == covered
    for o in pr:  # each band is the held-out prediction's parameter band widened by that source's quantiles
        lo, hi, _ = validation.error.held[o.row.id]
        assert o.band == pytest.approx((o.band_params[0] * math.exp(lo), o.band_params[1] * math.exp(hi)))
        assert o.band[0] <= o.held_out <= o.band[1]


def test_a_held_out_author_never_sees_its_own_measurements(validation):
    """Split-conformal by author: scaling one author's measured values (both of its sources, SpecForge #339 and
    AngelSlim #163) moves the quantiles of every other author (its rows are their calibration) but not its own (each
    calibration row predicted without it, too)."""
    models, author = validation.models, "Zzsf11"
    assert {m.priced.setup.row.source_key for m in models.values() if m.author == author} == {
        "specforge-339", "angelslim-163"}
    moved = {i: replace(m, priced=replace(m.priced, measured=m.priced.measured * 1.3))
             if m.author == author else m for i, m in models.items()}
    held = {o.row.id: o.held_out for o in validation.priced}
    again = error_bands(moved, list(moved.values()), held, fitted_params)
    mine = [i for i, m in models.items() if m.author == author]
    assert mine and all(again.held[i] == validation.error.held[i] for i in mine)
    assert any(again.held[i] != validation.error.held[i] for i in models if i not in mine)


def test_conformal_ranks():
    s = np.arange(1, 20) / 100.0 - 0.05  # n = 19: ranks floor(20 · 0.1) = 2 and ceil(20 · 0.9) = 18
    assert conformal(s, 0.8) == pytest.approx((-0.03, 0.13))
    assert conformal([0.1, 0.2]) == (0.0, 0.2)  # q_lo <= 0 <= q_hi: the band always holds the central value
    assert conformal([]) == (0.0, 0.0) and COVERAGE == 0.8
    assert score(1.0, 0.9, 1.1) == 0.0 and score(0.81, 0.9, 1.1) == pytest.approx(math.log(0.9))
    assert score(2.2, 0.9, 1.1) == pytest.approx(math.log(2.0))


def test_a_borrowed_accept_length_carries_an_acceptance_band():
    by_id = {r.id: r for r in ROWS}
    borrowed = setup(by_id["tw-glm47f-1xh200-b32-humaneval"], ROWS)
    own = setup(by_id["tw-glm47f-1xh200-b1-humaneval"], ROWS)
    assert borrowed.al_from == "tw-glm47f-1xh200-b1-humaneval" and own.al_from == "row"
    assert borrowed.al_spread == al_batch_spread(ROWS) > 0 and own.al_spread == 0.0
    lo, hi = price_row(borrowed, StepCache()).band_ratio()
    lo1, hi1 = price_row(own, StepCache()).band_ratio()
    assert hi - lo > 5 * (hi1 - lo1)  # AL × 0.5 … × 2 (the corpus's widest AL-vs-batch change) against none
