"""The vectorised Poisson-binomial (tree of pairwise products, FFT for long factors, binomial closed form for equal
probabilities) matches the sequential recursion it replaced; the random-placement busiest rank with group-limited
routing matches the per-group convolution; cached expert loads are the uncached ones, read-only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost import routing
from simulator.cost.routing import OverlapInput
from simulator.overlap.placement import _count_pmf, poly_product, random_busiest, random_max_table
from simulator.specs.catalog import load_model


def _sequential_pmf(q: np.ndarray) -> np.ndarray:
    pmf = np.zeros((q.shape[0], q.shape[1] + 1))
    pmf[:, 0] = 1.0
    for j in range(q.shape[1]):
        p = q[:, j : j + 1]
        pmf[:, 1 : j + 2] = pmf[:, 1 : j + 2] * (1 - p) + pmf[:, : j + 1] * p
        pmf[:, :1] *= 1 - p
    return pmf


def _sequential_group_busiest(q, ranks, group_of, activity):
    n = q.shape[1]
    pmf = np.zeros((q.shape[0], n + 1))
    pmf[:, 0] = 1.0
    for g in range(activity.shape[1]):
        a = activity[:, g : g + 1]
        sub = q[:, group_of == g]
        mix = a * _sequential_pmf(np.divide(sub, a, out=np.zeros_like(sub), where=a > 0))
        mix[:, 0] += 1.0 - a[:, 0]
        out = np.zeros_like(pmf)
        for j in range(mix.shape[1]):
            out[:, j:] += mix[:, j : j + 1] * pmf[:, : n + 1 - j]
        pmf = out
    return pmf @ random_max_table(n, ranks)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(1, 6), st.integers(0, 2**32 - 1), st.sampled_from([0.5, 1.0, 3.0, 8.0]))
def test_count_pmf_matches_the_sequential_recursion(n, rows, seed, power):
    rng = np.random.default_rng(seed)
    q = rng.random((rows, n)) ** power
    q[0] = q[0, 0]  # one row of equal probabilities (the binomial closed form)
    got, want = _count_pmf(q), _sequential_pmf(q)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) < 5e-13
    assert np.allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-11)
    m = random_max_table(n, 1)
    assert np.allclose(got @ m, want @ m, rtol=1e-11, atol=0)


def test_poly_product_of_integer_polynomials_is_exact():
    rng = np.random.default_rng(3)
    polys = rng.integers(0, 4, size=(2, 5, 4)).astype(float)
    for r in range(2):
        want = np.array([1.0])
        for j in range(5):
            want = np.convolve(want, polys[r, j])
        assert np.allclose(poly_product(polys)[r], want, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("experts, groups, ranks", [(256, 8, 8), (160, 8, 8), (64, 4, 16), (48, 3, 4)])
def test_group_limited_random_busiest_matches_the_convolution(experts, groups, ranks):
    rng = np.random.default_rng(experts)
    q = rng.random((7, experts)) ** 3
    gid = np.arange(experts) // (experts // groups)
    act = np.maximum(rng.random((7, groups)), np.stack([q[:, gid == g].max(axis=1) for g in range(groups)], 1))
    want = _sequential_group_busiest(q, ranks, gid, act)
    assert np.allclose(random_busiest(q, ranks, gid, act), want, rtol=1e-12, atol=0)


def test_cached_expert_load_is_the_uncached_one_and_read_only():
    m = load_model("deepseek-v3")
    st_ = OverlapInput((0.3, 0.2), "skew:0.05")
    batch, tokens = np.array([1.0, 8.0, 64.0, 1.0, 8.0]), np.array([1, 1, 1, 4, 4])
    a = routing.expert_load(m, 8, batch, tokens, "overlap", st_)
    b = routing.expert_load(m, 8, batch.copy(), tokens.copy(), "overlap", st_)
    ref = routing._expert_load(m.ffn, 8, batch, tokens, "overlap", st_, "random", 0)
    assert a is b
    for f in ("unique", "pairs", "unique_total"):
        assert np.array_equal(getattr(a, f), getattr(ref, f))
        with pytest.raises(ValueError):
            getattr(a, f)[0] = 0.0


@pytest.mark.parametrize("replicas, grouped", [(None, False), (None, True), (8, False), (8, True)])
def test_one_p_zero_row_per_batch_size_equals_one_call_per_row(replicas, grouped):
    from simulator.overlap import busiest_rank_experts
    from simulator.overlap.placement import eplb_replicas

    rng = np.random.default_rng(11)
    experts, ranks = 64, 8
    p0 = rng.random((5, experts)) ** 0.05
    batch = np.array([1.0, 3.0, 8.0, 8.0, 200.0])
    reps = eplb_replicas(1 - p0[0], replicas, ranks) if replicas else None
    gid = np.arange(experts) // 8
    g0 = np.stack([np.prod(p0[i].reshape(8, 8), axis=1) for i in range(5)]) if grouped else None
    rows = busiest_rank_experts(p0, batch, ranks, "random", replicas=reps, groups=(gid, g0) if grouped else None)
    one = [busiest_rank_experts(p0[i], batch[i : i + 1], ranks, "random", replicas=reps,
                                groups=(gid, g0[i]) if grouped else None)[0] for i in range(5)]
    assert np.allclose(rows, one, rtol=1e-12, atol=0)
