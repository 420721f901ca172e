"""Deployable draft-length tables: few ranges, no sawtooth, within a tolerance of the per-batch optimum
(docs/MODEL.md §5.3b, "Deployable schedules").

The per-batch optimum flips K between neighbouring batches where CUDA-graph padding makes two draft lengths almost
equally fast; nobody deploys such a table. :func:`deployable` picks, over every batch 1..B_max, a piecewise-constant
K(B) such that

- K(B) = 0 exactly where SD loses (the best chain's speedup ≤ 1, the rule ``sweep`` reports), K(B) ≥ 1 elsewhere;
- where SD pays, Speedup(B, K(B)) ≥ (1 − tol) · max_K Speedup(B, K);
- among those tables: the fewest ranges, then the smallest Σ_B K(B) (the smaller K wins a tie within the
  tolerance: less drafting work, less KV churn), then the largest Σ_B Speedup(B, K(B));
- each engine's table rules (:class:`~.engine_configs.FormatRules`): a range may start only where the engine's
  lookup can switch (SGLang: right after a captured CUDA-graph batch), and under TensorRT-LLM the K at batch 1 is
  the table's largest.

Exact by dynamic programming over range ends: a range [i, j) is feasible when the draft lengths allowed at every
batch in it intersect (bit masks), and its K is the smallest of them; the cost is additive over ranges.
"""

from __future__ import annotations

import numpy as np

from ..errors import InfeasibleError
from ..params import Interval, Param

__all__ = ["TOLERANCE", "deployable", "feasible_masks"]

TOLERANCE = Param(Interval(float, 0.0, 0.5), unit="fraction of the per-batch best speedup")
_LOW = np.array([(m & -m).bit_length() - 1 if m else -1 for m in range(1 << 10)])  # lowest set bit per mask


def feasible_masks(gammas, speedup, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """(bit mask of the draft lengths allowed at each batch (bit i = gammas[i]), whether SD pays there)."""
    g = np.asarray(gammas)
    s = np.asarray(speedup, dtype=float)
    sd = g >= 1
    best = s[sd].max(axis=0)
    pays = best > 1.0
    ok = sd[:, None] & (s >= (1.0 - tol) * best[None, :]) & pays[None, :]
    ok |= (g == 0)[:, None] & ~pays[None, :]
    bits = (1 << np.arange(g.size))[:, None]
    return (ok * bits).sum(axis=0).astype(np.int64), pays


def _segment(masks: np.ndarray, allowed: np.ndarray, cum_s: np.ndarray, gam: np.ndarray):
    """Minimum-cost cover of batches [0, n) by ranges; returns K per batch or None when no cover exists."""
    n = masks.size
    cost = np.full((n + 1, 3), np.inf)
    cost[0] = 0.0
    back = np.zeros((n + 1, 2), dtype=np.int64)  # (start, gamma index) of the last range
    for j in range(1, n + 1):
        run = np.bitwise_and.accumulate(masks[j - 1::-1])  # masks of [i, j) for i = j-1, j-2, ...
        live = np.flatnonzero(run == 0)
        m = run[: live[0]] if live.size else run
        starts = j - 1 - np.arange(m.size)
        keep = allowed[starts] & np.isfinite(cost[starts, 0])
        if not keep.any():
            continue
        starts, m = starts[keep], m[keep]
        gi = _LOW[m]
        length = j - starts
        c = cost[starts] + np.column_stack([np.ones(starts.size), gam[gi] * length,
                                            -(cum_s[gi, j] - cum_s[gi, starts])])
        best = np.lexsort((c[:, 2], c[:, 1], c[:, 0]))[0]
        cost[j], back[j] = c[best], (starts[best], gi[best])
    if not np.isfinite(cost[n, 0]):
        return None, cost[n]
    k = np.zeros(n, dtype=np.int64)
    j = n
    while j > 0:
        i, gi = back[j]
        k[i:j] = gam[gi]
        j = int(i)
    return k, cost[n]


def deployable(gammas, speedup, tol: float = 0.01, *, starts=None, first_is_max: bool = False) -> np.ndarray:
    """K per batch (module docstring) from ``speedup`` (draft lengths × batches 1..B_max, γ = 0 row included).
    ``starts``: where a range may begin (bool per batch; default everywhere); ``first_is_max``: the K at batch 1 is
    the table's largest (TensorRT-LLM). InfeasibleError when no table meets the rules."""
    TOLERANCE.check(tol, "tolerance", "deployable")
    g = np.asarray(gammas, dtype=np.int64)
    s = np.asarray(speedup, dtype=float)
    if g.size > 10:
        raise InfeasibleError("deployable: at most 10 draft lengths")
    masks, pays = feasible_masks(g, s, tol)
    n = masks.size
    allowed = np.ones(n, dtype=bool) if starts is None else np.asarray(starts, dtype=bool).copy()
    allowed[0] = True
    if starts is not None:  # a change of paying/losing must be expressible: K = 0 exactly where SD loses
        allowed |= np.concatenate([[True], pays[1:] != pays[:-1]])
    cum_s = np.concatenate([np.zeros((g.size, 1)), np.cumsum(np.where(g[:, None] == 0, 1.0, s), axis=1)], axis=1)
    if not first_is_max or not pays.any():  # SD paying nowhere: K = 0 throughout, the largest K at batch 1 too
        k, _ = _segment(masks, allowed, cum_s, g)
        if k is None:
            raise InfeasibleError(f"no draft-length table meets the engine's rules within tolerance {tol:g}")
        return k
    best, best_cost = None, None
    for gi in np.flatnonzero((masks[0] >> np.arange(g.size)) & 1):  # each K allowed at batch 1 as the table's max
        cap = int((1 << (np.flatnonzero(g <= g[gi]).max() + 1)) - 1)
        m = masks & cap
        m[0] = 1 << gi
        if g[gi] == 0 or (m == 0).any():
            continue
        k, c = _segment(m, allowed, cum_s, g)
        if k is not None and (best_cost is None or tuple(c) < tuple(best_cost)):
            best, best_cost = k, c
    if best is None:
        raise InfeasibleError(f"no draft-length table has its largest K at batch 1 (TensorRT-LLM's draft_len_schedule "
                              f"rule) within tolerance {tol:g}; raise --tolerance or use --format json")
    return best
