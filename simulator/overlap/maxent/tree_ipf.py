"""Exact maximum-entropy law of one expert's activations on the nodes of a draft tree, by IPF on a junction tree
(``overlap.tree`` turns routing statistics into the targets here; docs/MODEL.md §2.15).

Nodes 0..N−1 with ``parents`` (root −1). Two nodes at tree distance d ≤ L carry a pair constraint (the 2x2 law of
(x_u, x_v), cells [00, 01, 10, 11]). The constraint graph is the L-th power of the tree, which is chordal: ordering
the nodes deepest first (ties: larger index first) is a perfect elimination order, i.e. the later neighbours
N⁺(v) of every node v (within distance L, later in the order) are pairwise within distance L. The cliques
C_v = {v} ∪ N⁺(v) with parent clique C_{p(v)}, p(v) the earliest node of N⁺(v), form a junction tree (the
elimination tree) with separators S_v = N⁺(v). Every pair constraint (v, u), u ∈ N⁺(v), lives in C_v.

The maximum-entropy law is P(x) = Π_v ψ_v(x_{C_v}) / Z. IPF started from the uniform table multiplies the law by
target/current on one pair; that factor is a function of the tokens of C_v, so it folds into ψ_v (the iterates are
those of the 2^N-table IPF, without the table). Clique marginals come from messages over the junction tree:

    up_v(x_{S_v})   ∝ Σ_{x_v} ψ_v Π_{c: p(c)=v} up_c                  (v's side, away from C_{p(v)})
    down_v(x_{S_v}) ∝ Σ_{C_p \\ S_v} ψ_p down_p Π_{c ≠ v: p(c)=p} up_c  (p = p(v); the rest of the tree)
    μ_v ∝ ψ_v · down_v · Π_{c: p(c)=v} up_c

Schedule: each sweep walks the junction tree depth first from the root clique and back (an Euler tour); on arriving
at a clique its marginal μ_v is exact (every message pointing at it is current: each step recomputes the one message
along the edge just walked), up to ``inner`` IPF passes over its pairs follow, then the message to the next clique.
So every update is an exact IPF step and the limit is the I-projection of the uniform law: the maximum-entropy law.
Stopping: the largest pair error met on entering the cliques of a sweep below ``tol``; ``max_iter`` caps the sweeps.
P(0…0) = Π_v ψ_v(0) / Z with Z from a last upward pass (log scale). Vectorised over G distinct constraint sets.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...errors import InfeasibleError

__all__ = ["TreeJunction", "TreeResult", "ball_sizes", "preorder", "tree_children", "tree_depths", "tree_distances",
           "tree_ipf", "tree_junction"]


def tree_depths(parents: tuple) -> np.ndarray:
    """Depth of every node (root 0) of a valid parent list."""
    n = len(parents)
    depth = np.full(n, -1, dtype=int)
    children = tree_children(parents)
    root = parents.index(-1)
    depth[root] = 0
    queue = deque([root])
    while queue:
        v = queue.popleft()
        for c in children[v]:
            depth[c] = depth[v] + 1
            queue.append(c)
    return depth


def tree_children(parents) -> list:
    """The children of every node of a valid parent list, in node order."""
    out: list = [[] for _ in parents]
    for v, p in enumerate(parents):
        if p >= 0:
            out[p].append(v)
    return out


def preorder(parents, children: list | None = None) -> list:
    """The nodes depth-first from the root, every parent before its children (reversed: every child before its
    parent); ``children``: :func:`tree_children` when already at hand."""
    children = tree_children(parents) if children is None else children
    order, stack = [], [next(v for v, p in enumerate(parents) if p < 0)]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(children[v])
    return order


def _adjacency(parents: tuple) -> list:
    adj = tree_children(parents)
    for v, p in enumerate(parents):
        if p >= 0:
            adj[v].append(p)
    return adj


def _ball(adj: list, v: int, radius: int, cap: int | None = None) -> dict | None:
    """{node: distance} of the nodes within ``radius`` of v (None once more than ``cap`` nodes are found)."""
    dist = {v: 0}
    frontier = [v]
    for r in range(1, radius + 1):
        nxt = []
        for u in frontier:
            for w in adj[u]:
                if w not in dist:
                    dist[w] = r
                    nxt.append(w)
        if cap is not None and len(dist) > cap:
            return None
        frontier = nxt
    return dist


def ball_sizes(parents: tuple, lag: int, cap: int) -> int | None:
    """ω, the largest clique of the ``lag``-th power of the tree (the largest set of nodes pairwise within distance
    ``lag``): max_v |B(v, r)| for lag = 2r, max over edges uv of |B(u, r) ∪ B(v, r)| for lag = 2r + 1 (a tree's
    pairwise-close sets are balls around a node or an edge). None when it exceeds ``cap``."""
    adj = _adjacency(parents)
    r = lag // 2
    best = 1
    balls: dict = {}
    for v in range(len(parents)):
        b = _ball(adj, v, r, cap)
        if b is None:
            return None
        balls[v] = b
        best = max(best, len(b))
    if lag % 2:
        for v, p in enumerate(parents):
            if p >= 0:
                size = len(balls[v].keys() | balls[p].keys())
                if size > cap:
                    return None
                best = max(best, size)
    return best


def tree_distances(parents: tuple, lag: int) -> list:
    """For every node, {node: distance} of the other nodes within ``lag``."""
    adj = _adjacency(parents)
    out = []
    for v in range(len(parents)):
        b = _ball(adj, v, lag)
        del b[v]
        out.append(b)
    return out


@dataclass(frozen=True)
class TreeJunction:
    """Elimination junction tree of the ``lag``-th power of a tree. ``cliques[v]`` = (v,) + N⁺(v) in elimination
    order; ``lags[v]`` the tree distance from v to each node of N⁺(v); ``parent[v]`` the parent clique (−1 at the
    root clique); ``order`` the elimination order (children cliques before their parent); ``tour`` the Euler tour."""

    n_nodes: int
    lag: int
    cliques: tuple
    lags: tuple
    parent: tuple
    children: tuple
    order: tuple
    tour: tuple

    @property
    def width(self) -> int:
        return max(len(c) for c in self.cliques)

    def cells(self) -> int:
        return sum(1 << len(c) for c in self.cliques)


@lru_cache(maxsize=32)
def tree_junction(parents: tuple, lag: int) -> TreeJunction:
    """The junction tree of pair constraints up to tree distance ``lag`` (cached per tree and lag)."""
    n = len(parents)
    depth = tree_depths(parents)
    order = sorted(range(n), key=lambda v: (-depth[v], -v))
    pos = np.empty(n, dtype=int)
    pos[order] = np.arange(n)
    near = tree_distances(parents, lag) if lag else [{} for _ in range(n)]
    cliques, lags, parent = [], [], []
    for v in range(n):
        later = sorted((u for u in near[v] if pos[u] > pos[v]), key=lambda u: pos[u])
        cliques.append((v,) + tuple(later))
        lags.append(tuple(near[v][u] for u in later))
        parent.append(later[0] if later else -1)
    children: list = [[] for _ in range(n)]
    for v, p in enumerate(parent):
        if p >= 0:
            children[p].append(v)
    root = order[-1]
    tour = [root]
    stack = [(root, iter(children[root]))]
    while stack:
        v, it = stack[-1]
        c = next(it, None)
        if c is None:
            stack.pop()
            if stack:
                tour.append(stack[-1][0])
        else:
            tour.append(c)
            stack.append((c, iter(children[c])))
    return TreeJunction(n, lag, tuple(cliques), tuple(lags), tuple(parent), tuple(tuple(c) for c in children),
                        tuple(order), tuple(tour))


@dataclass(frozen=True)
class TreeResult:
    """``p_zero`` (G,): P(every node = 0). ``max_error``: the largest pair error met in the last sweep."""

    p_zero: np.ndarray
    iterations: int
    max_error: float
    converged: bool


class _Fit:
    """Potentials, messages and the IPF walk of one fit (all G constraint sets at once)."""

    def __init__(self, jt: TreeJunction, targets: dict, pi: np.ndarray):
        g = pi.size
        self.jt, self.g = jt, g
        self.psi = [np.ones((g,) + (2,) * len(c)) for c in jt.cliques]
        self.up = [np.ones((g,) + (2,) * (len(c) - 1)) for c in jt.cliques]
        self.down = [np.ones((g,) + (2,) * (len(c) - 1)) for c in jt.cliques]
        # where a child's separator sits inside its parent clique (broadcast shape of the child's up message)
        self.into_parent, self.sum_axes = [], []
        for v, p in enumerate(jt.parent):
            if p < 0:
                self.into_parent.append(None)
                self.sum_axes.append(None)
                continue
            sep = set(jt.cliques[v][1:])
            self.into_parent.append((g,) + tuple(2 if u in sep else 1 for u in jt.cliques[p]))
            self.sum_axes.append(tuple(1 + i for i, u in enumerate(jt.cliques[p]) if u not in sep))
        # per clique: targets of its pairs (v, u_j) as P(x_v = a, x_u = 1), shape (G, 2, s); bit maps of the rest
        self.t_one, self.bits, self.fshape = [], [], []
        for c, lags in zip(jt.cliques, jt.lags, strict=True):
            s = len(c) - 1
            if not s:
                self.t_one.append(None)
                self.bits.append(None)
                self.fshape.append(None)
                continue
            t = np.stack([targets[d].reshape(g, 2, 2)[:, :, 1] for d in lags], axis=2)
            self.t_one.append(t)
            m = np.arange(1 << s)
            self.bits.append(np.stack([((m >> (s - 1 - j)) & 1).astype(float) for j in range(s)], axis=1))
            self.fshape.append([(g, 2) + tuple(2 if a == j else 1 for a in range(s)) for j in range(s)])
        # P(x_v = a, x_u = 0) = P(x_v = a) − P(x_v = a, x_u = 1)
        single = np.stack([1 - pi, pi], axis=1)[:, :, None]
        self.t_zero = [None if t is None else single - t for t in self.t_one]

    def _incoming(self, v: int) -> np.ndarray:
        mu = self.psi[v].copy()
        if self.jt.parent[v] >= 0:
            mu *= self.down[v].reshape((self.g, 1) + self.down[v].shape[1:])
        for c in self.jt.children[v]:
            mu *= self.up[c].reshape(self.into_parent[c])
        return mu

    def visit(self, v: int, nxt: int, inner: int, tol: float) -> float:
        """Exact marginal of clique v, IPF passes over its pairs, then the message to clique ``nxt`` (-1: none).
        Returns the largest pair error on entry."""
        g = self.g
        mu = self._incoming(v)
        flat = mu.reshape(g, -1)
        total = flat.sum(axis=1)
        if not np.all(total > 0):
            raise InfeasibleError("the statistics are jointly infeasible on this tree: the pair constraints exclude "
                                  "every activation pattern; check the overlaps and popularity")
        flat /= total[:, None]
        big = 0.0
        t_one = self.t_one[v]
        if t_one is not None:
            half = mu.reshape(g, 2, -1)
            bits = self.bits[v]
            one = half @ bits
            single = half.sum(axis=2)
            big = max(float(np.abs(one - t_one).max()),
                      float(np.abs(single[:, :, None] - one - self.t_zero[v]).max()))
            if big >= 0.1 * tol:
                before = mu.copy()
                t_zero = self.t_zero[v]
                tiny = np.finfo(float).tiny
                for _ in range(inner):
                    for j, shape in enumerate(self.fshape[v]):
                        o1 = half @ bits[:, j]
                        o0 = half.sum(axis=2) - o1
                        f = np.stack([t_zero[:, :, j] / np.maximum(o0, tiny), t_one[:, :, j] / np.maximum(o1, tiny)],
                                     axis=2)
                        mu *= f.reshape(shape)
                ratio = np.divide(mu, before, out=np.zeros_like(mu), where=before > 0)
                self.psi[v] *= ratio
                pf = self.psi[v].reshape(g, -1)
                pf /= pf.max(axis=1, keepdims=True)
        if nxt >= 0:
            self._send(v, nxt, mu)
        return big

    def _send(self, v: int, w: int, mu: np.ndarray) -> None:
        """The message along the junction-tree edge v -> w, from v's current marginal mu."""
        g = self.g
        if self.jt.parent[v] == w:  # upward: divide out w's message, sum out v itself
            d = self.down[v].reshape((g, 1) + self.down[v].shape[1:])
            m = np.divide(mu, d, out=np.zeros_like(mu), where=d > 0).sum(axis=1)
            self.up[v] = m / m.reshape(g, -1).sum(axis=1).reshape((g,) + (1,) * (m.ndim - 1))
        else:  # downward to child clique w
            u = self.up[w].reshape(self.into_parent[w])
            m = np.divide(mu, u, out=np.zeros_like(mu), where=u > 0)
            m = m.sum(axis=self.sum_axes[w]) if self.sum_axes[w] else m
            self.down[w] = m / m.reshape(g, -1).sum(axis=1).reshape((g,) + (1,) * (m.ndim - 1))

    def log_p_zero(self) -> np.ndarray:
        """log P(0…0) = Σ_v log ψ_v(0) − log Z, Z by an upward pass in elimination order (log scale)."""
        log_z = np.zeros(self.g)
        up = [None] * self.jt.n_nodes
        with np.errstate(divide="ignore"):
            zero = sum(np.log(p.reshape(self.g, -1)[:, 0]) for p in self.psi)
        for v in self.jt.order:
            t = self.psi[v].copy()
            for c in self.jt.children[v]:
                t *= up[c].reshape(self.into_parent[c])
            if self.jt.parent[v] < 0:
                log_z += np.log(t.reshape(self.g, -1).sum(axis=1))
            else:
                m = t.sum(axis=1)
                s = m.reshape(self.g, -1).sum(axis=1)
                up[v] = m / s.reshape((self.g,) + (1,) * (m.ndim - 1))
                log_z += np.log(s)
        return zero - log_z


