import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from overlap_strategies import FAST, chain_law, real_profile, sparse_run_stats

from simulator.errors import InfeasibleError, ParameterError
from simulator.overlap import OverlapStats, fit_window, p_zero
from simulator.overlap.constraints import window_constraints
from simulator.overlap.maxent import junction_table, junction_tree, marginal, markov_table, table_ipf


def _ipf_table(stats, n):
    cons = window_constraints(stats, n)
    return table_ipf(n, cons.positions, cons.targets, tol=1e-11), cons


@FAST
@given(real_profile(max_experts=6), st.integers(1, 6))
def test_ipf_gives_a_distribution_whose_marginals_match(stats, n):
    res, cons = _ipf_table(stats, n)
    assert res.converged
    assert np.all(res.table >= 0)
    assert np.allclose(res.table.sum(axis=1), 1.0, atol=1e-12)
    for pos, target in zip(cons.positions, cons.targets, strict=True):
        assert np.abs(marginal(res.table, n, pos) - target).max() < 1e-9
    for t in range(n):  # every position has the popularity as its one-token marginal
        assert np.allclose(marginal(res.table, n, (t,))[:, 1], stats.popularity, atol=1e-9)


def test_block_ipf_equals_plain_ipf():
    stats = OverlapStats.from_overlaps(6, 2, (0.5, 0.4), "skew:0.4")
    cons = window_constraints(stats, 9)  # width 3 < 9 tokens: window-block updates
    block = table_ipf(9, cons.positions, cons.targets, tol=1e-12)
    plain = table_ipf(9, cons.positions, cons.targets, tol=1e-12, blocks=False)  # one constraint per step
    assert block.converged and plain.converged
    assert block.iterations < plain.iterations  # a whole window per step: fewer sweeps (2 against 17 here)
    assert np.abs(block.table - plain.table).max() < 1e-9


def test_structural_zeros_full_overlap():
    stats = OverlapStats.from_overlaps(8, 2, (1.0, 1.0, 1.0))
    fit = fit_window(stats, 5, "ipf")
    assert np.allclose(fit.p_zero, 1 - stats.popularity)
    res, _ = _ipf_table(stats, 5)
    assert np.allclose(res.table[:, 1:-1], 0.0)  # only 0…0 and 1…1 remain


def test_boundary_solutions_from_sparse_statistics_converge():
    # an expert active in exactly one run of three tokens out of 30: many patterns are implicitly impossible
    stats = sparse_run_stats()
    fit = fit_window(stats, 4, "ipf", tol=1e-10)
    assert fit.max_error < 1e-10


def test_infeasible_statistics_are_rejected_with_details():
    stats = OverlapStats.from_overlaps(8, 2, (1.0, 0.3))  # x_t = x_t+1 but not x_t = x_t+2
    with pytest.raises(InfeasibleError, match="triangle") as err:
        fit_window(stats, 3, "ipf")
    assert "\n" not in str(err.value)
    with pytest.raises(InfeasibleError):
        fit_window(stats, 3, "junction")


def test_fit_is_cached_and_read_only():
    stats = OverlapStats.from_overlaps(8, 2, (0.5, 0.4), "skew:0.3")
    a = fit_window(stats, 4, "ipf")
    b = fit_window(OverlapStats.from_overlaps(8, 2, (0.5, 0.4), "skew:0.3"), 4, "ipf")
    assert a is b
    assert np.array_equal(p_zero(stats, 4, "ipf"), a.p_zero)
    with pytest.raises(ValueError):
        a.p_zero[0] = 0


def test_parameter_errors():
    stats = OverlapStats.from_overlaps(8, 2, (0.5,))
    with pytest.raises(ParameterError, match="n_tokens"):
        fit_window(stats, 0)
    with pytest.raises(ParameterError, match="method"):
        fit_window(stats, 2, "magic")
    with pytest.raises(ParameterError, match="at most"):
        fit_window(stats, 21, "ipf_table")


@FAST
@given(real_profile(max_experts=6, max_lag=1), st.integers(2, 6))
def test_markov_ipf_and_junction_agree_on_lag1(stats, n):
    ipf, _ = _ipf_table(stats, n)
    chain = markov_table(stats.popularity, stats.pair_probs[:, 0], n)
    assert np.abs(ipf.table - chain).max() < 1e-8
    p_m = fit_window(stats, n, "markov").p_zero
    p_j = fit_window(stats, n, "junction").p_zero
    p_i = fit_window(stats, n, "ipf", tol=1e-11).p_zero
    assert np.allclose(p_m, p_i, atol=1e-8) and np.allclose(p_m, p_j, atol=1e-8)


