import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from overlap_strategies import FAST, popularity

from simulator.errors import InfeasibleError, ParameterError
from simulator.overlap import OverlapStats, pool_pairs
from simulator.overlap.constraints import lag_problems


@FAST
@given(popularity(), st.floats(0.0, 1.0), st.sampled_from(["lift", "conditional"]))
def test_pooling_rules_reproduce_the_overlap_and_respect_frechet_bounds(pk, frac, rule):
    pi, k = pk
    low = np.maximum(0, 2 * pi - 1).sum() / k
    o = low + frac * (1 - low)
    pairs = pool_pairs(pi, k, (o,), rule)[:, 0]
    assert pairs.sum() / k == pytest.approx(o, abs=1e-9)
    assert np.all(pairs <= pi + 1e-12) and np.all(pairs >= np.maximum(0, 2 * pi - 1) - 1e-12)


def test_lift_is_a_common_correlation_and_conditional_a_common_conditional():
    pi = np.array([0.5, 0.3, 0.2])
    o = 0.45
    lift = pool_pairs(pi, 1, (o,), "lift")[:, 0]
    corr = (lift - pi**2) / (pi - pi**2)
    assert np.allclose(corr, corr[0])
    cond = pool_pairs(pi, 1, (o,), "conditional")[:, 0]
    assert np.allclose(cond / pi, o)
    assert not np.allclose(lift, cond)


def test_independent_and_full_overlap_limits():
    stats = OverlapStats.from_overlaps(8, 2, (2 * 0.25**2 * 4 / 2 / 1,), "uniform")  # o = k/E = Σπ²/k
    assert np.allclose(stats.pair_probs[:, 0], 0.25**2)
    full = OverlapStats.from_overlaps(8, 2, (1.0, 1.0))
    assert np.allclose(full.pair_probs, 0.25)


def test_stats_are_hashable_by_value():
    a = OverlapStats.from_overlaps(8, 2, (0.4, 0.3), "skew:0.3")
    b = OverlapStats.from_overlaps(8, 2, (0.4, 0.3), "skew:0.3")
    c = OverlapStats.from_overlaps(8, 2, (0.4, 0.31), "skew:0.3")
    assert a == b and hash(a) == hash(b) and a != c
    assert len({a, b, c}) == 2
    with pytest.raises(ValueError):
        a.popularity[0] = 0.5  # read-only


@pytest.mark.parametrize(
    "kwargs,exc,text",
    [
        (dict(overlaps=(38.1,)), ParameterError, "did you mean 0.381"),
        (dict(overlaps=(-0.1,)), ParameterError, "fraction"),
        (dict(overlaps=(0.01,), popularity="skew:0.9"), InfeasibleError, "Fréchet"),
    ],
)
def test_bad_overlaps_are_rejected_with_one_line(kwargs, exc, text):
    with pytest.raises(exc, match=text) as err:
        OverlapStats.from_overlaps(16, 4, **kwargs)
    assert "\n" not in str(err.value)


def test_pair_above_marginal_or_below_frechet_is_infeasible():
    pi = np.array([0.6, 0.4])
    with pytest.raises(InfeasibleError, match="Fréchet"):
        OverlapStats(pi, 1, pair_probs=[[0.7], [0.3]])
    with pytest.raises(InfeasibleError, match="Fréchet"):
        OverlapStats(pi, 1, pair_probs=[[0.1], [0.1]])  # 0.1 < 2·0.6 − 1
    with pytest.raises(InfeasibleError, match="sum to top_k"):
        OverlapStats(np.array([0.6, 0.6]), 1)


def test_window_frequencies_must_be_consistent():
    good = np.array([[0.5, 0.1, 0.1, 0.3], [0.3, 0.1, 0.1, 0.5]])  # stationary: P(01) = P(10)
    s = OverlapStats(np.array([0.4, 0.6]), 1, window=good)
    assert np.allclose(s.pair_probs[:, 0], [0.3, 0.5]) and s.window_size == 2
    bad = np.array([[0.5, 0.2, 0.0, 0.3], [0.3, 0.1, 0.1, 0.5]])
    with pytest.raises(InfeasibleError):
        OverlapStats(np.array([0.4, 0.6]), 1, window=bad)


def test_lag_problems_detects_triangle_and_psd_violations():
    pi = np.array([0.3])
    assert lag_problems(pi, np.array([[0.2, 0.15]])) == []
    tri = lag_problems(pi, np.array([[0.3, 0.1]]))  # x_t = x_t+1 forces x_t = x_t+2
    assert tri and "triangle" in tri[0]
