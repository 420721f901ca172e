"""Routed tokens on the busiest expert-parallel rank (docs/MODEL.md §3.3, "Token imbalance").

The expert load of :mod:`simulator.cost.routing` counts the unique experts of the busiest rank and gives it the
(token, expert) pairs in proportion, ``P_share = B·s·k · U_r / U``: at large batch every rank touches all its
experts and ``P_share`` tends to the mean ``B·s·k / R``, while the busiest rank carries more pairs than the mean
(routing noise, skewed popularity, correlated tokens of one request). Here ``P_r``, the pairs routed to rank r,
is taken as normal with

    mean      μ_r = B·s · Σ_{e on r} w_e,                       w_e = π_e / c_e   (π: per-token usage, Σπ = k;
                                                                                     c_e copies of e, EPLB)
    routing   v_r = B · s · κ(s) · k·p_r(1 − p_r)·(E − k)/(E − 1),  p_r = Σ_{e on r} w_e / k
              κ(s) = 1 + 2 Σ_{d<s} (1 − d/s) λ_d                (tokens of one request are correlated:
                                                                  λ_d = (k·o(d) − Σπ²)/(k − Σπ²), the lift of
                                                                  the lag-d overlap over independent routing)
    placement (random only) (B·s)² · m·Var(w)·(n − m)/(n − 1)   m = n/R physical experts per rank, drawn at random

and ``E[max_r P_r]`` is the expected maximum of R such normals whose deviations sum to zero (the total is fixed):
with equal means (random, balanced) ``μ + σ·e_R / sqrt(1 − 1/R)``, e_R the expected maximum of R standard normals;
with per-rank means (contiguous) ``L + ∫_L^∞ (1 − Π_r Φ((x − μ_r)/σ'_r)) dx`` with σ'_r = σ_r / sqrt(1 − 1/R).
``balanced`` (EPLB-style packing by usage) is taken as equalising the means (its residual spread is neglected).
Group-limited routing's extra concentration is not modelled (a lower bound there). The normal law is poor when a
rank holds a few pairs, where ``P_share`` is the better estimate (one rank's pairs never exceed the busiest rank's),
so the op is priced with ``max(P_share, E[max_r P_r])``. Checked against Monte Carlo in tests/cost/test_imbalance.py.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import overlap as ov
from ..overlap.placement import eplb_replicas, replica_p_zero
from ..specs.model import FFN
from .ops import ExpertLoad
from .routing import OverlapInput

_GRID = np.linspace(-9.0, 9.0, 3601)


def normal_cdf(x):
    """Φ(x) by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7; numpy only: scipy.special costs 0.5 s to import)."""
    x = np.asarray(x, dtype=float)
    z = np.abs(x) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-z * z)
    return 0.5 * (1.0 + np.sign(x) * erf)


@functools.lru_cache(maxsize=256)
@functools.lru_cache(maxsize=256)
def expected_max_normal(ranks: int) -> float:
    """e_R = E[max of R independent standard normals] = ∫ (1 − Φ(x)^R) dx − ∫ Φ(x)^R dx over x < 0 and x > 0."""
    if ranks <= 1:
        return 0.0
    cdf_r = normal_cdf(_GRID) ** ranks
    neg, pos = _GRID <= 0, _GRID >= 0  # 0 is a grid point: each half is integrated by trapezoids on its own
    dx = _GRID[1] - _GRID[0]
    return float(_trapezoid(1.0 - cdf_r[pos]) * dx - _trapezoid(cdf_r[neg]) * dx)


def _trapezoid(y: np.ndarray) -> float:
    return float(y.sum() - 0.5 * (y[0] + y[-1]))


def lag_lift(popularity: np.ndarray, top_k: int, lags) -> np.ndarray:
    """λ_d = (k·o(d) − Σπ²)/(k − Σπ²) per lag d = 1..D, clipped to [0, 1] (0: independent tokens)."""
    s2 = float(popularity @ popularity)
    o = np.asarray(lags, dtype=float)
    return np.clip((top_k * o - s2) / max(top_k - s2, 1e-12), 0.0, 1.0)


def request_factor(lift: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """κ(s) = 1 + 2 Σ_{d=1}^{s−1} (1 − d/s) λ_d; beyond the last stated lag λ keeps its last value."""
    s = np.asarray(tokens, dtype=float)
    smax = int(max(1, s.max(initial=1)))
    lam = np.zeros(smax)
    if lift.size:
        lam[1:] = lift[np.minimum(np.arange(1, smax), lift.size) - 1]
    d = np.arange(smax)
    su, inv = np.unique(s, return_inverse=True)  # a grid has few pass lengths: one row of weights per length
    w = np.clip(1.0 - d[None, :] / su.reshape(-1, 1), 0.0, None) * (d[None, :] >= 1)
    return (1.0 + 2.0 * (w * lam[None, :]).sum(axis=1))[inv.reshape(-1)].reshape(s.shape)


def busiest_pairs(f: FFN, ep: int, batch, tokens, routing: str, stats: OverlapInput, placement: str,
                  redundant: int = 0) -> np.ndarray:
    """E[max_r P_r] of the docstring for each (batch, tokens) point (arrays broadcast together)."""
    b, s = np.broadcast_arrays(np.asarray(batch, dtype=float), np.asarray(tokens, dtype=float))
    E, k = f.experts, f.top_k
    if ep <= 1:
        return b * s * k
    w, lift = _weights(f, ep, routing, stats, redundant)
    n = w.size
    m = n // ep
    kappa = request_factor(lift, s)
    tok = b * s
    hyper = (E - k) / max(E - 1, 1)
    inflate = 1.0 / np.sqrt(1.0 - 1.0 / ep)
    if placement == "contiguous":
        per_rank = w[: m * ep].reshape(ep, m).sum(axis=1)  # blocks of the physical index order
        p = per_rank / k
        mu = tok[..., None] * per_rank
        var = (b * s * kappa)[..., None] * k * p * (1 - p) * hyper
        sd = np.sqrt(np.maximum(var, 1e-30)) * inflate
        lo = (mu - 9.0 * sd).min(axis=-1)
        hi = (mu + 9.0 * sd).max(axis=-1)
        x = lo[..., None] + (hi - lo)[..., None] * np.linspace(0.0, 1.0, 801)
        cdf = np.prod(normal_cdf((x[..., None, :] - mu[..., None]) / sd[..., None]), axis=-2)
        gap = 1.0 - cdf
        return lo + ((gap[..., 1:] + gap[..., :-1]) * 0.5 * np.diff(x, axis=-1)).sum(axis=-1)
    p = m * w.mean() / k
    var = b * s * kappa * k * p * (1 - p) * hyper
    if placement == "random":
        var = var + tok ** 2 * m * w.var() * (n - m) / max(n - 1, 1)
    return tok * k / ep + np.sqrt(var) * expected_max_normal(ep) * inflate


@functools.lru_cache(maxsize=512)
def _weights(f: FFN, ep: int, routing: str, stats: OverlapInput, redundant: int) -> tuple[np.ndarray, np.ndarray]:
    """(w per physical expert, λ per lag) for this FFN, routing model and replicas (cached: read-only arrays)."""
    E, k = f.experts, f.top_k
    if routing == "uniform":
        pi, lift = np.full(E, k / E), np.zeros(0)
    else:
        st = ov.OverlapStats.from_overlaps(experts=E, top_k=k, overlaps=stats.lags, popularity=stats.popularity)
        pi = np.asarray(st.popularity, dtype=float)
        lift = lag_lift(pi, k, stats.lags) if routing == "overlap" and len(stats.lags) else np.zeros(0)
    copies = eplb_replicas(pi, redundant, ep) if redundant else np.ones(E, dtype=int)
    _, logical = replica_p_zero(1.0 - pi, copies)  # physical experts: originals in index order, then replicas
    w = pi[logical] / copies[logical]
    for a in (w, lift):
        a.setflags(write=False)
    return w, lift


def with_busiest_pairs(load: ExpertLoad, f: FFN, ep: int, batch, tokens, routing: str, stats: OverlapInput,
                       placement: str, redundant: int = 0) -> ExpertLoad:
    """The load with its pairs raised to ``max(P_share, E[max_r P_r])`` (a named placement; arrays unchanged
    where ep = 1)."""
    if ep <= 1 or not isinstance(placement, str):
        return load
    busiest = busiest_pairs(f, ep, batch, tokens, routing, stats, placement, redundant)
    return ExpertLoad(load.unique, np.maximum(load.pairs, busiest), load.unique_total)
