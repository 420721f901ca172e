"""Shared Hypothesis strategies and helpers for the overlap-model tests (imported as a plain module)."""

from __future__ import annotations

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

from simulator.overlap import OverlapStats
from simulator.overlap.popularity import water_fill

# Modest, reproducible property runs: the whole tests/overlap suite must stay well under a minute on two cores.
FAST = settings(max_examples=25, deadline=None, derandomize=True)


@st.composite
def popularity(draw, max_experts: int = 10):
    """(popularity, top_k): positive weights water-filled to sum k."""
    e = draw(st.integers(2, max_experts))
    k = draw(st.integers(1, min(3, e - 1)))
    w = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=e, max_size=e)))
    return water_fill(w, k), k


@st.composite
def real_profile(draw, max_experts: int = 10, max_lag: int = 4):
    """Pooled statistics that a real stationary process produces: each expert is a mixture of a constant process
    (weight c) and a two-state Markov chain with lag correlation ρ^d, i.e. the lift rule with λ_d = c + (1−c)ρ^d."""
    pi, k = draw(popularity(max_experts))
    lags = draw(st.integers(1, max_lag))
    rho = draw(st.floats(0.0, 0.95))
    c = draw(st.floats(0.0, 0.5))
    s2 = float(pi @ pi)
    lam = c + (1 - c) * rho ** np.arange(1, lags + 1)
    overlaps = tuple((s2 + lam * (k - s2)) / k)
    return OverlapStats(pi, k, overlaps)


def chain_law(p1, order: int) -> tuple:
    """Transition matrix over the last ``order`` bits (oldest = most significant) of a binary chain with
    P(x = 1 | state) = p1[state], and its stationary state law."""
    states = 1 << order
    trans = np.zeros((states, states))
    for s in range(states):
        trans[s, ((s << 1) | 1) & (states - 1)] += p1[s]
        trans[s, (s << 1) & (states - 1)] += 1 - p1[s]
    w, v = np.linalg.eig(trans.T)
    nu = np.abs(np.real(v[:, np.argmax(np.real(w))]))
    return trans, nu / nu.sum()


def chain_stats(transitions: list, orders: list) -> OverlapStats:
    """Per-expert statistics of stationary binary Markov chains (order 1..3) with P(x=1 | state) = transitions[e],
    padded with one constant expert so that Σπ is an integer k."""
    pis, pairs = [], []
    lags = 4
    for p1, order in zip(transitions, orders, strict=True):
        states = 1 << order
        trans, nu = chain_law(p1, order)
        pi = float(nu @ p1)
        after = np.zeros(states)
        for s in range(states):
            after[((s << 1) | 1) & (states - 1)] += nu[s] * p1[s]
        row = []
        for _ in range(lags):
            row.append(float(after @ p1))
            after = after @ trans
        pis.append(pi)
        pairs.append(row)
    total = sum(pis)
    k = int(np.ceil(total - 1e-12))
    extra = k - total
    pis.append(extra)
    pairs.append([extra] * lags)
    return OverlapStats(np.array(pis), k, pair_probs=np.array(pairs))


@st.composite
def markov_chain_stats(draw, experts: int = 4):
    orders = [draw(st.integers(1, 3)) for _ in range(experts)]
    transitions = [np.array(draw(st.lists(st.floats(0.02, 0.98), min_size=1 << o, max_size=1 << o)))
                   for o in orders]
    return chain_stats(transitions, orders)


def sparse_run_stats() -> OverlapStats:
    """Statistics of an expert active in exactly one run of three tokens out of 30 (plus a filler expert): many
    patterns are implicitly impossible, so the maximum-entropy solution lies on the boundary."""
    x = np.zeros((3, 10), dtype=bool)
    x[0, 2:5] = True
    x[2, 7:10] = True
    pi = x.mean()
    pairs = [np.mean(x & np.roll(x, -d, axis=1)) for d in (1, 2, 3)]
    return OverlapStats(np.array([pi, 1 - pi]), 1, pair_probs=np.array([pairs, [1 - pi] * 3]))
