"""The persistent working set of a request: a long-range component of routing (docs/MODEL.md §2.15).

Each request draws, per expert, a latent state (hot with probability h, popularity a·π; cold, b·π; h·a + (1−h)·b = 1);
given it, tokens follow the routing law with the lift correlation λ'_d = (o(d) − f)/(1 − f) where f is the floor
(the overlap at long lags): P_e(0…0) = h·P_e(0…0 | hot) + (1 − h)·P_e(0…0 | cold), each request independent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..params import Interval, Param

__all__ = ["Persistent"]

FLOOR = Param(Interval(float, 0, 1, closed="neither"))
SHARE_SLACK = 1.01  # Persistent: a share up to 1% above the bound 1/m2 is taken at the bound (fit_persistent clips
# to the bound under the trace's own popularity; a prediction may use a slightly different one, e.g. uniform)


@dataclass(frozen=True)
class Persistent:
    """Per-request working set: ``floor`` f = the lag overlap at long lags (fraction), ``share`` h = probability that
    an expert is hot in a request (None: the pure working set, cold experts unused, h = Σπ²/(k·f))."""

    floor: float
    share: float | None = None

    def components(self, pi: np.ndarray, top_k: int) -> tuple:
        """(weights (2,), hot/cold popularity (2, E), m2 = E[r²]) of the two latent states."""
        FLOOR.check(self.floor, "floor", "Persistent")
        skew = float(pi @ pi) / top_k
        m2 = self.floor / skew
        if m2 <= 1 + 1e-12:
            return np.array([1.0, 0.0]), np.stack([pi, pi]), 1.0
        h = 1.0 / m2 if self.share is None else float(self.share)
        if 1.0 / m2 < h <= SHARE_SLACK / m2:  # a fitted share at the bound, the popularity slightly different
            h = 1.0 / m2
        if not 0 < h <= 1.0 / m2 + 1e-12:
            raise ParameterError(f"the 'share' parameter of Persistent must be in (0, {1 / m2:.4g}] for floor "
                                 f"{self.floor:g} (Σπ²/k = {skew:.4g}: cold experts would need a negative popularity)"
                                 f"; got {h:g}", owner="Persistent", param="share")
        gap = np.sqrt((m2 - 1) / (h * (1 - h))) if h < 1 else 0.0
        a, b = 1 + (1 - h) * gap, max(1 - h * gap, 0.0)
        return np.array([h, 1 - h]), np.stack([np.minimum(a * pi, 1.0), b * pi]), m2

    def to_dict(self, pi: np.ndarray, top_k: int) -> dict:
        w, comp, _ = self.components(pi, top_k)
        return {"floor": float(self.floor), "share": float(w[0]),
                "hot_boost": float(comp[0].sum() / top_k), "cold_scale": float(comp[1].sum() / top_k)}
