"""P(no token uses the expert) under the latent-score model, by message passing over the tree (docs/MODEL.md §2.16).

Given the per-request component u, the latent a is a Gaussian Markov tree (a child is r·a_parent + sqrt(1 − r²)·ε)
and every node must stay below t(u) = (τ − sqrt(c)·u)/sqrt(1 − c). With the messages

    g_v(a) = P(every node of v's subtree stays below t | a_parent(v) = a)
           = ∫_{−∞}^{t} N(a'; r·a, 1 − r²) Π_{children w of v} g_w(a') da',

P(0…0 | u) = ∫_{−∞}^{t} φ(a) Π_{children w of the root} g_w(a) da, and P(0…0) = ∫ φ(u) P(0…0 | u) du.

Discretisation: a on a uniform grid of cells on [−L, L] (the outer cells reach ±∞); the kernel is the exact
probability of each cell given the parent's cell midpoint (a discrete Markov chain, rows summing to one), the cell
holding t counts with its exact mass below t, and u by Gauss–Legendre on [−U_MAX, U_MAX] weighted by φ. Subtrees of
the same shape (children counted as a multiset of shapes) send the same message, so a full tree of depth D costs
D + 1 kernel products, any tree at most one per distinct internal shape; siblings' order never matters. All
operations are non-negative, so adding a node never raises P(0…0) (the discretised union is monotone too).
"""

from __future__ import annotations

import numpy as np

from .latent import LatentParams
from .maxent.tree_ipf import preorder, tree_children
from .normal import ndtr_fast as ndtr
from .normal import ndtri

__all__ = ["GRID_HALF_WIDTH", "latent_tree_p_zero", "subtree_shapes"]

GRID_HALF_WIDTH = 7.0  # L: P(|a| > 7) = 2.6e-12 per node
T_LO = -5.3  # Φ(T_LO) = 5.8e-8: below it even the root is above t
C_STEEP = 0.3  # per-request share above which P(0…0 | u) is too steep in u for Gauss–Hermite
HERMITE_NODES = 12  # Gauss–Hermite nodes for 0 < c <= C_STEEP
U_NODES = 24  # Gauss–Legendre nodes for the per-request component u when c > C_STEEP
CELLS_PER_SD = 5


def _t_high(nodes: int) -> float:
    """Above it no node of an n-node tree exceeds t, but with probability <= n·Φ̄(T_HI) = 5.8e-8."""
    return float(-ndtri(5.8e-8 / nodes))


MIN_CELLS, MAX_CELLS = 64, 320
_CHUNK_VALUES = 1 << 18  # experts are processed in chunks: messages held at once × experts × u-nodes × cells


def subtree_shapes(parents: tuple) -> tuple:
    """(shape id of every node, children of each shape as ((child shape, count), ...)); ids are numbered so that a
    shape's children have smaller ids (a post-order), the root's shape last among those it needs."""
    n = len(parents)
    children = tree_children(parents)
    order = preorder(parents, children)  # reversed, every child comes before its parent
    intern: dict = {}
    shape = [0] * n
    kids: list = []
    for v in reversed(order):
        counts: dict = {}
        for w in children[v]:
            counts[shape[w]] = counts.get(shape[w], 0) + 1
        key = tuple(sorted(counts.items()))
        if key not in intern:
            intern[key] = len(kids)
            kids.append(key)
        shape[v] = intern[key]
    return tuple(shape), tuple(kids)


def _peak_messages(kids: tuple) -> int:
    """The most messages held at once when the shapes are processed in order (each freed after its last use)."""
    uses = [0] * len(kids)
    for key in kids:
        for sid, _ in key:
            uses[sid] += 1
    live = peak = 0
    for key in kids:
        live += 1
        peak = max(peak, live)
        for sid, _ in key:
            uses[sid] -= 1
            live -= uses[sid] == 0
    return peak


