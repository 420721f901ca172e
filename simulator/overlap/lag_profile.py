"""Lag-overlap profiles over an independent baseline: the lag correlation λ(d) = (o(d) − s) / (1 − s) of a profile's
overlaps o(d) over the independent overlap s, and a profile of a given shape rescaled to a chosen o(1) (docs/MODEL.md
§6.1, the overlap variants of a study)."""

from __future__ import annotations

import numpy as np


def lift(lags, baseline: float) -> np.ndarray:
    """Lag correlation λ(d) = (o(d) − s) / (1 − s) of overlaps over the independent baseline s."""
    return (np.asarray(lags, float) - baseline) / (1.0 - baseline)


def profile_lags(s: float, shape, shape_baseline: float, lag1: float | None, profile: str) -> tuple[float, ...]:
    """Lag overlaps over the independent baseline ``s``: the shape's lag correlations, rescaled so that o(1) =
    ``lag1`` when given (``cohere``); ``markov``: o(1) only (the maximum-entropy law is then a first-order Markov
    chain per expert, λ(d) = λ(1)^d, realisable by construction)."""
    if profile == "markov":
        return (float(lag1),)
    lam = lift(shape, shape_baseline)
    if lag1 is not None:
        lam = lift(lag1, s) * lam / lam[0]
    return tuple(float(x) for x in s + lam * (1.0 - s))
