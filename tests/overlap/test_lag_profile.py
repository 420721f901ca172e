"""Lag-overlap profiles (overlap.lag_profile): a shape rescaled to a chosen o(1) keeps its lag correlations' ratios,
and the Markov profile is o(1) alone."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.overlap.lag_profile import lift, profile_lags


def test_lift_is_zero_at_the_baseline_and_one_at_full_overlap():
    assert lift([0.1, 1.0], 0.1).tolist() == pytest.approx([0.0, 1.0])


def test_cohere_profile_is_rescaled_to_its_lag1():
    shape, sb, s = (0.40, 0.30, 0.25), 0.0625, 0.05
    lags = profile_lags(s, shape, sb, 0.3, "cohere")
    assert lags[0] == pytest.approx(0.3)
    lam, lam0 = lift(lags, s), lift(shape, sb)
    assert np.allclose(lam / lam[0], lam0 / lam0[0])
    # no lag1: the shape's own correlations over the new baseline
    assert np.allclose(lift(profile_lags(s, shape, sb, None, "cohere"), s), lam0)


def test_markov_profile_is_lag1_only():
    assert profile_lags(0.05, (0.4, 0.3), 0.0625, 0.25, "markov") == (0.25,)