def tree_ipf(parents: tuple, lag: int, popularity: np.ndarray, targets: dict, *, tol: float = 1e-9,
             max_iter: int = 2000, inner: int = 2) -> TreeResult:
    """Maximum-entropy law of binary activations on a tree under pair constraints at every tree distance 1..lag.

    ``popularity`` (G,): P(x = 1) of every node; ``targets[d]`` (G, 4): the 2x2 law [00, 01, 10, 11] of two nodes at
    distance d = 1..lag (the same for every such pair: routing statistics are stationary). Returns P(all nodes 0)
    per constraint set. ``lag`` 0 or a single node: independent nodes.
    """
    pi = np.asarray(popularity, dtype=float)
    if int(lag) == 0 or len(parents) == 1:
        return TreeResult((1.0 - pi) ** len(parents), 0, 0.0, True)
    jt = tree_junction(tuple(parents), int(lag))
    fit = _Fit(jt, targets, pi)
    tour = jt.tour
    nxt = tour[1:] + (-1,)
    err, it, converged = np.inf, 0, False
    with np.errstate(invalid="ignore", divide="ignore"):
        while it < max_iter:
            it += 1
            err = 0.0
            for v, w in zip(tour, nxt, strict=True):
                err = max(err, fit.visit(v, w, inner, tol))
            if err < tol:
                converged = True
                break
    return TreeResult(np.exp(fit.log_p_zero()), it, float(err), converged)
