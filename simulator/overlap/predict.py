"""One-call prediction: unique experts for B requests of n tokens, its spread, the busiest EP rank, baselines,
and warnings about lag profiles no stationary process can produce."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..params import Interval, check_params
from .constraints import lag_problems
from .fit import fit_window, resolve_method
from .stats import OverlapStats
from .unique import busiest_rank_experts, independent_unique, uniform_unique, unique_experts, unique_experts_std

__all__ = ["OverlapPrediction", "REALISABILITY_MAX_TOKENS", "RealisabilityWarning", "predict", "realisability_warnings"]

REALISABILITY_MAX_TOKENS = 10  # longest window n' of the fitted U(1, n') that realisability_warnings examines


class RealisabilityWarning(UserWarning):
    """A typed-in lag profile that no stationary process realises (U may then break monotonicity/concavity)."""


@dataclass(frozen=True)
class OverlapPrediction:
    """Result of :func:`predict`. Array fields have one value per batch size (floats when one batch size)."""

    experts: int
    top_k: int
    n_tokens: int
    batch: object
    method: str
    unique_experts: object
    unique_experts_std: object
    independent: object
    uniform: object
    busiest_rank_experts: object = None
    ranks: int | None = None
    iterations: int = 0
    max_error: float = 0.0
    warnings: tuple = ()

    def to_dict(self) -> dict:
        """Plain JSON-ready dict with float numbers (lists when several batch sizes were asked for)."""

        def num(x):
            a = np.asarray(x, dtype=float)
            return float(a) if a.ndim == 0 else [float(v) for v in a]

        out = {
            "experts": self.experts,
            "top_k": self.top_k,
            "tokens": self.n_tokens,
            "batch": np.asarray(self.batch).tolist(),
            "method": self.method,
            "unique_experts": num(self.unique_experts),
            "unique_experts_std": num(self.unique_experts_std),
            "independent": num(self.independent),
            "uniform": num(self.uniform),
        }
        if self.ranks is not None:
            out["ranks"] = self.ranks
            out["busiest_rank_experts"] = num(self.busiest_rank_experts)
        out["iterations"] = self.iterations
        out["max_error"] = float(self.max_error)
        out["warnings"] = list(self.warnings)
        return out


def realisability_warnings(stats: OverlapStats, n_tokens: int, method: str = "auto") -> list:
    """Texts describing why the lag profile may not come from a stationary process (empty when none found).

    Checks, in order: (1) the whole profile o(1..D), including lags longer than the window (which the fit does not
    use), against the necessary conditions of :func:`~simulator.overlap.constraints.lag_problems` (triangle
    inequalities and a positive-semidefinite autocovariance); (2) for ``ipf`` and ``ipf_table``, the fitted U(1, n') for
    n' = 1..D+2 (at least 3, at most REALISABILITY_MAX_TOKENS) must be non-decreasing and concave in n' within 1e-6·E,
    where D is the longest lag. A stationary process always gives both; the other methods are stationary chains by
    construction.
    """
    out = []
    problems = lag_problems(stats.popularity, stats.pair_probs)
    if problems:
        out.append(f"the lag profile is not realisable by any process: {problems[0]}")
        return out
    if resolve_method(stats, n_tokens, method) not in ("ipf", "ipf_table"):
        return out
    top = min(max(stats.max_lag + 2, 3), REALISABILITY_MAX_TOKENS)
    u = [0.0] + [float(unique_experts(fit_window(stats, n, "ipf").p_zero, 1)) for n in range(1, top + 1)]
    step = np.diff(u)
    tol = 1e-6 * stats.experts
    down = np.flatnonzero(step < -tol)
    if down.size:
        n = int(down[0]) + 1
        out.append(f"U(1,n) decreases from n={n - 1} to n={n} ({u[n - 1]:.4f} -> {u[n]:.4f}); the lag profile is "
                   f"not realisable by a stationary process")
    bend = np.flatnonzero(np.diff(step) > tol)
    if bend.size:
        n = int(bend[0]) + 2
        out.append(f"U(1,n) is not concave in n at n={n} (gain {step[n - 2]:.4f} then {step[n - 1]:.4f}); the lag "
                   f"profile is not realisable by a stationary process")
    return out


def predict(stats: OverlapStats, n_tokens: int, batch=1, *, method: str = "auto", ranks: int | None = None,
            placement=None, check: bool = True, tol: float = 1e-9, max_iter: int = 5000) -> OverlapPrediction:
    """Expected unique experts for ``batch`` requests of ``n_tokens`` tokens each (scipy-style result object).

    ``batch`` may be an int or an array of batch sizes. With ``ranks`` (and optionally ``placement``: a name in
    ``PLACEMENTS`` or an array of rank ids, default ``balanced``) the busiest rank's expected unique experts is
    included. With ``check``, realisability problems of the lag profile are issued as warnings (and listed in the
    result).
    """
    check_params("predict", {"n_tokens": n_tokens, "ranks": ranks},
                 {"n_tokens": [Interval(int, 1, None)], "ranks": [Interval(int, 1, None), None]})
    fit = fit_window(stats, n_tokens, method, tol=tol, max_iter=max_iter)
    notes = list(fit.notes)
    if check:
        notes += realisability_warnings(stats, n_tokens, method)
    for text in notes:
        warnings.warn(text, RealisabilityWarning if "realisable" in text else UserWarning, stacklevel=2)
    busiest = None
    if ranks is not None or (placement is not None and not isinstance(placement, str)):
        busiest = busiest_rank_experts(fit.p_zero, batch, ranks=ranks, placement=placement)
        if ranks is None:
            ranks = int(np.max(placement)) + 1
    return OverlapPrediction(
        experts=stats.experts,
        top_k=stats.top_k,
        n_tokens=int(n_tokens),
        batch=batch,
        method=fit.method,
        unique_experts=unique_experts(fit.p_zero, batch),
        unique_experts_std=unique_experts_std(fit.p_zero, batch),
        independent=independent_unique(stats.popularity, n_tokens, batch),
        uniform=uniform_unique(stats.experts, stats.top_k, n_tokens, batch),
        busiest_rank_experts=busiest,
        ranks=ranks,
        iterations=fit.iterations,
        max_error=fit.max_error,
        warnings=tuple(notes),
    )
