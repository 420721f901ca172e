"""The latent-score routing model: a thresholded Gaussian process along the tokens (docs/MODEL.md §2.16).

Per expert e, every token (chain position or tree node) v carries a latent score

    z_v = sqrt(c)·u + sqrt(1 − c)·a_v,     u ~ N(0, 1) once per request,   a a Gaussian AR(1) process along the
                                            tokens: corr(a_v, a_w) = r^dist(v, w) (a Gaussian Markov tree)

and x_v = 1{z_v > τ} with τ = Φ⁻¹(1 − π_e), so P(x_v = 1) = π_e exactly. Two tokens at distance d have latent
correlation R(d) = c + (1 − c)·r^d, and the pair law P(x_v = 1, x_w = 1) = Φ̄₂(τ, τ; R(d)) (the bivariate normal
upper orthant). This module solves the parameters from the statistics users measure:

- ``latent_correlation``: per expert and lag, the R(d) whose orthant probability is the given p_e(d) (exact: the
  orthant is increasing in R; Plackett's identity written as an integral over θ = asin R, Gauss–Legendre);
- ``fit_latent``: (c, r) per expert, least squares on the R(d) weighted by ∂p/∂R (so the misfit is measured in
  pair probabilities); one lag gives c = 0, r = R(1) (the pure Markov latent, no per-request component).
  ``LatentParams.misfit`` is the largest |o_model(d) − o(d)| over the given lags of the pooled overlap.

P(no token uses e) is a Gaussian orthant probability over the tokens; :mod:`.latent_tree` computes it by message
passing over the tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .normal import ndtr, ndtri

__all__ = ["LatentParams", "binary_memory_misfit", "fit_latent", "latent_correlation", "upper_orthant"]

_GL_X, _GL_W = np.polynomial.legendre.leggauss(48)  # orthant integral over θ (smooth: no singularity at R = ±1)
_BISECT = 14  # bisection steps for R(d) (the θ bracket π shrinks to 2e-4), then Newton steps
_NEWTON = 4
_R_GRID = np.linspace(-0.995, 0.995, 399)  # coarse search for r; refined by a second grid around the best
_R_REFINE = 101
C_MAX = 0.999  # the per-request share c is kept below 1 (c = 1: the latent never changes within a request)


def upper_orthant(h: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """P(X > h, Y > h) for a standard bivariate normal with correlation ``corr`` (broadcast):
    (1 − Φ(h))² + (1/2π)·∫_0^{asin R} exp(−h²/(1 + sin θ)) dθ."""
    h, corr = np.broadcast_arrays(np.asarray(h, dtype=float), np.asarray(corr, dtype=float))
    top = np.arcsin(np.clip(corr, -1.0, 1.0))
    theta = 0.5 * top[..., None] * (_GL_X + 1)
    f = np.exp(-h[..., None] ** 2 / np.maximum(1 + np.sin(theta), 1e-300))
    return ndtr(-h) ** 2 + 0.5 * top * (f @ _GL_W) / (2 * np.pi)


def _density(h: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """∂/∂R of the upper orthant: the bivariate normal density at (h, h)."""
    corr = np.clip(corr, -0.999999, 0.999999)
    return np.exp(-h * h / (1 + corr)) / (2 * np.pi * np.sqrt(1 - corr * corr))


def latent_correlation(pi: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """R (E, D): the latent correlation whose orthant probability at τ_e is p_e(d); ±1 at the Fréchet bounds."""
    pi = np.asarray(pi, dtype=float)[:, None]
    pairs = np.asarray(pairs, dtype=float)
    h = np.broadcast_to(-ndtri(pi), pairs.shape)
    lo = np.full(pairs.shape, -np.pi / 2)
    hi = np.full(pairs.shape, np.pi / 2)
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        above = upper_orthant(h, np.sin(mid)) > pairs
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    theta = 0.5 * (lo + hi)
    for _ in range(_NEWTON):  # Newton in θ inside the bracket: dp/dθ = φ₂(h, h; sin θ)·cos θ
        gap = upper_orthant(h, np.sin(theta)) - pairs
        slope = _density(h, np.sin(theta)) * np.cos(theta)
        step = np.where(slope > 1e-300, gap / np.maximum(slope, 1e-300), 0.0)
        theta = np.clip(theta - step, lo, hi)
    return np.sin(theta)


@dataclass(frozen=True)
class LatentParams:
    """Per expert: threshold τ, per-request share c, AR(1) coefficient r (arrays (E,)); ``misfit``: the largest
    |o_model(d) − o(d)| of the pooled overlap over the lags given (0 for one lag); ``constant``: experts whose
    tokens all agree (π ∈ {0, 1} or full lag-1 overlap)."""

    tau: np.ndarray
    share: np.ndarray
    coef: np.ndarray
    constant: np.ndarray
    misfit: float
    lags: int

    def correlation(self, d) -> np.ndarray:
        """R_e(d) = c + (1 − c)·r^d, (E, len(d))."""
        d = np.atleast_1d(np.asarray(d, dtype=float))
        return self.share[:, None] + (1 - self.share[:, None]) * self.coef[:, None] ** d[None, :]


def _least_squares(corr: np.ndarray, weight: np.ndarray, grid: np.ndarray) -> tuple:
    """For each expert and candidate r (grid (E, M) or (M,)), the best c ∈ [0, C_MAX] in closed form; returns
    (r, c) of the smallest weighted residual Σ_d w_d (c + (1 − c) r^d − R_d)²."""
    d = np.arange(1, corr.shape[1] + 1, dtype=float)
    g = np.broadcast_to(grid, (corr.shape[0], grid.shape[-1]))
    f = np.sign(g)[..., None] ** d * np.abs(g)[..., None] ** d  # (E, M, D) r^d
    one = 1 - f
    w = weight[:, None, :]
    num = (w * (corr[:, None, :] - f) * one).sum(axis=2)
    den = (w * one * one).sum(axis=2)
    c = np.clip(np.where(den > 0, num / np.maximum(den, 1e-300), 0.0), 0.0, C_MAX)
    res = (w * (f + c[..., None] * one - corr[:, None, :]) ** 2).sum(axis=2)
    best = np.argmin(res, axis=1)
    rows = np.arange(corr.shape[0])
    return g[rows, best], c[rows, best]


def fit_latent(pi: np.ndarray, pairs: np.ndarray, top_k: float | None = None, weights=None) -> LatentParams:
    """(τ, c, r) per expert from π_e and p_e(1..D) (rows of ``pairs``); see the module docstring. ``weights``: how
    many experts each row stands for (distinct rows of a larger set), for the pooled misfit."""
    pi = np.asarray(pi, dtype=float)
    pairs = np.asarray(pairs, dtype=float).reshape(pi.size, -1)
    lags = pairs.shape[1]
    tau = -ndtri(pi)
    constant = (pi <= 0) | (pi >= 1)
    if lags:
        constant |= np.abs(pairs[:, 0] - pi) <= 1e-12
    share, coef = np.zeros(pi.size), np.zeros(pi.size)
    coef[constant] = 1.0
    live = np.flatnonzero(~constant)
    misfit = 0.0
    if lags and live.size:
        corr = latent_correlation(pi[live], pairs[live])
        if lags == 1:
            coef[live] = corr[:, 0]
        else:
            weight = _density(tau[live, None], corr) ** 2
            weight = weight / np.maximum(weight.max(axis=1, keepdims=True), 1e-300)
            r, _ = _least_squares(corr, weight, _R_GRID)
            step = _R_GRID[1] - _R_GRID[0]
            fine = np.clip(r[:, None] + np.linspace(-step, step, _R_REFINE)[None, :], -0.9999, 0.9999)
            coef[live], share[live] = _least_squares(corr, weight, fine)
            model = upper_orthant(tau[live, None], share[live, None] + (1 - share[live, None])
                                  * np.sign(coef[live, None]) ** np.arange(1, lags + 1)
                                  * np.abs(coef[live, None]) ** np.arange(1, lags + 1))
            w = np.ones(pi.size) if weights is None else np.asarray(weights, dtype=float)
            k = float(w @ pi) if top_k is None else float(top_k)
            misfit = float(np.max(np.abs(w[live] @ (model - pairs[live]))) / k)
    return LatentParams(tau, share, coef, constant, misfit, lags)


def binary_memory_misfit(overlaps, skew: float) -> tuple:
    """The other kind of persistence, as a diagnostic: per expert a binary Markov chain (no memory of how far below
    its threshold an unused expert is) within a per-request working set gives pooled overlaps
    o(d) = F + (1 − F)·θ^d (F: the floor, θ: the lift per step). Returns (largest |o_model(d) − o(d)|, F, θ) of the
    best (F, θ) (F on 200 values in [Σπ²/k, 0.99], θ on 500 in [0, 0.999]); compared with the latent misfit it says
    which kind of memory the lag profile looks like (docs/MODEL.md §2.16, Limits)."""
    o = np.asarray(overlaps, dtype=float)
    if o.size < 2:
        return 0.0, float(skew), float(o[0]) if o.size else 0.0
    d = np.arange(1, o.size + 1)
    floor = np.linspace(min(skew, 0.99), 0.99, 200)[:, None, None]
    theta = np.linspace(0.0, 0.999, 500)[None, :, None]
    res = np.abs(floor + (1 - floor) * theta ** d - o).max(axis=2)
    i, j = np.unravel_index(np.argmin(res), res.shape)
    return float(res[i, j]), float(floor[i, 0, 0]), float(theta[0, j, 0])