@FAST
@given(st.integers(2, 4), st.integers(1, 7), st.integers(0, 2**16))
def test_ipf_and_junction_agree_on_window_patterns(m, extra, seed):
    rng = np.random.default_rng(seed)
    # stationary m-token pattern law of a random (m-1)-order chain, for 3 experts + a filler
    wins = []
    for _ in range(3):
        states = 1 << (m - 1)
        p1 = rng.uniform(0.05, 0.95, states)
        _, nu = chain_law(p1, m - 1)
        wins.append(np.concatenate([[nu[s] * (1 - p1[s]), nu[s] * p1[s]] for s in range(states)]))
    pis = [float(f.reshape(-1, 2)[:, 1].sum()) for f in wins]
    k = int(np.ceil(sum(pis)))
    filler = k - sum(pis)
    const = np.zeros(1 << m)
    const[0], const[-1] = 1 - filler, filler
    stats = OverlapStats(np.array(pis + [filler]), k, window=np.array(wins + [const]))
    n = m + extra
    res, _ = _ipf_table(stats, n)
    tree = junction_tree(n, m)
    assert np.abs(res.table - junction_table(tree, stats.window)).max() < 1e-8
    assert np.allclose(fit_window(stats, n, "junction").p_zero, res.table[:, 0], atol=1e-8)


@FAST
@given(real_profile(max_experts=6, max_lag=3))
def test_junction_chain_meets_every_constraint_at_every_position(stats):
    n = stats.max_lag + 3
    fit_window(stats, n, "junction")  # warm the stationary fit
    from simulator.overlap.fit import stationary_window

    window, _, _ = stationary_window(stats, tuple(range(1, stats.max_lag + 1)), 0, 1e-10)
    w = window.shape[1].bit_length() - 1
    table = junction_table(junction_tree(n, w), window)
    assert np.allclose(table.sum(axis=1), 1.0)
    for d in range(1, stats.max_lag + 1):
        for s in range(n - d):
            assert np.allclose(marginal(table, n, (s, s + d))[:, 3], stats.pair_probs[:, d - 1], atol=1e-8)


def test_junction_differs_from_ipf_only_by_a_boundary_effect():
    stats = OverlapStats.from_overlaps(32, 4, (0.381, 0.329, 0.301, 0.299), "skew:0.2")
    for n in (5, 8):
        u_ipf = (1 - fit_window(stats, n, "ipf").p_zero).sum()
        u_junction = (1 - fit_window(stats, n, "junction").p_zero).sum()
        assert 0 <= u_junction / u_ipf - 1 < 0.02


def test_junction_is_linear_in_n_and_consistent():
    stats = OverlapStats.from_overlaps(16, 2, (0.5, 0.45, 0.42))
    p = {n: fit_window(stats, n, "junction").p_zero for n in (40, 41, 42, 200)}
    ratio1, ratio2 = p[41] / p[40], p[42] / p[41]
    assert np.allclose(ratio1, ratio2)  # P(0^n) = g(0^w)·q^(n−w) beyond the clique width
    assert np.all(p[200] < p[40])


def test_stationary_hessian_matches_finite_differences():
    from simulator.overlap.maxent import TransferMatrix, window_features

    stats = OverlapStats.from_overlaps(8, 2, (0.4, 0.3), "skew:0.3")
    phi, _, allowed = window_features(3, (1, 2), 0, stats.popularity, stats.pair_probs, None)
    theta = np.random.default_rng(0).normal(scale=0.5, size=(8, phi.shape[1]))
    chain = TransferMatrix(theta, phi, allowed, 3)
    grad = chain.mu @ phi
    h = 1e-5

    def mean_features(th):
        return TransferMatrix(th, phi, allowed, 3).mu @ phi

    fd = np.stack([(mean_features(theta + h * e) - mean_features(theta - h * e)) / (2 * h)
                   for e in np.eye(phi.shape[1])], axis=2)
    assert np.abs(chain.hessian(phi, grad) - fd).max() < 1e-8


def test_periodic_statistics_work_in_both_paths():
    # an expert active on tokens 0,1 of every 4 (x = 1100 1100 ...): x_t != x_t+2 is a structural zero
    stats = OverlapStats(np.array([0.5, 0.5]), 1, pair_probs=np.array([[0.25, 0.0], [0.25, 0.0]]))
    for n in (3, 6):
        assert np.allclose(fit_window(stats, n, "junction").p_zero, fit_window(stats, n, "ipf").p_zero, atol=1e-8)


@pytest.mark.parametrize("pooling", ["lift", "conditional"])
def test_both_pooling_rules_fit(pooling):
    stats = OverlapStats.from_overlaps(16, 2, (0.45, 0.35), "skew:0.2", pooling=pooling)
    res, cons = _ipf_table(stats, 5)
    assert res.converged
    for d in (1, 2):
        assert np.allclose(marginal(res.table, 5, (0, d))[:, 3], stats.pair_probs[:, d - 1], atol=1e-9)
        assert stats.pair_probs[:, d - 1].sum() / 2 == pytest.approx(stats.overlaps[d - 1])
