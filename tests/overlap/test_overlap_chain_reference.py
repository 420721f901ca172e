"""chain_ipf against a plain transcription of the same IPF schedule (docs/MODEL.md §2.3.1) in which every marginal,
every spread onto cells and every message is a one-hot matrix product. The fast path replaces the spreads and
messages by indexing and two-term sums, which are exact, so the two must agree to the last bit: same sweeps, same
potentials, same P(0^n). Also: the expert grouping of ``fit`` against ``np.unique``, the shared PSD check, and the
written-out junction tree of a band graph against the one networkx finds."""

import networkx as nx
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from overlap_strategies import FAST, markov_chain_stats, real_profile

from simulator.overlap import OverlapStats
from simulator.overlap.constraints import lag_problems, window_constraints
from simulator.overlap.fit import _groups
from simulator.overlap.maxent import chain_ipf, junction_tree
from simulator.overlap.maxent.tables import pattern_index, window_states


def _onehot(w: int, local: tuple) -> np.ndarray:
    hot = np.zeros((1 << w, 1 << len(local)))
    hot[np.arange(1 << w), pattern_index(w, local)] = 1.0
    return hot


def _reference(n, positions, targets, tol=1e-9, inner=4, max_iter=5000):
    """(P(0^n), potentials, sweeps) of the chain IPF, cold start, no facial reduction, cliques of <= 10 tokens."""
    w = min(max(p[-1] - p[0] + 1 for p in positions), n)
    k, cells, half, g = n - w + 1, 1 << w, 1 << (w - 1), targets[0].shape[0]
    s = window_states(w)
    inside = [[i for i, p in enumerate(positions) if t <= p[0] and p[-1] <= t + w - 1] for t in range(k)]
    hots = [[_onehot(w, tuple(q - t for q in positions[i])) for i in inside[t]] for t in range(k)]
    joined = [np.concatenate([targets[i] for i in inside[t]], axis=1) for t in range(k)]
    stacked = [np.concatenate(hots[t], axis=1) for t in range(k)]
    psi, fwd, bwd = np.ones((k, g, cells)), np.empty((k, g, half)), np.full((k, g, half), 1.0 / half)
    fwd[0] = 1.0 / half
    tiny = np.finfo(float).tiny

    def visit(t, forward):
        left, right = fwd[t] @ s.to_first, bwd[t] @ s.to_last
        mu = psi[t] * left
        mu *= right
        mu /= mu.sum(axis=1, keepdims=True)
        big = float(np.abs(mu @ stacked[t] - joined[t]).max())
        if big >= 0.1 * tol:
            before = mu.copy()
            for p in range(inner):
                for i, hot in zip(inside[t], hots[t], strict=True):
                    mu *= (targets[i] / np.maximum(mu @ hot, tiny)) @ hot.T
                if p + 1 < inner and float(np.abs(mu @ stacked[t] - joined[t]).max()) < 0.1 * tol:
                    break
            psi[t] *= np.divide(mu, before, out=np.zeros_like(mu), where=before > 0)
        if forward and t + 1 < k:
            nxt = (psi[t] * left) @ s.from_last
            fwd[t + 1] = nxt / nxt.sum(axis=1, keepdims=True)
        elif not forward and t > 0:
            nxt = (psi[t] * right) @ s.from_first
            bwd[t - 1] = nxt / nxt.sum(axis=1, keepdims=True)
        return big

    def measure(forward):
        for t in range(k - 1) if forward else range(k - 1, 0, -1):
            if forward:
                nxt = (psi[t] * (fwd[t] @ s.to_first)) @ s.from_last
                fwd[t + 1] = nxt / nxt.sum(axis=1, keepdims=True)
            else:
                nxt = (psi[t] * (bwd[t] @ s.to_last)) @ s.from_first
                bwd[t - 1] = nxt / nxt.sum(axis=1, keepdims=True)
        mu = psi * (fwd @ s.to_first)
        mu *= bwd @ s.to_last
        mu /= mu.sum(axis=2, keepdims=True)
        return mu, max(float(np.abs(mu[t] @ stacked[t] - joined[t]).max()) for t in range(k))

    sweeps, forward = 0, True
    with np.errstate(invalid="ignore", divide="ignore"):
        while sweeps < max_iter:
            sweeps += 1
            big = max(visit(t, forward) for t in (range(k) if forward else range(k - 1, -1, -1)))
            psi /= psi.max(axis=2, keepdims=True)
            forward = not forward
            if big < tol:
                mu, err = measure(forward)
                forward = not forward
                if err < tol:
                    break
    num = mu[1:, :, 0]
    den = num + mu[1:, :, 1]
    ratio = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    with np.errstate(divide="ignore"):
        return np.exp(np.log(mu[0, :, 0]) + np.log(ratio).sum(axis=0)), psi, sweeps


