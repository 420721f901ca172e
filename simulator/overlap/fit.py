"""Fit the per-expert n-token activation law and return P_e(x = 0…0): the cached entry point of the overlap model.

Methods: ``ipf`` (maximum entropy over the 2^n table, the reference), ``markov`` (lag-1 closed form), ``junction``
(maximum-entropy-rate stationary chain over the junction tree, linear in n), ``independent`` (P = (1−π)^n) and
``uniform`` (MoESD: P = (1 − k/E)^n). ``auto`` picks ``markov`` when only lag-1 constraints apply, ``junction``
when only window patterns apply (both exact), otherwise ``ipf`` up to IPF_AUTO_MAX_TOKENS tokens and ``junction``
beyond. Experts with identical constraints share one fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import InfeasibleError
from ..validation import Interval, Options, check_params
from .constraints import check_feasible, window_constraints
from .ipf import ipf_fit
from .junction import junction_tree, log_prob_zero
from .markov import markov_p_zero
from .stationary import fit_stationary, window_features
from .stats import OverlapStats

__all__ = ["WindowFit", "clear_cache", "fit_window", "p_zero", "resolve_method", "METHODS", "IPF_AUTO_MAX_TOKENS"]

METHODS = ("auto", "ipf", "markov", "junction", "independent", "uniform")
IPF_AUTO_MAX_TOKENS = 10


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
    cons = window_constraints(stats, n_tokens)
    if not cons.lags and not cons.window_size:
        return "independent"
    if cons.lags == (1,) and not cons.window_size:
        return "markov"
    if not cons.lags:
        return "junction"
    return "ipf" if n_tokens <= IPF_AUTO_MAX_TOKENS else "junction"


def _groups(keys: np.ndarray):
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _fit_ipf(stats: OverlapStats, n: int, tol: float, max_iter: int) -> WindowFit:
    check_feasible(stats, n)
    cons = window_constraints(stats, n)
    first, inverse = _groups(cons.stacked())
    res = ipf_fit(n, cons.positions, [t[first] for t in cons.targets], tol=tol, max_iter=max_iter)
    if not res.converged:
        grp, ci = res.worst
        expert = int(first[grp])
        raise InfeasibleError(
            f"IPF did not converge in {res.iterations} sweeps (tolerance {tol:g}): the largest marginal error is "
            f"{res.max_error:.2e}, for expert {expert} (π={stats.popularity[expert]:.4g}) on tokens "
            f"{cons.positions[ci]}; the statistics may be jointly infeasible, or raise max_iter"
        )
    return WindowFit(res.table[:, 0][inverse], "ipf", n, res.iterations, res.max_error)


@lru_cache(maxsize=64)
def _stationary_window(stats: OverlapStats, lags: tuple, m: int, tol: float):
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
        return WindowFit((1 - stats.popularity) ** n, "junction", n)
    window, iterations, err = _stationary_window(stats, cons.lags, cons.window_size, min(tol, 1e-10))
    w = window.shape[1].bit_length() - 1
    logp = log_prob_zero(junction_tree(n, w), window)
    return WindowFit(np.exp(logp), "junction", n, iterations, err)


@lru_cache(maxsize=512)
def _fit_cached(stats: OverlapStats, n: int, method: str, tol: float, max_iter: int) -> WindowFit:
    pi = stats.popularity
    notes: tuple = ()
    if method == "independent":
        fit = WindowFit((1 - pi) ** n, method, n)
    elif method == "uniform":
        fit = WindowFit(np.full(pi.size, (1 - stats.top_k / stats.experts) ** n), method, n)
    elif method == "markov":
        if stats.max_lag >= 1 and n >= 2:
            check_feasible(stats, 2)
            p0 = markov_p_zero(pi, stats.pair_probs[:, 0], n)
        else:
            p0 = (1 - pi) ** n
        if (stats.max_lag > 1 and n > 2) or stats.window_size > 2:
            notes = ("method 'markov' uses only the lag-1 statistics; longer lags and window patterns are ignored",)
        fit = WindowFit(p0, method, n, notes=notes)
    elif method == "ipf":
        fit = _fit_ipf(stats, n, tol, max_iter)
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
    """Forget every cached fit (for timing, or to release memory)."""
    _fit_cached.cache_clear()
    _stationary_window.cache_clear()
