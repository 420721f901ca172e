"""Iterative proportional fitting (IPF) of the maximum-entropy distribution over {0,1}^n, one table per expert.

Starting from the uniform table q_0(x) = 2^-n, each step rescales the table so that one constrained marginal
matches its target exactly:

    q(x) <- q(x) · target_c(x_c) / q_c(x_c)        (0/0 := 0: cells with a zero target stay zero)

cycling through the constraints (ordered by their last, then first position) until, over a whole sweep, no
constrained marginal is off by more than ``tol`` (max absolute difference). The limit is the I-projection of the
uniform table onto the constraint set, i.e. the maximum-entropy distribution with those marginals (Csiszár 1975);
structural zeros (e.g. full overlap, x_t = x_{t+d}) are handled by the zero cells. All experts are fitted at once:
the table has shape (G, 2^n) for G distinct constraint sets.

Two accelerations keep the same limit: window blocks (``ipf_fit``: one I-projection per window of w consecutive
tokens instead of one per constraint) and facial reduction (``_support``: when convergence turns sublinear because
the solution lies on the boundary, the largest feasible support is found by linear programs and IPF continues on
it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InfeasibleError, ParameterError

__all__ = ["IPFResult", "ipf_fit", "marginal", "MAX_IPF_TOKENS"]

MAX_IPF_TOKENS = 20
_MAX_TABLE_BYTES = 2 << 30
_STALL_WINDOW = 200
_SNAP_START = 128  # first sweep at which the convergence rate is examined (then 256, 512, ...)
_SUBLINEAR = 0.05  # error(t) > 0.05 · error(t/2): slower than linear convergence
_BLOCK_MIN_TOKENS = 7  # window-block updates pay off only for longer tables
_LP_MAX_TOKENS = 12  # facial reduction by linear programs on tables up to 2^12 cells


@dataclass(frozen=True)
class IPFResult:
    """``table`` (G, 2^n) with token 0 in the most significant bit; ``max_error`` is the largest constraint
    violation of the returned table; ``worst`` = (group, constraint index) where it occurs."""

    table: np.ndarray
    iterations: int
    max_error: float
    converged: bool
    worst: tuple


def _layout(n: int, positions: tuple) -> tuple:
    """Reshape of a (G, 2^n) table that exposes the constrained tokens as axes of size 2 and merges the others."""
    shape, sum_axes, fshape = [], [], []
    run = 0
    chosen = set(positions)
    for t in range(n):
        if t in chosen:
            if run:
                sum_axes.append(len(shape) + 1)
                shape.append(1 << run)
                fshape.append(1)
                run = 0
            shape.append(2)
            fshape.append(2)
        else:
            run += 1
    if run:
        sum_axes.append(len(shape) + 1)
        shape.append(1 << run)
        fshape.append(1)
    return tuple(shape), tuple(sum_axes), tuple(fshape)


def marginal(table: np.ndarray, n: int, positions: tuple) -> np.ndarray:
    """Marginal of (G, 2^n) tables on ascending token positions, shape (G, 2^len(positions))."""
    shape, axes, _ = _layout(n, positions)
    g = table.shape[0]
    return table.reshape((g,) + shape).sum(axis=axes).reshape(g, -1)


def _support(n: int, positions, targets) -> np.ndarray | None:
    """0/1 mask of the cells that some distribution with these marginals gives positive probability.

    Repeatedly maximises the total probability of the cells not yet known to be positive, subject to the marginal
    constraints; cells positive in an optimum join the support. Returns None if the constraints are infeasible.
    """
    from scipy.optimize import linprog  # imported on first use (scipy.optimize takes ~0.2 s to import)

    cells = 1 << n
    rows, rhs = [], []
    index = np.arange(cells).reshape(1, cells)
    for pos, target in zip(positions, targets, strict=True):
        pattern = np.zeros(cells, dtype=np.int64)
        for t in pos:
            pattern = (pattern << 1) | ((index[0] >> (n - 1 - t)) & 1)
        onehot = np.zeros((1 << len(pos), cells))
        onehot[pattern, np.arange(cells)] = 1.0
        rows.append(onehot)
        rhs.append(target)
    a_eq, b_eq = np.vstack(rows), np.concatenate(rhs)
    positive = np.zeros(cells, dtype=bool)
    while not positive.all():
        res = linprog(-(~positive).astype(float), A_eq=a_eq, b_eq=b_eq, bounds=(0, 1), method="highs")
        if res.status != 0:
            return None if not positive.any() else positive.astype(float)
        new = (res.x > 1e-11) & ~positive
        if not new.any():
            break
        positive |= new
    return positive.astype(float)


def _cyclic(table: np.ndarray, n: int, positions, targets, tol: float, max_iter: int, reduce: bool) -> tuple:
    """Cyclic IPF on ``table`` (G, 2^n) in place. Returns (sweeps, error of the first sweep, final per-group error,
    worst (group, constraint))."""
    g = table.shape[0]
    layouts = [_layout(n, p) for p in positions]

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
    iterations, reduced, next_check = 0, not reduce, _SNAP_START
    converged = not positions
    while not converged and iterations < max_iter:
        iterations += 1
        err = float(sweep(update=True)[0].max())
        history.append(err)
        if err < tol:
            converged = float(sweep(update=False)[0].max()) < tol
        if iterations == next_check:
            next_check *= 2
            if not converged and not reduced and err > _SUBLINEAR * history[iterations // 2 - 1]:
                # Sublinear convergence: the solution lies on the boundary, where some cells decay to zero like
                # 1/t although no target cell is zero (typical of statistics from short traces). Find the largest
                # support any fitting distribution has (linear programs) and continue on it (facial reduction).
                reduced = True
                for grp in np.flatnonzero(sweep(update=False)[0] >= tol):
                    support = _support(n, positions, [t[grp] for t in targets])
                    if support is not None:
                        table[grp] *= support
                        table[grp] /= table[grp].sum()
        if _stalled(history):
            break
    group_err, worst = sweep(update=False) if positions else (np.zeros(g), (0, 0))
    return iterations, (history[0] if history else 0.0), group_err, worst


def ipf_fit(n: int, positions, targets, *, tol: float = 1e-9, max_iter: int = 5000) -> IPFResult:
    """Fit (G, 2^n) tables to the marginal ``targets[i]`` (G, 2^len) on ``positions[i]`` by IPF.

    When every constraint lies inside a window of w < n consecutive tokens, each step fits a whole window at once:
    its marginal is computed from the table, fitted to all constraints inside the window by an inner IPF, and
    the table is rescaled by new/old window marginal — the exact I-projection onto that window's constraints, so
    the cyclic iteration has the same limit with far fewer passes over the 2^n table.
    """
    n = int(n)
    if n > MAX_IPF_TOKENS:
        raise ParameterError(f"method 'ipf' handles at most {MAX_IPF_TOKENS} tokens (2^n table); got n={n}; "
                             f"use method='junction' for long windows")
    g = targets[0].shape[0] if targets else 1
    if g * (8 << n) > _MAX_TABLE_BYTES:
        raise ParameterError(f"method 'ipf' would need {g * (8 << n) / 2**30:.1f} GiB for n={n} and {g} distinct "
                             f"experts; use method='junction' or fewer tokens")
    table = np.full((g, 1 << n), 1.0 / (1 << n))
    width = max((p[-1] - p[0] + 1 for p in positions), default=1)
    if width >= n or n <= _BLOCK_MIN_TOKENS:
        iterations, _, group_err, worst = _cyclic(table, n, positions, targets, tol, max_iter, n <= _LP_MAX_TOKENS)
        final = float(group_err.max())
        return IPFResult(table=table, iterations=iterations, max_error=final, converged=final < tol, worst=worst)
    blocks = []
    for s in range(n - width + 1):
        members = [i for i, p in enumerate(positions) if p[0] >= s and p[-1] < s + width]
        blocks.append((_layout(n, tuple(range(s, s + width))), [tuple(t - s for t in positions[i]) for i in members],
                       [targets[i] for i in members], members))

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
        if (err < tol and float(check()[0].max()) < tol) or _stalled(history):
            break
    group_err, worst = check()
    final = float(group_err.max())
    return IPFResult(table=table, iterations=iterations, max_error=final, converged=final < tol, worst=worst)


def _stalled(history: list) -> bool:
    """No progress over the last _STALL_WINDOW sweeps while still far from converged: infeasible or hopeless."""
    return len(history) > _STALL_WINDOW and history[-1] > 1e-6 and history[-1] > 0.999 * history[-1 - _STALL_WINDOW]
