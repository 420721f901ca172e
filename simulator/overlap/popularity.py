"""Expert popularity π (one value per expert, Σπ = k, each in [0, 1]) from a short spec or from weights.

Specs: ``uniform`` (π = k/E), ``zipf:S`` (weights r^-S for rank r = 1..E, expert 0 most popular), ``skew:X`` (the
Zipf exponent S ≥ 0 is solved so that the independent-routing overlap Σπ²/k equals X; X must lie in [k/E, 1]),
or the path of a file with E non-negative weights (text, whitespace or comma separated, or ``.npy``).

Weights become probabilities by *water filling*: π_e = min(1, c·w_e) with c chosen so that Σπ = k. This is the
closest valid popularity with the same order; an expert cannot be used by a token more than once.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from ..errors import InfeasibleError, ParameterError
from .brent import brentq

__all__ = ["parse_popularity", "water_fill", "zipf_popularity", "skew_popularity", "independent_overlap"]


def root_scalar(func, lo: float, hi: float, **kwargs) -> float:
    """Brent's root finder (:func:`.brent.brentq`: scipy's ``brentq`` iteration without importing scipy)."""
    return brentq(func, lo, hi, **kwargs)


def independent_overlap(popularity: np.ndarray, top_k: int) -> float:
    """Expected lag overlap under independent routing, Σπ²/k (k/E for uniform popularity)."""
    p = np.asarray(popularity, dtype=float)
    return float(np.dot(p, p) / top_k)


def water_fill(weights, top_k: int, *, what: str = "popularity weights") -> np.ndarray:
    """π_e = min(1, c·w_e) with c > 0 such that Σπ = top_k. Needs at least top_k positive weights."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1:
        raise ParameterError(f"{what} must be one list of weights, one per expert; got an array of shape {w.shape}")
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        i = int(bad[0])
        raise ParameterError(f"{what} must be finite and non-negative; weight {i + 1} of {w.size} is {w[i]:g}"
                             + (f" ({bad.size} such weights)" if bad.size > 1 else "") + ": give every expert a "
                             "weight >= 0")
    positive = w > 0
    if positive.sum() < top_k:
        raise InfeasibleError(
            f"{what}: only {int(positive.sum())} experts have positive weight, but top-k={top_k} needs at least "
            f"{top_k}; give more experts a positive weight"
        )
    if positive.sum() == top_k:
        return positive.astype(float)
    lw = np.full(w.shape, -np.inf)
    lw[positive] = np.log(w[positive])

    def excess(logc: float) -> float:
        return float(np.minimum(1.0, np.exp(np.minimum(logc + lw, 0.0))).sum() - top_k)

    lo = math.log(top_k) - float(np.logaddexp.reduce(lw[positive]))  # no capping: sum <= k
    hi = -float(np.sort(lw[positive])[-top_k])  # the top k reach 1: sum >= k
    logc = lo if excess(lo) >= 0 else root_scalar(excess, lo, hi, xtol=1e-14, rtol=1e-15, maxiter=200)
    pi = np.minimum(1.0, np.exp(np.minimum(logc + lw, 0.0)))
    capped = pi >= 1.0
    free = ~capped & positive
    if free.any():  # remove the root finder's last rounding so that Σπ = k to machine precision
        pi[free] *= (top_k - capped.sum()) / pi[free].sum()
    return np.clip(pi, 0.0, 1.0)


def zipf_popularity(experts: int, top_k: int, exponent: float) -> np.ndarray:
    """Zipf popularity: weight r^-exponent for the expert of rank r (expert 0 is the most popular), water filled."""
    if not (math.isfinite(exponent) and exponent >= 0):
        raise ParameterError(f"zipf exponent must be a finite number >= 0, e.g. zipf:1.0; got {exponent!r}")
    logr = np.log(np.arange(1, experts + 1, dtype=float))
    lw = -exponent * (logr - math.log(top_k))  # normalised at rank k: the top k weights never underflow
    return water_fill(np.exp(np.minimum(lw, 700.0)), top_k, what="zipf weights")