def _assert_bit_identical(stats, n):
    cons = window_constraints(stats, n)
    fast = chain_ipf(n, cons.positions, cons.targets)
    p_zero, psi, sweeps = _reference(n, cons.positions, [np.asarray(t, dtype=float) for t in cons.targets])
    assert fast.converged
    assert fast.iterations == sweeps
    assert np.array_equal(fast.potentials, psi)
    assert np.array_equal(fast.p_zero, p_zero)


@FAST
@given(real_profile(max_experts=8, max_lag=5), st.integers(2, 9))
def test_chain_ipf_is_bit_identical_to_the_one_hot_reference_on_pooled_profiles(stats, n):
    _assert_bit_identical(stats, n)


@FAST
@given(markov_chain_stats(), st.integers(2, 9))
def test_chain_ipf_is_bit_identical_to_the_one_hot_reference_on_per_expert_pairs(stats, n):
    _assert_bit_identical(stats, n)


def test_chain_ipf_is_bit_identical_to_the_one_hot_reference_on_many_experts():
    stats = OverlapStats.from_overlaps(128, 8, (0.381, 0.329, 0.301, 0.299), "skew:0.25")
    for n in (3, 5, 7, 9):
        _assert_bit_identical(stats, n)


@FAST
@given(st.integers(1, 40), st.integers(1, 5), st.integers(0, 2**16))
def test_expert_groups_equal_numpy_unique_rows(rows, cols, seed):
    rng = np.random.default_rng(seed)
    keys = rng.choice(np.array([0.0, -0.0, 0.25, 1 / 3, 1e-300, 0.7]), size=(rows, cols))
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    got_first, got_inverse = _groups(keys)
    assert np.array_equal(got_first, first) and np.array_equal(got_inverse, inverse.ravel())


def test_psd_check_of_identical_experts_equals_the_per_expert_check():
    pi = np.full(16, 0.5)
    pairs = np.tile([0.09, 0.43, 0.27], (16, 1))  # triangle inequalities hold, the Toeplitz matrix is not PSD
    alone = lag_problems(pi[:1], pairs[:1])
    assert any("not positive semidefinite" in text for text in alone)
    assert lag_problems(pi, pairs) == alone  # one eigvalsh for all; the same expert (0) and eigenvalue named
    varied = pairs.copy()
    varied[3, 1] = 0.42
    assert any("expert 0" in text for text in lag_problems(pi, varied) if "semidefinite" in text)


def _networkx_junction_tree(n, w):
    """Cliques and separators of the band graph (tokens joined when closer than w) by networkx: maximal cliques,
    then a maximum spanning tree of the clique graph weighted by overlap size."""
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((i, j) for i in range(n) for j in range(i + 1, min(n, i + w)))
    cliques = sorted((tuple(sorted(c)) for c in nx.find_cliques(graph)), key=lambda c: c[0])
    cgraph = nx.Graph()
    cgraph.add_nodes_from(range(len(cliques)))
    for a in range(len(cliques)):
        for b in range(a + 1, len(cliques)):
            if set(cliques[a]) & set(cliques[b]):
                cgraph.add_edge(a, b, weight=len(set(cliques[a]) & set(cliques[b])))
    tree = nx.maximum_spanning_tree(cgraph, weight="weight")
    separators = tuple(tuple(sorted(set(cliques[a]) & set(cliques[b])))
                       for a, b in sorted(tuple(sorted(e)) for e in tree.edges))
    return tuple(cliques), separators


def test_junction_tree_of_a_band_graph_equals_the_networkx_search():
    for n in range(1, 13):
        for width in range(1, 8):
            tree = junction_tree(n, width)
            assert (tree.cliques, tree.separators) == _networkx_junction_tree(n, max(1, min(width, n)))
            assert tree.width == max(1, min(width, n)) and tree.n_tokens == n


def test_chain_ipf_is_bit_identical_to_the_reference_where_the_clamp_acts():
    """Structural zeros (zero target cells) and cells near the floor of target/current (π = 1e-60): the fast path
    must keep max(m, TINY) wherever it can act (its skip is only for visits that provably stay above TINY)."""
    zero = OverlapStats(np.full(4, 0.25), 1, pair_probs=np.array([(0.08, 0.0)] * 4))  # x_t, x_t+2 never both on
    half = OverlapStats(np.full(2, 0.5), 1, pair_probs=np.array([(0.25, 0.5)] * 2))  # x_t = x_t+2
    rare = OverlapStats(np.array([1e-60, 1 - 1e-60]), 1, pair_probs=np.array([(1e-120, 5e-121), (1.0, 1.0)]))
    for stats in (zero, half, rare):
        for n in (3, 4, 6):
            _assert_bit_identical(stats, n)
