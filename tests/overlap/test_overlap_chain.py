"""The exact maximum-entropy fit by IPF on the junction tree (chain_ipf, method ``ipf``) against the 2^n-table IPF
(method ``ipf_table``), the lag-1 Markov closed form and the stationary junction chain (docs/MODEL.md §2.3)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from overlap_strategies import FAST, chain_law, markov_chain_stats, real_profile, sparse_run_stats

from simulator.errors import InfeasibleError
from simulator.overlap import OverlapStats, fit_window, resolve_method
from simulator.overlap.constraints import window_constraints
from simulator.overlap.maxent import chain_ipf, chain_table, extend_potentials, marginal, markov_table, table_ipf

AGREE = 1e-8  # chain vs table, both fitted to 1e-12


def _both(stats, n):
    cons = window_constraints(stats, n)
    table = table_ipf(n, cons.positions, cons.targets, tol=1e-12)
    chain = chain_ipf(n, cons.positions, cons.targets, tol=1e-12)
    assert table.converged and chain.converged
    return cons, table, chain


def _assert_same_law(stats, n):
    cons, table, chain = _both(stats, n)
    full = chain_table(chain.potentials)
    assert np.abs(chain.p_zero - table.table[:, 0]).max() < AGREE
    assert np.abs(full - table.table).max() < AGREE
    assert np.allclose(full.sum(axis=1), 1.0, atol=1e-12)
    for pos, target in zip(cons.positions, cons.targets, strict=True):
        assert np.abs(marginal(full, n, pos) - target).max() < 1e-10
    return chain


def _chain_window_stats(rng, orders, m, lags):
    """Statistics of stationary binary Markov chains of the given orders (one per expert, plus a constant filler
    expert so that Σπ is an integer): m-token window frequencies and pair marginals at lags 1..lags, all consistent."""
    wins, pairs, pis = [], [], []
    for order in orders:
        states = 1 << order
        p1 = rng.uniform(0.05, 0.95, states)
        trans, nu = chain_law(p1, order)
        # law of the first `span` tokens by forward recursion over states (oldest token = most significant bit)
        span = max(m, lags + 1)
        probs = np.zeros(1 << span)
        for x in range(1 << span):
            bits = [(x >> (span - 1 - t)) & 1 for t in range(span)]
            p = 0.0
            for s in range(states):  # state = the previous `order` tokens
                q, cur = nu[s], s
                for b in bits:
                    q *= p1[cur] if b else 1 - p1[cur]
                    cur = ((cur << 1) | b) & (states - 1)
                p += q
            probs[x] = p
        probs /= probs.sum()
        tokens = np.arange(1 << span)
        win = np.zeros(1 << m)
        np.add.at(win, tokens >> (span - m), probs)
        wins.append(win)
        pis.append(float(probs[(tokens >> (span - 1)) & 1 == 1].sum()))
        pairs.append([float(probs[((tokens >> (span - 1)) & 1) & ((tokens >> (span - 1 - d)) & 1) == 1].sum())
                      for d in range(1, lags + 1)])
    k = int(np.ceil(sum(pis) - 1e-12))
    filler = k - sum(pis)
    const = np.zeros(1 << m)
    const[0], const[-1] = 1 - filler, filler
    return OverlapStats(np.array(pis + [filler]), k, pair_probs=np.array(pairs + [[filler] * lags]),
                        window=np.array(wins + [const]))


@FAST
@given(real_profile(max_experts=8, max_lag=5), st.integers(1, 9))
def test_chain_equals_table_on_pooled_profiles(stats, n):
    _assert_same_law(stats, n)


@FAST
@given(markov_chain_stats(), st.integers(2, 9))
def test_chain_equals_table_on_per_expert_pairs(stats, n):
    _assert_same_law(stats, n)


@FAST
@given(st.integers(2, 4), st.integers(0, 2), st.integers(0, 3), st.integers(0, 2**16))
def test_chain_equals_table_with_window_patterns_and_longer_lags(m, extra_lags, extra_tokens, seed):
    rng = np.random.default_rng(seed)
    stats = _chain_window_stats(rng, [int(o) for o in rng.integers(1, 4, size=3)], m, m + extra_lags)
    _assert_same_law(stats, min(m + extra_lags + 1 + extra_tokens, 9))


def test_chain_equals_table_with_skewed_popularity_and_the_published_profile():
    stats = OverlapStats.from_overlaps(32, 4, (0.381, 0.329, 0.301, 0.299), "skew:0.25")
    for n in (3, 5, 8, 10):
        fit_c, fit_t = fit_window(stats, n, "ipf", tol=1e-12), fit_window(stats, n, "ipf_table", tol=1e-12)
        assert np.abs(fit_c.p_zero - fit_t.p_zero).max() < AGREE
        assert fit_c.method == "ipf" and fit_t.method == "ipf_table"


@pytest.mark.parametrize(
    ("pi", "pairs"),
    [
        (0.5, (0.5, 0.5, 0.5)),  # full overlap: x constant over the window
        (0.5, (0.25, 0.5)),  # x_t = x_t+2, lag 1 independent
        (0.5, (0.25, 0.0)),  # x_t+2 = 1 − x_t: period 4 (1100 1100 ...)
        (0.25, (0.08, 0.0)),  # x_t and x_t+2 never both active
    ],
)
def test_structural_zeros(pi, pairs):
    experts = int(round(1 / pi))
    stats = OverlapStats(np.full(experts, pi), 1, pair_probs=np.array([pairs] * experts))
    for n in (3, 4, 6, 8):
        chain = _assert_same_law(stats, n)
        assert chain.max_error < 1e-10
    if pairs == (0.5, 0.5, 0.5):
        assert np.allclose(fit_window(stats, 60, "ipf").p_zero, 1 - pi)


def test_boundary_solutions_are_reduced_on_the_chain():
    # an expert active in exactly one run of three tokens out of 30: patterns impossible without a zero target
    stats = sparse_run_stats()
    for n in (4, 6, 7):  # K = 1, 3, 4 cliques; the table reduces these too (per-constraint mode)
        fc, ft = fit_window(stats, n, "ipf", tol=1e-10), fit_window(stats, n, "ipf_table", tol=1e-10)
        assert fc.max_error < 1e-10 and np.abs(fc.p_zero - ft.p_zero).max() < AGREE
    assert fit_window(stats, 12, "ipf", tol=1e-10).max_error < 1e-10  # beyond the table's reduction (block mode)


def test_jointly_infeasible_targets_raise():
    same, differ = np.array([[0.5, 0.0, 0.0, 0.5]]), np.array([[0.0, 0.5, 0.5, 0.0]])
    with pytest.raises(InfeasibleError, match="exclude"):  # x0 = x1 = x2 but x0 != x2
        chain_ipf(3, [(0, 1), (1, 2), (0, 2)], [same, same, differ])
    off = np.array([[0.4, 0.1, 0.1, 0.4]])
    shifted = np.array([[0.2, 0.2, 0.2, 0.4]])  # P(x1 = 1) = 0.5 from one pair, 0.6 from the other
    res = chain_ipf(3, [(0, 1), (1, 2)], [off, shifted], max_iter=300)
    assert not res.converged and res.max_error > 1e-3


def test_infeasible_statistics_and_non_convergence_are_reported():
    with pytest.raises(InfeasibleError, match="triangle"):
        fit_window(OverlapStats.from_overlaps(8, 2, (1.0, 0.3)), 12, "ipf")
    stats = OverlapStats.from_overlaps(16, 2, (0.9, 0.85, 0.8), "skew:0.3")
    with pytest.raises(InfeasibleError, match=r"did not converge in 3 sweeps \(tolerance 1e-09\)") as err:
        fit_window(stats, 12, "ipf", max_iter=3)
    assert "expert" in str(err.value) and "tokens" in str(err.value) and "\n" not in str(err.value)


@FAST
@given(real_profile(max_experts=6, max_lag=1), st.integers(2, 12))
def test_chain_equals_markov_closed_form_on_lag1(stats, n):
    cons = window_constraints(stats, n)
    chain = chain_ipf(n, cons.positions, cons.targets, tol=1e-12)
    assert np.abs(chain.p_zero - fit_window(stats, n, "markov").p_zero).max() < AGREE
    if n <= 8:
        table = markov_table(stats.popularity, stats.pair_probs[:, 0], n)
        assert np.abs(chain_table(chain.potentials) - table).max() < AGREE


def test_auto_uses_the_exact_chain_for_longer_lags_at_every_length():
    lag1 = OverlapStats.from_overlaps(8, 2, (0.5,))
    lags = OverlapStats.from_overlaps(8, 2, (0.5, 0.4))
    assert resolve_method(lag1, 64) == "markov"
    assert all(resolve_method(lags, n) == "ipf" for n in (3, 10, 11, 64, 256))


def test_warm_started_long_chains_equal_cold_fits():
    for overlaps in ((0.381, 0.329, 0.301, 0.299), (0.9, 0.85, 0.8, 0.78)):
        stats = OverlapStats.from_overlaps(16, 2, overlaps, "skew:0.3")
        n = 90  # 86 cliques: fit_window starts from a 32-clique fit stretched to 86
        cons = window_constraints(stats, n)
        cold = chain_ipf(n, cons.positions, cons.targets, tol=1e-11)
        warm = fit_window(stats, n, "ipf", tol=1e-11)
        assert cold.converged and warm.max_error < 1e-11
        assert np.abs(warm.p_zero - cold.p_zero).max() < AGREE


def test_extend_potentials_repeats_the_middle_clique():
    psi = np.arange(5)[:, None, None] * np.ones((5, 2, 4))
    assert extend_potentials(psi, 9)[:, 0, 0].tolist() == [0, 1, 2, 2, 2, 2, 2, 3, 4]
    assert extend_potentials(psi, 5)[:, 0, 0].tolist() == [0, 1, 2, 3, 4]


def test_stationary_junction_differs_by_a_boundary_effect_that_fades_with_n():
    # the exact finite-n law vs the stationary maximum-entropy-rate chain, published profile, skewed popularity:
    # the junction chain predicts slightly more unique experts (+0.4 to +0.7% at n = 4..16), less for long n
    stats = OverlapStats.from_overlaps(128, 8, (0.381, 0.329, 0.301, 0.299), "skew:0.118")
    gaps = {}
    for n in (4, 8, 16, 64):
        u_ipf = (1 - fit_window(stats, n, "ipf").p_zero).sum()
        u_junction = (1 - fit_window(stats, n, "junction").p_zero).sum()
        gaps[n] = u_junction / u_ipf - 1
    assert all(0 < g < 0.01 for g in gaps.values())
    assert gaps[64] < gaps[16] < gaps[8]


def test_wide_cliques_use_reshape_marginals():
    stats = OverlapStats.from_overlaps(8, 2, tuple(np.linspace(0.6, 0.4, 10)))  # lags 1..10: cliques of 11 tokens
    cons = window_constraints(stats, 12)
    targets = [t[:1] for t in cons.targets]  # uniform popularity: one distinct expert
    chain = chain_ipf(12, cons.positions, targets, tol=1e-11)
    table = table_ipf(12, cons.positions, targets, tol=1e-11)
    assert chain.converged and chain.potentials.shape == (2, 1, 1 << 11)
    assert np.abs(chain.p_zero - table.table[:, 0]).max() < AGREE


def test_evaluate_trace_window_wider_than_the_prediction_window():
    """Window-pattern statistics wider than the largest n need pair statistics up to the window's lags."""
    from simulator.traces import evaluate_trace, synth_trace

    trace = synth_trace(32, 4, 32, 64, seed=1)
    report = evaluate_trace(trace, [2], [1, 4], window=4, samples=200)
    assert "window" in report.predictors and len(report.rows) == 2
