"""Iterative proportional fitting (IPF) of the maximum-entropy distribution over {0,1}^n, one 2^n table per group
of experts: fit method ``ipf_table``, the reference the junction-tree engine (``chain_ipf``) is tested against.

Starting from the uniform table q_0(x) = 2^-n, each step rescales the table so that one constrained marginal
matches its target exactly:

    q(x) <- q(x) · target_c(x_c) / q_c(x_c)        (0/0 := 0: cells with a zero target stay zero)

cycling through the constraints (ordered by their last, then first position) until, over a whole sweep, no
constrained marginal is off by more than ``tol`` (max absolute difference). The limit is the I-projection of the
uniform table onto the constraint set, i.e. the maximum-entropy distribution with those marginals (Csiszár 1975);
structural zeros (e.g. full overlap, x_t = x_{t+d}) are handled by the zero cells. All experts are fitted at once:
the table has shape (G, 2^n) for G distinct constraint sets.

Two accelerations keep the same limit: window blocks (``table_ipf``: one I-projection per window of w consecutive
tokens instead of one per constraint) and facial reduction (``convergence.largest_support`` over the table's cells,
when convergence turns sublinear because the solution lies on the boundary).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InfeasibleError, ParameterError
from .convergence import largest_support, stalled, turned_sublinear
from .tables import marginal, pattern_index, table_layout

__all__ = ["TableResult", "table_ipf", "MAX_TABLE_TOKENS"]

MAX_TABLE_TOKENS = 20
_MAX_TABLE_BYTES = 2 << 30
_BLOCK_MIN_TOKENS = 7  # window-block updates pay off only for longer tables
_LP_MAX_TOKENS = 12  # facial reduction by linear programs on tables up to 2^12 cells


@dataclass(frozen=True)
class TableResult:
    """``table`` (G, 2^n) with token 0 in the most significant bit; ``max_error`` is the largest constraint
    violation of the returned table; ``worst`` = (group, constraint index) where it occurs."""

    table: np.ndarray
    iterations: int
    max_error: float
    converged: bool
    worst: tuple


def _support(n: int, positions, targets) -> np.ndarray | None:
    """0/1 mask (2^n,) of the cells that some distribution with these marginals gives positive probability (None if
    the constraints are infeasible): facial reduction over the whole table."""
    cells = 1 << n
    rows = []
    for pos in positions:
        onehot = np.zeros((1 << len(pos), cells))
        onehot[pattern_index(n, pos), np.arange(cells)] = 1.0
        rows.append(onehot)
    support = largest_support(np.vstack(rows), np.concatenate(targets))
    return None if support is None else support.astype(float)


def _cyclic(table: np.ndarray, n: int, positions, targets, tol: float, max_iter: int, reduce: bool) -> tuple:
    """Cyclic IPF on ``table`` (G, 2^n) in place. Returns (sweeps, error of the first sweep, final per-group error,
    worst (group, constraint))."""
    g = table.shape[0]
    layouts = [table_layout(n, p) for p in positions]

    def sweep(update: bool) -> tuple:
        """One pass over the constraints; returns each group's largest error and the worst (group, constraint)."""
        group_err, where, worst = np.zeros(g), (0, 0), -1.0
        for i, ((shape, axes, fshape), target) in enumerate(zip(layouts, targets, strict=True)):
            view = table.reshape((g,) + shape)
            m = view.sum(axis=axes).reshape(g, -1)
            err = np.abs(m - target).max(axis=1)
            group_err = np.maximum(group_err, err)
            if err.max() > worst:
                worst, where = float(err.max()), (int(err.argmax()), i)
            if update:
                lost = (m <= 0) & (target > tol)
                if lost.any():
                    raise InfeasibleError(
                        f"the statistics are jointly infeasible: tokens {positions[i]} need a pattern that the other "
                        f"constraints exclude (distinct expert group {int(np.argwhere(lost)[0, 0])}); check the "
                        f"overlaps and popularity"
                    )
                view *= np.divide(target, m, out=np.zeros_like(m), where=m > 0).reshape((g,) + fshape)
        return group_err, where

    history: list[float] = []
    iterations, reduced = 0, not reduce
    converged = not positions
    while not converged and iterations < max_iter:
        iterations += 1
        err = float(sweep(update=True)[0].max())
        history.append(err)
        if err < tol:
            converged = float(sweep(update=False)[0].max()) < tol
        if not converged and not reduced and turned_sublinear(history):
            # the solution lies on the boundary: continue on the largest support any fitting law has
            reduced = True
            for grp in np.flatnonzero(sweep(update=False)[0] >= tol):
                support = _support(n, positions, [t[grp] for t in targets])
                if support is not None:
                    table[grp] *= support
                    table[grp] /= table[grp].sum()
        if stalled(history):
            break
    group_err, worst = sweep(update=False) if positions else (np.zeros(g), (0, 0))
    return iterations, (history[0] if history else 0.0), group_err, worst