def skew_popularity(experts: int, top_k: int, skew: float) -> np.ndarray:
    """Zipf popularity whose independent-routing overlap Σπ²/k equals ``skew`` (k/E <= skew <= 1)."""
    lo_x = top_k / experts
    if not math.isfinite(skew) or skew < lo_x - 1e-12 or skew > 1 + 1e-12:
        hint = f" (a fraction: did you mean skew:{skew / 100:g}?)" if 1 < skew <= 100 else ""
        raise InfeasibleError(
            f"skew:X needs k/E <= X <= 1, here {lo_x:g} <= X <= 1 for E={experts}, k={top_k}; got {skew:g}{hint}. "
            f"X is the independent-routing overlap Σπ²/k, e.g. skew:0.118"
        )
    if skew <= lo_x + 1e-15:
        return np.full(experts, lo_x)
    if skew >= 1 - 1e-12 or experts == top_k:
        pi = np.zeros(experts)
        pi[:top_k] = 1.0
        return pi

    def gap(s: float) -> float:
        return independent_overlap(zipf_popularity(experts, top_k, s), top_k) - skew

    hi = 1.0
    while gap(hi) < 0:
        hi *= 2
        if hi > 256:
            raise InfeasibleError(f"skew:{skew:g} is too close to 1 to be reached by a Zipf popularity; use <= 0.999")
    s = root_scalar(gap, 0.0, hi, xtol=1e-13, rtol=1e-14, maxiter=300)
    return zipf_popularity(experts, top_k, s)


def _load_weights(path: str) -> np.ndarray:
    try:
        if path.endswith(".npy"):
            return np.asarray(np.load(path, allow_pickle=False), dtype=float).ravel()
        with open(path, encoding="utf-8") as fh:
            text = fh.read().replace(",", " ")
        return np.array([float(t) for t in text.split()], dtype=float)
    except (OSError, ValueError) as exc:
        raise ParameterError(f"cannot read popularity file '{path}': {exc}; give E numbers, one per expert") from None


def parse_popularity(spec, experts: int, top_k: int) -> np.ndarray:
    """Popularity vector from ``uniform``, ``zipf:S``, ``skew:X``, a file path, or an array of E weights."""
    if not isinstance(spec, str):
        w = np.asarray(spec, dtype=float)
        if w.shape != (experts,):
            raise ParameterError(f"popularity weights must have one value per expert ({experts}); got shape {w.shape}")
        return water_fill(w, top_k)
    text = spec.strip()
    low = text.lower()
    if low == "uniform":
        return np.full(experts, top_k / experts)
    for prefix, func in (("zipf:", zipf_popularity), ("skew:", skew_popularity)):
        if low.startswith(prefix):
            try:
                value = float(text[len(prefix):])
            except ValueError:
                raise ParameterError(
                    f"popularity '{spec}': the value after '{prefix}' must be a number, e.g. {prefix}0.118"
                ) from None
            return func(experts, top_k, value)
    if os.path.isfile(text):
        w = _load_weights(text)
        if w.shape != (experts,):
            raise ParameterError(
                f"popularity file '{text}' has {w.size} weights but the model has {experts} experts; "
                f"give one weight per expert"
            )
        pi = water_fill(w, top_k, what=f"popularity file '{text}'")
        raw = w / w.sum() * top_k
        if raw.max() > 1 + 1e-12:
            warnings.warn(
                f"popularity file '{text}': {int((raw > 1).sum())} experts would exceed probability 1 after "
                f"normalising to sum k={top_k}; capped at 1 (water filling)",
                stacklevel=2,
            )
        return pi
    raise ParameterError(
        f"unknown popularity '{spec}': use uniform, zipf:S, skew:X (e.g. skew:0.118) or the path of a file of "
        f"{experts} weights"
    )