def _grid(coef: np.ndarray) -> tuple:
    s_min = float(np.sqrt(max(1 - float(np.max(coef * coef, initial=0.0)), 1e-6)))
    cells = int(np.clip(np.ceil(2 * GRID_HALF_WIDTH * CELLS_PER_SD / s_min), MIN_CELLS, MAX_CELLS))
    edges = np.linspace(-GRID_HALF_WIDTH, GRID_HALF_WIDTH, cells + 1)
    mid = 0.5 * (edges[:-1] + edges[1:])
    edges[0], edges[-1] = -np.inf, np.inf
    return edges, mid


def _u_nodes(tau: np.ndarray, share: np.ndarray, nodes: int, kind: str) -> tuple:
    """Quadrature of the per-request component: (t (M, U), weights (M, U), offset (M,)).

    ``none`` (c = 0): t = τ. ``hermite`` (0 < c <= C_STEEP: P(0…0 | u) varies slowly in u): Gauss–Hermite with
    HERMITE_NODES nodes against φ. ``legendre`` (c > C_STEEP: P(0…0 | u) is a steep step in u): outside
    [u_lo, u_hi] the orthant is 0 (t below T_LO: even the root is above t) or 1 (t above _t_high(n): no node
    exceeds it but with probability 5.8e-8), so P = Φ(u_lo) + ∫_{u_lo}^{u_hi} φ(u) P(0…0 | u) du, the integral by
    Gauss–Legendre with U_NODES nodes on [u_lo, u_hi] ∩ [−8, 8]."""
    if kind == "none":
        return tau[:, None], np.ones((tau.size, 1)), np.zeros(tau.size)
    sc, sd = np.sqrt(share), np.sqrt(1 - share)
    if kind == "hermite":
        x, w = np.polynomial.hermite_e.hermegauss(HERMITE_NODES)
        u = np.broadcast_to(x, (tau.size, x.size))
        wu = np.broadcast_to(w / w.sum(), u.shape)
        offset = np.zeros(tau.size)
    else:
        x, w = np.polynomial.legendre.leggauss(U_NODES)
        u_lo = ((tau - sd * _t_high(nodes)) / sc).clip(-8, 8)
        u_hi = ((tau - sd * T_LO) / sc).clip(-8, 8)
        half = 0.5 * (u_hi - u_lo)
        u = 0.5 * (u_hi + u_lo)[:, None] + half[:, None] * x[None, :]
        wu = half[:, None] * w[None, :] * np.exp(-0.5 * u * u) / np.sqrt(2 * np.pi)
        offset = ndtr(u_lo)
    t = (tau[:, None] - sc[:, None] * u) / sd[:, None]
    return t, wu, offset


