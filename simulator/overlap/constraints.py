"""Constraint sets of the n-token maximum-entropy fit, and necessary feasibility conditions on lag profiles.

For a window of n tokens the fit constrains, at every position (the statistics are stationary):

- window patterns: if the statistics carry m-token pattern frequencies f_e, the full m-token marginal at every
  window position s = 0..n-m (if n < m: the n-token marginal of f_e on the whole window);
- pairs: the 2x2 marginal of (x_s, x_{s+d}) — cells [00, 01, 10, 11] = [1 − 2π + p(d), π − p(d), π − p(d), p(d)] —
  for every lag d <= min(D, n−1) not already implied by the window (d >= m), at every s;
- singles: P(x_s = 1) = π when nothing else constrains position s (n = 1 or D = 0).

Necessary conditions checked before fitting (any distribution of n tokens with these pair marginals satisfies
them; violating one means no fit exists): with δ(d) = P(x_t ≠ x_{t+d}) = 2(π − p(d)), for lags d1, d2 with
d1 + d2 <= L the triangle inequalities δ(d1 + d2) <= δ(d1) + δ(d2) and δ(d1) + δ(d2) + δ(d1 + d2) <= 2, and
positive semidefiniteness of the (L+1)x(L+1) Toeplitz autocovariance matrix γ(|i−j|), γ(0) = π − π²,
γ(d) = p(d) − π².
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import InfeasibleError
from .stats import OverlapStats, window_marginal

__all__ = ["Constraints", "check_feasible", "clear_checks", "lag_problems", "pair_table", "used_statistics",
           "window_constraints"]

_FEAS_TOL = 1e-9


def pair_table(pi: np.ndarray, p: np.ndarray) -> np.ndarray:
    """2x2 joint of (x_t, x_{t+d}) as cells [00, 01, 10, 11], shape (E, 4)."""
    return np.stack([1 - 2 * pi + p, pi - p, pi - p, p], axis=-1).clip(0.0, 1.0)


@dataclass(frozen=True)
class Constraints:
    """Per-expert marginal constraints on an n-token window.

    ``positions[i]`` are ascending token positions; ``targets[i]`` has shape (E, 2^len(positions[i])) with the first
    position in the most significant bit. ``lags`` are the pair lags used, ``window_size`` the pattern size m used.
    """

    n_tokens: int
    positions: tuple
    targets: tuple
    lags: tuple
    window_size: int

    @property
    def width(self) -> int:
        """w: the widest span of a constraint (tokens), i.e. the clique size of the chordal constraint graph."""
        return max((p[-1] - p[0] + 1 for p in self.positions), default=1)

    def stacked(self) -> np.ndarray:
        """All targets side by side, shape (E, total cells): the per-expert key used to share fits."""
        return np.concatenate(self.targets, axis=1)


def used_statistics(stats: OverlapStats, n_tokens: int) -> tuple:
    """(lags, window size) that the n-token fit constrains: pair lags from m (or 1 without window patterns) up to
    min(D, n − 1), and the pattern size min(m, n) (0 without window patterns)."""
    n, m = int(n_tokens), stats.window_size
    return tuple(range(m if m else 1, min(stats.max_lag, n - 1) + 1)), (min(m, n) if m else 0)


def window_constraints(stats: OverlapStats, n_tokens: int) -> Constraints:
    """The constraint set of the n-token fit for these statistics (see the module docstring)."""
    n = int(n_tokens)
    lags, window_size = used_statistics(stats, n)
    pi = stats.popularity
    positions, targets = [], []
    m = stats.window_size
    if m:
        if n <= m:
            positions.append(tuple(range(n)))
            targets.append(window_marginal(stats.window, tuple(range(n))))
        else:
            for s in range(n - m + 1):
                positions.append(tuple(range(s, s + m)))
                targets.append(stats.window)
    for d in lags:
        table = pair_table(pi, stats.pair_probs[:, d - 1])
        for s in range(n - d):
            positions.append((s, s + d))
            targets.append(table)
    if not positions:
        single = np.stack([1 - pi, pi], axis=1)
        for s in range(n):
            positions.append((s,))
            targets.append(single)
    order = sorted(range(len(positions)), key=lambda i: (positions[i][-1], positions[i][0]))
    return Constraints(
        n_tokens=n,
        positions=tuple(positions[i] for i in order),
        targets=tuple(targets[i] for i in order),
        lags=lags,
        window_size=window_size,
    )


def lag_problems(pi: np.ndarray, pairs: np.ndarray) -> list[str]:
    """Violated necessary conditions of a lag profile (triangle inequalities, Toeplitz PSD), as one-line texts."""
    problems: list[str] = []
    lag_max = pairs.shape[1]
    if lag_max == 0:
        return problems
    delta = 2 * (pi[:, None] - pairs)  # P(x_t != x_{t+d}), shape (E, L)
    for d1 in range(1, lag_max + 1):
        for d2 in range(d1, lag_max + 1 - d1):
            a, b, c = delta[:, d1 - 1], delta[:, d2 - 1], delta[:, d1 + d2 - 1]
            bad = np.flatnonzero(c > a + b + _FEAS_TOL)
            if bad.size:
                e = int(bad[0])
                problems.append(
                    f"expert {e}: P(x_t != x_t+{d1 + d2})={c[e]:.4g} exceeds P(x_t != x_t+{d1}) + "
                    f"P(x_t != x_t+{d2})={a[e] + b[e]:.4g} (triangle inequality; e.g. o(1)=1 forces every o(d)=1)"
                )
            bad = np.flatnonzero(a + b + c > 2 + _FEAS_TOL)
            if bad.size:
                e = int(bad[0])
                problems.append(
                    f"expert {e}: P(x_t != x_t+{d1}) + P(x_t+{d1} != x_t+{d1 + d2}) + P(x_t != x_t+{d1 + d2})="
                    f"{a[e] + b[e] + c[e]:.4g} exceeds 2 (three binary values cannot all differ pairwise; "
                    f"the expert would be anti-correlated too strongly)"
                )
    gamma = np.concatenate([(pi - pi * pi)[:, None], pairs - (pi * pi)[:, None]], axis=1)
    idx = np.abs(np.subtract.outer(np.arange(lag_max + 1), np.arange(lag_max + 1)))
    if gamma.shape[0] > 1 and (gamma == gamma[0]).all():  # experts alike (uniform popularity): one matrix
        low = np.broadcast_to(np.linalg.eigvalsh(gamma[:1, idx]).min(axis=1), gamma.shape[:1])
    else:
        low = np.linalg.eigvalsh(gamma[:, idx]).min(axis=1)
    bad = np.flatnonzero(low < -_FEAS_TOL)
    if bad.size:
        e = int(bad[np.argmin(low[bad])])
        problems.append(
            f"expert {e}: the autocovariance matrix of lags 0..{lag_max} is not positive semidefinite "
            f"(smallest eigenvalue {low[e]:.3g})"
        )
    return problems


def check_feasible(stats: OverlapStats, n_tokens: int) -> None:
    """Raise InfeasibleError when the lags used by an n-token fit violate a necessary condition."""
    problems = _used_lag_problems(stats, min(stats.max_lag, max(int(n_tokens) - 1, 0)))
    if problems:
        raise InfeasibleError(
            f"no distribution of {n_tokens} tokens has these lag statistics: {problems[0]}; "
            f"check the overlaps (o(d) must not fall faster than the triangle inequality allows)"
        )


@lru_cache(maxsize=256)
def _used_lag_problems(stats: OverlapStats, used: int) -> tuple:
    """``lag_problems`` of the first ``used`` lags, once per statistics (windows of n >= used + 1 tokens share it)."""
    return tuple(lag_problems(stats.popularity, stats.pair_probs[:, :used]))


def clear_checks() -> None:
    """Forget the cached feasibility checks (for timing, or to release memory)."""
    _used_lag_problems.cache_clear()
