"""Why a fit misses the calibration goal (issue 18; docs/MODEL.md §3.7, "Residual analysis"): the least-squares
driver of every fit (:func:`fit_least_squares`) keeps each fitted row's signed residual, shape, size and kernel, and
:func:`why` reads them back into one line for the report.

The analysis splits the fit's mean |residual| into what a per-bin mean would remove (a structure the functional form
cannot follow) along three axes, and names the largest:

- **kernels**: the rows time more than one kernel (the ``kernel_source`` column), with each kernel's MAPE;
- **size**: the mean signed residual per size quartile (tokens, message bytes, ...) moves with size: the form cannot
  follow the curve (an efficiency step at a tile or protocol boundary, a second regime);
- **shape**: one shape's rows sit apart from the others (its own bias); held out, the worst shapes are named with
  their share of the leave-one-shape-out error (an extrapolation: no other shape covers that range);
- otherwise **scatter**: the residual of neighbouring rows of one shape differs row to row (measurement noise or
  steps finer than any smooth form), given as the median |difference| of consecutive rows.

Nothing here changes a fit; the reasons are computed from the residuals, never written by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

GOAL_FIT, GOAL_LOSO = 0.10, 0.12  # issue 18: in-sample MAPE <= 10%, leave-one-shape-out <= 12%
SIZE_BINS = 4
SHAPE_SHARE = 0.5  # a held-out shape carrying at least this share of the held-out error is named alone


@dataclass(frozen=True)
class Residuals:
    """The fitted rows at the fitted parameters: signed relative residual, shape key, size, kernel; and the
    leave-one-shape-out MAPE of each shape (held out)."""

    signed: tuple[float, ...]
    groups: tuple[str, ...]
    size: tuple[float, ...]
    size_name: str
    kernels: tuple[str, ...]
    loso: tuple[tuple[str, float, int], ...]  # (shape, held-out MAPE, rows)


def fit_least_squares(residual_of: Callable, x0, lo, hi, groups: np.ndarray, fit_mask: np.ndarray,
                      size=None, size_name: str = "size", kernels=None):
    """Least squares on relative error; returns (theta, mape_fit, mape_loso, :class:`Residuals`)."""
    def solve(mask):
        r = least_squares(lambda th: residual_of(th, mask), x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.05)
        return r.x

    theta = solve(fit_mask)
    signed = residual_of(theta, fit_mask)
    m_fit = float(np.mean(np.abs(signed)))
    errs, per = [], []
    for g in np.unique(groups[fit_mask]):
        hold = fit_mask & (groups == g)
        if hold.sum() == fit_mask.sum():
            continue
        e = np.abs(residual_of(solve(fit_mask & ~hold), hold))
        errs.append(e)
        per.append((_label(g), float(np.mean(e)), int(hold.sum())))
    m_loso = float(np.mean(np.concatenate(errs))) if errs else float("nan")
    n = int(fit_mask.sum())
    size = np.zeros(n) if size is None else np.asarray(size, dtype=float)[fit_mask]
    kern = ("",) * n if kernels is None else tuple(str(k) for k in np.asarray(kernels, dtype=object)[fit_mask])
    res = Residuals(tuple(float(x) for x in signed), tuple(_label(g) for g in groups[fit_mask]),
                    tuple(float(x) for x in size), size_name, kern, tuple(per))
    return theta, m_fit, m_loso, res


def _label(g) -> str:
    if isinstance(g, (float, np.floating)) and float(g).is_integer():
        return str(int(g))
    return str(g)


def _removed(r: np.ndarray, keys: np.ndarray) -> float:
    """The share of mean |r| a per-key mean removes."""
    base = float(np.mean(np.abs(r)))
    if base == 0:
        return 0.0
    out = r.copy()
    for k in np.unique(keys):
        m = keys == k
        out[m] -= r[m].mean()
    return 1.0 - float(np.mean(np.abs(out))) / base


def _size_bins(size: np.ndarray) -> np.ndarray:
    edges = np.quantile(size, np.linspace(0, 1, SIZE_BINS + 1)[1:-1])
    return np.searchsorted(edges, size, side="right")


def _fmt_size(x: float, name: str) -> str:
    if "bytes" in name:
        for unit, f in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
            if x >= f:
                return f"{x / f:.3g} {unit}"
        return f"{x:.0f} B"
    return f"{x:.4g}"


def _scatter(r: np.ndarray, groups: np.ndarray, size: np.ndarray) -> float:
    d = []
    for g in np.unique(groups):
        m = groups == g
        s = r[m][np.argsort(size[m], kind="stable")]
        d.extend(np.abs(np.diff(s)))
    return float(np.median(d)) if d else 0.0


def why(res: Residuals, mape_fit: float, mape_loso: float) -> str:
    """One line: why the fit misses :data:`GOAL_FIT` / :data:`GOAL_LOSO` ('' when it meets both)."""
    if not (mape_fit > GOAL_FIT or mape_loso > GOAL_LOSO) or not res.signed:
        return ""
    r, groups = np.asarray(res.signed), np.asarray(res.groups)
    size, kern = np.asarray(res.size), np.asarray(res.kernels)
    parts = []
    if len(set(res.kernels)) > 1:
        each = ", ".join(f"{k} {np.mean(np.abs(r[kern == k])):.0%} ({int((kern == k).sum())} rows)"
                         for k in sorted(set(res.kernels)))
        parts.append(f"rows of {len(set(res.kernels))} kernels: {each}")
    bins = _size_bins(size)
    cell = np.array([f"{g}#{b}" for g, b in zip(groups, bins, strict=True)])
    share = {"size": _removed(r, bins), "shape": _removed(r, groups), "both": _removed(r, cell)}
    lead = max(share["size"], share["shape"])
    if share["both"] - lead >= 0.2 and share["both"] >= 0.4:
        worst = max(np.unique(cell), key=lambda c: abs(r[cell == c].mean()) * (cell == c).sum())
        m = cell == worst
        lo, hi = (_fmt_size(f(size[m]), res.size_name) for f in (np.min, np.max))
        parts.append(f"the curve bends differently by shape: shape {groups[m][0]} at {res.size_name} {lo}–{hi} "
                     f"{r[m].mean():+.0%} ({share['both']:.0%} of the error is a trend in {res.size_name} within "
                     f"a shape, {lead:.0%} a trend in either alone)")
    elif share["size"] >= share["shape"] and share["size"] >= 0.2:
        trend = ", ".join(f"{r[bins == b].mean():+.0%} ≤{_fmt_size(size[bins == b].max(), res.size_name)}"
                          for b in np.unique(bins))
        parts.append(f"form cannot follow {res.size_name}: mean signed error by quartile {trend} "
                     f"({share['size']:.0%} of the error)")
    elif share["shape"] >= 0.2:
        worst = sorted(((abs(r[groups == g].mean()), g) for g in np.unique(groups)), reverse=True)[:2]
        means = [r[groups == g].mean() for g in np.unique(groups)]
        parts.append("shapes sit apart: " + ", ".join(f"{g} {r[groups == g].mean():+.0%}" for _, g in worst)
                     + f" (per-shape mean error {min(means):+.0%} to {max(means):+.0%} over {len(means)} shapes; "
                     f"{share['shape']:.0%} of the error)")
    else:
        a = np.sort(np.abs(r))[::-1]
        top = a[:max(1, len(a) // 10)].sum() / max(a.sum(), 1e-300)
        parts.append(f"row-to-row scatter: consecutive rows of a shape differ by {_scatter(r, groups, size):.0%} "
                     f"(median), the worst 10% of rows carry {top:.0%} of the error; no trend in {res.size_name} "
                     f"or shape removes more than {max(share.values()):.0%}")
    if mape_loso > GOAL_LOSO and res.loso:
        tot = sum(m * n for _, m, n in res.loso)
        top = max(res.loso, key=lambda t: t[1] * t[2])
        if tot > 0 and top[1] * top[2] / tot >= SHAPE_SHARE:
            parts.append(f"held out, shape {top[0]} alone is {top[1]:.0%} ({top[1] * top[2] / tot:.0%} of the "
                         "held-out error: no other shape covers its range)")
    return "; ".join(parts)