def table_ipf(n: int, positions, targets, *, tol: float = 1e-9, max_iter: int = 5000,
              blocks: bool = True) -> TableResult:
    """Fit (G, 2^n) tables to the marginal ``targets[i]`` (G, 2^len) on ``positions[i]`` by IPF.

    When every constraint lies inside a window of w < n consecutive tokens and n > 7 (and ``blocks``), each step
    fits a whole window at once: its marginal is computed from the table, fitted to all constraints inside the window
    by an inner IPF, and the table is rescaled by new/old window marginal — the exact I-projection onto that window's
    constraints, so the cyclic iteration has the same limit with far fewer passes over the 2^n table. With
    ``blocks=False`` every step is one constraint (plain cyclic IPF).
    """
    n = int(n)
    if n > MAX_TABLE_TOKENS:
        raise ParameterError(f"IPF over the 2^n table handles at most {MAX_TABLE_TOKENS} tokens; got n={n}; "
                             f"use method='junction' for long windows")
    g = targets[0].shape[0] if targets else 1
    if g * (8 << n) > _MAX_TABLE_BYTES:
        raise ParameterError(f"IPF over the 2^n table would need {g * (8 << n) / 2**30:.1f} GiB for n={n} and {g} "
                             f"distinct experts; use method='junction' or fewer tokens")
    table = np.full((g, 1 << n), 1.0 / (1 << n))
    width = max((p[-1] - p[0] + 1 for p in positions), default=1)
    if not blocks or width >= n or n <= _BLOCK_MIN_TOKENS:
        iterations, _, group_err, worst = _cyclic(table, n, positions, targets, tol, max_iter, n <= _LP_MAX_TOKENS)
        final = float(group_err.max())
        return TableResult(table=table, iterations=iterations, max_error=final, converged=final < tol, worst=worst)
    blocks = []
    for s in range(n - width + 1):
        members = [i for i, p in enumerate(positions) if p[0] >= s and p[-1] < s + width]
        local = [tuple(t - s for t in positions[i]) for i in members]
        blocks.append((table_layout(n, tuple(range(s, s + width))), local, [targets[i] for i in members], members))

    def check() -> tuple:
        """Largest constraint error per group of the current table, and the worst (group, constraint)."""
        group_err, worst, top = np.zeros(g), (0, 0), -1.0
        for (shape, axes, _), local, local_targets, members in blocks:
            marg = table.reshape((g,) + shape).sum(axis=axes).reshape(g, -1)
            for lp, target, ci in zip(local, local_targets, members, strict=True):
                err = np.abs(marginal(marg, width, lp) - target).max(axis=1)
                group_err = np.maximum(group_err, err)
                if err.max() > top:
                    top, worst = float(err.max()), (int(err.argmax()), ci)
        return group_err, worst

    history: list[float] = []
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        err = 0.0
        for (shape, axes, fshape), local, local_targets, _ in blocks:
            view = table.reshape((g,) + shape)
            old = view.sum(axis=axes).reshape(g, -1)
            new = old.copy()
            _, first, _, _ = _cyclic(new, width, local, local_targets, 0.1 * tol, max_iter, False)
            err = max(err, first)
            view *= np.divide(new, old, out=np.zeros_like(old), where=old > 0).reshape((g,) + fshape)
        history.append(err)
        if (err < tol and float(check()[0].max()) < tol) or stalled(history):
            break
    group_err, worst = check()
    final = float(group_err.max())
    return TableResult(table=table, iterations=iterations, max_error=final, converged=final < tol, worst=worst)

