"""The maximum-entropy-rate stationary chain whose w-token windows satisfy the constraints (the junction-tree path).

Among stationary processes whose windows of w consecutive tokens satisfy the per-step constraints (π, pair
marginals p(d) at lags d <= w−1, or m-token pattern frequencies), the one with the largest entropy rate is a
(w−1)-order Markov chain of Gibbs form. With state s = (x_{t−w+1}, …, x_{t−1}), window j = (s, x_t) and per-step
features φ_j (x_t; x_t·x_{t−d}; or the indicator of the newest m-token pattern), the transfer matrix is

    M_θ[s, s'] = exp(θ·φ_j)   for the window j leading from s to s' (zero for windows with a zero-target cell).

Its Perron root λ(θ), left and right Perron vectors l, r give the stationary window law μ_j = l_s M[s,s'] r_s' /
(λ l·r), and Λ(θ) = log λ(θ) is convex with gradient E_μ[φ] and Hessian the asymptotic covariance
Cov_μ(φ) + Σ_{k>=1} [C(k) + C(k)^T], obtained from the fundamental matrix Z = (I − P + 1ν^T)^(-1) of the chain.
θ solves the dual min_θ Λ(θ) − θ·c by Newton's method with backtracking; the solution's window law g = μ
satisfies every constraint at every position. Perron vectors come from repeated squaring of M (non-negative
products, no cancellation).

When the constraints are full m-token pattern frequencies only (consistent), g is those frequencies and no fit is
needed; with lag-1 constraints only, the chain is the closed-form Markov chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InfeasibleError, ParameterError
from .tables import window_states

__all__ = ["StationaryFit", "TransferMatrix", "fit_stationary", "window_features"]

_SQUARINGS = 60


@dataclass(frozen=True)
class StationaryFit:
    """``window`` (G, 2^w): stationary law of w consecutive tokens (oldest in the most significant bit)."""

    window: np.ndarray
    iterations: int
    max_error: float
    theta: np.ndarray | None = None  # the dual parameters (G, P) (a warm start for fits of nearby statistics)


def window_features(w: int, lags, m: int, pi, pairs, freq):
    """Per-step features on w-token windows, their targets and the allowed-window mask.

    Returns (phi (2^w, P), targets (G, P), allowed (G, 2^w) bool).
    """
    j = np.arange(1 << w)
    bit = [(j >> (w - 1 - t)) & 1 for t in range(w)]  # bit[t]: token t of the window (t = w-1 is the newest)
    newest = bit[w - 1]
    cols, targets = [], []
    allowed = np.ones((pi.shape[0], 1 << w), dtype=bool)
    if m:
        pat = j & ((1 << m) - 1)
        for v in range(1, 1 << m):
            cols.append((pat == v).astype(float))
            targets.append(freq[:, v])
        for off in range(w - m + 1):
            sub = (j >> (w - m - off)) & ((1 << m) - 1)
            allowed &= freq[:, sub] > 0
    else:
        cols.append(newest.astype(float))
        targets.append(pi)
    for d in lags:
        cols.append((newest * bit[w - 1 - d]).astype(float))
        p = pairs[:, d - 1]
        targets.append(p)
        cells = np.stack([1 - 2 * pi + p, pi - p, pi - p, p], axis=1) > 0
        for s in range(w - d):
            allowed &= cells[:, 2 * bit[s] + bit[s + d]]
    if not m and not lags:
        cells = np.stack([1 - pi, pi], axis=1) > 0
        for t in range(w):
            allowed &= cells[:, bit[t]]
    return np.stack(cols, axis=1), np.stack(targets, axis=1), allowed


def _check_chain(allowed_row: np.ndarray, w: int) -> None:
    """One recurrent class of allowed patterns is needed for a unique maximum-entropy-rate chain."""
    import networkx as nx  # imported on first use (~0.1 s)

    states = 1 << (w - 1)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(states))
    graph.add_edges_from((int(j) >> 1, int(j) & (states - 1)) for j in np.flatnonzero(allowed_row))
    cyclic = [c for c in nx.strongly_connected_components(graph)
              if len(c) > 1 or any(graph.has_edge(v, v) for v in c)]
    if len(cyclic) != 1:
        raise ParameterError(
            "method 'junction' needs statistics whose allowed activation patterns form one recurrent class; "
            "these split into several (e.g. full overlap at one longer lag only); use method='ipf'"
        )


class TransferMatrix:
    """The stationary chain at parameters θ (G, P): transfer matrices M_θ (G, S, S) on S = 2^(w−1) states, Perron
    root ``lam``, left/right Perron vectors ``l``, ``r``, stationary window law ``mu`` (G, 2^w), and ``valid``
    (groups whose Perron pair is finite and accurate)."""

    def __init__(self, theta, phi, allowed, w):
        g = theta.shape[0]
        states = 1 << (w - 1)
        self.windows = window_states(w)
        self.src, self.dst = self.windows.first, self.windows.last
        logw = np.where(allowed, theta @ phi.T, -np.inf)
        self.shift = logw.max(axis=1)
        weights = np.exp(logw - self.shift[:, None])
        mat = np.zeros((g, states, states))
        mat[:, self.src, self.dst] = weights
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            # M + I has M's Perron vectors and is aperiodic, so repeated squaring converges for periodic chains too
            q = mat / mat.max(axis=(1, 2), keepdims=True) + np.eye(states)
            for _ in range(_SQUARINGS):
                nxt = q @ q
                nxt /= nxt.max(axis=(1, 2), keepdims=True)
                diff = np.abs(nxt - q)
                done = bool(np.all((diff < 1e-15) | ~np.isfinite(diff)))
                q = nxt
                if done:
                    break
            r = q.sum(axis=2)
            l = q.sum(axis=1)
            r /= r.sum(axis=1, keepdims=True)
            l /= l.sum(axis=1, keepdims=True)
            mr = np.einsum("gst,gt->gs", mat, r)
            lr = (l * r).sum(axis=1)
            lam = (l * mr).sum(axis=1) / lr
            resid = np.abs(mr - lam[:, None] * r).max(axis=1)
            # a group is usable when its Perron pair is finite and accurate (extreme trial steps can underflow)
            self.valid = np.isfinite(resid) & np.isfinite(lam) & (lam > 0) & (resid <= 1e-8 * lam)
            self.mat, self.l, self.r, self.lam, self.lr = mat, l, r, lam, lr
            self.mu = l[:, self.src] * weights * r[:, self.dst] / (lam * lr)[:, None]

    def objective(self, theta, c):
        """Λ(θ) − θ·c per group (+inf where the Perron pair is not usable)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.log(self.lam) + self.shift - (theta * c).sum(axis=1)
        return np.where(self.valid, value, np.inf)

    def hessian(self, phi, grad):
        """∇²Λ(θ): the asymptotic covariance of the features (G, P, P), ``grad`` = E_μ[φ] (G, P)."""
        g, states = self.l.shape
        nu = self.l * self.r / self.lr[:, None]
        fc = phi[None, :, :] - grad[:, None, :]  # centred features (G, 2^w, P)
        weighted = self.mu[:, :, None] * fc
        arrive = self.windows.from_last.T @ weighted  # centred feature mass arriving at
        leave = self.windows.from_first.T @ weighted  # each state, and leaving it
        with np.errstate(divide="ignore", invalid="ignore"):
            leave = np.where(nu[:, :, None] > 0, leave / nu[:, :, None], 0.0)
            trans = np.where(self.r[:, :, None] > 0,
                             self.mat * self.r[:, None, :] / (self.lam[:, None, None] * self.r[:, :, None]), 0.0)
        fund = np.linalg.inv(np.eye(states) - trans + nu[:, None, :])
        cross = np.swapaxes(arrive, 1, 2) @ fund @ leave  # batched matmul (einsum of three: ~100x slower)
        cov0 = np.swapaxes(weighted, 1, 2) @ fc
        return cov0 + cross + np.swapaxes(cross, 1, 2)


