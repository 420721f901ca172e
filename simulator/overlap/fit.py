"""Fit the per-expert n-token activation law and return P_e(x = 0…0): the cached entry point of the overlap model.

Methods (each names the algorithm or closed form that computes P_e; the engines live in :mod:`.maxent`): ``ipf``
(the exact maximum-entropy law of the n-token window, by IPF on the junction tree of the constraint graph: linear in
n, ``maxent.chain_ipf``), ``ipf_table`` (the same law by IPF over the whole 2^n table: the reference, n <= 20,
``maxent.table_ipf``), ``markov`` (lag-1 closed form, ``maxent.markov``), ``latent`` (the latent-score model of
trees on a path, ``latent``/``latent_tree``), ``junction`` (maximum-entropy-rate *stationary* chain over the
junction tree, ``maxent.stationary`` + ``maxent.junction``: differs from ``ipf`` by a boundary effect when lags >= 2
are constrained), ``independent`` (P = (1−π)^n) and ``uniform`` (MoESD: P = (1 − k/E)^n). ``auto`` picks ``markov``
when only lag-1 constraints apply and ``junction`` when only window patterns apply (both closed forms of the
maximum-entropy law), otherwise ``ipf``. Experts with identical constraints share one fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..errors import InfeasibleError
from ..params import Interval, Options, check_params
from .constraints import check_feasible, clear_checks, used_statistics, window_constraints
from .latent import fit_latent
from .latent_tree import latent_tree_p_zero
from .maxent import (
    chain_ipf,
    clear_plans,
    extend_potentials,
    fit_stationary,
    junction_tree,
    log_prob_zero,
    markov_p_zero,
    table_ipf,
    window_features,
)
from .stats import OverlapStats
from .unique import independent_p_zero, uniform_p_zero

__all__ = ["WindowFit", "clear_cache", "fit_window", "p_zero", "resolve_method", "stationary_window", "METHODS"]

METHODS = ("auto", "ipf", "ipf_table", "markov", "junction", "latent", "independent", "uniform")
WARM_CLIQUES = 32  # longer chains start from a fit of this many cliques, its middle clique repeated,
WARM_MIN_CLIQUES = 40  # ... when they have more than this many
COLD_FITS, COLD_BYTES = 512, 32 << 20  # cold chain fits kept by their grouped inputs, oldest dropped first
_COLD: dict = {}  # key -> (P(0) per group, sweeps, max error, bytes of the key's target arrays)


@dataclass(frozen=True)
class WindowFit:
    """Result of one fit: ``p_zero[e]`` = P_e(x = 0…0) for the n-token window (read-only array of shape (E,))."""

    p_zero: np.ndarray
    method: str
    n_tokens: int
    iterations: int = 0
    max_error: float = 0.0
    notes: tuple = ()


def resolve_method(stats: OverlapStats, n_tokens: int, method: str = "auto") -> str:
    """The method ``auto`` stands for, given the statistics and window (other names are returned unchanged)."""
    if method != "auto":
        return method
    lags, window_size = used_statistics(stats, n_tokens)
    if not lags and not window_size:
        return "independent"
    if lags == (1,) and not window_size:
        return "markov"
    if not lags:
        return "junction"
    return "ipf"


def _groups(keys: np.ndarray):
    """Rows of ``keys`` (E, c) grouped as ``np.unique(keys, axis=0, return_index=True, return_inverse=True)``
    does (groups in lexicographic row order, each represented by its first row), by one stable lexsort."""
    order = np.lexsort(keys.T[::-1]) if keys.shape[1] else np.arange(keys.shape[0])
    ordered = keys[order]
    new = np.empty(order.size, dtype=bool)
    new[:1] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=new[1:])
    inverse = np.empty(order.size, dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


def _shared_targets(cons) -> np.ndarray:
    """Per-expert key of a stationary constraint set: each distinct target array once (they repeat by position)."""
    return np.concatenate(list({id(t): t for t in cons.targets}.values()), axis=1)


def _not_converged(stats: OverlapStats, res, first, positions, tol: float) -> InfeasibleError:
    grp, ci = res.worst
    expert = int(first[grp])
    return InfeasibleError(
        f"IPF did not converge in {res.iterations} sweeps (tolerance {tol:g}): the largest marginal error is "
        f"{res.max_error:.2e}, for expert {expert} (π={stats.popularity[expert]:.4g}) on tokens {positions[ci]}; "
        f"the statistics may be jointly infeasible, or raise max_iter"
    )


def _select(targets, rows) -> list:
    """Targets restricted to the representative experts of the groups (each distinct array indexed once)."""
    picked: dict = {}
    return [picked.setdefault(id(t), t[rows]) for t in targets]


def _fit_ipf(stats: OverlapStats, n: int, tol: float, max_iter: int) -> WindowFit:
    """Exact maximum-entropy fit by IPF on the chain of cliques. Chains of more than WARM_MIN_CLIQUES cliques start
    from a WARM_CLIQUES-clique fit stretched to n tokens (same exponential family, so the same limit); a single
    clique wider than 10 tokens (constraints spanning the whole window) is the 2^n table, fitted by ``table_ipf``."""
    check_feasible(stats, n)
    cons = window_constraints(stats, n)
    width = cons.width
    if width >= n > 10:
        return replace(_fit_ipf_table(stats, n, tol, max_iter), method="ipf")
    first, inverse = _groups(_shared_targets(cons))
    targets = _select(cons.targets, first)
    init, iterations, key = None, 0, None
    if n - width + 1 > WARM_MIN_CLIQUES:
        short = window_constraints(stats, width - 1 + WARM_CLIQUES)
        res = chain_ipf(short.n_tokens, short.positions, _select(short.targets, first), tol=tol, max_iter=max_iter)
        if not res.converged:
            raise _not_converged(stats, res, first, short.positions, tol)
        init, iterations = extend_potentials(res.potentials, n - width + 1), res.iterations
    else:  # a cold fit is a function of its grouped inputs alone: statistics that group alike share it
        key = _cold_key(n, tol, max_iter, cons.positions, targets)
    if key in _COLD:
        p_zero, sweeps, error, _ = _COLD[key]
        return WindowFit(p_zero[inverse], "ipf", n, sweeps, error)
    res = chain_ipf(n, cons.positions, targets, tol=tol, max_iter=max_iter, init=init)
    if not res.converged:
        raise _not_converged(stats, res, first, cons.positions, tol)
    if key is not None:
        _COLD[key] = (res.p_zero, res.iterations, res.max_error, sum(len(part[1]) for part in key[5:]))
        while len(_COLD) > COLD_FITS or sum(v[3] for v in _COLD.values()) > COLD_BYTES:
            del _COLD[next(iter(_COLD))]
    return WindowFit(res.p_zero[inverse], "ipf", n, iterations + res.iterations, res.max_error)


def _cold_key(n: int, tol: float, max_iter: int, positions: tuple, targets: list) -> tuple:
    """Exact key of a cold chain fit: n, tolerances, positions, which distinct target array each position uses and
    the bytes of those arrays (G rows, one per group of experts, in group order)."""
    slots: dict = {}
    uses = tuple(slots.setdefault(id(t), len(slots)) for t in targets)
    distinct = {id(t): t for t in targets}.values()
    return (n, tol, max_iter, positions, uses) + tuple((t.shape, t.tobytes()) for t in distinct)


def _fit_ipf_table(stats: OverlapStats, n: int, tol: float, max_iter: int) -> WindowFit:
    check_feasible(stats, n)
    cons = window_constraints(stats, n)
    first, inverse = _groups(cons.stacked())
    res = table_ipf(n, cons.positions, [t[first] for t in cons.targets], tol=tol, max_iter=max_iter)
    if not res.converged:
        raise _not_converged(stats, res, first, cons.positions, tol)
    return WindowFit(res.table[:, 0][inverse], "ipf_table", n, res.iterations, res.max_error)


@lru_cache(maxsize=64)
def stationary_window(stats: OverlapStats, lags: tuple, m: int, tol: float):
    """Window law g (E, 2^w) of the maximum-entropy-rate chain, fitted once per (statistics, lags, m)."""
    pi = stats.popularity
    if m and not lags:
        return stats.window, 0, 0.0
    w = max(m, max(lags) + 1)
    phi, targets, allowed = window_features(w, lags, m, pi, stats.pair_probs, stats.window)
    keys = np.concatenate([targets, allowed], axis=1)
    # constant processes (π in {0, 1}, or full lag-1 overlap) have a closed form and no unique Gibbs chain
    const = (pi <= 0) | (pi >= 1) | (np.abs(stats.pair_probs[:, 0] - pi) <= 1e-12 if stats.max_lag else False)
    window = np.zeros((pi.size, 1 << w))
    window[const, 0] = 1 - pi[const]
    window[const, -1] = pi[const]
    iterations, err = 0, 0.0
    rest = np.flatnonzero(~const)
    if rest.size:
        first, inverse = _groups(keys[rest])
        theta0 = None
        if not m:
            theta0 = np.zeros((first.size, phi.shape[1]))
            p = pi[rest][first]
            theta0[:, 0] = np.log(p / (1 - p))
        fit = fit_stationary(phi, targets[rest][first], allowed[rest][first], w, theta0=theta0, tol=tol)
        window[rest] = fit.window[inverse]
        iterations, err = fit.iterations, fit.max_error
    window.setflags(write=False)
    return window, iterations, err


def _fit_junction(stats: OverlapStats, n: int, tol: float) -> WindowFit:
    check_feasible(stats, n)
    cons = window_constraints(stats, n)
    if cons.window_size and n <= stats.window_size and not cons.lags:
        return WindowFit(cons.targets[0][:, 0].copy(), "junction", n)
    if not cons.lags and not cons.window_size:
        return WindowFit(independent_p_zero(stats.popularity, n), "junction", n)
    window, iterations, err = stationary_window(stats, cons.lags, cons.window_size, min(tol, 1e-10))
    w = window.shape[1].bit_length() - 1
    logp = log_prob_zero(junction_tree(n, w), window)
    return WindowFit(np.exp(logp), "junction", n, iterations, err)


@lru_cache(maxsize=512)
def _fit_cached(stats: OverlapStats, n: int, method: str, tol: float, max_iter: int) -> WindowFit:
    pi = stats.popularity
    notes: tuple = ()
    if method == "independent":
        fit = WindowFit(independent_p_zero(pi, n), method, n)
    elif method == "uniform":
        fit = WindowFit(np.full(pi.size, uniform_p_zero(stats.experts, stats.top_k, n)), method, n)
    elif method == "markov":
        if stats.max_lag >= 1 and n >= 2:
            check_feasible(stats, 2)
            p0 = markov_p_zero(pi, stats.pair_probs[:, 0], n)
        else:
            p0 = independent_p_zero(pi, n)
        if (stats.max_lag > 1 and n > 2) or stats.window_size > 2:
            notes = ("method 'markov' uses only the lag-1 statistics; longer lags and window patterns are ignored",)
        fit = WindowFit(p0, method, n, notes=notes)
    elif method == "latent":  # the latent-score model of trees (§2.16) on a path: every given lag shapes it
        params = fit_latent(pi, stats.pair_probs, stats.top_k)
        fit = WindowFit(latent_tree_p_zero(params, (-1,) + tuple(range(n - 1))), method, n, max_error=params.misfit)
    elif method == "ipf":
        fit = _fit_ipf(stats, n, tol, max_iter)
    elif method == "ipf_table":
        fit = _fit_ipf_table(stats, n, tol, max_iter)
    else:
        fit = _fit_junction(stats, n, tol)
    p0 = np.clip(np.asarray(fit.p_zero, dtype=float), 0.0, 1.0)
    p0.setflags(write=False)
    return WindowFit(p0, fit.method, n, fit.iterations, float(fit.max_error), fit.notes)


def fit_window(stats: OverlapStats, n_tokens: int, method: str = "auto", *, tol: float = 1e-9,
               max_iter: int = 5000) -> WindowFit:
    """Fit the n-token activation law of every expert (cached per statistics, n, method, tol, max_iter).

    Returns a :class:`WindowFit` whose ``p_zero`` is P_e(x = 0…0), shape (E,).
    """
    check_params(
        "fit_window",
        {"n_tokens": n_tokens, "method": method, "tol": tol, "max_iter": max_iter},
        {
            "n_tokens": [Interval(int, 1, None)],
            "method": [Options(METHODS)],
            "tol": [Interval(float, 0, 1, closed="neither")],
            "max_iter": [Interval(int, 1, None)],
        },
    )
    if not isinstance(stats, OverlapStats):
        raise TypeError("stats must be an OverlapStats")
    resolved = resolve_method(stats, int(n_tokens), method)
    return _fit_cached(stats, int(n_tokens), resolved, float(tol), int(max_iter))


def p_zero(stats: OverlapStats, n_tokens: int, method: str = "auto", **kwargs) -> np.ndarray:
    """P_e(x = 0…0) per expert for an n-token window: the cached quantity the cost engine needs."""
    return fit_window(stats, n_tokens, method, **kwargs).p_zero


def clear_cache() -> None:
    """Forget every cached fit, clique plan and feasibility check (for timing, or to release memory)."""
    _fit_cached.cache_clear()
    stationary_window.cache_clear()
    clear_plans()
    clear_checks()
    _COLD.clear()
