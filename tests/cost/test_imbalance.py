"""Busiest-rank routed tokens (cost/imbalance.py; docs/MODEL.md §3.3): the closed form against Monte Carlo, and
what it does to the step (EPLB replicas can pay, the busiest rank carries more than the mean)."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.cost.deployment import Deployment, Mechanisms
from simulator.cost.imbalance import busiest_pairs, expected_max_normal, normal_cdf, request_factor
from simulator.cost.ops import Workload
from simulator.cost.routing import OverlapInput
from simulator.cost.step import describe
from simulator.specs import load_model


def _mc_max(E, k, R, tokens, pi, placement, trials, rng):
    """E[max_r pairs on r]: each token picks k distinct experts, expert e independently kept with prob. ∝ π_e
    (uniform π: exactly k of E), placement random (a fresh permutation per trial) or contiguous."""
    out = np.empty(trials)
    for t in range(trials):
        place = rng.permutation(E) // (E // R) if placement == "random" else np.arange(E) * R // E
        keys = rng.random((tokens, E)) ** (1.0 / pi)  # weighted sampling without replacement (Efraimidis-Spirakis)
        picks = np.argpartition(-keys, k, axis=1)[:, :k]
        out[t] = np.bincount(place[picks].ravel(), minlength=R).max()
    return out.mean()


@pytest.mark.parametrize(("R", "B"), [(8, 16), (8, 64), (32, 64), (32, 256)])
def test_uniform_random_placement_matches_monte_carlo(R, B):
    f = load_model("qwen3-235b-a22b").ffn  # E 128, k 8
    got = float(busiest_pairs(f, R, np.array([B]), np.array([1]), "uniform", OverlapInput(), "random")[0])
    mc = _mc_max(f.experts, f.top_k, R, B, np.full(f.experts, 1.0), "random", 300, np.random.default_rng(R + B))
    assert got == pytest.approx(mc, rel=0.04)
    assert got > B * f.top_k / R * 1.08  # above the mean the share estimate tends to


def test_skewed_popularity_random_and_contiguous_near_monte_carlo():
    m = load_model("qwen3-235b-a22b")
    f = m.ffn
    st = OverlapInput(popularity=m.overlap.popularity)
    from simulator import overlap as ov
    pi = np.asarray(ov.OverlapStats.from_overlaps(experts=f.experts, top_k=f.top_k, overlaps=(),
                                                  popularity=st.popularity).popularity)
    rng = np.random.default_rng(7)
    for placement, tol in (("random", 0.05), ("contiguous", 0.10)):
        got = float(busiest_pairs(f, 8, np.array([32]), np.array([1]), "independent", st, placement)[0])
        mc = _mc_max(f.experts, f.top_k, 8, 32, pi, placement, 200, rng)
        assert got == pytest.approx(mc, rel=tol), placement
    rnd = busiest_pairs(f, 8, np.array([32]), np.array([1]), "independent", st, "random")[0]
    bal = busiest_pairs(f, 8, np.array([32]), np.array([1]), "independent", st, "balanced")[0]
    con = busiest_pairs(f, 8, np.array([32]), np.array([1]), "independent", st, "contiguous")[0]
    assert bal < rnd < con


def test_redundant_experts_lower_the_busiest_rank_under_skew():
    m = load_model("qwen3-235b-a22b")
    st = OverlapInput(popularity=m.overlap.popularity)
    b, s = np.array([64.0]), np.array([1.0])
    plain = busiest_pairs(m.ffn, 8, b, s, "independent", st, "random")[0]
    eplb = busiest_pairs(m.ffn, 8, b, s, "independent", st, "random", redundant=32)[0]
    assert eplb < plain


def test_correlated_tokens_of_a_request_raise_the_variance():
    assert request_factor(np.zeros(0), np.array([4.0]))[0] == 1.0
    assert request_factor(np.array([0.5, 0.5, 0.5]), np.array([4.0]))[0] == pytest.approx(1 + 2 * 0.5 * (0.75 + 0.5
                                                                                                       + 0.25))
    assert request_factor(np.array([1.0]), np.array([3.0]))[0] == pytest.approx(3.0)  # identical tokens: s-fold


def test_normal_helpers():
    assert normal_cdf(np.array([0.0, 1.0, -1.96]))[1] == pytest.approx(0.841345, abs=1e-6)
    assert expected_max_normal(2) == pytest.approx(1 / np.sqrt(np.pi), abs=1e-6)
    assert expected_max_normal(8) == pytest.approx(1.4236, abs=1e-3)


def test_step_pairs_are_the_busiest_rank_not_the_mean():
    m = load_model("deepseek-v3")
    dep = Deployment(dtype="fp8_block", tp=1, dp=32, ep=32)
    wl = Workload(np.array([32.0 * 64]), np.array([1.0]), 1024)
    _, _, info = describe(m, dep, wl, Mechanisms())
    mean = 32 * 64 * m.ffn.top_k / 32
    assert float(info["load"].pairs[0]) > 1.05 * mean


def test_group_limited_routing_random_placement_near_monte_carlo():
    """DeepSeek's group-limited routing (8 groups, 4 chosen per token): under random placement the closed form,
    which ignores the groups, stays within a few percent of Monte Carlo at >= 16 pairs per rank."""
    f = load_model("deepseek-v3").ffn
    E, k, G, kg, R, per = 256, 8, 8, 4, 32, 16
    T = per * R // k
    rng = np.random.default_rng(3)
    out = []
    for _ in range(200):
        place = rng.permutation(E) // (E // R)
        groups = np.argsort(rng.random((T, G)), axis=1)[:, :kg]
        cand = (groups[:, :, None] * (E // G) + np.arange(E // G)[None, None, :]).reshape(T, -1)
        pick = np.take_along_axis(cand, np.argsort(rng.random(cand.shape), axis=1)[:, :k], axis=1)
        out.append(np.bincount(place[pick].ravel(), minlength=R).max())
    got = float(busiest_pairs(f, R, np.array([float(T)]), np.array([1.0]), "uniform", OverlapInput(), "random")[0])
    assert got == pytest.approx(np.mean(out), rel=0.04)
