"""The latent-score tree model (docs/MODEL.md §2.16): the normal CDF, the orthant inversion, the fit reproducing the
statistics it was given, message passing against exact Gaussian orthants, and the tree invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from overlap_strategies import FAST
from scipy.stats import multivariate_normal

from simulator.cli import main
from simulator.overlap import OverlapStats, fit_window, full_tree, predict_tree, tree_p_zero
from simulator.overlap.latent import LatentParams, fit_latent, latent_correlation, upper_orthant
from simulator.overlap.latent_tree import latent_tree_p_zero, subtree_shapes
from simulator.overlap.normal import ndtr, ndtr_fast, ndtri
from simulator.traces.synth_tree import route_tree, router_trace, set_router, tree_empirical_unique, tree_router
from simulator.traces.trace import layer_stats

UNION_TOL = 3e-3  # stated numerical error of the message passing: relative, on the union 1 − P(0…0)


def _path(n: int) -> tuple:
    return (-1,) + tuple(range(n - 1))


def _params(pi, share, coef) -> LatentParams:
    pi = np.atleast_1d(np.asarray(pi, dtype=float))
    n = pi.size
    return LatentParams(-ndtri(pi), np.broadcast_to(share, n).astype(float), np.broadcast_to(coef, n).astype(float),
                        np.zeros(n, dtype=bool), 0.0, 1)


def _distances(parents) -> np.ndarray:
    n = len(parents)
    anc = []
    for v in range(n):
        a = [v]
        while parents[a[-1]] >= 0:
            a.append(parents[a[-1]])
        anc.append(a)
    d = np.zeros((n, n), dtype=int)
    for v in range(n):
        for w in range(n):
            common = set(anc[v]) & set(anc[w])
            lca = max(common, key=lambda x: len(anc[x]))
            d[v, w] = len(anc[v]) + len(anc[w]) - 2 * len(anc[lca])
    return d


def test_normal_cdf_and_inverse():
    x = np.linspace(-36, 8, 4001)
    exact = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    assert np.max(np.abs(ndtr(x) / exact - 1)[x < 0]) < 1e-10
    assert np.max(np.abs(ndtr(x) - exact)) < 1e-11
    assert np.max(np.abs(ndtr_fast(x) - exact)) < 1e-8
    p = np.concatenate([np.logspace(-250, -1, 300), np.linspace(0.05, 0.95, 19)])
    assert np.max(np.abs(ndtr(ndtri(p)) / p - 1)) < 1e-9
    assert np.allclose(ndtri(1 - p[-19:]), -ndtri(p[-19:]), atol=1e-9)


def test_orthant_is_the_bivariate_normal():
    for h, r in [(0.3, 0.5), (1.2, -0.4), (2.5, 0.9), (3.1, 0.2)]:
        exact = multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf([-h, -h])
        assert abs(float(upper_orthant(h, r)) - exact) < 1e-7
    h = np.array([0.0, 1.0, 2.0])
    assert np.allclose(upper_orthant(h, 0.0), ndtr(-h) ** 2, atol=1e-14)
    assert np.allclose(upper_orthant(h, 1.0), ndtr(-h), atol=1e-12)


@FAST
@given(st.floats(0.01, 0.6), st.floats(-0.9, 0.995))
def test_correlation_inverts_the_orthant(pi, r):
    p = float(upper_orthant(-ndtri(pi), r))
    got = latent_correlation(np.array([pi]), np.array([[p]]))
    assert abs(float(upper_orthant(-ndtri(pi), got[0, 0])) - p) < 1e-12


@FAST
@given(st.lists(st.floats(0.02, 0.7), min_size=2, max_size=6), st.floats(0.0, 0.8), st.floats(0.1, 0.97),
       st.integers(2, 6))
def test_fit_reproduces_the_statistics_it_was_given(pis, share, coef, lags):
    """Pair overlaps from a latent (c, r) are reproduced (misfit < 1e-4, every p_e(d) within 2e-4); one node gives
    the popularity exactly; with one lag, a 2-node tree gives P(0, 0) = 1 − 2π + p(1) within the numerical bound."""
    pi = np.array(pis)
    d = np.arange(1, lags + 1)
    corr = share + (1 - share) * coef ** d
    pairs = upper_orthant(-ndtri(pi)[:, None], corr[None, :])
    fit = fit_latent(pi, pairs)
    assert fit.misfit < 1e-4
    model = upper_orthant(fit.tau[:, None], fit.correlation(d))
    assert np.max(np.abs(model - pairs)) < 2e-4
    assert np.allclose(latent_tree_p_zero(fit, (-1,)), 1 - pi, atol=1e-12)
    one = fit_latent(pi, pairs[:, :1])
    two = latent_tree_p_zero(one, (-1, 0))
    union = 2 * pi - pairs[:, 0]
    assert np.max(np.abs((1 - two) / union - 1)) < UNION_TOL


@pytest.mark.parametrize("parents", [full_tree((2, 2)), _path(5), (-1, 0, 0, 1, 1, 2, 3)])
@pytest.mark.parametrize("pi,share,coef", [(0.125, 0.0, 0.7), (0.05, 0.3, 0.8), (0.4, 0.0, 0.95), (0.3, 0.8, 0.9),
                                           (0.05, 0.98, 0.3), (0.2, 0.6, -0.3)])
def test_message_passing_is_the_gaussian_orthant(parents, pi, share, coef):
    """P(no node above τ) for the covariance c + (1 − c)·r^dist equals the multivariate normal CDF (Genz) within the
    stated bound on the union."""
    cov = share + (1 - share) * coef ** _distances(parents)
    tau = float(-ndtri(pi))
    exact = multivariate_normal(np.zeros(len(parents)), cov, abseps=1e-7, releps=1e-7,
                                maxpts=300_000).cdf(np.full(len(parents), tau))
    got = float(latent_tree_p_zero(_params(pi, share, coef), parents)[0])
    assert abs((1 - got) / (1 - exact) - 1) < UNION_TOL


@st.composite
def trees(draw, max_nodes: int = 12):
    n = draw(st.integers(2, max_nodes))
    return (-1,) + tuple(draw(st.integers(0, v - 1)) for v in range(1, n))


@FAST
@given(trees(), st.floats(0.02, 0.6), st.floats(0.0, 0.9), st.floats(0.0, 0.98), st.data())
def test_union_monotone_and_sibling_relabelling(parents, pi, share, coef, data):
    """Adding a node anywhere never lowers the union (exactly: every operation is non-negative); relabelling the
    nodes, siblings included, gives the identical number."""
    prm = _params(pi, share, coef)
    base = float(latent_tree_p_zero(prm, parents)[0])
    at = data.draw(st.integers(0, len(parents) - 1))
    assert float(latent_tree_p_zero(prm, parents + (at,))[0]) <= base + 1e-15
    n = len(parents)
    perm = np.random.default_rng(n).permutation(n)
    relabelled = [0] * n
    for v, p in enumerate(parents):
        relabelled[perm[v]] = -1 if p < 0 else int(perm[p])
    assert float(latent_tree_p_zero(prm, tuple(relabelled))[0]) == base
    assert len(subtree_shapes(tuple(relabelled))[1]) == len(subtree_shapes(parents)[1])


def test_one_wide_tree_is_the_latent_chain_and_full_trees_share_shapes():
    stats = OverlapStats.from_overlaps(32, 4, (0.5, 0.4, 0.35), "skew:0.2")
    for n in (2, 5, 12):
        assert np.array_equal(tree_p_zero(stats, _path(n)).p_zero, fit_window(stats, n, "latent").p_zero)
    assert len(subtree_shapes(full_tree((2,) * 7))[1]) == 8  # one message per depth


def test_latent_beats_pairwise_on_a_strongly_correlated_router():
    """AR(1) tree router at ρ = 0.9 with skewed popularity: from the chain's o(1..4) and popularity, the latent model
    is within 5% of the Monte-Carlo union on a 15-node tree; the pairwise stationary chain is further off."""
    router = tree_router(32, 4, persistence=0.9, skew=0.25, seed=5)
    m = layer_stats(router_trace(router, 300, 96, seed=6), 0, max_lag=4)
    stats = OverlapStats(m.popularity, 4, m.overlaps)
    parents = full_tree((2, 2, 2))
    mc, _ = tree_empirical_unique(route_tree(router, parents, 3000, seed=7), 32, 1)
    latent = float(predict_tree(stats, parents).unique_experts)
    pairwise = float(predict_tree(stats, parents, method="stationary").unique_experts)
    assert abs(latent / mc - 1) < 0.05, (latent, mc)
    assert abs(pairwise / mc - 1) > abs(latent / mc - 1)


def test_set_router_is_routing():
    router = set_router(16, 3, stick=2.0, boost=1.0, working=5, skew=0.3)
    ids = route_tree(router, full_tree((2, 2)), 50, seed=1)
    assert ids.shape == (50, 7, 3) and ids.min() >= 0 and ids.max() < 16
    assert all(len(set(row)) == 3 for row in ids.reshape(-1, 3))


def test_cli_tree_uses_every_lag_and_ipf_refuses(capsys):
    lags = "0.45,0.38,0.34,0.31,0.3,0.29,0.28,0.28"
    assert main(["overlap", "predict", "--experts", "64", "--top-k", "8", "--tree", "2,2,2,2", "--overlap", lags,
                 "--popularity", "skew:0.2"]) == 0
    out = capsys.readouterr().out
    assert "method latent, lags 1..8 of 8" in out and "dropped" not in out
    assert main(["overlap", "predict", "--experts", "64", "--top-k", "8", "--tree", "2,2,2,2", "--overlap", lags,
                 "--tree-method", "ipf"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MAX_CLIQUE_NODES" in err[0] and "latent" in err[0]


def test_binary_memory_is_flagged_only_where_the_profile_says_so():
    """A set-Markov router's lag profile is fitted better by the binary-memory family than by the latent one: the
    latent method says so and auto takes the pairwise stationary chain; an AR(1) router's is not flagged and auto
    is the latent model."""
    flagged, chosen = [], []
    for router in (set_router(32, 4, stick=3.0, boost=0.0, working=0, skew=0.3),
                   tree_router(32, 4, persistence=0.8, skew=0.25, seed=5)):
        m = layer_stats(router_trace(router, 200, 96, seed=2), 0, max_lag=4)
        stats = OverlapStats(m.popularity, 4, m.overlaps)
        flagged.append("binary memory" in tree_p_zero(stats, full_tree((2, 2)), method="latent").approximation)
        chosen.append(tree_p_zero(stats, full_tree((2, 2))).method)
    assert flagged == [True, False]
    assert chosen == ["stationary", "latent"]


def test_many_distinct_experts_are_binned_within_the_stated_error(monkeypatch):
    """Above LATENT_MAX_DISTINCT distinct experts the latent fit groups them into bins and states the largest
    |ΔP(0…0)| of a checked sample; the exact union (binning switched off) is within E × that."""
    import simulator.overlap.latent_union as union_module
    from simulator.overlap import clear_tree_cache

    weights = np.random.default_rng(3).pareto(1.5, 300) + 0.05
    stats = OverlapStats.from_overlaps(300, 8, (0.5, 0.42, 0.38), weights)
    parents = full_tree((2, 2, 2))
    clear_tree_cache()
    binned = tree_p_zero(stats, parents)
    assert "grouped into" in binned.approximation
    bound = float(binned.approximation.split("(E × that: ")[1].split(" experts")[0])
    monkeypatch.setattr(union_module, "LATENT_MAX_DISTINCT", 10_000)
    clear_tree_cache()
    exact = tree_p_zero(stats, parents)
    assert "grouped" not in exact.approximation
    assert abs(float((exact.p_zero - binned.p_zero).sum())) <= bound
    assert 0 < np.max(np.abs(exact.p_zero - binned.p_zero)) < 0.02


def test_fit_reports_which_memory_and_which_model_explains_the_trace(capsys, tmp_path):
    """`overlap fit` on an AR(1) trace: the latent model reproduces the lag profile more closely than binary memory,
    the latent predictor is in the table, and the best predictor is named."""
    import json

    path = str(tmp_path / "t.npz")
    assert main(["overlap", "synth", "--experts", "32", "--top-k", "4", "--sequences", "80", "--tokens", "64",
                 "--persistence", "0.9", "--skew", "0.25", "--seed", "3", "--out", path]) == 0
    capsys.readouterr()
    assert main(["overlap", "fit", path, "--tokens", "4,8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    layer = out["statistics"][0]
    assert layer["latent_misfit"] < layer["binary_memory_misfit"]
    assert "latent" in out["predictions"][0] and out["best"]["predictor"] == "latent"


@FAST
@given(trees(max_nodes=10), st.data())
def test_auto_picks_one_model_per_statistics_and_stays_monotone(parents, data):
    """auto's choice (latent or, on binary-memory profiles, the stationary chain) depends on the statistics only:
    growing the tree keeps the model and never lowers the union."""
    stats = data.draw(st.sampled_from([SET_MARKOV_STATS, AR_STATS]))
    fit = tree_p_zero(stats, parents)
    at = data.draw(st.integers(0, len(parents) - 1))
    grown = tree_p_zero(stats, parents + (at,))
    assert grown.method == fit.method == ("stationary" if stats is SET_MARKOV_STATS else "latent")
    assert float((1 - grown.p_zero).sum()) >= float((1 - fit.p_zero).sum()) - 1e-9


def _router_stats(router) -> OverlapStats:
    m = layer_stats(router_trace(router, 200, 96, seed=2), 0, max_lag=4)
    return OverlapStats(m.popularity, 4, m.overlaps)


SET_MARKOV_STATS = _router_stats(set_router(32, 4, stick=3.0, boost=0.0, working=0, skew=0.3))
AR_STATS = _router_stats(tree_router(32, 4, persistence=0.8, skew=0.25, seed=5))
