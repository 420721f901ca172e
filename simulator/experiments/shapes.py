"""Programmatic classification of a speedup-vs-batch curve (speedup at the best draft length per batch).

Labels (``tol`` is a relative tolerance: values within it count as ties):

- ``low-batch peak``: the speedup at the smallest batch is within ``tol`` of the curve's maximum (the study's
  finding for fine-grained MoEs under the refined model);
- ``interior peak``: the maximum is above both ends by more than ``tol`` (MoESD's prior prediction);
- ``rising``: the largest batch is within ``tol`` of the maximum and the smallest is not.

Qualifiers, on the curve against log2(batch): ``unimodal`` (non-decreasing up to the peak and non-increasing after,
within ``tol``), ``concave`` (every second difference ≤ ``tol`` · peak), and ``dip`` (it first falls by more than
``tol`` and then climbs back above its start: a valley at small batch before an interior peak).
"""

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


def interior(shape: Shape) -> bool:
    """MoESD's prior expectation: an interior peak."""
    return shape.label == INTERIOR
