"""When IPF stops, and how it leaves a boundary solution: the rules both IPF engines (``table_ipf``, ``chain_ipf``)
share.

- ``stalled(history)``: no progress over the last STALL_WINDOW sweeps while the error is still above 1e-6 — the
  statistics are infeasible, or the fit is hopeless within ``max_iter``: stop.
- ``turned_sublinear(history)``: at sweeps 128, 256, 512, … the error fell by less than a factor 1/SUBLINEAR = 20
  over the last half of the sweeps. IPF converges linearly unless the solution lies on the boundary of the
  simplex, where some cells decay to zero like 1/t although no target cell is zero (typical of statistics from
  short traces); then facial reduction follows.
- ``largest_support(a_eq, b_eq)``: facial reduction. The cells some distribution satisfying A·q = b (0 <= q <= 1)
  gives positive probability, by linear programs (HiGHS) that maximise the mass on the cells not yet known to be
  positive, until no new cell turns positive. IPF continues on that support and converges linearly again.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SNAP_START", "STALL_WINDOW", "SUBLINEAR", "largest_support", "stalled", "turned_sublinear"]

STALL_WINDOW = 200
SNAP_START = 128  # first sweep at which the convergence rate is examined (then 256, 512, ...)
SUBLINEAR = 0.05  # error(t) > 0.05 · error(t/2): slower than linear convergence
_POSITIVE = 1e-11  # LP solution values above this are positive cells


def stalled(history: list) -> bool:
    """No progress over the last STALL_WINDOW sweeps while still far from converged: infeasible or hopeless."""
    return len(history) > STALL_WINDOW and history[-1] > 1e-6 and history[-1] > 0.999 * history[-1 - STALL_WINDOW]


def turned_sublinear(history: list) -> bool:
    """At sweep t = SNAP_START·2^j: error(t) > SUBLINEAR · error(t/2) (``history`` holds one error per sweep)."""
    t = len(history)
    return t >= SNAP_START and t & (t - 1) == 0 and history[-1] > SUBLINEAR * history[t // 2 - 1]


def largest_support(a_eq, b_eq) -> np.ndarray | None:
    """Boolean mask of the cells that some q with a_eq·q = b_eq, 0 <= q <= 1, makes positive; None if infeasible.

    ``a_eq`` may be dense or scipy-sparse. A linear-program failure after some cells were found returns those."""
    from scipy.optimize import linprog  # imported on first use (scipy.optimize takes ~0.2 s to import)

    positive = np.zeros(a_eq.shape[1], dtype=bool)
    while not positive.all():
        res = linprog(-(~positive).astype(float), A_eq=a_eq, b_eq=b_eq, bounds=(0, 1), method="highs")
        if res.status != 0:
            return positive if positive.any() else None
        new = (res.x > _POSITIVE) & ~positive
        if not new.any():
            break
        positive |= new
    return positive
