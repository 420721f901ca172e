import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from overlap_strategies import FAST, popularity, real_profile

from simulator.errors import ParameterError
from simulator.overlap import (
    OverlapStats,
    busiest_rank_experts,
    fit_window,
    independent_unique,
    predict,
    rank_placement,
    uniform_p_zero,
    uniform_unique,
    unique_experts,
    unique_experts_std,
)

METHODS = ("ipf", "junction", "markov")


@FAST
@given(real_profile(), st.integers(1, 6), st.sampled_from(METHODS))
def test_unique_experts_lie_between_k_and_min_e_nk(stats, n, method):
    u = float(unique_experts(fit_window(stats, n, method).p_zero, 1))
    assert stats.top_k - 1e-9 <= u <= min(stats.experts, n * stats.top_k) + 1e-9


@FAST
@given(popularity(), st.integers(1, 6), st.lists(st.integers(1, 64), min_size=1, max_size=4),
       st.sampled_from(METHODS))
def test_independent_statistics_reproduce_the_independent_formula(pk, n, batch, method):
    pi, k = pk
    stats = OverlapStats(pi, k, overlaps=(float(pi @ pi) / k,) * 3)  # lift λ = 0: p(d) = π²
    u = unique_experts(fit_window(stats, n, method).p_zero, batch)
    expected = [(1 - (1 - pi) ** (n * b)).sum() for b in batch]
    assert np.allclose(u, expected, rtol=1e-7)
    assert np.allclose(independent_unique(pi, n, batch), expected)


@FAST
@given(st.integers(2, 64), st.integers(1, 8), st.integers(1, 6), st.integers(1, 32))
def test_uniform_statistics_reproduce_moesd(e, k, n, b):
    k = min(k, e)
    stats = OverlapStats.from_overlaps(e, k, (k / e, k / e))  # uniform popularity, independent tokens
    u = float(unique_experts(fit_window(stats, n, "ipf").p_zero, b))
    moesd = e * (1 - (1 - k / e) ** (n * b))
    assert u == pytest.approx(moesd, rel=1e-7)
    assert float(uniform_unique(e, k, n, b)) == pytest.approx(moesd)
    assert np.allclose(fit_window(stats, n, "ipf").p_zero, uniform_p_zero(e, k, n), rtol=1e-9, atol=0)
    assert np.array_equal(fit_window(stats, n, "uniform").p_zero, np.full(e, uniform_p_zero(e, k, n)))


@FAST
@given(popularity(), st.integers(1, 8), st.sampled_from(METHODS))
def test_full_overlap_gives_k(pk, n, method):
    pi, k = pk
    stats = OverlapStats(pi, k, (1.0, 1.0, 1.0))
    p0 = fit_window(stats, n, method).p_zero
    assert float(unique_experts(p0, 1)) == pytest.approx(k, abs=1e-7)
    assert float(unique_experts(p0, 3)) == pytest.approx((1 - (1 - pi) ** 3).sum(), abs=1e-7)


@FAST
@given(real_profile(), st.integers(1, 5), st.integers(2, 50))
def test_batch_composition(stats, n, b):
    p0 = fit_window(stats, n, "ipf").p_zero
    u1, ub = float(unique_experts(p0, 1)), float(unique_experts(p0, b))
    assert u1 - 1e-9 <= ub <= min(stats.experts, b * u1) + 1e-9


@FAST
@given(real_profile(), st.integers(1, 5), st.randoms(use_true_random=False))
def test_permuting_expert_labels_changes_nothing(stats, n, rnd):
    order = np.array(rnd.sample(range(stats.experts), stats.experts))
    perm = stats.permuted(order)
    p, q = fit_window(stats, n, "ipf").p_zero, fit_window(perm, n, "ipf").p_zero
    assert np.allclose(q, p[order], atol=1e-9)
    batch = [1, 4]
    for f in (unique_experts, unique_experts_std):
        assert np.allclose(f(p, batch), f(q, batch))
    place = rank_placement(stats.experts, 2)
    assert np.allclose(busiest_rank_experts(p, batch, placement=place),
                       busiest_rank_experts(q, batch, placement=place[order]))


def test_busiest_rank_matches_monte_carlo_and_bounds():
    rng = np.random.default_rng(0)
    p0 = rng.uniform(0.3, 0.95, 12)
    batch = np.array([1, 3])
    q = 1 - p0[None, :] ** batch[:, None]
    draws = rng.random((200_000, 1, 12)) < q[None]
    per_rank = {"contiguous": draws.reshape(200_000, 2, 3, 4).sum(axis=3),  # rank r holds experts 4r..4r+3
                "balanced": draws.reshape(200_000, 2, 4, 3).sum(axis=2)}  # rank r holds experts r, r+3, r+6, r+9
    u = unique_experts(p0, batch)
    for placement, counts in per_rank.items():
        exact = busiest_rank_experts(p0, batch, placement=rank_placement(12, 3, placement))  # explicit rank maps
        assert np.allclose(exact, counts.max(axis=2).mean(axis=0), atol=0.01)
        assert np.all(exact >= u / 3 - 1e-12) and np.all(exact <= np.minimum(u, 4) + 1e-12)
    assert np.array_equal(busiest_rank_experts(p0, batch, ranks=3),  # the default placement is random
                          busiest_rank_experts(p0, batch, ranks=3, placement="random"))
    assert float(busiest_rank_experts(p0, 1, ranks=1)) == pytest.approx(float(unique_experts(p0, 1)))


def test_std_and_placements():
    p0 = np.array([0.5, 0.5, 0.0, 1.0])
    assert float(unique_experts_std(p0, 1)) == pytest.approx(np.sqrt(0.5))
    assert list(rank_placement(8, 4)) == [0, 1, 2, 3, 0, 1, 2, 3]  # balanced: e mod R
    assert list(rank_placement(8, 4, "contiguous")) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert list(rank_placement(5, 2, "contiguous")) == [0, 0, 0, 1, 1]
    with pytest.raises(ParameterError, match="'strided' has no single map"):
        rank_placement(8, 4, "strided")
    with pytest.raises(ParameterError, match="ranks"):
        rank_placement(4, 5)
    with pytest.raises(ParameterError, match="batch"):
        unique_experts(p0, [0])


def test_predict_result_and_json_dict():
    stats = OverlapStats.from_overlaps(128, 8, (0.381, 0.329, 0.301, 0.299), "skew:0.118")
    res = predict(stats, 4, np.array([1, 4, 16]), ranks=8)
    d = res.to_dict()
    assert d["method"] == "ipf" and len(d["unique_experts"]) == 3
    assert all(isinstance(v, float) for v in d["unique_experts"] + d["busiest_rank_experts"])
    assert np.all(np.asarray(res.unique_experts) < np.asarray(res.independent))
    assert np.all(np.asarray(res.independent) < np.asarray(res.uniform))
    one = predict(stats, 4, 1).to_dict()
    assert isinstance(one["unique_experts"], float) and "busiest_rank_experts" not in one
