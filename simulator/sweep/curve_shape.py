"""The shape of a best-speedup-vs-batch curve: where it peaks (at the smallest batch, inside the batch range, or at
its end) and its qualifiers (unimodal, concave in log2 B, a dip at small batch), for comparing a model's curves with
the shapes a study expects (docs/MODEL.md §6.4, the ``curve_shapes`` analysis)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LOW, INTERIOR, RISING = "low-batch peak", "interior peak", "rising"


@dataclass(frozen=True)
class Shape:
    label: str
    peak_batch: int
    peak: float
    at_min: float
    at_max: float
    unimodal: bool
    concave: bool
    dip: bool

    @property
    def description(self) -> str:
        q = [w for w, on in (("unimodal", self.unimodal), ("concave", self.concave),
                             ("dip at small batch", self.dip)) if on]
        return self.label + (f" ({', '.join(q)})" if q else "")


def classify(batch, speedup, tol: float = 0.01) -> Shape:
    """Label (low-batch peak, rising, interior peak) and qualifiers (unimodal, concave in log2 B, dip at small batch)
    of a best-speedup-vs-batch curve; values within the relative tolerance ``tol`` count as ties."""
    b = np.asarray(batch, float)
    s = np.asarray(speedup, float)
    i = int(np.argmax(s))
    peak = float(s[i])
    if s[0] >= peak * (1 - tol):
        label = LOW
    elif s[-1] >= peak * (1 - tol):
        label = RISING
    else:
        label = INTERIOR
    band = tol * peak
    d = np.diff(s)
    unimodal = bool(np.all(d[:i] >= -band) and np.all(d[i:] <= band))
    concave = bool(s.size < 3 or np.all(np.diff(d) <= band))
    low_idx = int(np.argmin(s[: i + 1]))
    dip = bool(0 < low_idx < i and s[low_idx] < s[0] - band and peak > s[0] + band)
    return Shape(label, int(b[i]), peak, float(s[0]), float(s[-1]), unimodal, concave, dip)


def low_batch(shape: Shape, low_batch_max: int) -> bool:
    """The study's refined expectation: the highest speedup at low batch (peak batch ≤ ``low_batch_max``, or the
    smallest batch tied with the peak)."""
    return shape.label == LOW or shape.peak_batch <= low_batch_max