def fit_stationary(phi, targets, allowed, w: int, *, theta0=None, tol: float = 1e-10, max_iter: int = 200):
    """Newton's method on the dual of the maximum-entropy-rate problem, all groups at once."""
    for row in np.unique(allowed, axis=0):
        if not row.all():
            _check_chain(row, w)
    theta = np.zeros((targets.shape[0], phi.shape[1])) if theta0 is None else np.array(theta0, dtype=float)
    chain = TransferMatrix(theta, phi, allowed, w)
    if not chain.valid.all():
        raise ParameterError("method 'junction': the constrained chain is degenerate; use method='ipf'")
    f = chain.objective(theta, targets)
    err = np.inf
    for it in range(1, max_iter + 1):
        grad = chain.mu @ phi
        resid = grad - targets
        err = float(np.abs(resid).max())
        if err < tol:
            return StationaryFit(window=chain.mu, iterations=it - 1, max_error=err, theta=theta)
        step = -np.einsum("gpq,gq->gp", np.linalg.pinv(chain.hessian(phi, grad), rcond=1e-13, hermitian=True), resid)
        slope = (resid * step).sum(axis=1)
        active = np.abs(resid).max(axis=1) >= tol
        t = np.ones(theta.shape[0])
        for _ in range(60):
            trial = theta + (t * active)[:, None] * step
            new = TransferMatrix(trial, phi, allowed, w)
            fn = new.objective(trial, targets)
            ok = ~active | (fn <= f + 1e-4 * t * slope + 1e-13 * np.abs(f))
            if ok.all():
                break
            t = np.where(ok, t, t / 2)
        theta, chain, f = trial, new, fn
    raise InfeasibleError(
        f"the stationary (junction) fit did not converge in {max_iter} Newton steps (largest constraint error "
        f"{err:.2e}); the lag statistics may not be realisable by a stationary process; try method='ipf'"
    )