def _chunk(tau, share, coef, parents_shapes, edges, mid, n, kind) -> np.ndarray:
    """log P(0…0) of one chunk of experts (arrays (M,)), all with the same kind of u quadrature."""
    _, kids = parents_shapes
    m, g_cells = tau.size, mid.size
    t, wu, offset = _u_nodes(tau, share, n, kind)
    nu = t.shape[1]
    s = np.sqrt(np.maximum(1 - coef * coef, 1e-12))[:, None, None]
    cdf = ndtr((edges[None, None, :] - coef[:, None, None] * mid[None, :, None]) / s)  # (M, G, G+1)
    kernel_t = np.ascontiguousarray(np.diff(cdf, axis=2).transpose(0, 2, 1))  # [m, j, i] = P(cell j | mid i)
    t = np.clip(t, -GRID_HALF_WIDTH - 1, GRID_HALF_WIDTH + 1)
    cell = np.clip(np.searchsorted(edges[1:-1], t, side="right"), 0, g_cells - 1)  # the cell holding t
    below = np.arange(g_cells)[None, None, :] < cell[..., None]  # (M, U, G) cells wholly below t
    lower = edges[cell]  # lower edge of t's cell (−inf for the first)
    drift = coef[:, None, None] * mid[None, None, :]
    part = np.maximum(ndtr((t[..., None] - drift) / s) - ndtr((lower[..., None] - drift) / s), 0.0)  # in [lower, t)
    leaf = ndtr((t[..., None] - drift) / s)  # the message of a leaf: P(child below t | parent at mid i)
    root_mass = np.diff(ndtr(edges))[None, None, :] * below
    rows, cols = np.arange(m)[:, None], np.arange(nu)[None, :]
    root_mass[rows, cols, cell] = np.maximum(ndtr(t) - ndtr(lower), 0.0)
    uses = np.zeros(len(kids), dtype=int)
    for key in kids:
        for sid, _ in key:
            uses[sid] += 1
    msgs: dict = {}
    root = len(kids) - 1  # the root's subtree is the largest: its shape is numbered last
    below = below.astype(float)
    hb = np.empty((m, nu, g_cells))
    for sid, key in enumerate(kids):
        if len(key) == 1 and key[0][1] == 1:  # one child (a path step): its message as it is, no copy
            h, logs = msgs[key[0][0]]
        else:
            h = np.ones((m, nu, g_cells))
            logs = np.zeros((m, nu))
            for cid, count in key:
                g, lg = msgs[cid]
                h *= g ** count
                logs = logs + count * lg
        for cid, _ in key:
            uses[cid] -= 1
            if uses[cid] == 0:
                del msgs[cid]
        if sid == root:
            with np.errstate(divide="ignore"):
                lp = np.log(np.einsum("mug,mug->mu", root_mass, h)) + logs + np.log(wu)
                lp = np.concatenate([lp, np.log(offset)[:, None]], axis=1)
            mx = lp.max(axis=1, keepdims=True)
            mx = np.where(np.isfinite(mx), mx, 0.0)
            with np.errstate(divide="ignore"):
                return np.log(np.exp(lp - mx).sum(axis=1)) + mx[:, 0]
        if not key:
            g = leaf
        else:
            np.multiply(h, below, out=hb)
            g = np.matmul(hb, kernel_t)  # Σ_j P(cell j | parent at mid i) h_j over the cells below t
            g += part * h[rows, cols, cell][..., None]
        scale = g.max(axis=2, keepdims=True)
        scale[scale <= 0] = 1.0
        g /= scale
        msgs[sid] = (g, logs + np.log(scale[..., 0]))
    raise AssertionError("the root's shape was not reached")  # pragma: no cover - subtree_shapes numbers the root last


def latent_tree_p_zero(params: LatentParams, parents: tuple, shapes: tuple | None = None) -> np.ndarray:
    """P_e(no node of the tree uses e) for every expert of ``params`` (E,)."""
    shapes = subtree_shapes(parents) if shapes is None else shapes
    n = len(parents)
    out = np.empty(params.tau.size)
    const = params.constant
    pi = ndtr(-params.tau)
    out[const] = 1 - pi[const]
    live = np.flatnonzero(~const)
    if not live.size:
        return out
    if n == 1:
        out[live] = 1 - pi[live]
        return out
    tau, share, coef = params.tau[live], params.share[live], params.coef[live]
    edges, mid = _grid(coef)
    logp = np.empty(live.size)
    kinds = np.where(share <= 0, 0, np.where(share <= C_STEEP, 1, 2))
    peak = _peak_messages(shapes[1])
    for code, kind, nu in ((0, "none", 1), (1, "hermite", HERMITE_NODES), (2, "legendre", U_NODES)):
        group = np.flatnonzero(kinds == code)
        # chunks small enough that (messages alive at once + kernel) × chunk × u × cells stays in cache
        size = max(1, _CHUNK_VALUES // ((peak + 4) * nu * mid.size + mid.size * (mid.size + 1)))
        for lo in range(0, group.size, size):
            sl = group[lo:lo + size]
            logp[sl] = _chunk(tau[sl], share[sl], coef[sl], shapes, edges, mid, n, kind)
    out[live] = np.exp(logp)
    return out
