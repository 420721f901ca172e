"""Monotonicity properties of the maximum-entropy fit, stated as precisely as they hold (docs/MODEL.md §2)."""

import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from overlap_strategies import FAST, markov_chain_stats, real_profile

from simulator.errors import InfeasibleError
from simulator.overlap import OverlapStats, fit_window, predict, realisability_warnings, unique_experts
from simulator.traces import synth_trace
from simulator.traces.trace import layer_stats


def _u(stats, n, method="ipf", batch=1):
    return float(unique_experts(fit_window(stats, n, method).p_zero, batch))


def _raised(stats, overlaps):
    try:
        return OverlapStats(stats.popularity, stats.top_k, tuple(overlaps))
    except InfeasibleError:
        return None


def _assert_no_more_experts(stats, up, n):
    """U(1, n) under the raised overlaps ``up`` is at most U(1, n) under ``stats`` (skipping unrealisable ones)."""
    raised = _raised(stats, up)
    assume(raised is not None)
    try:
        u_up = _u(raised, n)
    except InfeasibleError:
        assume(False)
    assert u_up <= _u(stats, n) + 1e-7


@FAST
@given(real_profile(max_experts=6), st.integers(2, 6), st.floats(0.0, 1.0))
def test_raising_lag1_alone_never_adds_experts(stats, n, step):
    o = np.array(stats.overlaps)
    up = o.copy()
    up[0] = o[0] + step * (1 - o[0])
    _assert_no_more_experts(stats, up, n)


@FAST
@given(real_profile(max_experts=6), st.integers(2, 6), st.floats(0.0, 1.0), st.booleans())
def test_raising_every_lag_together_never_adds_experts(stats, n, amount, by_fraction):
    o = np.array(stats.overlaps)
    up = o + amount * (1 - o) if by_fraction else np.minimum(1.0, o * (1 + amount))
    _assert_no_more_experts(stats, up, n)


def test_raising_one_longer_lag_alone_can_add_experts():
    base = OverlapStats.from_overlaps(8, 2, (0.6, 0.6, 0.25))
    raised = OverlapStats.from_overlaps(8, 2, (0.6, 0.6, 0.30))
    assert _u(raised, 4) > _u(base, 4) + 0.05  # max-ent redistributes mass: more experts, not fewer


@FAST
@given(markov_chain_stats(), st.sampled_from(["ipf", "junction"]))
def test_u_is_monotone_and_concave_in_n_for_real_processes(stats, method):
    u = [0.0] + [_u(stats, n, method) for n in range(1, 8)]
    step = np.diff(u)
    assert np.all(step >= -1e-7)
    assert np.all(np.diff(step) <= 1e-7)


@FAST
@given(real_profile(max_experts=6), st.integers(1, 16))
def test_u_is_monotone_and_concave_in_n_for_real_profiles_at_any_batch(stats, b):
    u = [0.0] + [_u(stats, n, "ipf", b) for n in range(1, 8)]
    step = np.diff(u)
    assert np.all(step >= -1e-7) and np.all(np.diff(step) <= 1e-7)


def test_synthetic_router_statistics_give_concave_u():
    trace = synth_trace(32, 4, 64, 96, persistence=0.9, skew=0.2, seed=3)
    stats = layer_stats(trace, 0, max_lag=4)
    assert realisability_warnings(stats, 4, "ipf") == []
    u = [0.0] + [_u(stats, n) for n in range(1, 9)]
    step = np.diff(u)
    assert np.all(step >= -1e-7) and np.all(np.diff(step) <= 1e-7)


def test_unrealisable_profile_is_warned_about_not_rejected():
    stats = OverlapStats.from_overlaps(8, 2, (0.8, 0.9, 0.9))  # feasible on 4 tokens, no stationary process
    problems = realisability_warnings(stats, 4, "ipf")
    assert problems and "stationary" in problems[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = predict(stats, 4)
    assert res.warnings and any("stationary" in str(w.message) for w in caught)
    u = [_u(stats, n) for n in (3, 4)]
    assert u[1] < u[0]  # the symptom the warning is about: U falls with n


def test_lags_beyond_the_window_are_checked_too():
    stats = OverlapStats.from_overlaps(8, 2, (1.0, 0.5))  # infeasible at lag 2, which a 2-token fit ignores
    assert "not realisable by any process" in realisability_warnings(stats, 2, "ipf")[0]
    with pytest.warns(UserWarning, match="not realisable"):
        predict(stats, 2)
